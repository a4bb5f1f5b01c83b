//! The fixed lines in a code block: the edit a small model writes most readily. A fenced block
//! that is not a whole function (`def pop(self, index=-1):`, or a few lines of a body) replaces
//! the lines of the repository it most resembles, found by a fuzzy match line by line, and takes
//! their indentation. A block that resembles nothing closely enough, or two places equally, is
//! refused with what to write instead.

use super::tools::{ToolOutput, Workspace};

/// Most non-blank lines a block may hold to be read as fixed lines.
pub const MAX_FRAGMENT_LINES: usize = 12;
/// Least score of a match (mean line similarity: normalised Levenshtein, whitespace collapsed).
const MIN_SIMILARITY: f64 = 0.65;
/// Python lines scanned at most when no file is named (larger repositories must name one).
const MAX_SCANNED_LINES: usize = 60_000;

/// Whitespace collapsed: indentation and spacing do not count in the match.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn indent_of(line: &str) -> usize {
    line.chars().take_while(|c| *c == ' ' || *c == '\t').count()
}

/// Whether `path` holds tests (never the target of a fix; grading restores them anyway).
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("test_")
        || name.ends_with("_test.py")
        || name == "conftest.py"
        || path
            .split('/')
            .any(|part| part == "tests" || part == "test")
}

/// A window of a file's lines that a block resembles.
#[derive(Debug, Clone, PartialEq)]
struct Window {
    start: usize,
    len: usize,
    score: f64,
}

/// The window of `lines` that `block` (non-blank, squeezed) resembles most: windows of the
/// block's length `k`, one shorter (the fix adds a line) and one longer (it removes one), each
/// scored by the best in-order pairing of its lines with the block's: the paired similarity
/// over `k` for a window as long as the block, over the window's length for a longer one (every
/// block line must find its line), and over `k - 1/2` for a shorter one (so that a block of
/// context plus a changed line replaces the changed line rather than inserting after the
/// context). On equal scores the window as long as the block wins, then the shorter one.
fn best_window(block: &[String], lines: &[&str]) -> Option<Window> {
    let k = block.len();
    if k == 0 || lines.is_empty() {
        return None;
    }
    let squeezed: Vec<String> = lines.iter().map(|l| squeeze(l)).collect();
    // Similarity of every block line to every file line (0 for lengths too far apart).
    let similarity: Vec<Vec<f64>> = block
        .iter()
        .map(|b| {
            squeezed
                .iter()
                .map(|l| {
                    let (a, c) = (b.chars().count(), l.chars().count());
                    if l.is_empty() || a.min(c) * 2 < a.max(c) {
                        0.0
                    } else {
                        strsim::normalized_levenshtein(b, l)
                    }
                })
                .collect()
        })
        .collect();
    let mut best: Option<Window> = None;
    for len in [k, k.saturating_sub(1), k + 1] {
        if len == 0 || len > lines.len() {
            continue;
        }
        for start in 0..=lines.len() - len {
            // In-order pairing (a weighted longest common subsequence) of block lines with
            // the window's lines.
            let mut table = vec![vec![0.0f64; len + 1]; k + 1];
            for i in 1..=k {
                for j in 1..=len {
                    let pair = table[i - 1][j - 1] + similarity[i - 1][start + j - 1];
                    table[i][j] = pair.max(table[i - 1][j]).max(table[i][j - 1]);
                }
            }
            let score = table[k][len]
                / match len.cmp(&k) {
                    std::cmp::Ordering::Less => k as f64 - 0.5,
                    _ => len as f64,
                };
            if best.as_ref().is_none_or(|b| score > b.score + 1e-12) {
                best = Some(Window { start, len, score });
            }
        }
    }
    best
}

/// Which window line each block line pairs with (the in-order pairing `best_window` scores).
fn pairing(block: &[String], window: &[&str]) -> Vec<Option<usize>> {
    let window: Vec<String> = window.iter().map(|l| squeeze(l)).collect();
    let (k, len) = (block.len(), window.len());
    let sim = |i: usize, j: usize| strsim::normalized_levenshtein(&block[i], &window[j]);
    let mut table = vec![vec![0.0f64; len + 1]; k + 1];
    for i in 1..=k {
        for j in 1..=len {
            let pair = table[i - 1][j - 1] + sim(i - 1, j - 1);
            table[i][j] = pair.max(table[i - 1][j]).max(table[i][j - 1]);
        }
    }
    let mut pairs = vec![None; k];
    let (mut i, mut j) = (k, len);
    while i > 0 && j > 0 {
        if (table[i][j] - table[i - 1][j]).abs() < 1e-12 {
            i -= 1;
        } else if (table[i][j] - table[i][j - 1]).abs() < 1e-12 {
            j -= 1;
        } else {
            pairs[i - 1] = Some(j - 1);
            i -= 1;
            j -= 1;
        }
    }
    pairs
}

