//! Property tests of the action parser: arbitrary input gives a valid request or a clear error,
//! never a panic; every request survives a round trip through both wire forms.

use frognano_core::{Action, ToolCall};
use frognano_env::{ToolRequest, parse_action};
use proptest::prelude::*;

fn check(action: &Action) {
    match parse_action(action) {
        Ok(request) => {
            // A parsed request has a canonical form that parses to itself.
            let again = parse_action(&Action::Tool(request.to_tool_call()));
            assert_eq!(again.as_ref(), Ok(&request));
        }
        Err(e) => {
            assert!(!e.message.trim().is_empty());
            assert!(e.message.len() < 2_000, "error messages stay short");
        }
    }
}

fn arb_path() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{1,8}(/[a-z_]{1,8}){0,3}\\.py",
        "[ -~]{0,20}",
        Just("a b/c d.py".to_string()),
    ]
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ -~\n\t]{0,60}",
        "(    )?[a-z =+()\\[\\]:'\"]{0,30}(\n(    )?[a-z =+()]{0,30}){0,4}",
    ]
}

fn arb_request() -> impl Strategy<Value = ToolRequest> {
    prop_oneof![
        (
            arb_path(),
            proptest::option::of(1usize..500),
            proptest::option::of(1usize..500)
        )
            .prop_filter("ordered range", |(_, s, e)| match (s, e) {
                (Some(s), Some(e)) => s <= e,
                _ => true,
            })
            .prop_map(|(path, start, end)| ToolRequest::View { path, start, end }),
        arb_path().prop_map(|p| ToolRequest::List { path: Some(p) }),
        ("[a-z( ).*]{1,12}", proptest::option::of(arb_path()))
            .prop_map(|(pattern, path)| ToolRequest::Search { pattern, path }),
        (arb_path(), arb_text(), arb_text()).prop_map(|(path, search, replace)| {
            ToolRequest::Edit {
                path,
                search,
                replace,
            }
        }),
        (arb_path(), 0usize..100, arb_text()).prop_map(|(path, line, text)| ToolRequest::Insert {
            path,
            line,
            text
        }),
        proptest::collection::vec("[a-z_/.:\\[\\]-]{1,20}", 0..4)
            .prop_map(|tests| ToolRequest::RunTests { tests }),
        Just(ToolRequest::Undo),
        Just(ToolRequest::Submit),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check(&Action::Text { text: String::from_utf8_lossy(&bytes).into_owned() });
    }

    #[test]
    fn near_miss_grammar_never_panics(
        word in prop_oneof![
            Just("view"), Just("ls"), Just("search"), Just("edit"), Just("create"),
            Just("insert"), Just("undo"), Just("test"), Just("submit"), Just("###"), Just("```"),
        ],
        rest in "[ -~\n]{0,80}",
        marker in prop_oneof![
            Just(""), Just("\n<<<<<<< SEARCH\n"), Just("\n=======\n"), Just("\n>>>>>>> REPLACE\n"),
        ],
        tail in "[ -~\n]{0,40}",
    ) {
        check(&Action::Text { text: format!("{word} {rest}{marker}{tail}") });
    }

    #[test]
    fn arbitrary_json_calls_never_panic(
        name in "[a-z_]{0,12}",
        key in prop_oneof![Just("path"), Just("line"), Just("tests"), Just("search"), Just("pattern")],
        value in prop_oneof![
            Just(serde_json::json!(null)), Just(serde_json::json!(-1)), Just(serde_json::json!(1.5)),
            Just(serde_json::json!([1, "a"])), Just(serde_json::json!({"x": 1})),
            "[ -~]{0,20}".prop_map(serde_json::Value::from),
        ],
    ) {
        let call = ToolCall { name, arguments: serde_json::json!({ key: value }) };
        check(&Action::Tool(call.clone()));
        let wire = serde_json::json!({"name": call.name, "arguments": call.arguments.to_string()});
        check(&Action::Text { text: wire.to_string() });
    }

    #[test]
    fn requests_round_trip_through_text(request in arb_request()) {
        let text = request.to_text();
        match parse_action(&Action::Text { text: text.clone() }) {
            Ok(parsed) => {
                // Text cannot carry a trailing newline or blank-only edits exactly; everything
                // else must come back unchanged.
                if parsed != request {
                    let lossy = matches!(&request,
                        ToolRequest::Edit { search, replace, .. }
                            if search.ends_with('\n') || replace.ends_with('\n')
                                || search.lines().chain(replace.lines()).any(|l| l.starts_with("=======") || l.starts_with("<<<<<<<") || l.starts_with(">>>>>>>")))
                        || matches!(&request, ToolRequest::Insert { text, .. } | ToolRequest::Create { content: text, .. }
                            if !text.ends_with('\n') || text.ends_with("\n\n") || text.trim().is_empty() || text.lines().next().is_some_and(|l| l.trim_start().starts_with("```")));
                    prop_assert!(lossy, "{request:?} -> {text:?} -> {parsed:?}");
                }
            }
            Err(e) => prop_assert!(!e.message.is_empty()),
        }
        let call = request.to_tool_call();
        let back = parse_action(&Action::Tool(call));
        if let ToolRequest::Edit { search, .. } = &request && search.is_empty() {
            prop_assert!(back.is_err());
        } else {
            prop_assert_eq!(back, Ok(request));
        }
    }
}
