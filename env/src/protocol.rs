//! The tool protocol: a compact text grammar that small models can emit, and JSON tool calls
//! in the OpenAI function-calling shape for served models. Parsing never fails hard: anything
//! that is not a command yields a [`ProtocolError`] whose message says how to write one.

use frognano_core::{Action, ToolCall};
use serde_json::{Map, Value};

/// One parsed tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRequest {
    /// Show a file with line numbers (optionally a 1-based inclusive range), or list a directory.
    View {
        /// Repository-relative path.
        path: String,
        /// First line to show.
        start: Option<usize>,
        /// Last line to show.
        end: Option<usize>,
    },
    /// List a directory two levels deep.
    List {
        /// Directory (the repository root when absent).
        path: Option<String>,
    },
    /// Regex search over the repository's text files.
    Search {
        /// The regular expression.
        pattern: String,
        /// A file or directory to search in.
        path: Option<String>,
    },
    /// Replace a snippet that occurs exactly once in a file.
    Edit {
        /// The file.
        path: String,
        /// Exact text to find.
        search: String,
        /// Its replacement.
        replace: String,
    },
    /// Create a new file.
    Create {
        /// The file.
        path: String,
        /// Its contents.
        content: String,
    },
    /// Insert lines after a line (0 inserts at the top).
    Insert {
        /// The file.
        path: String,
        /// The line after which to insert.
        line: usize,
        /// The lines to insert.
        text: String,
    },
    /// Replace a whole function (or method) with a new definition of the same name.
    ReplaceFunction {
        /// The file that defines it; absent: the one file in the repository that does.
        path: Option<String>,
        /// The function's name.
        name: String,
        /// The new definition, from its `def` line to the end of its body, dedented.
        source: String,
    },
    /// Replace the lines of a file that these lines resemble most (the fixed lines a small
    /// model writes in a code block; see [`crate::line_fix`]).
    ReplaceLines {
        /// The file; absent: the repository's non-test Python file that holds the closest match.
        path: Option<String>,
        /// The new lines.
        source: String,
    },
    /// Revert the last edit, creation or insertion.
    Undo,
    /// Run the tests: all of them, or the named ids/paths.
    RunTests {
        /// pytest node ids or test file paths (empty: all).
        tests: Vec<String>,
    },
    /// End the episode; the fix is graded.
    Submit,
}

