//! Training: group advantages, learnability, training configurations, the trainer handle
//! and `frognano_train`.

use std::ffi::c_char;
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use frognano_core::{Task, Trainer};
use frognano_train::{
    Estimator, GrpoTrainer, PolicyEvaluator, Quiet, TrainConfig, TrainError, checked_learnability,
    group_advantages, make_curriculum, make_policy, prepare_pools,
};

use crate::error::{FrognanoError, FrognanoErrorCode, invalid_option};
use crate::ffi::{
    HandleArg, HandleArgMut, free_handle, guard, optional_str_arg, out_arg, read_handle, str_arg,
    write_handle, write_json,
};
use crate::sandbox::FrognanoSandbox;

/// Computes the advantages of one group of rollouts of the same task from their rewards, as
/// FrogNano's trainer does: a drop-in for C trainers of their own.
///
/// - `rewards`, `n`: the group's rewards (finite numbers). `rewards` may be `NULL` when `n` is
///   0, which is a successful call that writes nothing.
/// - `estimator`: `"grpo"` (`(r - mean) / (std + 1e-6)`, the sample standard deviation of the
///   group), `"dr_grpo"` (`r - mean`) or `"rloo"` (`r -` the mean of the other `n - 1`
///   rewards, that is `n / (n - 1) * (r - mean)`). Case and `-` for `_` do not matter.
/// - `out`: `n` writable doubles for the advantages, in the order of `rewards`; it may be the
///   `rewards` array itself (computed in place). `NULL` is accepted when `n` is 0.
///
/// A group with a single member or whose rewards are all equal carries no learning signal:
/// its advantages are all 0. On success writes the advantages and returns `NULL`. On failure
/// returns an owned error and leaves `out` untouched: `FROGNANO_ERROR_CODE_NULL_POINTER` for a
/// `NULL` `estimator`, or a `NULL` `rewards` or `out` with `n` > 0;
/// `FROGNANO_ERROR_CODE_INVALID_UTF8`; `FROGNANO_ERROR_CODE_INVALID_OPTION` for an unknown
/// estimator or a reward that is NaN or infinite. Thread safety: may be called from any
/// thread.
///
/// # Safety
///
/// `rewards` must be `NULL` or point to `n` readable doubles; `estimator` must be `NULL` or a
/// NUL-terminated string; `out` must be `NULL` or point to `n` writable doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_group_advantages(
    rewards: *const f64,
    n: usize,
    estimator: *const c_char,
    out: *mut f64,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let name = unsafe { str_arg(estimator, "estimator") }?;
        // The library's parser and message; an estimator argument is an option here, not a
        // training configuration.
        let estimator = Estimator::parse(name).map_err(|err| match err {
            TrainError::Config(message) => invalid_option(message),
            other => FrognanoError::from(other),
        })?;
        if n == 0 {
            return Ok(());
        }
        if rewards.is_null() {
            return Err(FrognanoError::null("rewards"));
        }
        out_arg(out, "out")?;
        if n > isize::MAX as usize / std::mem::size_of::<f64>() {
            return Err(invalid_option(format!("n = {n} rewards is too many")));
        }
        // Copied out before anything is written, so `out` may be `rewards` itself.
        // SAFETY: non-NULL, and the caller guarantees `n` readable doubles.
        let rewards = unsafe { std::slice::from_raw_parts(rewards, n) }.to_vec();
        if let Some((i, r)) = rewards.iter().enumerate().find(|(_, r)| !r.is_finite()) {
            return Err(invalid_option(format!(
                "rewards[{i}] is {r}: rewards must be finite numbers"
            )));
        }
        let advantages = group_advantages(&rewards, estimator);
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees `n` writable
        // doubles; `advantages` is a fresh vector of length `n`, so the ranges do not overlap.
        unsafe { ptr::copy_nonoverlapping(advantages.as_ptr(), out, n) };
        Ok(())
    })
}

