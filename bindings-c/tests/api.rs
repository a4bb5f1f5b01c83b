//! Calls the exported C functions through the rlib, as a C program would.

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use frognano::*;

mod common;
use common::{
    ScratchRepo, assert_ok, cstring, evaluate, owned, read, shared_sandbox, take_error, textkit,
};

/// Runs tests and returns the report or the error.
fn run(
    repo: &CStr,
    limits: Option<&FrognanoLimits>,
    args: &[&str],
) -> Result<*mut FrognanoReport, (FrognanoErrorCode, String)> {
    let args: Vec<CString> = args.iter().map(|a| cstring(a)).collect();
    let argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    let mut report = ptr::null_mut();
    // SAFETY: every pointer is valid for the duration of the call.
    let error = unsafe {
        frognano_sandbox_run_tests(
            shared_sandbox(),
            repo.as_ptr(),
            limits.map_or(ptr::null(), |l| l as *const _),
            argv.as_ptr(),
            argv.len(),
            &mut report,
        )
    };
    owned(error, report)
}

// -------------------------------------------------------------------------------------------
// Errors and arguments
// -------------------------------------------------------------------------------------------

#[test]
fn null_error_reads_as_ok() {
    // SAFETY: NULL is an accepted argument.
    unsafe {
        assert_eq!(frognano_error_code(ptr::null()), FrognanoErrorCode::Ok);
        assert_eq!(
            read(frognano_error_message(ptr::null())).as_deref(),
            Some("no error")
        );
        frognano_error_free(ptr::null_mut());
        frognano_string_free(ptr::null_mut());
        frognano_report_free(ptr::null_mut());
        frognano_sandbox_free(ptr::null_mut());
    }
}

#[test]
fn sandbox_new_rejects_null_out() {
    // SAFETY: NULL arguments are reported as errors.
    let error = unsafe { frognano_sandbox_new(ptr::null(), ptr::null_mut()) };
    let (code, message) = take_error(error);
    assert_eq!(code, FrognanoErrorCode::NullPointer);
    assert!(message.contains("out"), "{message}");
}

#[test]
fn sandbox_new_rejects_unknown_image_and_leaves_out_untouched() {
    let sentinel = ptr::NonNull::<FrognanoSandbox>::dangling().as_ptr();
    let mut out = sentinel;
    let image = cstring("python-2.7");
    // SAFETY: valid arguments.
    let error = unsafe { frognano_sandbox_new(image.as_ptr(), &mut out) };
    let (code, message) = take_error(error);
    assert_eq!(code, FrognanoErrorCode::InvalidOption);
    assert!(message.contains("unknown image"), "{message}");
    assert_eq!(out, sentinel);
}

#[test]
fn sandbox_new_rejects_invalid_utf8() {
    let image = CString::new(vec![0xff, 0xfe]).expect("no NUL");
    let mut out = ptr::null_mut();
    // SAFETY: valid arguments.
    let error = unsafe { frognano_sandbox_new(image.as_ptr(), &mut out) };
    let (code, message) = take_error(error);
    assert_eq!(code, FrognanoErrorCode::InvalidUtf8);
    assert!(message.contains("image"), "{message}");
    assert!(out.is_null());
}

#[test]
fn limits_default_and_validation() {
    let limits = frognano_limits_default();
    assert_eq!(limits.timeout_s, 120.0);
    assert_eq!(limits.memory_mb, 1024);
    assert_eq!(limits.output_bytes, 4 << 20);
    // SAFETY: valid pointers or NULL.
    unsafe {
        assert_ok(frognano_limits_validate(&limits));
        let (code, _) = take_error(frognano_limits_validate(ptr::null()));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        for bad in [
            FrognanoLimits {
                timeout_s: 0.0,
                ..limits
            },
            FrognanoLimits {
                timeout_s: f64::NAN,
                ..limits
            },
            FrognanoLimits {
                memory_mb: 0,
                ..limits
            },
            FrognanoLimits {
                memory_mb: 5000,
                ..limits
            },
            FrognanoLimits {
                output_bytes: 0,
                ..limits
            },
        ] {
            let (code, message) = take_error(frognano_limits_validate(&bad));
            assert_eq!(code, FrognanoErrorCode::InvalidOption, "{bad:?}");
            assert!(message.starts_with("invalid option"), "{message}");
        }
    }
}