/// `block`'s lines indented to sit where `window` was. A block written flat (small models
/// often drop indentation) takes the indentation of the lines it pairs with, and a line with
/// no pair that of the line before it (one level deeper after a line ending in `:`). A block
/// with indentation of its own keeps it, relative to the window's first line, where it
/// differs from the window's.
fn reindent(block: &[&str], window: &[&str]) -> Vec<String> {
    let squeezed: Vec<String> = block.iter().map(|l| squeeze(l)).collect();
    let pairs = pairing(&squeezed, window);
    let base_block = block.first().map_or(0, |l| indent_of(l));
    let base_window = window.first().map_or(0, |l| indent_of(l));
    let shaped = block.iter().any(|l| indent_of(l) != base_block);
    let prefix_of = |line: &str| -> String { line.chars().take(indent_of(line)).collect() };
    let unit = "    ";
    let mut out: Vec<String> = Vec::with_capacity(block.len());
    for (i, line) in block.iter().enumerate() {
        let body = line.trim_start_matches([' ', '\t']);
        let own = indent_of(line) as isize - base_block as isize;
        let indent = match pairs[i] {
            Some(j) => {
                let theirs = indent_of(window[j]) as isize - base_window as isize;
                if shaped && own != theirs {
                    let width = (base_window as isize + own).max(0) as usize;
                    format!(
                        "{}{}",
                        prefix_of(window[0]),
                        " ".repeat(width.saturating_sub(base_window))
                    )
                } else {
                    prefix_of(window[j])
                }
            }
            None => match out.last() {
                Some(previous) => {
                    let mut indent = prefix_of(previous);
                    if previous.trim_end().ends_with(':') {
                        indent.push_str(unit);
                    }
                    indent
                }
                None => prefix_of(window.first().copied().unwrap_or("")),
            },
        };
        out.push(format!("{indent}{body}"));
    }
    out
}

