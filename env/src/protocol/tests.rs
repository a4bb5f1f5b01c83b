use super::*;

fn text(s: &str) -> Result<ToolRequest, ProtocolError> {
    parse_action(&Action::Text { text: s.into() })
}

#[test]
fn grammar_commands_parse() {
    assert_eq!(
        text("view pkg/a.py 10-20").expect("ok"),
        ToolRequest::View {
            path: "pkg/a.py".into(),
            start: Some(10),
            end: Some(20)
        }
    );
    assert_eq!(
        text("view pkg/a.py:5-9").expect("ok"),
        ToolRequest::View {
            path: "pkg/a.py".into(),
            start: Some(5),
            end: Some(9)
        }
    );
    assert_eq!(text("ls").expect("ok"), ToolRequest::List { path: None });
    assert_eq!(
        text("search \"def parse\" src").expect("ok"),
        ToolRequest::Search {
            pattern: "def parse".into(),
            path: Some("src".into())
        }
    );
    assert_eq!(
        text("test tests/test_a.py::test_x tests/test_b.py").expect("ok"),
        ToolRequest::RunTests {
            tests: vec!["tests/test_a.py::test_x".into(), "tests/test_b.py".into()]
        }
    );
    assert_eq!(text("  submit\n").expect("ok"), ToolRequest::Submit);
    assert_eq!(text("UNDO").expect("ok"), ToolRequest::Undo);
    assert_eq!(
        text("insert a.py 0\nimport os").expect("ok"),
        ToolRequest::Insert {
            path: "a.py".into(),
            line: 0,
            text: "import os\n".into()
        }
    );
}

#[test]
fn edit_blocks_parse_bare_in_fences_and_agentless_style() {
    let expected = ToolRequest::Edit {
        path: "m.py".into(),
        search: "    return a - b".into(),
        replace: "    return a + b".into(),
    };
    let block = "<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE";
    assert_eq!(text(&format!("edit m.py\n{block}")).expect("ok"), expected);
    assert_eq!(
        text(&format!(
            "The sum is wrong, so:\n```\nedit m.py\n{block}\n```\n"
        ))
        .expect("ok"),
        expected
    );
    assert_eq!(text(&format!("### m.py\n{block}")).expect("ok"), expected);
    let err = text("edit m.py\n<<<<<<< SEARCH\nx\n>>>>>>> REPLACE").expect_err("no divider");
    assert!(err.message.contains("======="), "{err}");
}

#[test]
fn json_calls_in_every_common_shape() {
    let expected = ToolRequest::View {
        path: "a.py".into(),
        start: None,
        end: None,
    };
    for shape in [
        r#"{"name": "view", "arguments": {"path": "a.py"}}"#,
        r#"{"name": "view", "arguments": "{\"path\": \"a.py\"}"}"#,
        r#"{"type": "function", "function": {"name": "view", "arguments": "{\"path\": \"a.py\"}"}}"#,
        r#"{"tool_calls": [{"id": "1", "type": "function", "function": {"name": "view", "arguments": {"path": "a.py"}}}]}"#,
        r#"<tool_call>{"name": "str_replace_editor", "arguments": {"path": "a.py"}}</tool_call>"#,
    ] {
        let got = text(shape);
        // str_replace_editor maps to edit, which needs a search string.
        if shape.contains("str_replace_editor") {
            assert!(
                got.expect_err("edit without search")
                    .message
                    .contains("search")
            );
        } else {
            assert_eq!(got.expect(shape), expected, "{shape}");
        }
    }
    let two = r#"[{"name": "view", "arguments": {}}, {"name": "submit"}]"#;
    assert!(
        text(two)
            .expect_err("two calls")
            .message
            .contains("exactly one")
    );
    let edit = parse_action(&Action::Tool(ToolCall {
        name: "str_replace".into(),
        arguments: serde_json::json!({"path": "a.py", "old_str": "x", "new_str": "y"}),
    }))
    .expect("ok");
    assert_eq!(
        edit,
        ToolRequest::Edit {
            path: "a.py".into(),
            search: "x".into(),
            replace: "y".into()
        }
    );
}

#[test]
fn text_form_round_trips() {
    let requests = [
        ToolRequest::View {
            path: "a b.py".into(),
            start: Some(3),
            end: Some(7),
        },
        ToolRequest::Search {
            pattern: "def (f|g)\\(".into(),
            path: Some("pkg".into()),
        },
        ToolRequest::Edit {
            path: "m.py".into(),
            search: "a\n  b".into(),
            replace: "c".into(),
        },
        ToolRequest::Create {
            path: "n.py".into(),
            content: "x = 1\ny = 2\n".into(),
        },
        ToolRequest::RunTests {
            tests: vec!["t.py::test[a b]".into()],
        },
        ToolRequest::ReplaceFunction {
            path: Some("pkg/m.py".into()),
            name: "f".into(),
            source: "def f(a):\n    return a + 1\n".into(),
        },
        ToolRequest::ReplaceFunction {
            path: None,
            name: "g".into(),
            source: "def g():\n    pass\n".into(),
        },
        ToolRequest::Undo,
        ToolRequest::Submit,
    ];
    for request in requests {
        assert_eq!(text(&request.to_text()).expect("parses"), request);
        let call = request.to_tool_call();
        assert_eq!(parse_action(&Action::Tool(call)).expect("parses"), request);
    }
}

