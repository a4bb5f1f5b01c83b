//! Task synthesis: synthesis options, `frognano_synthesize` and the mutation operators.

use std::ffi::c_char;
use std::sync::Arc;

use frognano_synth::{SynthConfig, Synthesizer};

use crate::env::FrognanoTaskSet;
use crate::error::{FrognanoError, FrognanoErrorCode};
use crate::ffi::{
    HandleArg, guard, optional_str_arg, out_arg, str_arg, to_json, write_handle, write_json,
    write_string,
};
use crate::sandbox::FrognanoSandbox;

/// Reads synthesis options: `NULL` gives the defaults; otherwise a JSON object of
/// `SynthConfig` fields, read strictly by the library (missing ones take their defaults;
/// unknown ones and type errors are `FROGNANO_ERROR_CODE_INVALID_OPTION` errors naming the
/// field), then validated.
fn synth_config(options_json: Option<&str>) -> Result<SynthConfig, FrognanoError> {
    let Some(text) = options_json else {
        return Ok(SynthConfig::default());
    };
    let config: SynthConfig = frognano_core::config::from_json_text_strict(
        text,
        "options_json",
        frognano_core::ErrorKind::InvalidArgument,
    )?;
    config.validate()?;
    Ok(config)
}

/// Makes up to `count` validated bug-fix tasks from the Python repository at `repo` (a
/// directory or a `.zip`/`.tar.gz` bundle, UTF-8 path) whose test suite passes.
///
/// The repository's clean suite runs first, twice, with line coverage (the intake; cached by
/// the repository's content, so later calls on the same contents skip it). Then mutation
/// operators inject bugs, and a bug becomes a task when a passing test fails with it, another
/// keeps passing and a second, grading-equivalent run agrees. The same options (seed
/// included) on the same repository give the same tasks. Fewer than `count` tasks come back
/// when the repository runs out of candidate bugs or `max_candidates` is reached. The task
/// records name the repository by its absolute path (a relative `repo` is resolved against the
/// current directory).
///
/// `options_json` is `NULL` (every default) or a JSON object of synthesis options, each
/// optional: `seed` (integer, default 0), `operators` (array of names from
/// `frognano_mutation_operators_json`; empty: all), `max_bugs` (tasks carry 1 to this many
/// bugs, 1 to 8, default 1), `scope` (`"function"`, `"file"` (default) or `"repo"`: where the
/// bugs of a multi-bug task lie), `hint_levels` (array of problem-statement hint levels 0 to 6,
/// drawn per task; default `[2]`), `workers` (parallel validations; 0, the default: the
/// sandbox's workers), `reproduce` (confirm each bug with a second run; default true),
/// `select_tests` (run only the tests that can observe a bug; default true),
/// `skip_unreached` (skip code no test executes; default true), `timeout_factor` (a
/// validation run may take this many times the clean suite's time; at least 1, default 3),
/// `max_candidates` (stop after this many candidate bugs; 0, the default: no limit).
///
/// On success writes an owned task set to `*tasks_out` (free it with
/// `frognano_task_set_free`; read the tasks with `frognano_task_set_get_json`, evaluate them
/// with `frognano_evaluate`) and, when `stats_json_out` is not `NULL`, an owned UTF-8 JSON
/// object to `*stats_json_out` (free it with `frognano_string_free`) holding `candidates`,
/// `duplicates`, `valid`, `validation_runs`, `by_operator` (per operator: `sites`,
/// `unreached`, `tried`, `valid`, `rejected`), `by_selection`, `tests_run`,
/// `selection_misses`, `elapsed_s`, `intake_s` and `tasks_per_minute`; returns `NULL`. On
/// failure returns an owned error and leaves both out-parameters untouched:
/// `FROGNANO_ERROR_CODE_INVALID_OPTION` for options that are not a JSON object, an unknown or
/// ill-typed option, an out-of-range value or an unknown operator;
/// `FROGNANO_ERROR_CODE_SYNTHESIS` when the repository's suite cannot validate bugs (the
/// message says why: no tests collected, no test passing reliably, a suite that times out);
/// `FROGNANO_ERROR_CODE_REPO` for a missing repository; the sandbox's codes otherwise.
///
/// The call blocks until the tasks are made (seconds for a small repository; the intake takes
/// about two runs of its suite). Thread safety: may be called from any thread, also on a
/// sandbox other threads use at the same time.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed; `repo`
/// must be `NULL` or a NUL-terminated string; `options_json` must be `NULL` or a
/// NUL-terminated string; `tasks_out` must be `NULL` or point to writable storage for a
/// pointer; `stats_json_out` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_synthesize(
    sandbox: *const FrognanoSandbox,
    repo: *const c_char,
    count: usize,
    options_json: *const c_char,
    tasks_out: *mut *mut FrognanoTaskSet,
    stats_json_out: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let sandbox = unsafe { sandbox.live("sandbox") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let repo = unsafe { str_arg(repo, "repo") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let options_json = unsafe { optional_str_arg(options_json, "options_json") }?;
        out_arg(tasks_out, "tasks_out")?;
        let config = synth_config(options_json)?;
        let repo = std::path::absolute(repo).map_err(|e| {
            FrognanoError::new(
                FrognanoErrorCode::Io,
                format!("resolve the repository path: {e}"),
            )
        })?;
        let mut synth = Synthesizer::new(Arc::clone(&sandbox.inner), &repo, config)?;
        let tasks = synth.generate(count, &|_| {})?;
        let stats_json = if stats_json_out.is_null() {
            None
        } else {
            let stats = synth.stats();
            let mut value = serde_json::to_value(stats).map_err(|e| {
                FrognanoError::new(
                    FrognanoErrorCode::Io,
                    format!("serialise the statistics as JSON: {e}"),
                )
            })?;
            if let Some(object) = value.as_object_mut() {
                object.insert("tasks_per_minute".into(), stats.tasks_per_minute().into());
            }
            Some(to_json(&value, "statistics")?)
        };
        // SAFETY: `tasks_out` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_handle(tasks_out, FrognanoTaskSet { tasks }) };
        if let Some(json) = stats_json {
            // SAFETY: `stats_json_out` is non-NULL here and the caller guarantees it is
            // writable.
            unsafe { write_string(stats_json_out, &json) };
        }
        Ok(())
    })
}

/// Lists the mutation operators `frognano_synthesize` can use, as a JSON array of objects
/// `{"name": ..., "description": ..., "family": ...}` (`family` is `"swe-smith"` for
/// SWE-smith's procedural operators, `"extra"` for the others), in a stable order.
///
/// On success writes an owned UTF-8 string to `*json_out` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error and leaves
/// `*json_out` untouched. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `json_out` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_mutation_operators_json(
    json_out: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        out_arg(json_out, "json_out")?;
        // SAFETY: `json_out` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_json(json_out, &frognano_synth::operators(), "mutation operators") }
    })
}
