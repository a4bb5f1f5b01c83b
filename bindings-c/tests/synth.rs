//! Task synthesis through the exported C functions (`frognano_synthesize`,
//! `frognano_mutation_operators_json`), as a C program would call them.

use std::ffi::CStr;
use std::path::Path;
use std::ptr;

use frognano::*;

mod common;
use common::{
    ScratchRepo, assert_ok, cstring, evaluate, not_utf8, shared_sandbox, take_error, take_string,
    textkit,
};

/// Calls `frognano_synthesize`: the task set and the parsed statistics, or the error (checking
/// that the out-parameters stay untouched on failure).
fn synthesize(
    repo: &CStr,
    count: usize,
    options: Option<&str>,
) -> Result<(*mut FrognanoTaskSet, serde_json::Value), (FrognanoErrorCode, String)> {
    let options = options.map(cstring);
    let mut tasks = ptr::null_mut();
    let mut stats = ptr::null_mut();
    // SAFETY: live sandbox, valid strings and out-pointers.
    let error = unsafe {
        frognano_synthesize(
            shared_sandbox(),
            repo.as_ptr(),
            count,
            options.as_ref().map_or(ptr::null(), |o| o.as_ptr()),
            &mut tasks,
            &mut stats,
        )
    };
    if error.is_null() {
        assert!(!tasks.is_null() && !stats.is_null());
        let stats = serde_json::from_str(&take_string(stats)).expect("statistics JSON");
        Ok((tasks, stats))
    } else {
        assert!(
            tasks.is_null() && stats.is_null(),
            "out-parameter written on failure"
        );
        Err(take_error(error))
    }
}

/// Every task of a set, parsed.
fn tasks_of(tasks: *const FrognanoTaskSet) -> Vec<serde_json::Value> {
    // SAFETY: live task set; each string is freed once by `take_string`.
    unsafe {
        (0..frognano_task_set_len(tasks))
            .map(|i| {
                let mut json = ptr::null_mut();
                assert_ok(frognano_task_set_get_json(tasks, i, &mut json));
                serde_json::from_str(&take_string(json)).expect("task JSON")
            })
            .collect()
    }
}

