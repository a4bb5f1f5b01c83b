//! Training through the exported C functions (`frognano_group_advantages`,
//! `frognano_learnability`, the `FrognanoTrainer` handle and `frognano_train`), as a C program
//! would call them.

use std::ffi::CString;
use std::path::PathBuf;
use std::ptr;

use frognano::*;

mod common;
use common::{
    assert_ok, cstring, not_utf8, owned, shared_sandbox, take_error, take_json, textkit_dir,
};

/// Calls `frognano_group_advantages`: the advantages, or the error (checking that `out` stays
/// untouched on failure).
fn advantages(rewards: &[f64], estimator: &str) -> Result<Vec<f64>, (FrognanoErrorCode, String)> {
    let estimator = cstring(estimator);
    let mut out = vec![-7.0; rewards.len()];
    // SAFETY: `rewards` and `out` hold `rewards.len()` doubles; a valid string.
    let error = unsafe {
        frognano_group_advantages(
            rewards.as_ptr(),
            rewards.len(),
            estimator.as_ptr(),
            out.as_mut_ptr(),
        )
    };
    if error.is_null() {
        Ok(out)
    } else {
        assert!(out.iter().all(|v| *v == -7.0), "out written on failure");
        Err(take_error(error))
    }
}

fn assert_close(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "{got:?} vs {want:?}");
    }
}

#[test]
fn advantages_match_hand_computed_values() {
    // [1, 0, 0, 1]: mean 0.5, sample standard deviation sqrt(1/3) = 0.5773502691896257.
    let grpo = 0.5 / (0.577_350_269_189_625_7 + 1e-6);
    assert_close(
        &advantages(&[1.0, 0.0, 0.0, 1.0], "grpo").expect("grpo"),
        &[grpo, -grpo, -grpo, grpo],
    );
    assert_close(
        &advantages(&[1.0, 0.0, 0.0, 1.0], "dr_grpo").expect("dr_grpo"),
        &[0.5, -0.5, -0.5, 0.5],
    );
    // RLOO: each reward minus the mean of the other three: 1 - 1/3, 0 - 2/3.
    assert_close(
        &advantages(&[1.0, 0.0, 0.0, 1.0], "rloo").expect("rloo"),
        &[2.0 / 3.0, -2.0 / 3.0, -2.0 / 3.0, 2.0 / 3.0],
    );
    // [0.2, 0.8, 0.5]: mean 0.5, sample standard deviation 0.3.
    assert_close(
        &advantages(&[0.2, 0.8, 0.5], "grpo").expect("grpo"),
        &[-0.3 / 0.300_001, 0.3 / 0.300_001, 0.0],
    );
    assert_close(
        &advantages(&[0.2, 0.8, 0.5], "dr_grpo").expect("dr_grpo"),
        &[-0.3, 0.3, 0.0],
    );
    // 0.2 - (0.8 + 0.5) / 2 = -0.45, 0.8 - 0.35 = 0.45, 0.5 - 0.5 = 0.
    assert_close(
        &advantages(&[0.2, 0.8, 0.5], "rloo").expect("rloo"),
        &[-0.45, 0.45, 0.0],
    );
    // RLOO on [1, 0, 0]: 1 - 0, 0 - 1/2.
    assert_close(
        &advantages(&[1.0, 0.0, 0.0], "rloo").expect("rloo"),
        &[1.0, -0.5, -0.5],
    );
    // No signal: equal rewards, or a group of one.
    for estimator in ["grpo", "dr_grpo", "rloo"] {
        assert_eq!(
            advantages(&[1.0, 1.0, 1.0], estimator).expect(estimator),
            vec![0.0; 3]
        );
        assert_eq!(advantages(&[0.7], estimator).expect(estimator), vec![0.0]);
    }
    // Names are case-insensitive and accept `-` for `_`.
    assert_close(
        &advantages(&[1.0, 0.0], "Dr-GRPO").expect("Dr-GRPO"),
        &[0.5, -0.5],
    );
}

