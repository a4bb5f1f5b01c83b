//! Line-level text helpers: comparing two versions of a text, finding its last line.

/// How many items `old` and `new` share at their start, and then how many at their end (the
/// end never reaching into the shared start): what lies between is what changed.
pub fn common_ends<T: PartialEq>(old: &[T], new: &[T]) -> (usize, usize) {
    let head = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let room = old.len().min(new.len()) - head;
    let tail = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    (head, tail)
}

/// The last line of `text` that is not blank (a tool's summary or final error line), as it
/// stands; `None` when every line is blank.
pub fn last_nonblank(text: &str) -> Option<&str> {
    text.lines().rev().find(|l| !l.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_start_and_end_do_not_overlap() {
        assert_eq!(common_ends(&["a", "b", "c"], &["a", "x", "c"]), (1, 1));
        assert_eq!(common_ends(&["a", "a"], &["a", "a", "a"]), (2, 0));
        assert_eq!(common_ends(&["a", "b"], &["a", "b"]), (2, 0));
        assert_eq!(common_ends::<&str>(&[], &["a"]), (0, 0));
    }

    #[test]
    fn the_last_nonblank_line_skips_trailing_blank_ones() {
        assert_eq!(last_nonblank("a\n b \n\n  \n"), Some(" b "));
        assert_eq!(last_nonblank(" \n\n"), None);
    }
}