impl ToolRequest {
    /// The tool's canonical name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolRequest::View { .. } => "view",
            ToolRequest::List { .. } => "list",
            ToolRequest::Search { .. } => "search",
            ToolRequest::Edit { .. } => "edit",
            ToolRequest::Create { .. } => "create",
            ToolRequest::Insert { .. } => "insert",
            ToolRequest::ReplaceFunction { .. } => "replace_function",
            ToolRequest::ReplaceLines { .. } => "replace_lines",
            ToolRequest::Undo => "undo",
            ToolRequest::RunTests { .. } => "run_tests",
            ToolRequest::Submit => "submit",
        }
    }

    /// The call as a JSON tool call (canonical argument names).
    pub fn to_tool_call(&self) -> ToolCall {
        use serde_json::json;
        let arguments = match self {
            ToolRequest::View { path, start, end } => {
                let mut m = Map::new();
                m.insert("path".into(), json!(path));
                if let Some(s) = start {
                    m.insert("start_line".into(), json!(s));
                }
                if let Some(e) = end {
                    m.insert("end_line".into(), json!(e));
                }
                Value::Object(m)
            }
            ToolRequest::List { path } => match path {
                Some(p) => json!({ "path": p }),
                None => json!({}),
            },
            ToolRequest::Search { pattern, path } => match path {
                Some(p) => json!({ "pattern": pattern, "path": p }),
                None => json!({ "pattern": pattern }),
            },
            ToolRequest::Edit {
                path,
                search,
                replace,
            } => json!({ "path": path, "search": search, "replace": replace }),
            ToolRequest::Create { path, content } => json!({ "path": path, "content": content }),
            ToolRequest::Insert { path, line, text } => {
                json!({ "path": path, "line": line, "text": text })
            }
            ToolRequest::ReplaceFunction { path, name, source } => match path {
                Some(p) => json!({ "path": p, "name": name, "source": source }),
                None => json!({ "name": name, "source": source }),
            },
            ToolRequest::ReplaceLines { path, source } => match path {
                Some(p) => json!({ "path": p, "source": source }),
                None => json!({ "source": source }),
            },
            ToolRequest::Undo | ToolRequest::Submit => json!({}),
            ToolRequest::RunTests { tests } => json!({ "tests": tests }),
        };
        ToolCall {
            name: self.name().to_string(),
            arguments,
        }
    }

    /// The call written in the text grammar (what a model would emit).
    pub fn to_text(&self) -> String {
        match self {
            ToolRequest::View { path, start, end } => match (start, end) {
                (Some(s), Some(e)) => format!("view {} {s}-{e}", quote_view_path(path)),
                (Some(s), None) => format!("view {} {s}-", quote_view_path(path)),
                (None, Some(e)) => format!("view {} -{e}", quote_view_path(path)),
                (None, None) => format!("view {}", quote_view_path(path)),
            },
            ToolRequest::List { path } => match path {
                Some(p) => format!("ls {}", quote(p)),
                None => "ls".into(),
            },
            ToolRequest::Search { pattern, path } => match path {
                Some(p) => format!("search {} {}", quote(pattern), quote(p)),
                None => format!("search {}", quote(pattern)),
            },
            ToolRequest::Edit {
                path,
                search,
                replace,
            } => format!(
                "edit {}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE",
                quote(path)
            ),
            ToolRequest::Create { path, content } => {
                format!("create {}\n{}", quote(path), content.trim_end_matches('\n'))
            }
            ToolRequest::Insert { path, line, text } => {
                format!(
                    "insert {} {line}\n{}",
                    quote(path),
                    text.trim_end_matches('\n')
                )
            }
            ToolRequest::ReplaceFunction { path, source, .. }
            | ToolRequest::ReplaceLines { path, source } => match path {
                Some(p) => format!("{p}:\n```python\n{}\n```", source.trim_end_matches('\n')),
                None => format!("```python\n{}\n```", source.trim_end_matches('\n')),
            },
            ToolRequest::Undo => "undo".into(),
            ToolRequest::RunTests { tests } => {
                let mut s = "test".to_string();
                for t in tests {
                    s.push(' ');
                    s.push_str(&quote(t));
                }
                s
            }
            ToolRequest::Submit => "submit".into(),
        }
    }
}

/// `path:RANGE` split into its parts, when a path ends like an inline line range.
fn inline_range(raw: &str) -> Option<(&str, &str)> {
    let (path, range) = raw.rsplit_once(':')?;
    let is_range = !range.is_empty() && range.chars().all(|c| c.is_ascii_digit() || c == '-');
    (is_range && !path.is_empty()).then_some((path, range))
}

/// A path for `view`: quoted whenever it could be read as `path:RANGE`.
fn quote_view_path(path: &str) -> String {
    if inline_range(path).is_some() {
        format!("'{}'", path.replace('\'', "'\"'\"'"))
    } else {
        quote(path)
    }
}

fn quote(s: &str) -> String {
    let plain = |c: char| c.is_alphanumeric() || "_-./:[]=,+@%^".contains(c);
    if !s.is_empty() && s.chars().all(plain) && !s.starts_with('-') {
        s.to_string()
    } else {
        shlex::try_quote(s).map_or_else(|_| s.to_string(), |q| q.into_owned())
    }
}

/// Why an action could not be understood, with how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    /// The message shown to the agent.
    pub message: String,
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProtocolError {}

fn err<T>(message: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError {
        message: message.into(),
    })
}

/// The tool instructions shown at the start of every episode.
pub const INSTRUCTIONS: &str = "\
Reply with exactly one command per turn (free text before it is allowed only if the command is \
in a ``` block).
Commands:
  view PATH [START-END]   show a file with line numbers (or list a directory)
  ls [DIR]                list files
  search PATTERN [PATH]   regex search; quote patterns with spaces: search \"def parse\" src
  test [TEST_ID ...]      run the tests (all, or the ones named)
  edit PATH               replace text that occurs exactly once in PATH; write it as:
    edit PATH
    <<<<<<< SEARCH
    exact existing lines
    =======
    new lines
    >>>>>>> REPLACE
  insert PATH LINE        insert the lines that follow after line LINE (0 = top)
  create PATH             create a new file with the lines that follow
  ```python               or write the whole fixed function in a python code block: it
  def name(...):          replaces the function of that name (name its file just before the
      ...                 block when several files define it)
  ```
  undo                    revert your last edit
  submit                  finish; your fix is graded by the tests