/// Computes the learnability score of a success rate `p` for a target success rate `target`:
/// `p^a (1 - p)^b` with its mode at the target (`a = 2 target`, `b = 2 (1 - target)`), scaled
/// to 1 there. For `target` 0.5 it is `4 p (1 - p)`, proportional to the reward variance of a
/// 0/1 group: tasks solved about half the time teach the most, tasks always or never solved
/// teach nothing. The frontier curriculum chooses task families by this score.
///
/// `p` is clamped to `[0, 1]`; `target` must lie strictly between 0 and 1, as the
/// curriculum's does. On success writes the score to `*out` and returns `NULL`. On failure
/// returns an owned error and leaves `*out` untouched: `FROGNANO_ERROR_CODE_INVALID_OPTION`
/// for a `target` outside `(0, 1)` or a NaN argument, `FROGNANO_ERROR_CODE_NULL_POINTER` for a
/// `NULL` `out`. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `out` must be `NULL` or point to a writable double.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_learnability(
    p: f64,
    target: f64,
    out: *mut f64,
) -> *mut FrognanoError {
    guard(|| {
        out_arg(out, "out")?;
        let score = checked_learnability(p, target)?;
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(score) };
        Ok(())
    })
}

/// Reads a training configuration: `NULL` gives `default()`; otherwise a JSON object of
/// `TrainConfig` fields, read strictly by the library (missing ones take their defaults;
/// unknown ones, at any depth, and type errors are `FROGNANO_ERROR_CODE_CONFIG` errors naming
/// the field). With no repositories named, the bundled sample repositories are used (as
/// `frognano train` and Python's `train` do); repository and output paths are made absolute
/// against the current directory.
fn train_config(
    config_json: Option<&str>,
    default: fn() -> frognano_train::Result<TrainConfig>,
) -> Result<TrainConfig, FrognanoError> {
    let config = match config_json {
        None => default()?,
        Some(text) => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| TrainError::Config(format!("config_json is not valid JSON: {e}")))?;
            TrainConfig::from_json(value)?
        }
    }
    .or_bundled_repos()?;
    config.validate()?;
    Ok(config)
}

/// A trainer of the bundled repair policy: group-advantage reinforcement learning (GRPO,
/// Dr. GRPO or RLOO) on bug-fix tasks synthesized from Python repositories, with a held-out
/// evaluation set.
///
/// Created by `frognano_trainer_new`, freed with `frognano_trainer_free`. Each
/// `frognano_trainer_iterate` proposes tasks from the curriculum, rolls out a group of
/// episodes per task, turns rewards into advantages and updates the policy.
/// Thread safety: a trainer is used by one thread at a time (calls on it must not overlap);
/// different trainers may be used from different threads at once.
#[derive(Debug)]
pub struct FrognanoTrainer {
    trainer: GrpoTrainer,
    evaluator: PolicyEvaluator,
    held_out: Vec<Task>,
}