#[test]
fn run_tests_rejects_null_arguments() {
    let repo_dir = textkit();
    let repo = repo_dir.as_ptr();
    let sandbox = shared_sandbox();
    let mut report = ptr::null_mut();
    let out: *mut *mut FrognanoReport = &mut report;
    // Runs the tests without limits and takes the error.
    let run = |sandbox, repo, args, n_args, out| {
        // SAFETY: NULL arguments are reported as errors; the others are valid for the call.
        take_error(unsafe {
            frognano_sandbox_run_tests(sandbox, repo, ptr::null(), args, n_args, out)
        })
    };
    assert_eq!(
        run(ptr::null(), repo, ptr::null(), 0, out).0,
        FrognanoErrorCode::NullPointer
    );
    let (code, message) = run(sandbox, ptr::null(), ptr::null(), 0, out);
    assert_eq!(code, FrognanoErrorCode::NullPointer);
    assert!(message.contains("repo_dir"), "{message}");
    assert_eq!(
        run(sandbox, repo, ptr::null(), 0, ptr::null_mut()).0,
        FrognanoErrorCode::NullPointer
    );
    let (code, message) = run(sandbox, repo, ptr::null(), 2, out);
    assert_eq!(code, FrognanoErrorCode::NullPointer);
    assert!(message.contains("pytest_args"), "{message}");
    let argv = [c"-q".as_ptr(), ptr::null()];
    let (code, message) = run(sandbox, repo, argv.as_ptr(), argv.len(), out);
    assert_eq!(code, FrognanoErrorCode::NullPointer);
    assert!(message.contains("pytest_args[1]"), "{message}");
    let bad = CString::new(vec![b'-', 0xc3]).expect("no NUL");
    let argv = [bad.as_ptr()];
    let (code, message) = run(sandbox, repo, argv.as_ptr(), argv.len(), out);
    assert_eq!(code, FrognanoErrorCode::InvalidUtf8);
    assert!(message.contains("pytest_args[0]"), "{message}");
    assert!(report.is_null());
}

#[test]
fn missing_repo_is_a_repo_error() {
    let missing = cstring("/nonexistent/frognano/repo");
    let (code, message) = run(&missing, None, &[]).expect_err("missing repo");
    assert_eq!(code, FrognanoErrorCode::Repo);
    assert!(message.contains("/nonexistent/frognano/repo"), "{message}");
    assert!(message.contains("not a directory"), "{message}");
}

#[test]
fn invalid_limits_are_rejected_before_running() {
    let limits = FrognanoLimits {
        timeout_s: 0.0,
        ..frognano_limits_default()
    };
    let (code, message) = run(&textkit(), Some(&limits), &[]).expect_err("timeout 0");
    assert_eq!(code, FrognanoErrorCode::InvalidOption);
    assert!(message.contains("timeout_s"), "{message}");
}

// -------------------------------------------------------------------------------------------
// Runs and reports
// -------------------------------------------------------------------------------------------

#[test]
fn textkit_passes_and_the_report_reads_back() {
    let report = run(&textkit(), None, &[]).expect("run");
    // SAFETY: `report` is live until freed at the end.
    unsafe {
        assert_eq!(frognano_report_outcome(report), FrognanoRunOutcome::Passed);
        assert_eq!(
            read(frognano_report_outcome_name(report)).as_deref(),
            Some("passed")
        );
        let count = frognano_report_test_count(report);
        assert!(count > 10, "{count}");
        assert_eq!(frognano_report_passed(report), count);
        assert_eq!(frognano_report_failed(report), 0);
        assert_eq!(frognano_report_errors(report), 0);
        assert_eq!(frognano_report_skipped(report), 0);
        assert_eq!(frognano_report_xfailed(report), 0);
        assert_eq!(frognano_report_xpassed(report), 0);
        assert!(frognano_report_duration_s(report) > 0.0);
        let mut exit_code = -1;
        assert!(frognano_report_exit_code(report, &mut exit_code));
        assert_eq!(exit_code, 0);
        assert!(!frognano_report_exit_code(report, ptr::null_mut()));
        assert!(frognano_report_detail(report).is_null());
        assert!(read(frognano_report_stdout(report)).is_some());
        assert!(read(frognano_report_stderr(report)).is_some());
        for i in 0..count {
            let id = read(frognano_report_test_id(report, i)).expect("id");
            assert!(id.starts_with("tests/test_"), "{id}");
            assert_eq!(
                frognano_report_test_outcome(report, i),
                FrognanoTestOutcome::Passed
            );
            assert_eq!(
                read(frognano_report_test_outcome_name(report, i)).as_deref(),
                Some("passed")
            );
            assert!(frognano_report_test_duration_s(report, i) >= 0.0);
            assert!(frognano_report_test_message(report, i).is_null());
        }
        assert!(frognano_report_test_id(report, count).is_null());
        assert!(frognano_report_test_outcome_name(report, count).is_null());
        assert!(frognano_report_test_message(report, count).is_null());
        assert!(frognano_report_test_duration_s(report, count).is_nan());
        assert_eq!(
            frognano_report_test_outcome(report, usize::MAX),
            FrognanoTestOutcome::Error
        );

        let mut json = ptr::null_mut();
        assert_ok(frognano_report_to_json(report, &mut json));
        let text = read(json).expect("json");
        frognano_string_free(json);
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(value["outcome"], "passed");
        assert_eq!(value["tests"].as_array().map(Vec::len), Some(count));
        assert_eq!(value["passed"].as_u64(), u64::try_from(count).ok());

        let (code, _) = take_error(frognano_report_to_json(report, ptr::null_mut()));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        let mut untouched = ptr::null_mut();
        let (code, _) = take_error(frognano_report_to_json(ptr::null(), &mut untouched));
        assert_eq!(code, FrognanoErrorCode::NullPointer);
        assert!(untouched.is_null());

        frognano_report_free(report);
    }
}

