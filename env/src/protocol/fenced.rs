//! Code blocks read as edits: a block holding a whole function replaces that function, a block of
//! a few lines replaces the lines it resembles most.

use super::*;

/// A repository path (`*.py`) that `text` mentions, the last one when there are several.
pub(super) fn mentioned_path(text: &str) -> Option<String> {
    text.rsplit(|c: char| c.is_whitespace() || "`'\"()[]<>,;*".contains(c))
        .map(|w| w.trim_end_matches([':', '.', '!', '?']))
        .map(|w| w.split_once("::").map_or(w, |(path, _)| path))
        .find(|w| w.len() > 3 && w.ends_with(".py") && !w.contains("://"))
        .map(str::to_string)
}

/// A fenced code block holding a whole function definition, read as a request to replace the
/// function of that name: the last block with a `def` in it. A block left open (the reply was
/// cut off) counts only when something follows the function in it, so the function is whole.
/// Its file is the one a comment at the top of the block (`# path/to/file.py`) or the prose
/// before the block names.
pub(super) fn fenced_function(text: &str) -> Option<ToolRequest> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut open: Option<usize> = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        match open {
            None if t.starts_with("```") => open = Some(i),
            Some(start) if t == "```" => {
                blocks.push((start, i, true));
                open = None;
            }
            _ => {}
        }
    }
    if let Some(start) = open {
        blocks.push((start, lines.len(), false));
    }
    let (start, end, name, source) = blocks.iter().rev().find_map(|&(start, end, closed)| {
        let body = &lines[start + 1..end];
        let (name, source) = function_in(body)?;
        if !closed {
            let def = body.iter().position(|l| def_name(l).is_some())?;
            let after = function_end(body, def);
            body[after..].iter().find(|l| !l.trim().is_empty())?;
        }
        // A definition with no body is not a fix.
        (source.lines().count() > 1 || !source.trim_end().ends_with(':'))
            .then_some((start, end, name, source))
    })?;
    let comment = lines[start + 1..end]
        .iter()
        .map(|l| l.trim())
        .take_while(|l| l.is_empty() || l.starts_with('#'))
        .find_map(mentioned_path);
    let path = comment.or_else(|| mentioned_path(&lines[..start].join("\n")));
    Some(ToolRequest::ReplaceFunction { path, name, source })
}

/// A fenced block of 1 to [`crate::line_fix::MAX_FRAGMENT_LINES`] non-blank lines that is not
/// a whole function: fixed lines, which replace the lines they resemble most. The first closed
/// block counts (small models tend to add more blocks after their answer); a reply that ends
/// inside a block (generation stopped at its closing fence by a stop string) counts that block
/// when no block was closed, unless it could be a function cut off. Its file is named as for a
/// function (a `# path` comment or the prose before it).
pub(super) fn fenced_lines(text: &str) -> Option<ToolRequest> {
    let lines: Vec<&str> = text.lines().collect();
    let mut open: Option<usize> = None;
    let mut first = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        match open {
            None if t.starts_with("```") => open = Some(i),
            Some(start) if t == "```" => {
                first = Some((start, i));
                break;
            }
            _ => {}
        }
    }
    let closed = first.is_some();
    let (start, end) = first.or_else(|| open.map(|start| (start, lines.len())))?;
    let body: Vec<&str> = lines[start + 1..end]
        .iter()
        .copied()
        .filter(|l| !l.trim().is_empty())
        .collect();
    // An open block may be a function cut off mid-body: it counts only as one line, or as
    // lines with no definition among them.
    if !closed && body.len() > 1 && body.iter().any(|l| def_name(l).is_some()) {
        return None;
    }
    let comment = body
        .iter()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with('#'))
        .find_map(mentioned_path);
    let code: Vec<&str> = body
        .iter()
        .copied()
        .skip_while(|l| comment.is_some() && l.trim().starts_with('#'))
        .collect();
    if code.is_empty() || code.len() > crate::line_fix::MAX_FRAGMENT_LINES {
        return None;
    }
    let path = comment.or_else(|| mentioned_path(&lines[..start].join("\n")));
    Some(ToolRequest::ReplaceLines {
        path,
        source: code.join("\n"),
    })
}