#[test]
fn nonsense_gets_help() {
    for bad in [
        "",
        "   ",
        "I think the bug is in parse()",
        "{not json",
        "view",
        "insert a.py x\ny",
    ] {
        let err = text(bad).expect_err(bad);
        assert!(!err.message.is_empty());
    }
    assert!(text("hello").expect_err("x").message.contains("submit"));
}

#[test]
fn a_fenced_function_after_prose_is_a_replace_request() {
    let reply = "The bug is in `textkit/wrap.py`. Here is the fixed function:\n\n```python\n@cache\ndef wrap(text, width):\n    if width <= 0:\n        return []\n    return [text]\n\nprint(wrap(\"a\", 1))\n```\nThis should work.";
    assert_eq!(
        text(reply).expect("parses"),
        ToolRequest::ReplaceFunction {
            path: Some("textkit/wrap.py".into()),
            name: "wrap".into(),
            source:
                "def wrap(text, width):\n    if width <= 0:\n        return []\n    return [text]\n"
                    .into(),
        }
    );
    // A method written indented, with no file named, and a path comment in the block.
    let method = "```\n    def size(self):\n        return len(self.items)\n```";
    assert_eq!(
        text(method).expect("parses"),
        ToolRequest::ReplaceFunction {
            path: None,
            name: "size".into(),
            source: "def size(self):\n    return len(self.items)\n".into(),
        }
    );
    let commented = "```python\n# pkg/box.py\ndef f():\n    return 1\n```";
    assert!(matches!(
        text(commented),
        Ok(ToolRequest::ReplaceFunction { path: Some(p), .. }) if p == "pkg/box.py"
    ));
    // Prose that starts with a command word still reaches the code block.
    let worded = "Replace the function:\n```python\ndef f():\n    return 2\n```";
    assert!(matches!(
        text(worded),
        Ok(ToolRequest::ReplaceFunction { .. })
    ));
    // A reply cut off inside its block still counts once the function is whole.
    let cut = "```python\ndef f():\n    return 2\n\ndef test_f():\n    assert f(";
    assert!(matches!(
        text(cut),
        Ok(ToolRequest::ReplaceFunction { name, source, .. })
            if name == "f" && source == "def f():\n    return 2\n"
    ));
    // A command in a block is still the command; the last block with a def wins.
    assert_eq!(text("```\nsubmit\n```").expect("ok"), ToolRequest::Submit);
    let two = "Old:\n```python\ndef f():\n    return 1\n```\nNew:\n```python\ndef f():\n    return 2\n```";
    assert!(matches!(
        text(two),
        Ok(ToolRequest::ReplaceFunction { source, .. }) if source.contains("return 2")
    ));
}

#[test]
fn code_blocks_without_a_whole_function_get_help() {
    let long = format!("```python\n{}```", "x = 1\n".repeat(13));
    for bad in [
        "```python\ndef f():\n    return 1\n",
        "```python\ndef f():\n    return 1\n    # cut off",
        long.as_str(),
    ] {
        let err = text(bad).expect_err(bad);
        assert!(err.message.contains("whole function"), "{bad}: {err}");
    }
    // A closed block of a few lines that is not a whole function: fixed lines.
    for (fixed, path) in [
        ("```python\nx = 1\n```", None),
        (
            "In `pkg/m.py`:\n```python\ndef f(a=1):\n```",
            Some("pkg/m.py"),
        ),
        (
            "```python\n# pkg/m.py\n    return a - b\n```",
            Some("pkg/m.py"),
        ),
        ("```python\nx = 1\n```\nor\n```python\nx = 2\n```", None),
        ("```python\n    def pop(self, index=-1):\n", None),
    ] {
        match text(fixed) {
            Ok(ToolRequest::ReplaceLines { path: p, source }) => {
                assert_eq!(p.as_deref(), path, "{fixed}");
                assert!(!source.contains('#') && !source.is_empty(), "{source}");
                assert!(
                    !source.contains("x = 2"),
                    "the first block counts: {source}"
                );
            }
            other => panic!("{fixed}: {other:?}"),
        }
    }
    assert_eq!(
        text("replace_lines m.py\n    return a + b").expect("ok"),
        ToolRequest::ReplaceLines {
            path: Some("m.py".into()),
            source: "    return a + b".into(),
        }
    );
    let call = parse_action(&Action::Tool(ToolCall {
        name: "replace_function".into(),
        arguments: serde_json::json!({"name": "g", "source": "def f():\n  return 1"}),
    }));
    assert!(call.expect_err("mismatch").message.contains("`g`"));
    assert_eq!(
        text("replace_function m.py\n```python\ndef f():\n    return 1\n```").expect("ok"),
        ToolRequest::ReplaceFunction {
            path: Some("m.py".into()),
            name: "f".into(),
            source: "def f():\n    return 1\n".into(),
        }
    );
}