JSON tool calls are accepted too: {\"name\": \"view\", \"arguments\": {\"path\": \"a.py\"}}";

const SHORT_HELP: &str = "Write one command, e.g. `view src/mod.py 1-40`, `search \"def name\"`, \
`test`, `edit PATH` followed by a <<<<<<< SEARCH / ======= / >>>>>>> REPLACE block, the whole \
fixed function in a ```python block, or `submit`.";

/// JSON schemas of the tools, in the OpenAI `tools` shape, for served models.
pub fn tool_schemas() -> Value {
    use serde_json::json;
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": properties, "required": required}
            }
        })
    };
    let path = json!({"type": "string", "description": "path relative to the repository root"});
    Value::Array(vec![
        tool(
            "view",
            "Show a file with line numbers, or list a directory.",
            json!({"path": path, "start_line": {"type": "integer"}, "end_line": {"type": "integer"}}),
            &["path"],
        ),
        tool(
            "list",
            "List a directory two levels deep.",
            json!({"path": path}),
            &[],
        ),
        tool(
            "search",
            "Search the repository's files with a regular expression.",
            json!({"pattern": {"type": "string"}, "path": path}),
            &["pattern"],
        ),
        tool(
            "edit",
            "Replace text that occurs exactly once in a file.",
            json!({"path": path, "search": {"type": "string"}, "replace": {"type": "string"}}),
            &["path", "search", "replace"],
        ),
        tool(
            "create",
            "Create a new file.",
            json!({"path": path, "content": {"type": "string"}}),
            &["path", "content"],
        ),
        tool(
            "insert",
            "Insert text after a line (0 = top of the file).",
            json!({"path": path, "line": {"type": "integer"}, "text": {"type": "string"}}),
            &["path", "line", "text"],
        ),
        tool(
            "replace_function",
            "Replace a whole function or method with a new definition of the same name.",
            json!({"path": path, "name": {"type": "string"}, "source": {"type": "string", "description": "the whole new definition, from its def line"}}),
            &["source"],
        ),
        tool(
            "replace_lines",
            "Replace the lines of a file that the given lines resemble most (write the fixed lines; they take the old lines' indentation).",
            json!({"path": path, "source": {"type": "string", "description": "the fixed lines (1 to 12)"}}),
            &["source"],
        ),
        tool(
            "undo",
            "Revert the last edit, insertion or creation.",
            json!({}),
            &[],
        ),
        tool(
            "run_tests",
            "Run the tests: all, or the named pytest ids / files.",
            json!({"tests": {"type": "array", "items": {"type": "string"}}}),
            &[],
        ),
        tool(
            "submit",
            "Finish; the fix is graded by the tests.",
            json!({}),
            &[],
        ),
    ])
}

/// Parses an action into a tool request.
pub fn parse_action(action: &Action) -> Result<ToolRequest, ProtocolError> {
    match action {
        Action::Tool(call) => parse_tool_call(&call.name, &call.arguments),
        Action::Text { text } => parse_text(text),
    }
}

/// Canonical tool name for a command word or JSON tool name.
fn canonical(word: &str) -> Option<&'static str> {
    Some(match word.to_ascii_lowercase().trim_end_matches(':') {
        "view" | "open" | "cat" => "view",
        "ls" | "list" | "list_dir" | "list_directory" => "list",
        "search" | "grep" | "search_repo" => "search",
        "edit" | "str_replace" | "replace" | "str_replace_editor" => "edit",
        "create" | "create_file" => "create",
        "insert" => "insert",
        "replace_function" | "replace_def" => "replace_function",
        "replace_lines" | "fix_lines" => "replace_lines",
        "undo" | "undo_edit" => "undo",
        "test" | "tests" | "run_tests" | "pytest" | "run_test" => "run_tests",
        "submit" | "done" | "finish" => "submit",
        _ => return None,
    })
}