impl Workspace {
    /// Replaces the lines that `source` (a fenced block that is not a whole function)
    /// resembles most, in the file `raw` names or else in the repository's non-test Python
    /// files.
    pub(crate) fn replace_lines(&mut self, raw: Option<&str>, source: &str) -> ToolOutput {
        let block: Vec<&str> = source.lines().filter(|l| !l.trim().is_empty()).collect();
        if block.is_empty() || block.len() > MAX_FRAGMENT_LINES {
            return ToolOutput::error(format!(
                "A code block replaces the lines it resembles only when it holds 1 to \
                 {MAX_FRAGMENT_LINES} lines; write a whole function, or `edit PATH` with a \
                 SEARCH/REPLACE block."
            ));
        }
        let squeezed: Vec<String> = block.iter().map(|l| squeeze(l)).collect();
        let named = raw
            .and_then(|r| Self::resolve(r).ok())
            .filter(|p| !p.is_empty() && self.read_text(p).is_ok());
        let files: Vec<String> = match &named {
            Some(path) => vec![path.clone()],
            None => self
                .walk("")
                .into_iter()
                .filter(|f| f.ends_with(".py") && !is_test_file(f))
                .collect(),
        };
        let mut scanned = 0usize;
        let mut found: Vec<(String, String, Window)> = Vec::new();
        for file in files {
            let Ok(text) = self.read_text(&file) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            scanned += lines.len();
            if scanned > MAX_SCANNED_LINES {
                return ToolOutput::error(
                    "The repository is too large to find where these lines go: name the file \
                     on the line before the code block (e.g. `pkg/module.py:`), or use `edit \
                     PATH` with a SEARCH/REPLACE block.",
                );
            }
            if let Some(window) = best_window(&squeezed, &lines) {
                found.push((file, text, window));
            }
        }
        found.sort_by(|a, b| b.2.score.total_cmp(&a.2.score));
        let Some((path, text, window)) = found.first().cloned() else {
            return ToolOutput::error("No Python file to apply these lines to.");
        };
        if window.score < MIN_SIMILARITY {
            return ToolOutput::error(
                "No replacement was performed: these lines resemble no lines of the repository \
                 closely enough. Copy the lines to fix and change only what is wrong, or use \
                 `edit PATH` with a SEARCH/REPLACE block.",
            );
        }
        let ties: Vec<String> = found
            .iter()
            .filter(|(_, _, w)| (w.score - window.score).abs() < 1e-9)
            .map(|(p, _, w)| format!("{p}:{}", w.start + 1))
            .collect();
        if ties.len() > 1 {
            return ToolOutput::error(format!(
                "No replacement was performed: these lines resemble {} places equally ({}). Name \
                 the file on the line before the code block, or use `edit PATH` with a \
                 SEARCH/REPLACE block.",
                ties.len(),
                ties.join(", ")
            ));
        }
        let lines: Vec<&str> = text.lines().collect();
        let old = &lines[window.start..window.start + window.len];
        let new_lines = reindent(&block, old);
        if new_lines
            .iter()
            .map(|l| squeeze(l))
            .eq(old.iter().map(|l| squeeze(l)))
        {
            return ToolOutput::error(format!(
                "No change: lines {}-{} of {path} already read like that. Change what is wrong.",
                window.start + 1,
                window.start + window.len
            ));
        }
        let mut new = String::with_capacity(text.len() + source.len());
        for line in lines[..window.start]
            .iter()
            .copied()
            .chain(new_lines.iter().map(String::as_str))
            .chain(lines[window.start + window.len..].iter().copied())
        {
            new.push_str(line);
            new.push('\n');
        }
        if !text.ends_with('\n') {
            new.pop();
        }
        if let Some(err) = self.write(&path, new.as_bytes(), Some(text.clone().into_bytes())) {
            return err;
        }
        let first = window.start + 1;
        let last = window.start + new_lines.len().max(1);
        ToolOutput::ok(format!(
            "Replaced lines {first}-{} of {path} with yours. Lines {}-{} now read:\n{}",
            window.start + window.len,
            first.saturating_sub(2).max(1),
            (last + 2).min(new.lines().count()),
            Self::excerpt(&new, first, last)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn squeezed(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| squeeze(l)).collect()
    }

    const SOURCE: &str = "class SortedList:\n    def pop(self, index=-2):\n        if not self._items:\n            raise IndexError(\"empty\")\n        return self._items.pop(index)\n\n    def peek(self):\n        return self._items[-1]\n";

    #[test]
    fn a_fixed_line_finds_its_buggy_line() {
        let lines: Vec<&str> = SOURCE.lines().collect();
        let window =
            best_window(&squeezed(&["def pop(self, index=-1):"]), &lines).expect("a window");
        assert_eq!((window.start, window.len), (1, 1));
        assert!(window.score > 0.9, "{window:?}");
        let block = ["def pop(self, index=-1):"];
        assert_eq!(
            reindent(&block, &lines[1..2]),
            vec!["    def pop(self, index=-1):".to_string()]
        );
    }

    #[test]
    fn a_block_with_an_added_line_takes_a_shorter_window() {
        let lines: Vec<&str> = SOURCE.lines().collect();
        let block = [
            "if not self._items:",
            "    raise IndexError(\"empty\")",
            "    print(1)",
        ];
        let window = best_window(&squeezed(&block), &lines).expect("a window");
        assert_eq!((window.start, window.len), (2, 2), "{window:?}");
        assert!(window.score >= MIN_SIMILARITY, "{window:?}");
        // Context plus a changed line replaces the changed line, not an insertion.
        let changed = ["if not self._items:", "    raise IndexError(\"empty!\")"];
        let found = best_window(&squeezed(&changed), &lines).expect("a window");
        assert_eq!((found.start, found.len), (2, 2), "{found:?}");
        let new = reindent(&block, &lines[window.start..window.start + window.len]);
        assert_eq!(new[0], "        if not self._items:");
        assert_eq!(new[1], "            raise IndexError(\"empty\")");
    }

    #[test]
    fn unrelated_text_scores_low() {
        let lines: Vec<&str> = SOURCE.lines().collect();
        let window = best_window(&squeezed(&["import numpy as np"]), &lines).expect("a window");
        assert!(window.score < MIN_SIMILARITY, "{window:?}");
    }

    #[test]
    fn test_files_are_not_targets() {
        assert!(is_test_file("tests/test_a.py"));
        assert!(is_test_file("pkg/conftest.py"));
        assert!(is_test_file("test_x.py"));
        assert!(!is_test_file("src/pkg/latest.py"));
    }
}