/// Creates a trainer over `sandbox` of the policy the configuration names: the bundled repair
/// policy (the default), or a language model (`"policy": {"kind": "onnx", "model": NAME or
/// fp32 FOLDER, "generation": {...}, "learner": {...}}`: rollouts in ONNX Runtime, updates by
/// the PyTorch learner in its environment, installed on first use, new weights handed back
/// after every update).
///
/// `config_json` is a JSON object of training settings, each optional (`NULL` or `"{}"` take
/// every default): `repos` (array of repository paths, directories or `.zip`/`.tar.gz`
/// bundles whose test suites pass, relative to the current directory; empty, the default: the
/// bundled sample repositories, under `examples/repos` of the current directory or of the
/// source tree the library was built from, as `frognano train` and Python's `train` take
/// them), `curriculum` (`"frontier"`, the
/// default: tasks synthesized online for the families the policy solves about half the time;
/// `"static"`: a fixed synthesized set sampled uniformly; `"easy_to_hard"`: that set opened
/// from easy to hard), `iterations` (default 6: the length of the easy-to-hard schedule; the
/// trainer itself iterates as often as it is asked), `seed` (default 0), `held_out` (size of the
/// held-out evaluation set, never trained on; default 24), `static_tasks` (size of the fixed
/// set of the static and easy-to-hard curricula; default 48), `max_bugs` (tasks carry 1 to this
/// many bugs, 1 to 8; default 2), `hint_levels` (default `[2]`), `operators` (mutation
/// operators; empty, the default: all), `easy_start_fraction` (default 0.3), `synth_workers`
/// (default 1), `out` (a directory; when set, each iteration's metrics are appended to
/// `metrics.jsonl` there), `trainer` (an object: `tasks_per_iteration` (default 6),
/// `group_size` (rollouts per task, at least 2; default 4), `estimator` (`"grpo"`, the
/// default, `"dr_grpo"` or `"rloo"`), `drop_zero_variance` (default true), `workers` (parallel
/// rollouts; 0, the default: the sandbox's workers), `env` (episode budgets: `max_steps`
/// (default 40), ...)), `policy` (`kind` `"repair"` (default) or `"onnx"`; the repair
/// policy: `max_attempts` (default 8),
/// `learning_rate` (default 0.15), `temperature`, `max_candidates`, `entropy_bonus`,
/// `ratio_cap`, ...), `frontier` (the frontier curriculum: `target_success` (default 0.5),
/// `decay`, `exploration`, `buffer`, `max_uses`, `max_wait_s`, ...). The seed of the policy is
/// `seed`.
///
/// The call synthesizes the held-out set and, for the static and easy-to-hard curricula, the
/// training set (seconds to minutes, depending on the repositories and the sizes); the frontier
/// curriculum starts synthesizing in the background.
///
/// On success writes an owned handle to `*out` (free it with `frognano_trainer_free`) and
/// returns `NULL`. On failure returns an owned error and leaves `*out` untouched:
/// `FROGNANO_ERROR_CODE_CONFIG` for a configuration that is not a JSON object, an unknown key
/// (at any depth), a value of the wrong type or out of range, or no repositories named where
/// the bundled ones cannot be found;
/// `FROGNANO_ERROR_CODE_REPO` for a missing repository; `FROGNANO_ERROR_CODE_SYNTHESIS` for a
/// repository whose suite cannot validate bugs; `FROGNANO_ERROR_CODE_TRAINING` when no
/// training task could be made; the sandbox's codes otherwise. Thread safety: may be called
/// from any thread, also on a sandbox other threads use at the same time. The trainer shares
/// the sandbox's runtime and keeps it alive: the sandbox may be freed before the trainer.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed;
/// `config_json` must be `NULL` or a NUL-terminated string; `out` must be `NULL` or point to
/// writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_new(
    sandbox: *const FrognanoSandbox,
    config_json: *const c_char,
    out: *mut *mut FrognanoTrainer,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let sandbox = unsafe { sandbox.live("sandbox") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let config_json = unsafe { optional_str_arg(config_json, "config_json") }?;
        out_arg(out, "out")?;
        let config = train_config(config_json, || Ok(TrainConfig::default()))?;
        let pools = prepare_pools(&sandbox.inner, &config, &mut Quiet)?;
        let curriculum = make_curriculum(&sandbox.inner, &config, &pools)?;
        let (policy, evaluator) = make_policy(&config)?;
        let mut trainer = GrpoTrainer::new(
            Arc::clone(&sandbox.inner),
            policy,
            curriculum,
            config.trainer.clone(),
        )?;
        if let Some(dir) = &config.out {
            std::fs::create_dir_all(dir).map_err(|e| {
                FrognanoError::new(
                    FrognanoErrorCode::Io,
                    format!("create {}: {e}", dir.display()),
                )
            })?;
            trainer.set_metrics_file(dir.join("metrics.jsonl"));
        }
        let held_out = pools.held_out;
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe {
            write_handle(
                out,
                FrognanoTrainer {
                    trainer,
                    evaluator,
                    held_out,
                },
            )
        };
        Ok(())
    })
}

