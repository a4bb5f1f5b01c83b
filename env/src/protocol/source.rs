//! Python source as the protocol reads it: indentation, `def` lines and where a function ends.

/// Leading whitespace of a line, in characters.
pub(crate) fn indent_of(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).count()
}

/// The name `line` defines when it starts a function (`def name(` or `async def name(`).
pub(crate) fn def_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest
        .strip_prefix("async")
        .filter(|r| r.starts_with(char::is_whitespace))
        .map_or(rest, str::trim_start);
    let rest = rest.strip_prefix("def")?;
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    let name = &rest[..end];
    let starts_well = name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    (starts_well && rest[end..].trim_start().starts_with('(')).then_some(name)
}

/// How much `line` opens brackets (minus what it closes), outside strings and comments.
pub(super) fn bracket_depth_change(line: &str) -> i64 {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in line.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '#' => break,
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// The end (exclusive) of the function whose `def` line is `lines[start]`: its header (to the
/// line where its brackets close), then every line indented deeper, trailing blank lines left
/// out.
pub(crate) fn function_end<S: AsRef<str>>(lines: &[S], start: usize) -> usize {
    let Some(def_line) = lines.get(start) else {
        return start;
    };
    let indent = indent_of(def_line.as_ref());
    let mut depth = 0;
    let mut header_end = start;
    for (i, line) in lines.iter().enumerate().skip(start) {
        depth += bracket_depth_change(line.as_ref());
        header_end = i;
        if depth <= 0 {
            break;
        }
    }
    let mut end = header_end + 1;
    for (i, line) in lines.iter().enumerate().skip(header_end + 1) {
        let line = line.as_ref();
        if line.trim().is_empty() {
            continue;
        }
        if indent_of(line) <= indent {
            break;
        }
        end = i + 1;
    }
    end
}

/// Removes `n` leading whitespace characters (at most as many as there are) from each line.
pub(crate) fn dedent(lines: &[&str], n: usize) -> String {
    let mut out = String::new();
    for line in lines {
        let mut rest = *line;
        for _ in 0..n {
            match rest.chars().next() {
                Some(c) if c.is_whitespace() => rest = &rest[c.len_utf8()..],
                _ => break,
            }
        }
        out.push_str(rest.trim_end());
        out.push('\n');
    }
    out
}

/// The first function definition in `lines`: its name and its dedented source.
pub(super) fn function_in(lines: &[&str]) -> Option<(String, String)> {
    let start = lines.iter().position(|l| def_name(l).is_some())?;
    let name = def_name(lines[start])?.to_string();
    let end = function_end(lines, start);
    let source = dedent(&lines[start..end], indent_of(lines[start]));
    Some((name, source))
}
