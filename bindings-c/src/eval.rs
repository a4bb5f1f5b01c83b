//! Evaluation: rolling a policy out over a task set (`frognano_evaluate`).

use std::ffi::c_char;
use std::sync::Arc;

use frognano_env::{EnvConfig, EnvPool};

use crate::env::FrognanoTaskSet;
use crate::error::FrognanoError;
use crate::ffi::{HandleArg, guard, out_arg, str_arg, write_json};
use crate::sandbox::FrognanoSandbox;

/// Rolls out a policy over every task of a set, `workers` episodes in parallel, and
/// summarises the episodes.
///
/// `policy` is `"oracle"` (applies each task's gold patch), `"noop"` (submits at once),
/// `"random"` or `"random:SEED"` (random tool calls; seed 0 by default), `"repair"` or
/// `"repair:CHECKPOINT"` (the repair policy, untrained or restored from a trainer checkpoint;
/// greedy), or `"onnx:MODEL"`: a local chat model (a model folder or registry name, as
/// `frognano_model_load` takes) replying greedily with one command per turn, the episodes of a
/// step generated as one batch, or `"openai:URL@MODEL"`: a model behind an OpenAI-compatible
/// server (vLLM, Ollama, llama.cpp's server, `frognano serve`; e.g.
/// `"openai:http://127.0.0.1:11434/v1@qwen2.5-coder:7b"`), asked with many episodes in flight,
/// the API key read from `OPENAI_API_KEY` when set. The same names as `frognano eval --policy`
/// and Python's `evaluate`.
/// `workers` is the number of parallel environments (0 = the sandbox's worker count, by
/// default the number of CPUs; never more than the tasks).
///
/// On success writes an owned UTF-8 JSON object to `*out_summary_json` (free it with
/// `frognano_string_free`) and returns `NULL`. The object is the evaluation report that
/// `frognano eval --json` prints and Python's `evaluate` returns: `episodes`, `resolved`,
/// `resolved_rate`, `met_failure`, `recovered`, `recovery_rate`, `mean_steps`,
/// `tool_errors`, `test_runs`, `truncated`, `steps_per_s` (environment steps per second of
/// wall-clock time), `wall_s`, `mean_reset_ms`, `workers` (environments stepped in parallel)
/// and `failed_tasks`, a list of `{"task_id", "error"}` objects for tasks that could not be
/// reset (e.g. a missing repository; they are skipped, not counted as episodes). On failure
/// returns an owned error and leaves `*out_summary_json` untouched
/// (`FROGNANO_ERROR_CODE_INVALID_OPTION` for an unknown policy or an empty task set,
/// `FROGNANO_ERROR_CODE_INFERENCE` for an `onnx:` model that cannot be loaded or an `openai:`
/// server that cannot be reached or does not serve the model; an episode whose request fails
/// later is counted in `failed_episodes`, with the first reason in `first_policy_error`).
/// Thread safety:
/// may be called from any thread, also on a sandbox and a task set other threads use at the
/// same time.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed; `tasks`
/// must be `NULL` or a task set returned by this library and not yet freed; `policy` must be
/// `NULL` or a NUL-terminated string; `out_summary_json` must be `NULL` or point to writable
/// storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_evaluate(
    sandbox: *const FrognanoSandbox,
    tasks: *const FrognanoTaskSet,
    policy: *const c_char,
    workers: usize,
    out_summary_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let sandbox = unsafe { sandbox.live("sandbox") }?;
        // SAFETY: the caller passes NULL or a live task-set handle.
        let tasks = unsafe { tasks.live("tasks") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let policy = unsafe { str_arg(policy, "policy") }?;
        out_arg(out_summary_json, "out_summary_json")?;
        let tasks = &tasks.tasks;
        let mut policy = frognano_policy::policy_from_spec(policy, tasks, &|_| {})?;
        let mut pool = EnvPool::for_tasks(
            Arc::clone(&sandbox.inner),
            tasks.len(),
            workers,
            EnvConfig::default(),
        )?;
        let (report, _records) =
            frognano_env::evaluate(&mut pool, policy.as_mut(), tasks, |_| {}, |_| {})?;
        // SAFETY: `out_summary_json` is non-NULL (checked above) and the caller guarantees it
        // is writable.
        unsafe { write_json(out_summary_json, &report, "summary") }
    })
}