/// Runs one training iteration: proposes `tasks_per_iteration` tasks, rolls out
/// `group_size` episodes of each with the sampling policy, computes the group advantages,
/// leaves out groups whose rewards are all equal (unless `drop_zero_variance` is false),
/// updates the policy and feeds the outcomes back to the curriculum.
///
/// On success, when `metrics_json` is not `NULL`, writes an owned UTF-8 JSON object to
/// `*metrics_json` (free it with `frognano_string_free`): `iteration` (from 0),
/// `resolved_rate`, `rollouts` and `extra` (`groups`, `zero_variance_groups`,
/// `zero_variance_fraction`, `mean_learnability`, `difficulty`, `rollouts_per_s`,
/// `env_steps_per_s`, `synthesis_wait_s`, `rollout_s`, `learn_s`, `wall_s`, `mean_steps`,
/// `trainable_steps`, `failed_resets`, `learner` (the policy's update statistics),
/// `synthesizer` (the curriculum's), ...); returns `NULL`. On failure returns an owned error
/// and leaves `*metrics_json` untouched; the iteration does not count: usually
/// `FROGNANO_ERROR_CODE_TRAINING` (no task proposed or no episode run, the learner failed),
/// `FROGNANO_ERROR_CODE_IO` when the metrics file cannot be written. The call blocks for the
/// iteration's rollouts (seconds to minutes). Thread safety: one thread at a time per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread; `metrics_json` must be `NULL` or point to writable storage for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_iterate(
    trainer: *mut FrognanoTrainer,
    metrics_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live trainer used by this thread only.
        let trainer = unsafe { trainer.live_mut("trainer") }?;
        let metrics = trainer.trainer.iterate()?;
        if !metrics_json.is_null() {
            // SAFETY: `metrics_json` is non-NULL and the caller guarantees it is writable.
            unsafe { write_json(metrics_json, &metrics, "iteration metrics") }?;
        }
        Ok(())
    })
}

/// Returns the number of iterations run (including those restored by
/// `frognano_trainer_resume`); 0 when `trainer` is `NULL`. Thread safety: one thread at a time
/// per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_iteration(trainer: *const FrognanoTrainer) -> usize {
    // SAFETY: the caller passes NULL or a live trainer handle.
    unsafe { read_handle(trainer, 0, |t| Some(t.trainer.iteration())) }
}

/// Evaluates the policy as trained so far on the held-out tasks: the repair policy with the
/// current weights, greedy (always the most probable repair), one episode per task, without
/// learning.
///
/// On success writes an owned UTF-8 JSON object to `*summary_json` (free it with
/// `frognano_string_free`) and returns `NULL`. The object holds `episodes`, `resolved`,
/// `resolved_rate`, `met_failure`, `recovered`, `recovery_rate`, `mean_steps`,
/// `tool_errors`, `test_runs`, `truncated`, plus `iteration` (iterations trained) and
/// `held_out_tasks`. On failure returns an owned error and leaves `*summary_json` untouched:
/// `FROGNANO_ERROR_CODE_TRAINING` when there is no held-out task (`held_out` 0) or none could
/// be run. Thread safety: one thread at a time per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread; `summary_json` must be `NULL` or point to writable storage for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_evaluate(
    trainer: *mut FrognanoTrainer,
    summary_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live trainer used by this thread only.
        let trainer = unsafe { trainer.live_mut("trainer") }?;
        out_arg(summary_json, "summary_json")?;
        if trainer.held_out.is_empty() {
            return Err(FrognanoError::from(TrainError::NoTasks(
                "no held-out task to evaluate on (the configuration's held_out is 0)".into(),
            )));
        }
        let state = trainer.trainer.policy().state()?;
        let mut policy = trainer.evaluator.policy(Some(&state))?;
        let (summary, _records) =
            trainer
                .trainer
                .evaluate(policy.as_mut(), &trainer.held_out, |_| {})?;
        let mut value = serde_json::to_value(&summary).map_err(|e| {
            FrognanoError::new(
                FrognanoErrorCode::Io,
                format!("serialise the summary as JSON: {e}"),
            )
        })?;
        if let Some(object) = value.as_object_mut() {
            object.insert("iteration".into(), trainer.trainer.iteration().into());
            object.insert("held_out_tasks".into(), trainer.held_out.len().into());
        }
        // SAFETY: `summary_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(summary_json, &value, "summary") }
    })
}

/// Runs a checkpoint call: borrows the trainer with `trainer` (its NULL check comes first), then
/// reads the UTF-8 `path` and applies `call` to both.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string that stays valid during the call.
unsafe fn checkpoint_call<T>(
    trainer: impl FnOnce() -> Result<T, FrognanoError>,
    path: *const c_char,
    call: impl FnOnce(T, &Path) -> Result<(), TrainError>,
) -> *mut FrognanoError {
    guard(|| {
        let trainer = trainer()?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let path = unsafe { str_arg(path, "path") }?;
        call(trainer, Path::new(path))?;
        Ok(())
    })
}