#[test]
fn advantages_in_place_and_empty_groups() {
    let mut rewards = [1.0, 0.0, 0.0];
    let estimator = cstring("rloo");
    // SAFETY: `rewards` holds 3 doubles, read and written in place as documented.
    assert_ok(unsafe {
        frognano_group_advantages(
            rewards.as_ptr(),
            rewards.len(),
            estimator.as_ptr(),
            rewards.as_mut_ptr(),
        )
    });
    assert_close(&rewards, &[1.0, -0.5, -0.5]);
    // n = 0: nothing to read or write, so NULL arrays are fine.
    // SAFETY: a valid string; no array is dereferenced for n = 0.
    assert_ok(unsafe {
        frognano_group_advantages(ptr::null(), 0, estimator.as_ptr(), ptr::null_mut())
    });
    assert_eq!(advantages(&[], "grpo").expect("empty"), Vec::<f64>::new());
}

#[test]
fn advantage_errors() {
    let (code, message) = advantages(&[1.0, 0.0], "ppo").expect_err("ppo");
    assert_eq!(code, FrognanoErrorCode::InvalidOption, "{message}");
    assert!(
        message.contains("\"ppo\"") && message.contains("dr_grpo"),
        "{message}"
    );
    for bad in [f64::NAN, f64::INFINITY] {
        let (code, message) = advantages(&[1.0, bad], "grpo").expect_err("non-finite");
        assert_eq!(code, FrognanoErrorCode::InvalidOption, "{message}");
        assert!(message.contains("rewards[1]"), "{message}");
    }
    let rewards = [1.0, 0.0];
    let mut out = [0.0; 2];
    let grpo = cstring("grpo");
    // SAFETY: every pointer is NULL or valid for the call.
    unsafe {
        let null = FrognanoErrorCode::NullPointer;
        let (code, message) = take_error(frognano_group_advantages(
            rewards.as_ptr(),
            2,
            ptr::null(),
            out.as_mut_ptr(),
        ));
        assert_eq!(code, null);
        assert!(message.contains("estimator"), "{message}");
        let (code, message) = take_error(frognano_group_advantages(
            ptr::null(),
            2,
            grpo.as_ptr(),
            out.as_mut_ptr(),
        ));
        assert_eq!(code, null);
        assert!(message.contains("rewards"), "{message}");
        let (code, message) = take_error(frognano_group_advantages(
            rewards.as_ptr(),
            2,
            grpo.as_ptr(),
            ptr::null_mut(),
        ));
        assert_eq!(code, null);
        assert!(message.contains("out"), "{message}");
        // The estimator is checked even for an empty group.
        assert_eq!(
            take_error(frognano_group_advantages(
                ptr::null(),
                0,
                ptr::null(),
                ptr::null_mut()
            ))
            .0,
            null
        );
        assert_eq!(
            take_error(frognano_group_advantages(
                rewards.as_ptr(),
                2,
                not_utf8(),
                out.as_mut_ptr(),
            ))
            .0,
            FrognanoErrorCode::InvalidUtf8
        );
    }
    assert_eq!(out, [0.0; 2], "out written on failure");
}

/// The score of `p` for `target`, or the error's code and message.
fn learnability(p: f64, target: f64) -> Result<f64, (FrognanoErrorCode, String)> {
    let mut out = -1.0;
    // SAFETY: `out` is a live, writable double.
    let err = unsafe { frognano_learnability(p, target, &mut out) };
    if err.is_null() {
        Ok(out)
    } else {
        assert_eq!(out, -1.0, "out written on failure");
        Err(take_error(err))
    }
}

#[test]
fn learnability_peaks_at_the_target() {
    let close = |a: Result<f64, _>, b: f64| a.is_ok_and(|a: f64| (a - b).abs() < 1e-12);
    // Target 0.5: 4 p (1 - p).
    assert!(close(learnability(0.5, 0.5), 1.0));
    assert!(close(learnability(0.25, 0.5), 0.75));
    assert!(close(learnability(0.0, 0.5), 0.0));
    assert!(close(learnability(1.0, 0.5), 0.0));
    // Target 0.25: p^0.5 (1 - p)^1.5 / (0.25^0.5 0.75^1.5), 1 at 0.25.
    assert!(close(learnability(0.25, 0.25), 1.0));
    assert!(close(learnability(0.5, 0.25), 0.769_800_358_919_501_2));
    let below_peak = |p| learnability(p, 0.25).is_ok_and(|s| s < 1.0);
    assert!(below_peak(0.2) && below_peak(0.3));
    // p is clamped to [0, 1].
    assert!(close(learnability(2.0, 0.5), 0.0));
    assert!(close(learnability(-1.0, 0.5), 0.0));
    // The target lies strictly between 0 and 1, as the curriculum's does; NaN is no rate.
    for (p, target) in [
        (0.5, 0.0),
        (0.5, 1.0),
        (0.5, 1.5),
        (0.5, -0.5),
        (f64::NAN, 0.5),
        (0.5, f64::NAN),
    ] {
        let (code, message) = learnability(p, target).expect_err("out of range");
        assert_eq!(
            code,
            FrognanoErrorCode::InvalidOption,
            "{p}, {target}: {message}"
        );
    }
    // SAFETY: a NULL `out` is an error, not a write.
    let err = unsafe { frognano_learnability(0.5, 0.5, ptr::null_mut()) };
    assert_eq!(take_error(err).0, FrognanoErrorCode::NullPointer);
}

