//! The command grammar: `view`, `search`, `edit` with search/replace blocks and the rest, one
//! command per reply.

use super::*;

pub(super) fn command_word(line: &str) -> Option<&'static str> {
    let word = line.split_whitespace().next()?;
    canonical(word)
}

pub(super) fn is_marker(line: &str, c: char) -> bool {
    let t = line.trim();
    t.len() >= 7 && t.chars().take(7).all(|x| x == c)
}

pub(super) fn split_args(rest: &str) -> Vec<String> {
    shlex::split(rest).unwrap_or_else(|| rest.split_whitespace().map(str::to_string).collect())
}

/// Strips one ``` fence around a body, if there is one.
pub(super) fn unfence(body: &[&str]) -> String {
    let mut lines = body;
    if lines
        .first()
        .is_some_and(|l| l.trim_start().starts_with("```"))
        && lines.last().is_some_and(|l| l.trim() == "```")
        && lines.len() >= 2
    {
        lines = &lines[1..lines.len() - 1];
    }
    let mut s = lines.join("\n");
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// The lines of `body` that do not open or close a code fence.
fn without_fences<'a>(body: &[&'a str]) -> Vec<&'a str> {
    body.iter()
        .copied()
        .filter(|l| !l.trim_start().starts_with("```"))
        .collect()
}

pub(super) fn parse_command(lines: &[&str]) -> Result<ToolRequest, ProtocolError> {
    let header = lines[0].trim();
    let (word, rest) = header
        .split_once(char::is_whitespace)
        .unwrap_or((header, ""));
    let Some(tool) = canonical(word) else {
        return err(format!("Unknown command `{word}`. {SHORT_HELP}"));
    };
    let args = split_args(rest.trim());
    let body = &lines[1..];
    match tool {
        "view" => {
            let Some(raw_path) = args.first() else {
                return err("view needs a path: `view PATH` or `view PATH START-END`.");
            };
            // `view path:10-20` is accepted too, unless the path was quoted (a file whose name
            // ends in `:10` is written `view 'name:10'`).
            let quoted = rest.trim_start().starts_with(['\'', '"']);
            let (path, inline_range) = match inline_range(raw_path) {
                Some((p, r)) if !quoted => (p.to_string(), Some(r.to_string())),
                _ => (raw_path.clone(), None),
            };
            let range_text = match (inline_range, &args[1..]) {
                (Some(r), []) => Some(r),
                (None, []) => None,
                (None, [one]) => Some(one.clone()),
                (None, [a, b]) => Some(format!("{a}-{b}")),
                _ => return err("view takes a path and an optional range: `view PATH 10-40`."),
            };
            let (start, end) = match range_text {
                None => (None, None),
                Some(r) => parse_range(&r)?,
            };
            Ok(ToolRequest::View { path, start, end })
        }
        "list" => match args.as_slice() {
            [] => Ok(ToolRequest::List { path: None }),
            [p] => Ok(ToolRequest::List {
                path: Some(p.clone()),
            }),
            _ => err("ls takes at most one directory: `ls src`."),
        },
        "search" => match args.as_slice() {
            [pattern] => Ok(ToolRequest::Search {
                pattern: pattern.clone(),
                path: None,
            }),
            [pattern, path] => Ok(ToolRequest::Search {
                pattern: pattern.clone(),
                path: Some(path.clone()),
            }),
            [] => err("search needs a pattern: `search PATTERN [PATH]`."),
            _ => err(
                "search takes a pattern and an optional path; quote a pattern with spaces: \
                 `search \"def parse\" src`.",
            ),
        },
        "edit" => {
            let Some(path) = args.first() else {
                return err("edit needs a path: `edit PATH` then a SEARCH/REPLACE block.");
            };
            if args.len() > 1 {
                return err(
                    "edit takes one path; the SEARCH/REPLACE block goes on the next lines.",
                );
            }
            parse_search_replace(path.clone(), body)
        }
        "create" => {
            let Some(path) = args.first() else {
                return err("create needs a path: `create PATH` then the file's lines.");
            };
            if args.len() > 1 {
                return err("create takes one path; the file's lines go on the next lines.");
            }
            Ok(ToolRequest::Create {
                path: path.clone(),
                content: unfence(body),
            })
        }
        "insert" => {
            let (Some(path), Some(line)) = (args.first(), args.get(1)) else {
                return err("insert needs a path and a line: `insert PATH LINE` then the lines.");
            };
            let Ok(line) = line.parse::<usize>() else {
                return err(format!(
                    "insert: `{line}` is not a line number (0 = top of file)."
                ));
            };
            let text = unfence(body);
            if text.is_empty() {
                return err("insert: put the lines to insert after the `insert PATH LINE` line.");
            }
            Ok(ToolRequest::Insert {
                path: path.clone(),
                line,
                text,
            })
        }
        "replace_function" => {
            if args.len() > 1 {
                return err("replace_function takes at most a path; the function goes below it.");
            }
            let Some((name, source)) = function_in(&without_fences(body)) else {
                return err(
                    "replace_function: put the whole new function (`def name(...):` and its \
                     body) on the lines after the command.",
                );
            };
            Ok(ToolRequest::ReplaceFunction {
                path: args.first().cloned(),
                name,
                source,
            })
        }
        "replace_lines" => {
            if args.len() > 1 {
                return err("replace_lines takes at most a path; the fixed lines go below it.");
            }
            let mut code = without_fences(body);
            code.retain(|l| !l.trim().is_empty());
            if code.is_empty() || code.len() > crate::line_fix::MAX_FRAGMENT_LINES {
                return err(format!(
                    "replace_lines: put 1 to {} fixed lines on the lines after the command.",
                    crate::line_fix::MAX_FRAGMENT_LINES
                ));
            }
            Ok(ToolRequest::ReplaceLines {
                path: args.first().cloned(),
                source: code.join("\n"),
            })
        }
        "undo" => Ok(ToolRequest::Undo),
        "run_tests" => Ok(ToolRequest::RunTests { tests: args }),
        _ => Ok(ToolRequest::Submit),
    }
}