/// Parses model text: a JSON tool call, a `<tool_call>` block, the command grammar (bare, or
/// in a ``` block after free text), or else a code block holding a whole function definition
/// (possibly after prose), which replaces the function of that name.
pub fn parse_text(text: &str) -> Result<ToolRequest, ProtocolError> {
    match parse_text_strictly(text) {
        Ok(request) => Ok(request),
        Err(e) => match fenced_function(text).or_else(|| fenced_lines(text)) {
            Some(request) => Ok(request),
            None if has_fence(text) => Err(ProtocolError {
                message: format!(
                    "{} A code block counts as an edit when it holds a whole function \
                     (`def name(...):` and its body), or 1 to {} fixed lines, between ``` lines.",
                    e.message,
                    crate::line_fix::MAX_FRAGMENT_LINES
                ),
            }),
            None => Err(e),
        },
    }
}

fn parse_text_strictly(text: &str) -> Result<ToolRequest, ProtocolError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return err(format!("Empty action. {SHORT_HELP}"));
    }
    if let Some(start) = trimmed.find("<tool_call>") {
        let body = &trimmed[start + "<tool_call>".len()..];
        let body = body.split("</tool_call>").next().unwrap_or(body);
        return parse_json_call(body.trim());
    }
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return parse_json_call(trimmed);
    }
    let lines: Vec<&str> = text.lines().collect();
    if let Some(first) = lines.iter().position(|l| !l.trim().is_empty())
        && command_word(lines[first]).is_some()
    {
        return parse_command(&lines[first..]);
    }
    // A command inside a fenced block after free text.
    for (i, line) in lines.iter().enumerate() {
        if !line.trim_start().starts_with("```") {
            continue;
        }
        let Some(next) = lines.get(i + 1) else { break };
        if command_word(next).is_some() {
            let body = &lines[i + 1..];
            let end = body
                .iter()
                .rposition(|l| l.trim() == "```")
                .unwrap_or(body.len());
            return parse_command(&body[..end]);
        }
        if next.trim_start().starts_with('{') {
            let body = &lines[i + 1..];
            let end = body
                .iter()
                .position(|l| l.trim() == "```")
                .unwrap_or(body.len());
            return parse_json_call(&body[..end].join("\n"));
        }
    }
    // Agentless / SWE-RL style: `### path` followed by a SEARCH/REPLACE block.
    if let Some(i) = lines
        .iter()
        .position(|l| l.trim_start().starts_with("### "))
        && lines[i..].iter().any(|l| is_marker(l, '<'))
    {
        let path = lines[i].trim_start()[4..].trim().to_string();
        return parse_search_replace(path, &lines[i + 1..]);
    }
    let first = trimmed.lines().next().unwrap_or("").trim();
    let shown: String = first.chars().take(60).collect();
    err(format!(
        "No command found: `{shown}` does not start with a command. {SHORT_HELP}"
    ))
}

