//! Small text helpers shared by the operators.

/// A short one-line excerpt of `s` for descriptions.
pub(crate) fn snippet(s: &str) -> String {
    let trimmed = s.trim();
    let line = trimmed.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(40).collect();
    if out.len() < line.len() || line.len() < trimmed.len() {
        out.push('…');
    }
    out
}

/// A decimal integer literal that is safe to shift by one.
pub(crate) fn int_value(text: &str) -> Option<i64> {
    if text.is_empty()
        || text.len() > 15
        || !text.bytes().all(|b| b.is_ascii_digit())
        || (text.len() > 1 && text.starts_with('0'))
    {
        return None;
    }
    text.parse().ok()
}

/// Whitespace that may appear inside a line.
pub(crate) fn is_inline_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\x0c')
}

/// The 1-based line number of a 0-based row.
pub(crate) fn line_of(row: usize) -> u32 {
    u32::try_from(row + 1).unwrap_or(u32::MAX)
}