pub(super) fn parse_range(r: &str) -> Result<(Option<usize>, Option<usize>), ProtocolError> {
    // Each end: empty (open) or a line number.
    let end_of = |side: &str| -> Result<Option<usize>, ProtocolError> {
        if side.is_empty() {
            return Ok(None);
        }
        side.parse().map(Some).or_else(|_| {
            err(format!(
                "`{r}` is not a line range; write START-END, e.g. `view a.py 10-40`."
            ))
        })
    };
    let (a, b) = r.split_once('-').unwrap_or((r, r));
    let (start, end) = (end_of(a)?, end_of(b)?);
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return err(format!("line range {s}-{e} ends before it starts."));
    }
    Ok((start, end))
}

pub(super) fn parse_search_replace(
    path: String,
    body: &[&str],
) -> Result<ToolRequest, ProtocolError> {
    let usage = "write the edit as:\nedit PATH\n<<<<<<< SEARCH\nexact existing lines\n=======\n\
                 new lines\n>>>>>>> REPLACE";
    let Some(open) = body.iter().position(|l| is_marker(l, '<')) else {
        return err(format!("edit: no `<<<<<<< SEARCH` line; {usage}"));
    };
    let Some(mid) = body[open + 1..].iter().position(|l| is_marker(l, '=')) else {
        return err(format!("edit: no `=======` line after SEARCH; {usage}"));
    };
    let mid = open + 1 + mid;
    let Some(close) = body[mid + 1..].iter().position(|l| is_marker(l, '>')) else {
        return err(format!("edit: no `>>>>>>> REPLACE` line; {usage}"));
    };
    let close = mid + 1 + close;
    if body[close + 1..].iter().any(|l| is_marker(l, '<')) {
        return err(
            "edit: one SEARCH/REPLACE block per command; send the next one as another edit.",
        );
    }
    let search = body[open + 1..mid].join("\n");
    let replace = body[mid + 1..close].join("\n");
    if search.trim().is_empty() {
        return err(
            "edit: the SEARCH part is empty; copy the exact lines to replace (use insert to add lines).",
        );
    }
    Ok(ToolRequest::Edit {
        path,
        search,
        replace,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ranges_may_be_open_and_are_checked() {
        assert_eq!(parse_range("10-40").ok(), Some((Some(10), Some(40))));
        assert_eq!(parse_range("-5").ok(), Some((None, Some(5))));
        assert_eq!(parse_range("3-").ok(), Some((Some(3), None)));
        assert_eq!(parse_range("7").ok(), Some((Some(7), Some(7))));
        let bad = parse_range("a-3").expect_err("not a number");
        assert!(
            bad.message.contains("`a-3` is not a line range"),
            "{}",
            bad.message
        );
        assert!(parse_range("9-3").is_err());
    }
}
