//! The tool protocol: a compact text grammar that small models can emit, and JSON tool calls
//! in the OpenAI function-calling shape for served models. Parsing never fails hard: anything
//! that is not a command yields a [`ProtocolError`] whose message says how to write one.

use frognano_core::{Action, ToolCall};
use serde_json::{Map, Value};

mod command;
mod fenced;
mod json;
mod source;

use command::{command_word, is_marker, parse_command, parse_search_replace, split_args};
use fenced::{fenced_function, fenced_lines};
use json::parse_json_call;
pub use json::parse_tool_call;
use source::function_in;
pub(crate) use source::{dedent, def_name, function_end, indent_of};

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

#[cfg(test)]
mod tests;