#[test]
fn null_report_accessors_give_fallbacks() {
    let null = ptr::null();
    // SAFETY: NULL is an accepted argument.
    unsafe {
        assert_eq!(frognano_report_outcome(null), FrognanoRunOutcome::Crashed);
        assert!(frognano_report_outcome_name(null).is_null());
        assert_eq!(frognano_report_passed(null), 0);
        assert_eq!(frognano_report_test_count(null), 0);
        assert!(frognano_report_duration_s(null).is_nan());
        assert!(frognano_report_test_id(null, 0).is_null());
        assert!(frognano_report_stdout(null).is_null());
        assert!(frognano_sandbox_image(ptr::null()).is_null());
    }
}

#[test]
fn pytest_args_select_tests() {
    let report = run(&textkit(), None, &["tests/test_slug.py"]).expect("run");
    // SAFETY: `report` is live until freed at the end.
    unsafe {
        let count = frognano_report_test_count(report);
        assert!(count > 0);
        for i in 0..count {
            let id = read(frognano_report_test_id(report, i)).expect("id");
            assert!(id.starts_with("tests/test_slug.py::"), "{id}");
        }
        frognano_report_free(report);
    }
}

#[test]
fn failures_skips_and_xfails_are_reported() {
    let repo = ScratchRepo::new(
        "mixed",
        &[(
            "tests/test_mixed.py",
            "import pytest\n\
             def test_ok():\n    assert 1 + 1 == 2\n\
             def test_bad():\n    assert 1 + 1 == 3, 'arithmetic is broken'\n\
             @pytest.mark.skip(reason='not today')\n\
             def test_skipped():\n    pass\n\
             @pytest.mark.xfail\n\
             def test_expected():\n    assert False\n",
        )],
    );
    let report = run(&repo.path(), None, &[]).expect("run");
    // SAFETY: `report` is live until freed at the end.
    unsafe {
        assert_eq!(frognano_report_outcome(report), FrognanoRunOutcome::Failed);
        assert_eq!(frognano_report_passed(report), 1);
        assert_eq!(frognano_report_failed(report), 1);
        assert_eq!(frognano_report_skipped(report), 1);
        assert_eq!(frognano_report_xfailed(report), 1);
        let mut exit_code = 0;
        assert!(frognano_report_exit_code(report, &mut exit_code));
        assert_eq!(exit_code, 1);
        let mut seen_failure = false;
        for i in 0..frognano_report_test_count(report) {
            let id = read(frognano_report_test_id(report, i)).expect("id");
            if id.ends_with("::test_bad") {
                seen_failure = true;
                assert_eq!(
                    frognano_report_test_outcome(report, i),
                    FrognanoTestOutcome::Failed
                );
                let message = read(frognano_report_test_message(report, i)).expect("message");
                assert!(message.contains("arithmetic is broken"), "{message}");
            }
        }
        assert!(seen_failure);
        frognano_report_free(report);
    }
}