/// The tiny configuration of the tests: two held-out tasks, a static curriculum of three, two
/// tasks of two rollouts per iteration, episodes of at most 12 steps.
fn tiny_config(repo: &str) -> String {
    serde_json::json!({
        "repos": [repo],
        "curriculum": "static",
        "iterations": 1,
        "seed": 1,
        "held_out": 2,
        "static_tasks": 3,
        "trainer": {
            "tasks_per_iteration": 2,
            "group_size": 2,
            "estimator": "rloo",
            "env": {"max_steps": 12},
        },
    })
    .to_string()
}

/// Calls `frognano_trainer_new`: the trainer, or the error (checking that `out` stays untouched
/// on failure).
fn new_trainer(config: Option<&str>) -> Result<*mut FrognanoTrainer, (FrognanoErrorCode, String)> {
    let config = config.map(cstring);
    let mut trainer = ptr::null_mut();
    // SAFETY: live sandbox, valid string (or NULL) and out-pointer.
    let error = unsafe {
        frognano_trainer_new(
            shared_sandbox(),
            config.as_ref().map_or(ptr::null(), |c| c.as_ptr()),
            &mut trainer,
        )
    };
    owned(error, trainer)
}

fn policy_state(trainer: *const FrognanoTrainer) -> serde_json::Value {
    let mut json = ptr::null_mut();
    // SAFETY: live trainer, valid out-pointer.
    assert_ok(unsafe { frognano_trainer_policy_json(trainer, &mut json) });
    take_json(json)
}

/// Asserts that two policy states are the same, numbers up to the last bits: the checkpoint is
/// JSON, and serde_json without its `float_roundtrip` feature may read a float back one unit in
/// the last place off.
fn assert_same_state(got: &serde_json::Value, want: &serde_json::Value) {
    fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value;
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()).max(1e-300),
                _ => x == y,
            },
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
            }
            _ => a == b,
        }
    }
    assert!(same(got, want), "states differ:\n{got}\n{want}");
}