#[test]
fn synthesized_tasks_are_valid_and_the_oracle_resolves_them() {
    let (tasks, stats) =
        synthesize(&textkit(), 3, Some(r#"{"seed": 5, "hint_levels": [1, 2]}"#)).expect("synth");
    let records = tasks_of(tasks);
    assert_eq!(records.len(), 3);
    assert_eq!(stats["valid"], 3, "{stats}");
    assert!(stats["candidates"].as_u64() >= Some(3), "{stats}");
    assert!(stats["tasks_per_minute"].as_f64() > Some(0.0), "{stats}");
    for task in &records {
        assert!(task["id"].as_str().expect("id").starts_with("textkit__"));
        let repo = task["repo"]["path"].as_str().expect("repo path");
        assert!(Path::new(repo).is_absolute(), "{repo}");
        assert!(!task["fail_to_pass"].as_array().expect("F2P").is_empty());
        assert!(!task["bug_patch"].as_str().expect("bug patch").is_empty());
        let hint = task["metadata"]["difficulty"]["hint_level"].as_u64();
        assert!(matches!(hint, Some(1 | 2)), "{hint:?}");
    }

    let oracle = evaluate(tasks, "oracle");
    assert_eq!(oracle["episodes"], 3, "{oracle}");
    assert_eq!(oracle["resolved_rate"], 1.0, "{oracle}");
    let noop = evaluate(tasks, "noop");
    assert_eq!(noop["resolved_rate"], 0.0, "{noop}");
    // SAFETY: live task set, freed once.
    unsafe { frognano_task_set_free(tasks) };
}

#[test]
fn default_options_and_no_statistics() {
    let mut tasks = ptr::null_mut();
    // SAFETY: live sandbox, valid string and out-pointer; NULL options and statistics.
    unsafe {
        assert_ok(frognano_synthesize(
            shared_sandbox(),
            textkit().as_ptr(),
            1,
            ptr::null(),
            &mut tasks,
            ptr::null_mut(),
        ));
        assert_eq!(frognano_task_set_len(tasks), 1);
        frognano_task_set_free(tasks);
    }
}

#[test]
fn bad_options_are_invalid_option_errors() {
    let repo = textkit();
    for options in [
        "not json",
        "[1, 2]",
        r#"{"sed": 3}"#,
        r#"{"seed": -1}"#,
        r#"{"seed": "three"}"#,
        r#"{"max_bugs": 0}"#,
        r#"{"scope": "galaxy"}"#,
        r#"{"hint_levels": [7]}"#,
        r#"{"hint_levels": []}"#,
        r#"{"timeout_factor": 0.5}"#,
        r#"{"operators": ["no_such_operator"]}"#,
    ] {
        let (code, message) = synthesize(&repo, 1, Some(options)).expect_err(options);
        assert_eq!(
            code,
            FrognanoErrorCode::InvalidOption,
            "{options}: {message}"
        );
    }
    let (_, message) = synthesize(&repo, 1, Some(r#"{"sed": 3}"#)).expect_err("typo");
    assert!(message.contains("unknown field `sed`"), "{message}");
    let (_, message) =
        synthesize(&repo, 1, Some(r#"{"operators": ["no_such_operator"]}"#)).expect_err("op");
    assert!(message.contains("op_swap"), "{message}");
}

#[test]
fn unusable_repositories_are_synthesis_or_repo_errors() {
    let no_tests = ScratchRepo::new(
        "no-tests",
        &[
            ("pkg/__init__.py", ""),
            ("pkg/core.py", "def f():\n    return 1\n"),
        ],
    );
    let (code, message) = synthesize(&no_tests.path(), 1, None).expect_err("no tests");
    assert_eq!(code, FrognanoErrorCode::Synthesis, "{message}");
    assert!(message.contains("collected no tests"), "{message}");

    let failing = ScratchRepo::new(
        "failing",
        &[
            ("calc.py", "def add(a, b):\n    return a - b\n"),
            (
                "tests/test_calc.py",
                "from calc import add\n\ndef test_add():\n    assert add(2, 2) == 4\n",
            ),
        ],
    );
    let (code, message) = synthesize(&failing.path(), 1, None).expect_err("all failing");
    assert_eq!(code, FrognanoErrorCode::Synthesis, "{message}");
    assert!(message.contains("no test passes reliably"), "{message}");

    let missing = cstring("/nonexistent/frognano-synth-repo");
    let (code, message) = synthesize(&missing, 1, None).expect_err("missing");
    assert_eq!(code, FrognanoErrorCode::Repo, "{message}");
}

#[test]
fn synthesize_rejects_null_and_non_utf8_arguments() {
    let repo = textkit();
    let not_utf8 = not_utf8();
    let mut tasks = ptr::null_mut();
    let mut stats = ptr::null_mut();
    // SAFETY: every pointer is NULL or valid for the call.
    unsafe {
        let null = FrognanoErrorCode::NullPointer;
        let calls = [
            frognano_synthesize(
                ptr::null(),
                repo.as_ptr(),
                1,
                ptr::null(),
                &mut tasks,
                &mut stats,
            ),
            frognano_synthesize(
                shared_sandbox(),
                ptr::null(),
                1,
                ptr::null(),
                &mut tasks,
                &mut stats,
            ),
            frognano_synthesize(
                shared_sandbox(),
                repo.as_ptr(),
                1,
                ptr::null(),
                ptr::null_mut(),
                &mut stats,
            ),
        ];
        for error in calls {
            assert_eq!(take_error(error).0, null);
        }
        let utf8 = FrognanoErrorCode::InvalidUtf8;
        assert_eq!(
            take_error(frognano_synthesize(
                shared_sandbox(),
                not_utf8,
                1,
                ptr::null(),
                &mut tasks,
                &mut stats
            ))
            .0,
            utf8
        );
        assert_eq!(
            take_error(frognano_synthesize(
                shared_sandbox(),
                repo.as_ptr(),
                1,
                not_utf8,
                &mut tasks,
                &mut stats
            ))
            .0,
            utf8
        );
        assert!(tasks.is_null() && stats.is_null());
        assert_eq!(
            take_error(frognano_mutation_operators_json(ptr::null_mut())).0,
            null
        );
    }
}

#[test]
fn mutation_operators_are_listed() {
    let mut json = ptr::null_mut();
    // SAFETY: valid out-pointer.
    assert_ok(unsafe { frognano_mutation_operators_json(&mut json) });
    let operators: Vec<serde_json::Value> =
        serde_json::from_str(&take_string(json)).expect("operators JSON");
    assert!(operators.len() >= 20, "{}", operators.len());
    let names: Vec<&str> = operators
        .iter()
        .map(|o| o["name"].as_str().expect("name"))
        .collect();
    assert!(names.contains(&"op_swap") && names.contains(&"off_by_one_slice"));
    for operator in &operators {
        assert!(matches!(
            operator["family"].as_str(),
            Some("swe-smith" | "extra")
        ));
        assert!(
            !operator["description"]
                .as_str()
                .unwrap_or_default()
                .is_empty()
        );
    }
}