#[test]
fn a_timeout_is_an_outcome_not_an_error() {
    let repo = ScratchRepo::new(
        "spin",
        &[(
            "tests/test_spin.py",
            "def test_forever():\n    while True:\n        pass\n",
        )],
    );
    let limits = FrognanoLimits {
        timeout_s: 1.0,
        ..frognano_limits_default()
    };
    let report = run(&repo.path(), Some(&limits), &[]).expect("run");
    // SAFETY: `report` is live until freed at the end.
    unsafe {
        assert_eq!(frognano_report_outcome(report), FrognanoRunOutcome::Timeout);
        let mut exit_code = 12345;
        assert!(!frognano_report_exit_code(report, &mut exit_code));
        assert_eq!(exit_code, 12345);
        let detail = read(frognano_report_detail(report)).expect("detail");
        assert!(!detail.is_empty());
        frognano_report_free(report);
    }
}

#[test]
fn one_sandbox_runs_from_several_threads() {
    let repo = textkit();
    let counts: Vec<usize> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                scope.spawn(|| {
                    let report = run(&repo, None, &["tests/test_roman.py"]).expect("run");
                    // SAFETY: `report` is live until freed here.
                    unsafe {
                        let count = frognano_report_passed(report);
                        frognano_report_free(report);
                        count
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    assert!(counts[0] > 0);
    assert!(counts.iter().all(|&c| c == counts[0]), "{counts:?}");
}

#[test]
fn own_sandbox_with_progress_is_created_and_freed() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    unsafe extern "C" fn progress(message: *const c_char, user_data: *mut c_void) {
        assert!(!message.is_null());
        assert_eq!(user_data as usize, 42);
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
    let mut sandbox = ptr::null_mut();
    let image = cstring("python-3.15");
    // SAFETY: valid arguments; the callback is thread-safe.
    unsafe {
        assert_ok(frognano_sandbox_new_with_progress(
            image.as_ptr(),
            Some(progress),
            42 as *mut c_void,
            &mut sandbox,
        ));
        assert!(!sandbox.is_null());
        assert_eq!(
            read(frognano_sandbox_image(sandbox)).as_deref(),
            Some("python-3.15")
        );
        frognano_sandbox_free(sandbox);
    }
}

#[test]
fn version_is_reported() {
    assert_eq!(
        read(frognano_version()).as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

// -------------------------------------------------------------------------------------------
// Agent environment
// -------------------------------------------------------------------------------------------

fn sample_tasks_path() -> CString {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks/sample.jsonl");
    cstring(path.to_str().expect("UTF-8 path"))
}

/// Loads a task set, panicking on error.
fn load_tasks(path: &CStr) -> *mut FrognanoTaskSet {
    let mut tasks = ptr::null_mut();
    // SAFETY: valid string and out-pointer.
    assert_ok(unsafe { frognano_tasks_load(path.as_ptr(), &mut tasks) });
    assert!(!tasks.is_null());
    tasks
}

/// Reads task `index` of a set as JSON.
fn task_json(tasks: *const FrognanoTaskSet, index: usize) -> String {
    let mut json = ptr::null_mut();
    // SAFETY: live task set and valid out-pointer; the string is freed once below.
    unsafe {
        assert_ok(frognano_task_set_get_json(tasks, index, &mut json));
        let text = read(json).expect("json");
        frognano_string_free(json);
        text
    }
}

/// Takes a step and returns it, or the error.
fn step(
    env: *mut FrognanoEnv,
    action: &str,
) -> Result<*mut FrognanoStep, (FrognanoErrorCode, String)> {
    let action = cstring(action);
    let mut out = ptr::null_mut();
    // SAFETY: live environment, valid string and out-pointer.
    let error = unsafe { frognano_env_step(env, action.as_ptr(), &mut out) };
    owned(error, out)
}

#[test]
fn sample_tasks_load_and_read_back_as_json() {
    let tasks = load_tasks(&sample_tasks_path());
    // SAFETY: live task set, freed once at the end.
    unsafe {
        assert_eq!(frognano_task_set_len(tasks), 12);
        let task: serde_json::Value =
            serde_json::from_str(&task_json(tasks, 0)).expect("task JSON");
        assert_eq!(task["id"], "tinyparse-interpolation-depth-001");
        let repo = task["repo"]["path"].as_str().expect("repo path");
        assert!(Path::new(repo).is_absolute(), "{repo}");

        let mut json = ptr::null_mut();
        let (code, message) = take_error(frognano_task_set_get_json(tasks, 12, &mut json));
        assert_eq!(code, FrognanoErrorCode::InvalidOption);
        assert!(message.contains("out of range"), "{message}");
        assert!(json.is_null());

        frognano_task_set_free(tasks);
    }
}

#[test]
fn malformed_task_files_and_records_are_task_errors() {
    let mut tasks = ptr::null_mut();
    let missing = cstring("/nonexistent/frognano-tasks.jsonl");
    // SAFETY: valid strings and out-pointers.
    unsafe {
        let (code, _) = take_error(frognano_tasks_load(missing.as_ptr(), &mut tasks));
        assert_eq!(code, FrognanoErrorCode::Task);
        assert!(tasks.is_null());

        let mut env = ptr::null_mut();
        assert_ok(frognano_env_new(shared_sandbox(), 0, &mut env));
        let mut observation = ptr::null_mut();
        let bad = cstring("{\"id\": 3}");
        let (code, _) = take_error(frognano_env_reset(env, bad.as_ptr(), &mut observation));
        assert_eq!(code, FrognanoErrorCode::Task);
        assert!(observation.is_null());
        frognano_env_free(env);
    }
}

#[test]
fn an_episode_runs_tests_handles_bad_actions_and_ends_on_submit() {
    let tasks = load_tasks(&sample_tasks_path());
    let task = cstring(&task_json(tasks, 0));
    // SAFETY: live handles and valid pointers; each handle is freed once.
    unsafe {
        frognano_task_set_free(tasks);
        let mut env = ptr::null_mut();
        assert_ok(frognano_env_new(shared_sandbox(), 0, &mut env));

        // No episode yet: stepping and reading the record are episode errors.
        let (code, _) = step(env, "test").expect_err("step before reset");
        assert_eq!(code, FrognanoErrorCode::Episode);
        let mut record = ptr::null_mut();
        let (code, _) = take_error(frognano_env_record_json(env, &mut record));
        assert_eq!(code, FrognanoErrorCode::Episode);
        assert!(record.is_null());

        let mut observation = ptr::null_mut();
        assert_ok(frognano_env_reset(env, task.as_ptr(), &mut observation));
        let first = read(observation).expect("observation");
        frognano_string_free(observation);
        assert!(!first.is_empty());

        let test = step(env, "test").expect("test step");
        let text = read(frognano_step_observation(test)).expect("observation");
        assert!(text.to_lowercase().contains("fail"), "{text}");
        assert!(!frognano_step_terminated(test));
        assert!(!frognano_step_truncated(test));
        assert!(!frognano_step_is_error(test));
        let info: serde_json::Value =
            serde_json::from_str(&read(frognano_step_info_json(test)).expect("info"))
                .expect("info JSON");
        assert!(!info.is_null());
        frognano_step_free(test);

        let bad = step(env, "%%% not a tool call {").expect("malformed action is a step");
        assert!(frognano_step_is_error(bad));
        assert!(!frognano_step_terminated(bad));
        assert!(read(frognano_step_observation(bad)).is_some());
        frognano_step_free(bad);

        let submit = step(env, "submit").expect("submit step");
        assert!(frognano_step_terminated(submit));
        assert_eq!(frognano_step_reward(submit), 0.0);
        frognano_step_free(submit);

        let (code, message) = step(env, "test").expect_err("step after the end");
        assert_eq!(code, FrognanoErrorCode::Episode, "{message}");

        assert_ok(frognano_env_record_json(env, &mut record));
        let record_json: serde_json::Value =
            serde_json::from_str(&read(record).expect("record")).expect("record JSON");
        frognano_string_free(record);
        assert!(
            record_json
                .to_string()
                .contains("tinyparse-interpolation-depth-001")
        );

        frognano_env_free(env);
    }
}

#[test]
fn env_functions_reject_null_arguments() {
    let path = sample_tasks_path();
    let policy = cstring("oracle");
    let action = cstring("test");
    // SAFETY: every pointer is NULL or valid; handles are freed once.
    unsafe {
        let mut tasks = ptr::null_mut();
        let null = FrognanoErrorCode::NullPointer;
        let code = |error| take_error(error).0;
        assert_eq!(code(frognano_tasks_load(ptr::null(), &mut tasks)), null);
        assert_eq!(
            code(frognano_tasks_load(path.as_ptr(), ptr::null_mut())),
            null
        );
        assert!(tasks.is_null());
        let mut json = ptr::null_mut();
        assert_eq!(
            code(frognano_task_set_get_json(ptr::null(), 0, &mut json)),
            null
        );
        assert_eq!(frognano_task_set_len(ptr::null()), 0);

        let mut env = ptr::null_mut();
        assert_eq!(code(frognano_env_new(ptr::null(), 0, &mut env)), null);
        assert_eq!(
            code(frognano_env_new(shared_sandbox(), 0, ptr::null_mut())),
            null
        );
        assert!(env.is_null());
        assert_ok(frognano_env_new(shared_sandbox(), 5, &mut env));

        let mut text = ptr::null_mut();
        let reset_code = |env, task_json, out| code(frognano_env_reset(env, task_json, out));
        assert_eq!(reset_code(ptr::null_mut(), path.as_ptr(), &mut text), null);
        assert_eq!(reset_code(env, ptr::null(), &mut text), null);
        assert_eq!(reset_code(env, path.as_ptr(), ptr::null_mut()), null);
        let mut out = ptr::null_mut();
        let step_code = |env, action, out| code(frognano_env_step(env, action, out));
        let action = action.as_ptr();
        assert_eq!(step_code(ptr::null_mut(), action, &mut out), null);
        assert_eq!(step_code(env, ptr::null(), &mut out), null);
        assert_eq!(step_code(env, action, ptr::null_mut()), null);
        assert_eq!(code(frognano_env_record_json(ptr::null(), &mut json)), null);
        assert_eq!(code(frognano_env_record_json(env, ptr::null_mut())), null);
        assert!(text.is_null() && out.is_null() && json.is_null());

        let set = load_tasks(&path);
        // The error code of an evaluation by one worker.
        let evaluation_code = |sandbox: *const FrognanoSandbox,
                               set: *const FrognanoTaskSet,
                               policy: *const c_char,
                               out: *mut *mut c_char| {
            code(frognano_evaluate(sandbox, set, policy, 1, out))
        };
        let sandbox = shared_sandbox();
        let oracle = policy.as_ptr();
        assert_eq!(evaluation_code(ptr::null(), set, oracle, &mut json), null);
        assert_eq!(
            evaluation_code(sandbox, ptr::null(), oracle, &mut json),
            null
        );
        assert_eq!(evaluation_code(sandbox, set, ptr::null(), &mut json), null);
        assert_eq!(evaluation_code(sandbox, set, oracle, ptr::null_mut()), null);
        let unknown = cstring("clever");
        assert_eq!(
            evaluation_code(sandbox, set, unknown.as_ptr(), &mut json),
            FrognanoErrorCode::InvalidOption
        );
        assert!(json.is_null());

        // Accessors of a NULL step give their fallbacks; the frees accept NULL.
        assert!(frognano_step_observation(ptr::null()).is_null());
        assert!(frognano_step_info_json(ptr::null()).is_null());
        assert!(frognano_step_reward(ptr::null()).is_nan());
        assert!(!frognano_step_terminated(ptr::null()));
        assert!(!frognano_step_truncated(ptr::null()));
        assert!(!frognano_step_is_error(ptr::null()));
        frognano_step_free(ptr::null_mut());
        frognano_env_free(ptr::null_mut());
        frognano_task_set_free(ptr::null_mut());

        frognano_task_set_free(set);
        frognano_env_free(env);
    }
}

#[test]
fn evaluate_oracle_resolves_and_noop_does_not() {
    // A set of the first three sample tasks: their JSON already holds absolute repo paths.
    let all = load_tasks(&sample_tasks_path());
    let lines: Vec<String> = (0..3).map(|i| task_json(all, i)).collect();
    // SAFETY: live task set, freed once.
    unsafe { frognano_task_set_free(all) };
    let dir = std::env::temp_dir().join(format!("frognano-c-test-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("three.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").expect("write");
    let tasks = load_tasks(&cstring(file.to_str().expect("UTF-8 path")));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: live task set.
    assert_eq!(unsafe { frognano_task_set_len(tasks) }, 3);

    let oracle = evaluate(tasks, "oracle");
    assert_eq!(oracle["episodes"], 3, "{oracle}");
    assert_eq!(oracle["resolved_rate"], 1.0, "{oracle}");
    assert_eq!(oracle["failed_tasks"], serde_json::json!([]), "{oracle}");
    assert!(oracle["steps_per_s"].as_f64().is_some(), "{oracle}");

    let noop = evaluate(tasks, "noop");
    assert_eq!(noop["episodes"], 3, "{noop}");
    assert_eq!(noop["resolved_rate"], 0.0, "{noop}");

    // SAFETY: live task set, freed once.
    unsafe { frognano_task_set_free(tasks) };
}