fn has_fence(text: &str) -> bool {
    text.lines().any(|l| l.trim_start().starts_with("```"))
}

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
fn bracket_depth_change(line: &str) -> i64 {
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
fn function_in(lines: &[&str]) -> Option<(String, String)> {
    let start = lines.iter().position(|l| def_name(l).is_some())?;
    let name = def_name(lines[start])?.to_string();
    let end = function_end(lines, start);
    let source = dedent(&lines[start..end], indent_of(lines[start]));
    Some((name, source))
}

/// A repository path (`*.py`) that `text` mentions, the last one when there are several.
fn mentioned_path(text: &str) -> Option<String> {
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
fn fenced_function(text: &str) -> Option<ToolRequest> {
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
fn fenced_lines(text: &str) -> Option<ToolRequest> {
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

fn command_word(line: &str) -> Option<&'static str> {
    let word = line.split_whitespace().next()?;
    canonical(word)
}

fn is_marker(line: &str, c: char) -> bool {
    let t = line.trim();
    t.len() >= 7 && t.chars().take(7).all(|x| x == c)
}

fn split_args(rest: &str) -> Vec<String> {
    shlex::split(rest).unwrap_or_else(|| rest.split_whitespace().map(str::to_string).collect())
}

/// Strips one ``` fence around a body, if there is one.
fn unfence(body: &[&str]) -> String {
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

fn parse_command(lines: &[&str]) -> Result<ToolRequest, ProtocolError> {
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
            let body: Vec<&str> = body
                .iter()
                .copied()
                .filter(|l| !l.trim_start().starts_with("```"))
                .collect();
            let Some((name, source)) = function_in(&body) else {
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
            let code: Vec<&str> = body
                .iter()
                .copied()
                .filter(|l| !l.trim_start().starts_with("```") && !l.trim().is_empty())
                .collect();
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

fn parse_range(r: &str) -> Result<(Option<usize>, Option<usize>), ProtocolError> {
    let bad = || {
        err(format!(
            "`{r}` is not a line range; write START-END, e.g. `view a.py 10-40`."
        ))
    };
    let (a, b) = r.split_once('-').unwrap_or((r, r));
    let start = if a.is_empty() {
        None
    } else {
        match a.parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => return bad(),
        }
    };
    let end = if b.is_empty() {
        None
    } else {
        match b.parse::<usize>() {
            Ok(n) => Some(n),
            Err(_) => return bad(),
        }
    };
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return err(format!("line range {s}-{e} ends before it starts."));
    }
    Ok((start, end))
}

fn parse_search_replace(path: String, body: &[&str]) -> Result<ToolRequest, ProtocolError> {
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

/// Parses a JSON tool call: `{"name", "arguments"}` (arguments as an object or a JSON string),
/// `{"function": {...}}`, `{"tool_calls": [...]}` or a one-element array of those.
fn parse_json_call(text: &str) -> Result<ToolRequest, ProtocolError> {
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let value = match stream.next() {
        Some(Ok(v)) => v,
        Some(Err(e)) => return err(format!("The JSON tool call does not parse: {e}.")),
        None => return err("Empty JSON tool call."),
    };
    let mut call = value;
    loop {
        call = match call {
            Value::Array(mut items) => {
                if items.len() != 1 {
                    return err(format!(
                        "Send exactly one tool call per step (got {}).",
                        items.len()
                    ));
                }
                items.remove(0)
            }
            Value::Object(mut m) if m.contains_key("tool_calls") => {
                m.remove("tool_calls").unwrap_or(Value::Null)
            }
            Value::Object(mut m) if m.get("function").is_some_and(Value::is_object) => {
                m.remove("function").unwrap_or(Value::Null)
            }
            other => break call_from_object(other),
        };
    }
}

fn call_from_object(value: Value) -> Result<ToolRequest, ProtocolError> {
    let Value::Object(mut m) = value else {
        return err(
            r#"A JSON tool call is an object: {"name": "view", "arguments": {"path": "a.py"}}."#,
        );
    };
    let name = ["name", "tool", "tool_name"]
        .iter()
        .find_map(|k| m.get(*k).and_then(Value::as_str).map(str::to_string));
    let Some(name) = name else {
        return err(
            r#"The JSON tool call has no "name": {"name": "view", "arguments": {"path": "a.py"}}."#,
        );
    };
    let arguments = ["arguments", "args", "parameters", "input"]
        .iter()
        .find_map(|k| m.remove(*k))
        .unwrap_or(Value::Object(Map::new()));
    parse_tool_call(&name, &arguments)
}

/// Parses a structured tool call (name + arguments object, or arguments as a JSON string).
pub fn parse_tool_call(name: &str, arguments: &Value) -> Result<ToolRequest, ProtocolError> {
    let Some(tool) = canonical(name) else {
        return err(format!(
            "Unknown tool `{name}`; tools: view, list, search, edit, create, insert, \
             replace_function, undo, run_tests, submit."
        ));
    };
    let parsed;
    let args = match arguments {
        Value::String(s) if s.trim().is_empty() => {
            parsed = Value::Object(Map::new());
            &parsed
        }
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v) => {
                parsed = v;
                &parsed
            }
            Err(e) => return err(format!("{tool}: arguments do not parse as JSON: {e}.")),
        },
        Value::Null => {
            parsed = Value::Object(Map::new());
            &parsed
        }
        other => other,
    };
    let Value::Object(args) = args else {
        return err(format!("{tool}: arguments must be a JSON object."));
    };
    let text = |keys: &[&str]| -> Result<Option<String>, ProtocolError> {
        for k in keys {
            match args.get(*k) {
                None | Some(Value::Null) => continue,
                Some(Value::String(s)) => return Ok(Some(s.clone())),
                Some(other) => {
                    return err(format!("{tool}: `{k}` must be a string, got {other}."));
                }
            }
        }
        Ok(None)
    };
    let number = |keys: &[&str]| -> Result<Option<usize>, ProtocolError> {
        for k in keys {
            match args.get(*k) {
                None | Some(Value::Null) => continue,
                Some(v) => {
                    if let Some(n) = v.as_u64() {
                        return Ok(Some(n as usize));
                    }
                    if let Some(n) = v.as_str().and_then(|s| s.trim().parse::<usize>().ok()) {
                        return Ok(Some(n));
                    }
                    return err(format!(
                        "{tool}: `{k}` must be a non-negative integer, got {v}."
                    ));
                }
            }
        }
        Ok(None)
    };
    let required = |value: Option<String>, key: &str| -> Result<String, ProtocolError> {
        value.ok_or_else(|| ProtocolError {
            message: format!("{tool}: missing argument `{key}`."),
        })
    };
    let path = || text(&["path", "file", "file_path", "filename"]);
    Ok(match tool {
        "view" => {
            let mut start = number(&["start_line", "start"])?;
            let mut end = number(&["end_line", "end"])?;
            if let Some(Value::Array(range)) = args.get("view_range")
                && let [a, b] = range.as_slice()
            {
                start = a.as_u64().map(|n| n as usize);
                // str_replace_editor uses -1 for "to the end".
                end = b.as_u64().map(|n| n as usize);
            }
            if let (Some(s), Some(e)) = (start, end)
                && e < s
            {
                return err(format!("view: line range {s}-{e} ends before it starts."));
            }
            ToolRequest::View {
                path: required(path()?, "path")?,
                start,
                end,
            }
        }
        "list" => ToolRequest::List { path: path()? },
        "search" => ToolRequest::Search {
            pattern: required(text(&["pattern", "regex", "query"])?, "pattern")?,
            path: path()?,
        },
        "edit" => {
            let search = required(text(&["search", "old_str", "old", "old_string"])?, "search")?;
            if search.is_empty() {
                return err("edit: `search` is empty; give the exact text to replace.");
            }
            ToolRequest::Edit {
                path: required(path()?, "path")?,
                search,
                replace: text(&["replace", "new_str", "new", "new_string"])?.unwrap_or_default(),
            }
        }
        "create" => ToolRequest::Create {
            path: required(path()?, "path")?,
            content: text(&["content", "file_text", "text"])?.unwrap_or_default(),
        },
        "insert" => ToolRequest::Insert {
            path: required(path()?, "path")?,
            line: number(&["line", "insert_line", "after_line"])?.ok_or_else(|| ProtocolError {
                message: "insert: missing argument `line` (0 = top of file).".into(),
            })?,
            text: required(text(&["text", "new_str", "content"])?, "text")?,
        },
        "replace_function" => {
            let code = required(text(&["source", "code", "content"])?, "source")?;
            let lines: Vec<&str> = code.lines().collect();
            let Some((name, source)) = function_in(&lines) else {
                return err("replace_function: `source` must hold a whole `def name(...):`.");
            };
            if let Some(given) = text(&["name", "function"])?
                && given != name
            {
                return err(format!(
                    "replace_function: `name` is `{given}` but the source defines `{name}`."
                ));
            }
            ToolRequest::ReplaceFunction {
                path: path()?,
                name,
                source,
            }
        }
        "replace_lines" => {
            let code = required(text(&["source", "code", "content", "lines"])?, "source")?;
            if code.lines().filter(|l| !l.trim().is_empty()).count() == 0 {
                return err("replace_lines: `source` must hold the fixed lines.");
            }
            ToolRequest::ReplaceLines {
                path: path()?,
                source: code,
            }
        }
        "undo" => ToolRequest::Undo,
        "run_tests" => {
            let tests = match args.get("tests").or_else(|| args.get("test_ids")) {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::String(s)) => split_args(s),
                Some(Value::Array(items)) => {
                    let mut out = Vec::new();
                    for item in items {
                        match item.as_str() {
                            Some(s) => out.push(s.to_string()),
                            None => return err("run_tests: `tests` must be a list of strings."),
                        }
                    }
                    out
                }
                Some(_) => return err("run_tests: `tests` must be a list of strings."),
            };
            ToolRequest::RunTests { tests }
        }
        _ => ToolRequest::Submit,
    })
}

#[cfg(test)]
mod tests;
