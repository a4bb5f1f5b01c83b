//! The agent environment: task sets, the environment handle, its steps and episode records.

use std::ffi::{CString, c_char};
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use frognano_core::{Action, Task};
use frognano_env::{EnvConfig, EnvError, RepoEnv, taskset};

use crate::error::{FrognanoError, FrognanoErrorCode};
use crate::ffi::{
    HandleArg, HandleArgMut, c_string, free_handle, guard, out_arg, read_handle, str_arg, to_json,
    write_handle, write_json, write_string,
};
use crate::sandbox::FrognanoSandbox;

/// An immutable set of bug-fix tasks, read from a JSONL file by `frognano_tasks_load` or made
/// by `frognano_synthesize`.
///
/// Freed with `frognano_task_set_free`. Thread safety: immutable, so it may be read from any
/// number of threads at once (including by `frognano_evaluate`); it must not be freed while
/// another thread still uses it.
#[derive(Debug)]
pub struct FrognanoTaskSet {
    pub(crate) tasks: Vec<Task>,
}

/// Loads a JSONL task set (one task record per line; blank lines and `#` comments skipped;
/// SWE-bench field names accepted). Relative repository paths are resolved against the
/// directory of the JSONL file, so the tasks read back hold absolute paths.
///
/// On success writes an owned handle to `*out` (free it with `frognano_task_set_free`) and
/// returns `NULL`. On failure returns an owned error and leaves `*out` untouched:
/// `FROGNANO_ERROR_CODE_TASK` for an unreadable file or a malformed record (the message names
/// the line and field). Thread safety: may be called from any thread.
///
/// # Safety
///
/// `path` must be `NULL` or a NUL-terminated string; `out` must be `NULL` or point to writable
/// storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_tasks_load(
    path: *const c_char,
    out: *mut *mut FrognanoTaskSet,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let path = unsafe { str_arg(path, "path") }?;
        out_arg(out, "out")?;
        let tasks = taskset::load_tasks(Path::new(path))?;
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { write_handle(out, FrognanoTaskSet { tasks }) };
        Ok(())
    })
}

/// Returns the number of tasks in a set; 0 when `tasks` is `NULL`. Valid indices for
/// `frognano_task_set_get_json` are `0` to this minus 1. Thread safety: may be called from any
/// thread.
///
/// # Safety
///
/// `tasks` must be `NULL` or a task set returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_task_set_len(tasks: *const FrognanoTaskSet) -> usize {
    // SAFETY: the caller passes NULL or a live task-set handle.
    unsafe { read_handle(tasks, 0, |t| Some(t.tasks.len())) }
}

/// Serialises task `index` of a set as one JSON object (the task record, with the absolute
/// repository path), suitable for `frognano_env_reset`.
///
/// On success writes an owned UTF-8 string to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error and leaves
/// `*out_json` untouched (`FROGNANO_ERROR_CODE_INVALID_OPTION` when `index` is out of range).
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `tasks` must be `NULL` or a task set returned by this library and not yet freed. `out_json`
/// must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_task_set_get_json(
    tasks: *const FrognanoTaskSet,
    index: usize,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live task-set handle.
        let tasks = unsafe { tasks.live("tasks") }?;
        out_arg(out_json, "out_json")?;
        let task = tasks.tasks.get(index).ok_or_else(|| {
            FrognanoError::new(
                FrognanoErrorCode::InvalidOption,
                format!(
                    "task index {index} is out of range (the set has {} tasks)",
                    tasks.tasks.len()
                ),
            )
        })?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(out_json, task, "task") }
    })
}

/// Frees a task set. `NULL` is accepted and ignored. No other thread may still use it.
///
/// # Safety
///
/// `tasks` must be `NULL` or a task set returned by this library and not yet freed, that no
/// other thread is using; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_task_set_free(tasks: *mut FrognanoTaskSet) {
    // SAFETY: same contract as this function: `tasks` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(tasks) };
}

/// An agent environment: one bug-fix episode at a time over a sandboxed repository.
///
/// Created by `frognano_env_new`, freed with `frognano_env_free`. An episode starts with
/// `frognano_env_reset`, advances one tool call per `frognano_env_step`, and ends when the
/// agent submits (the final state is graded by running the task's tests) or the step budget
/// runs out. Thread safety: an environment is used by one thread at a time (calls on it must
/// not overlap); different environments may be used from different threads at once.
#[derive(Debug)]
pub struct FrognanoEnv {
    inner: RepoEnv,
}