/// Writes a checkpoint to `path` (UTF-8; the file is replaced atomically): the iteration
/// count, the trainer's settings, the policy's state (weights and optimizer moments), the
/// curriculum's state and the metrics of every iteration so far.
///
/// Returns `NULL` on success, else an owned error: `FROGNANO_ERROR_CODE_TRAINING` when the
/// file cannot be written (the message names the path). Thread safety: one thread at a time
/// per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread; `path` must be `NULL` or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_save_checkpoint(
    trainer: *const FrognanoTrainer,
    path: *const c_char,
) -> *mut FrognanoError {
    // SAFETY: the caller passes NULL or a live trainer handle, and NULL or a valid
    // NUL-terminated `path`.
    unsafe {
        checkpoint_call(
            || trainer.live("trainer"),
            path,
            |trainer, path| trainer.trainer.save_checkpoint(path),
        )
    }
}

/// Writes the model steps of the batch the learner got in the last iteration as a token batch
/// file at `path` (UTF-8; safetensors, replaced whole): per step the exact prompt token ids the
/// model was fed, the generated ids, their rollout log-probs and loss mask, and the
/// trajectories' advantages, rewards and flags, as flat arrays with offsets (the format the
/// PyTorch learner and any safetensors reader take; see `frognano_core::TokenBatch`).
///
/// Returns `NULL` on success, else an owned error: `FROGNANO_ERROR_CODE_TRAINING` before the
/// first iteration, `FROGNANO_ERROR_CODE_INVALID_ARGUMENT` for a batch a token learner cannot
/// use (a model step without prompt ids, say), `FROGNANO_ERROR_CODE_IO` when the file cannot
/// be written. Thread safety: one thread at a time per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread; `path` must be `NULL` or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_save_token_batch(
    trainer: *const FrognanoTrainer,
    path: *const c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live trainer handle.
        let trainer = unsafe { trainer.live("trainer") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let path = unsafe { str_arg(path, "path") }?;
        let batch = trainer.trainer.last_batch().ok_or_else(|| {
            FrognanoError::from(TrainError::NoTasks(
                "no batch yet: run an iteration first".into(),
            ))
        })?;
        let tokens = frognano_core::TokenBatch::from_batch(batch)?;
        tokens.save(Path::new(path))?;
        Ok(())
    })
}

/// Restores a checkpoint written by `frognano_trainer_save_checkpoint` (UTF-8 path): the
/// iteration count, the policy's state, the curriculum's state and the metrics history; the
/// next iteration continues where the checkpointed trainer stopped. Make the trainer with the
/// same configuration as the one that wrote the checkpoint.
///
/// Returns `NULL` on success, else an owned error, leaving the trainer unchanged when the file
/// cannot be read or is not a trainer checkpoint: `FROGNANO_ERROR_CODE_TRAINING` (the message
/// names the path and what was wrong). Thread safety: one thread at a time per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread; `path` must be `NULL` or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_resume(
    trainer: *mut FrognanoTrainer,
    path: *const c_char,
) -> *mut FrognanoError {
    // SAFETY: the caller passes NULL or a live trainer used by this thread only, and NULL or a
    // valid NUL-terminated `path`.
    unsafe {
        checkpoint_call(
            || trainer.live_mut("trainer"),
            path,
            |trainer, path| trainer.trainer.resume(path),
        )
    }
}

/// Serialises the policy's learnable state as one JSON object: `kind` (`"repair"`),
/// `features` (the feature names), `weights` (one per feature), `adam` (the optimizer's
/// moments), `updates` and `config`. It is the `policy` of a checkpoint and of
/// `frognano_train`'s report.
///
/// On success writes an owned UTF-8 string to `*state_json` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error and leaves
/// `*state_json` untouched. Thread safety: one thread at a time per trainer.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, not in
/// use by another thread; `state_json` must be `NULL` or point to writable storage for a
/// pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_policy_json(
    trainer: *const FrognanoTrainer,
    state_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live trainer handle.
        let trainer = unsafe { trainer.live("trainer") }?;
        out_arg(state_json, "state_json")?;
        let state = trainer.trainer.policy().state()?;
        // SAFETY: `state_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(state_json, &state, "policy state") }
    })
}

