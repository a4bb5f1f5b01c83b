//! JSON tool calls in the OpenAI function-calling shape, and their arguments.

use super::*;

/// Parses a JSON tool call: `{"name", "arguments"}` (arguments as an object or a JSON string),
/// `{"function": {...}}`, `{"tool_calls": [...]}` or a one-element array of those.
pub(super) fn parse_json_call(text: &str) -> Result<ToolRequest, ProtocolError> {
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

pub(super) fn call_from_object(value: Value) -> Result<ToolRequest, ProtocolError> {
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