/// Creates an environment over `sandbox`, with a budget of `max_steps` steps per episode
/// (0 selects the default, 30). The environment shares the sandbox's runtime and keeps it
/// alive: the sandbox may be freed before the environment.
///
/// On success writes an owned handle to `*out` (free it with `frognano_env_free`) and returns
/// `NULL`; on failure returns an owned error and leaves `*out` untouched. Thread safety: may
/// be called from any thread.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed; `out`
/// must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_env_new(
    sandbox: *const FrognanoSandbox,
    max_steps: usize,
    out: *mut *mut FrognanoEnv,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let sandbox = unsafe { sandbox.live("sandbox") }?;
        out_arg(out, "out")?;
        let defaults = EnvConfig::default();
        let config = EnvConfig {
            max_steps: if max_steps == 0 {
                defaults.max_steps
            } else {
                max_steps
            },
            ..defaults
        };
        let inner = RepoEnv::new(Arc::clone(&sandbox.inner), config)?;
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { write_handle(out, FrognanoEnv { inner }) };
        Ok(())
    })
}

/// Makes the repository path of a task absolute, against the current directory.
fn absolutize(task: &mut Task) -> Result<(), FrognanoError> {
    let cwd = std::env::current_dir().map_err(|e| {
        FrognanoError::new(
            FrognanoErrorCode::Io,
            format!("resolve the repository path: {e}"),
        )
    })?;
    task.repo = task.repo.resolved_against(&cwd);
    Ok(())
}

/// Starts a new episode on the task given as one JSON task record (the form of
/// `frognano_task_set_get_json` and of a line of a task-set file). A relative repository
/// path is resolved against the current directory. Any running episode is abandoned.
///
/// On success writes the first observation (the problem statement and a map of the
/// repository) as an owned UTF-8 string to `*out_observation` (free it with
/// `frognano_string_free`) and returns `NULL`. On failure returns an owned error and leaves
/// `*out_observation` untouched: `FROGNANO_ERROR_CODE_TASK` for a malformed task or a bug
/// patch that does not apply, `FROGNANO_ERROR_CODE_REPO` for a missing repository.
/// Thread safety: one thread at a time per environment.
///
/// # Safety
///
/// `env` must be `NULL` or an environment returned by this library and not yet freed, not in
/// use by another thread; `task_json` must be `NULL` or a NUL-terminated string;
/// `out_observation` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_env_reset(
    env: *mut FrognanoEnv,
    task_json: *const c_char,
    out_observation: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live environment used by this thread only.
        let env = unsafe { env.live_mut("env") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let task_json = unsafe { str_arg(task_json, "task_json") }?;
        out_arg(out_observation, "out_observation")?;
        let mut task = taskset::parse_task(task_json)
            .map_err(|e| FrognanoError::new(FrognanoErrorCode::Task, format!("task_json: {e}")))?;
        absolutize(&mut task)?;
        let observation = env.inner.reset_task(&task)?;
        // SAFETY: `out_observation` is non-NULL (checked above) and the caller guarantees it
        // is writable.
        unsafe { write_string(out_observation, &observation.text) };
        Ok(())
    })
}

/// The result of one environment step: observation, reward, end flags and structured info.
///
/// Returned by `frognano_env_step`, freed with `frognano_step_free`. Immutable: it may be read
/// from any thread; strings read from it stay valid until it is freed.
#[derive(Debug)]
pub struct FrognanoStep {
    observation: CString,
    reward: f64,
    terminated: bool,
    truncated: bool,
    is_error: bool,
    info_json: CString,
}