/// Frees a trainer: its policy, curriculum (a frontier curriculum's background synthesis is
/// stopped and joined) and environments. `NULL` is accepted and ignored. No call on it may be
/// in progress, and the handle must not be used afterwards.
///
/// # Safety
///
/// `trainer` must be `NULL` or a trainer returned by this library and not yet freed, with no
/// call on it in progress; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_trainer_free(trainer: *mut FrognanoTrainer) {
    // SAFETY: same contract as this function: `trainer` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(trainer) };
}

/// Runs a whole training job, as `frognano train` does: synthesizes the held-out set (and the
/// fixed training set of the static and easy-to-hard curricula), evaluates the untrained
/// policy on the held-out set (unless `evaluate_initial` is false), trains for `iterations`
/// iterations, and evaluates the trained policy (greedy) on the held-out set.
///
/// `config_json` is as for `frognano_trainer_new`, plus `evaluate_initial` (default true);
/// `NULL` runs the main job's configuration (`examples/train/main.toml`, found under the
/// current directory or the source tree the library was built from, as `frognano train` runs it
/// without `--config`: SmolLM2-135M trained with RL, fetched on first use) where
/// `frognano_trainer_new` takes every default. With `out` set, the job writes `held_out.jsonl`,
/// `training_tasks.jsonl` (fixed-set curricula), `metrics.jsonl`, `checkpoint.json` (after
/// every iteration) and `eval.jsonl` there, and resumes from a `checkpoint.json` it finds.
///
/// On success writes an owned UTF-8 JSON object to `*report_json` (free it with
/// `frognano_string_free`) and returns `NULL`: `curriculum`, `seed`, `history` (every
/// iteration's metrics, as `frognano_trainer_iterate` gives them), `initial` (the untrained
/// policy's held-out summary, or `null`), `trained` (the trained policy's), `held_out_tasks`,
/// `rollouts`, `synthesis_wait_s`, `policy` (the trained state, as
/// `frognano_trainer_policy_json` gives it) and `wall_s`. On failure returns an owned error and
/// leaves `*report_json` untouched, with the codes of `frognano_trainer_new` and
/// `frognano_trainer_iterate` (`FROGNANO_ERROR_CODE_TRAINING` also when no held-out task could
/// be synthesized). The call blocks for the whole job (minutes). Thread safety: may be called
/// from any thread, also on a sandbox other threads use at the same time.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed;
/// `config_json` must be `NULL` or a NUL-terminated string; `report_json` must be `NULL` or
/// point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_train(
    sandbox: *const FrognanoSandbox,
    config_json: *const c_char,
    report_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let sandbox = unsafe { sandbox.live("sandbox") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let config_json = unsafe { optional_str_arg(config_json, "config_json") }?;
        out_arg(report_json, "report_json")?;
        let config = train_config(config_json, frognano_train::main_job_config)?;
        let pools = prepare_pools(&sandbox.inner, &config, &mut Quiet)?;
        let report = frognano_train::run(&sandbox.inner, &config, &pools, &mut Quiet, None)?;
        // SAFETY: `report_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(report_json, &report, "training report") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::FrognanoEnv;
    use crate::model::FrognanoModel;

    #[test]
    fn trainers_may_be_used_from_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<FrognanoTrainer>();
        assert_send::<FrognanoEnv>();
        assert_send::<FrognanoModel>();
    }

    #[test]
    fn unknown_configuration_keys_are_config_errors_at_any_depth() {
        let text = r#"{"seed": 1, "trainer": {"group_size": 2, "env": {"max_stepz": 1}}}"#;
        let err =
            train_config(Some(text), frognano_train::main_job_config).expect_err("unknown key");
        assert_eq!(err.code, FrognanoErrorCode::Config);
        let message = err.message.to_string_lossy().into_owned();
        assert!(message.contains("`trainer.env.max_stepz`"), "{message}");
    }
}