/// A path under the system temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let path =
            std::env::temp_dir().join(format!("frognano-c-train-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let _ = std::fs::remove_file(&path);
        Scratch(path)
    }

    fn c(&self) -> CString {
        cstring(self.0.to_str().expect("UTF-8 path"))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_trainer_iterates_evaluates_and_resumes_from_a_checkpoint() {
    let config = tiny_config(&textkit_dir());
    let trainer = new_trainer(Some(&config)).expect("trainer");
    // SAFETY: `trainer` is live until freed at the end; every out-pointer is valid.
    unsafe {
        assert_eq!(frognano_trainer_iteration(trainer), 0);
        let initial = policy_state(trainer);
        assert_eq!(initial["kind"], "repair", "{initial}");
        assert_eq!(initial["updates"], 0, "{initial}");

        let mut metrics = ptr::null_mut();
        assert_ok(frognano_trainer_iterate(trainer, &mut metrics));
        let metrics = take_json(metrics);
        assert_eq!(metrics["iteration"], 0, "{metrics}");
        assert_eq!(metrics["rollouts"], 4, "{metrics}");
        let rate = metrics["resolved_rate"].as_f64().expect("resolved_rate");
        assert!((0.0..=1.0).contains(&rate), "{metrics}");
        assert_eq!(metrics["extra"]["groups"], 2, "{metrics}");
        assert!(metrics["extra"]["zero_variance_fraction"].is_number());
        assert_eq!(frognano_trainer_iteration(trainer), 1);

        let mut summary = ptr::null_mut();
        assert_ok(frognano_trainer_evaluate(trainer, &mut summary));
        let summary = take_json(summary);
        assert_eq!(summary["episodes"], 2, "{summary}");
        assert_eq!(summary["held_out_tasks"], 2, "{summary}");
        assert_eq!(summary["iteration"], 1, "{summary}");
        assert!(summary["resolved_rate"].is_number(), "{summary}");

        let trained = policy_state(trainer);
        let checkpoint = Scratch::new("checkpoint.json");
        assert_ok(frognano_trainer_save_checkpoint(
            trainer,
            checkpoint.c().as_ptr(),
        ));
        assert!(checkpoint.0.is_file());
        frognano_trainer_free(trainer);

        // A fresh trainer with the same configuration (its repository given relative to the
        // current directory, the crate's) picks up where the first stopped.
        let relative = tiny_config("../examples/repos/textkit");
        let resumed = new_trainer(Some(&relative)).expect("second trainer");
        assert_eq!(frognano_trainer_iteration(resumed), 0);
        assert_ok(frognano_trainer_resume(resumed, checkpoint.c().as_ptr()));
        assert_eq!(frognano_trainer_iteration(resumed), 1);
        assert_same_state(&policy_state(resumed), &trained);

        // Unusable checkpoints are TRAINING errors naming the file; the trainer is unchanged.
        let missing = Scratch::new("missing.json");
        let (code, message) = take_error(frognano_trainer_resume(resumed, missing.c().as_ptr()));
        assert_eq!(code, FrognanoErrorCode::Training, "{message}");
        assert!(message.contains("missing.json"), "{message}");
        let not_checkpoint = Scratch::new("not-a-checkpoint.json");
        std::fs::write(&not_checkpoint.0, "{\"format\": \"something else\"}").expect("write");
        let (code, message) = take_error(frognano_trainer_resume(
            resumed,
            not_checkpoint.c().as_ptr(),
        ));
        assert_eq!(code, FrognanoErrorCode::Training, "{message}");
        assert!(message.contains("not a trainer checkpoint"), "{message}");
        let unwritable = cstring("/nonexistent-dir/frognano/checkpoint.json");
        let (code, message) = take_error(frognano_trainer_save_checkpoint(
            resumed,
            unwritable.as_ptr(),
        ));
        assert_eq!(code, FrognanoErrorCode::Training, "{message}");
        assert_eq!(frognano_trainer_iteration(resumed), 1);

        // Iterating on: the next iteration is number 1, without metrics asked for.
        assert_ok(frognano_trainer_iterate(resumed, ptr::null_mut()));
        assert_eq!(frognano_trainer_iteration(resumed), 2);
        frognano_trainer_free(resumed);
    }
}

#[test]
fn bad_configurations_are_config_errors_with_a_message() {
    let repo = textkit_dir();
    let with_repo = |extra: &str| format!(r#"{{"repos": [{repo:?}], {extra}}}"#);
    let cases: Vec<(Option<String>, &str)> = vec![
        (Some("not json".into()), "not valid JSON"),
        (Some("[1, 2]".into()), "must be a JSON object"),
        (Some(with_repo(r#""curiculum": "static""#)), "`curiculum`"),
        (
            Some(with_repo(r#""policy": {"learning_rat": 1}"#)),
            "`policy.learning_rat`",
        ),
        (
            Some(with_repo(r#""trainer": {"env": {"max_step": 3}}"#)),
            "`trainer.env.max_step`",
        ),
        (Some(with_repo(r#""curriculum": "galaxy""#)), "`curriculum`"),
        (
            Some(with_repo(r#""trainer": {"estimator": "ppo"}"#)),
            "`trainer.estimator`",
        ),
        (Some(with_repo(r#""seed": "three""#)), "`seed`"),
        (
            Some(with_repo(r#""trainer": {"group_size": 1}"#)),
            "group_size",
        ),
        (Some(with_repo(r#""iterations": 0"#)), "iterations"),
        (Some(with_repo(r#""max_bugs": 9"#)), "max_bugs"),
        (
            Some(with_repo(r#""policy": {"temperature": 0}"#)),
            "temperature",
        ),
        (
            Some(with_repo(r#""frontier": {"target_success": 1.5}"#)),
            "target_success",
        ),
    ];
    for (config, needle) in &cases {
        let (code, message) = new_trainer(config.as_deref()).expect_err(needle);
        assert_eq!(code, FrognanoErrorCode::Config, "{config:?}: {message}");
        assert!(message.contains(needle), "{config:?}: {message}");
    }
    // frognano_train reads its configuration the same way (no repositories named: the
    // bundled ones, so only the mistake stops it).
    let mut report = ptr::null_mut();
    let config = cstring(r#"{"iterations": 0}"#);
    // SAFETY: live sandbox, valid string and out-pointer.
    let (code, message) =
        take_error(unsafe { frognano_train(shared_sandbox(), config.as_ptr(), &mut report) });
    assert_eq!(code, FrognanoErrorCode::Config, "{message}");
    assert!(message.contains("iterations"), "{message}");
    assert!(report.is_null());

    let missing = r#"{"repos": ["/nonexistent/frognano-train-repo"], "held_out": 1}"#;
    let (code, message) = new_trainer(Some(missing)).expect_err("missing repository");
    assert_eq!(code, FrognanoErrorCode::Repo, "{message}");
}

#[test]
fn trainer_functions_reject_null_and_non_utf8_arguments() {
    let config = cstring(&tiny_config(&textkit_dir()));
    let path = cstring("checkpoint.json");
    let not_utf8 = not_utf8();
    let mut json = ptr::null_mut();
    let mut trainer = ptr::null_mut();
    // SAFETY: every pointer is NULL or valid for the call; no trainer is ever made.
    unsafe {
        let null = FrognanoErrorCode::NullPointer;
        for error in [
            frognano_trainer_new(ptr::null(), config.as_ptr(), &mut trainer),
            frognano_trainer_new(shared_sandbox(), config.as_ptr(), ptr::null_mut()),
            frognano_trainer_iterate(ptr::null_mut(), &mut json),
            frognano_trainer_evaluate(ptr::null_mut(), &mut json),
            frognano_trainer_save_checkpoint(ptr::null(), path.as_ptr()),
            frognano_trainer_resume(ptr::null_mut(), path.as_ptr()),
            frognano_trainer_policy_json(ptr::null(), &mut json),
            frognano_train(ptr::null(), config.as_ptr(), &mut json),
            frognano_train(shared_sandbox(), config.as_ptr(), ptr::null_mut()),
        ] {
            assert_eq!(take_error(error).0, null);
        }
        let (code, _) = take_error(frognano_trainer_new(
            shared_sandbox(),
            not_utf8,
            &mut trainer,
        ));
        assert_eq!(code, FrognanoErrorCode::InvalidUtf8);
        let (code, _) = take_error(frognano_train(shared_sandbox(), not_utf8, &mut json));
        assert_eq!(code, FrognanoErrorCode::InvalidUtf8);
        assert!(trainer.is_null() && json.is_null());
        assert_eq!(frognano_trainer_iteration(ptr::null()), 0);
        frognano_trainer_free(ptr::null_mut());
        assert_eq!(FrognanoErrorCode::Training as i32, 15);
    }
}

#[test]
fn a_whole_training_job_reports_before_and_after() {
    let out = Scratch::new("job");
    let mut config: serde_json::Value =
        serde_json::from_str(&tiny_config(&textkit_dir())).expect("config");
    config["out"] = out.0.to_str().expect("UTF-8 path").into();
    let config = cstring(&config.to_string());
    let mut report = ptr::null_mut();
    // SAFETY: live sandbox, valid string and out-pointer.
    assert_ok(unsafe { frognano_train(shared_sandbox(), config.as_ptr(), &mut report) });
    let report = take_json(report);
    assert_eq!(report["curriculum"], "static", "{report}");
    assert_eq!(report["held_out_tasks"], 2, "{report}");
    assert_eq!(report["rollouts"], 4, "{report}");
    assert_eq!(report["history"].as_array().map(Vec::len), Some(1));
    assert_eq!(report["initial"]["episodes"], 2, "{report}");
    assert_eq!(report["trained"]["episodes"], 2, "{report}");
    assert_eq!(report["policy"]["kind"], "repair", "{report}");
    for file in [
        "held_out.jsonl",
        "metrics.jsonl",
        "checkpoint.json",
        "eval.jsonl",
    ] {
        assert!(out.0.join(file).is_file(), "{file}");
    }
}