/// Takes one step: `action` is the agent's text, either the tool grammar (e.g. `"test"`,
/// `"view path"`, `"submit"`) or a JSON tool call. A malformed action or a failed tool call is
/// not an error: the step's observation explains it and `frognano_step_is_error` is true.
///
/// On success writes an owned step to `*out` (free it with `frognano_step_free`) and returns
/// `NULL`. On failure returns an owned error and leaves `*out` untouched:
/// `FROGNANO_ERROR_CODE_EPISODE` when no episode is running (never reset, or it ended).
/// Thread safety: one thread at a time per environment.
///
/// # Safety
///
/// `env` must be `NULL` or an environment returned by this library and not yet freed, not in
/// use by another thread; `action` must be `NULL` or a NUL-terminated string; `out` must be
/// `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_env_step(
    env: *mut FrognanoEnv,
    action: *const c_char,
    out: *mut *mut FrognanoStep,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live environment used by this thread only.
        let env = unsafe { env.live_mut("env") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let action = unsafe { str_arg(action, "action") }?;
        out_arg(out, "out")?;
        let result = env.inner.step_action(&Action::Text {
            text: action.to_owned(),
        })?;
        let info_json = to_json(&result.info, "step info")?;
        let step = FrognanoStep {
            observation: c_string(&result.observation.text),
            reward: result.reward,
            terminated: result.terminated,
            truncated: result.truncated,
            is_error: result.observation.is_error,
            info_json: c_string(&info_json),
        };
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { write_handle(out, step) };
        Ok(())
    })
}

/// Returns the step's observation, the text the agent sees next (borrowed, valid until the
/// step is freed); `NULL` when `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_observation(step: *const FrognanoStep) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_handle(step, ptr::null(), |s| Some(s.observation.as_ptr())) }
}

/// Returns the step's reward (1 for a submit that resolves the task, 0 otherwise); NaN when
/// `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_reward(step: *const FrognanoStep) -> f64 {
    // SAFETY: same contract as this function.
    unsafe { read_handle(step, f64::NAN, |s| Some(s.reward)) }
}

/// Returns true when the agent ended the episode (submit); false when `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_terminated(step: *const FrognanoStep) -> bool {
    // SAFETY: same contract as this function.
    unsafe { read_handle(step, false, |s| Some(s.terminated)) }
}

/// Returns true when a budget cut the episode short (it was graded as it stood); false when
/// `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_truncated(step: *const FrognanoStep) -> bool {
    // SAFETY: same contract as this function.
    unsafe { read_handle(step, false, |s| Some(s.truncated)) }
}

/// Returns true when the observation reports a malformed action or a failed tool call; false
/// when `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_is_error(step: *const FrognanoStep) -> bool {
    // SAFETY: same contract as this function.
    unsafe { read_handle(step, false, |s| Some(s.is_error)) }
}

/// Returns the step's structured information (per-test results, grading, timings) as JSON
/// text (borrowed, valid until the step is freed); `NULL` when `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_info_json(step: *const FrognanoStep) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_handle(step, ptr::null(), |s| Some(s.info_json.as_ptr())) }
}

/// Frees a step. `NULL` is accepted and ignored. Strings borrowed from it become invalid; no
/// other thread may still be reading it.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed, that no other
/// thread is reading; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_free(step: *mut FrognanoStep) {
    // SAFETY: same contract as this function: `step` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(step) };
}

/// Serialises the record of the current or last episode (task, every step with its action,
/// observation and reward, the outcome and grading) as one JSON object: a training
/// trajectory.
///
/// On success writes an owned UTF-8 string to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`. On failure returns an owned error and leaves
/// `*out_json` untouched: `FROGNANO_ERROR_CODE_EPISODE` when the environment never had an
/// episode. Thread safety: one thread at a time per environment.
///
/// # Safety
///
/// `env` must be `NULL` or an environment returned by this library and not yet freed, not in
/// use by another thread; `out_json` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_env_record_json(
    env: *const FrognanoEnv,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live environment used by this thread only.
        let env = unsafe { env.live("env") }?;
        out_arg(out_json, "out_json")?;
        let record = env
            .inner
            .record()
            .ok_or_else(|| FrognanoError::from(EnvError::NoEpisode))?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(out_json, &record, "episode record") }
    })
}

/// Frees an environment and its workspace. `NULL` is accepted and ignored. No call on it may
/// be in progress, and the handle must not be used afterwards.
///
/// # Safety
///
/// `env` must be `NULL` or an environment returned by this library and not yet freed, with no
/// call on it in progress; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_env_free(env: *mut FrognanoEnv) {
    // SAFETY: same contract as this function: `env` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(env) };
}
