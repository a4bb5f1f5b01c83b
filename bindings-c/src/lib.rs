//! C ABI for FrogNano: run a Python repository's pytest suite inside a WebAssembly sandbox
//! from C (or any language with a C FFI) and read the per-test report.
//!
//! The library is built as `libfrognano.so` / `libfrognano.a`; its header,
//! `include/frognano.h`, is generated from this file by cbindgen (see `tests/header.rs`).
//!
//! # Conventions
//!
//! - **Handles.** `FrognanoSandbox`, `FrognanoReport`, `FrognanoTaskSet`, `FrognanoEnv`,
//!   `FrognanoStep`, `FrognanoTrainer`, `FrognanoModel` and `FrognanoError` are opaque. Each is
//!   created by this library and released with its own `_free` function
//!   (`frognano_sandbox_free`, `frognano_report_free`, `frognano_task_set_free`,
//!   `frognano_env_free`, `frognano_step_free`, `frognano_trainer_free`, `frognano_model_free`,
//!   `frognano_error_free`); every `_free` accepts `NULL`. Strings returned as `char *` are
//!   owned by the caller and released with `frognano_string_free`; strings returned as
//!   `const char *` are borrowed from the handle they were read from and stay valid until that
//!   handle is freed.
//! - **Errors.** Every fallible function returns `FrognanoError *`: `NULL` on success, else an
//!   error object the caller must free. Results are written through out-parameters only on
//!   success; on failure the out-parameters are left untouched.
//! - **Robustness.** `NULL` where a value is required and strings that are not valid UTF-8 give
//!   an error object (`FROGNANO_ERROR_CODE_NULL_POINTER`, `FROGNANO_ERROR_CODE_INVALID_UTF8`),
//!   never a crash. A Rust panic never unwinds into C: it becomes an error object with
//!   `FROGNANO_ERROR_CODE_PANIC` (or, for functions that cannot return an error, the documented
//!   fallback value).
//! - **Threads.** A `FrognanoSandbox` may be used from several threads at once. Reports and
//!   errors are immutable once returned: reading one from several threads at once is safe,
//!   freeing it while another thread still reads it is not. Task sets and steps are immutable
//!   likewise. A `FrognanoEnv`, a `FrognanoTrainer` and a `FrognanoModel` are used by one
//!   thread at a time.
//! - **Agent environment.** Tasks, step information and episode records are exchanged as JSON
//!   text (`frognano_task_set_get_json`, `frognano_step_info_json`,
//!   `frognano_env_record_json`, `frognano_evaluate`).
//! - **Task synthesis.** `frognano_synthesize` makes a `FrognanoTaskSet` of validated bug-fix
//!   tasks from a repository whose test suite passes; its options and statistics are JSON
//!   text, and `frognano_mutation_operators_json` lists the mutation operators.
//! - **Training.** `frognano_group_advantages` and `frognano_learnability` are the trainer's
//!   building blocks for C trainers of their own. A `FrognanoTrainer` (`frognano_trainer_new`,
//!   freed with `frognano_trainer_free`) trains the bundled repair policy with group advantages
//!   on synthesized tasks, one `frognano_trainer_iterate` at a time, with held-out evaluation
//!   and checkpoints; `frognano_train` runs a whole job. Configurations, metrics, summaries,
//!   policy states and reports are JSON text.
//! - **Local language models.** A `FrognanoModel` (`frognano_model_load`, freed with
//!   `frognano_model_free`) is a decoder model on ONNX Runtime with its tokenizer and chat
//!   template; `frognano_model_generate` takes a JSON request (prompts as text, token ids or
//!   conversations, and the sampling options) and returns the generations (token ids,
//!   per-token log-probabilities, text) as JSON. `frognano_evaluate` also takes a local model
//!   as its policy (`"onnx:MODEL"`).
//!
//! What the guest does (failing tests, timeouts, memory or output floods, interpreter crashes)
//! is never an error: it is the report's `FrognanoRunOutcome`.

use std::any::Any;
use std::ffi::{CStr, CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use frognano_core::{Action, Limits, RunOutcome, Task, TestOutcome, TestReport, Trainer};
use frognano_env::{EnvConfig, EnvError, EnvPool, EvalSummary, RepoEnv, taskset};
use frognano_policy::llm::{
    ChatMessage, DecoderModel, GenerationOptions, InferenceError, ModelOptions, OnnxPolicy,
    OnnxPolicyConfig, TextCodec, assets, generate,
};
use frognano_policy::{RepairConfig, RepairPolicy};
use frognano_sandbox::{ImageKind, Sandbox, SandboxError, SandboxOptions, TestRequest};
use frognano_synth::{MutateError, SynthConfig, SynthError, Synthesizer};
use frognano_train::{
    Estimator, GrpoTrainer, Quiet, TrainConfig, TrainError, greedy_policy, group_advantages,
    learnability, make_curriculum, prepare_pools,
};

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// What kind of error a `FrognanoError` is.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrognanoErrorCode {
    /// Not an error: what `frognano_error_code` returns for a `NULL` error.
    Ok = 0,
    /// A runtime asset (CPython image, pytest wheels) is missing, could not be fetched or
    /// failed verification.
    Asset = 1,
    /// The repository directory is missing or unusable.
    Repo = 2,
    /// The repository's `frognano.toml` or metadata is malformed.
    Config = 3,
    /// An option or limit is invalid (unknown image name, timeout of 0, ...).
    InvalidOption = 4,
    /// A test requirement of the repository could not be provided as a pure-Python wheel.
    Requirements = 5,
    /// The WebAssembly runtime failed to compile, instantiate or snapshot the interpreter.
    Runtime = 6,
    /// The run was cancelled.
    Cancelled = 7,
    /// A host I/O operation failed.
    Io = 8,
    /// A required pointer argument was `NULL`.
    NullPointer = 9,
    /// A string argument was not valid UTF-8.
    InvalidUtf8 = 10,
    /// The library panicked (a bug in FrogNano); the message carries the panic's text.
    Panic = 11,
    /// A task record or task is malformed, or its bug patch does not apply to the repository.
    Task = 12,
    /// An environment was stepped (or its record read) without a running or finished episode.
    Episode = 13,
    /// Task synthesis cannot use the repository: its clean test suite cannot validate bugs (no
    /// tests, none passing reliably, a suite that times out or crashes), or a mutation could
    /// not be applied.
    Synthesis = 14,
    /// Training failed: no task could be proposed or rolled out (every family ran dry, an
    /// empty task set, no held-out task to evaluate on), a checkpoint cannot be written or read
    /// back, or a rollout or the learner failed during an iteration (the message says which).
    Training = 15,
    /// A local language model could not be loaded or run: the ONNX Runtime library was not
    /// found or not loadable, a model folder is missing a file or unusable (an unknown registry
    /// name included), the tokenizer or chat template failed, the model could not be fetched
    /// or converted, or ONNX Runtime failed while running. (Invalid generation options and
    /// prompts are `FROGNANO_ERROR_CODE_INVALID_OPTION`.)
    Inference = 16,
}

/// An error: a code and a human-readable message.
///
/// Returned by every fallible function (`NULL` means success). Owned by the caller, who frees
/// it with `frognano_error_free`. Immutable: it may be read from any thread.
#[derive(Debug)]
pub struct FrognanoError {
    code: FrognanoErrorCode,
    message: CString,
}

impl FrognanoError {
    fn new(code: FrognanoErrorCode, message: impl AsRef<str>) -> Self {
        FrognanoError {
            code,
            message: c_string(message.as_ref()),
        }
    }

    fn null(what: &str) -> Self {
        FrognanoError::new(
            FrognanoErrorCode::NullPointer,
            format!("{what} must not be NULL"),
        )
    }

    fn from_panic(payload: &(dyn Any + Send)) -> Self {
        let detail = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("unknown panic payload");
        FrognanoError::new(
            FrognanoErrorCode::Panic,
            format!("internal error (panic): {detail}"),
        )
    }

    fn into_raw(self) -> *mut FrognanoError {
        Box::into_raw(Box::new(self))
    }
}

impl From<SandboxError> for FrognanoError {
    fn from(err: SandboxError) -> Self {
        let code = match &err {
            SandboxError::Asset { .. } => FrognanoErrorCode::Asset,
            SandboxError::Repo { .. } => FrognanoErrorCode::Repo,
            SandboxError::Config { .. } => FrognanoErrorCode::Config,
            SandboxError::InvalidOption(_) => FrognanoErrorCode::InvalidOption,
            SandboxError::Requirements { .. } => FrognanoErrorCode::Requirements,
            SandboxError::Runtime(_) => FrognanoErrorCode::Runtime,
            SandboxError::Cancelled => FrognanoErrorCode::Cancelled,
            SandboxError::Io { .. } => FrognanoErrorCode::Io,
        };
        FrognanoError::new(code, err.to_string())
    }
}

impl From<SynthError> for FrognanoError {
    fn from(err: SynthError) -> Self {
        let code = match err {
            SynthError::Env(inner) => return FrognanoError::from(inner),
            SynthError::Sandbox(inner) => return FrognanoError::from(inner),
            SynthError::InvalidOption(_) | SynthError::Mutate(MutateError::UnknownOperator(_)) => {
                FrognanoErrorCode::InvalidOption
            }
            SynthError::Intake { .. } | SynthError::Mutate(_) => FrognanoErrorCode::Synthesis,
            SynthError::Cancelled => FrognanoErrorCode::Cancelled,
        };
        FrognanoError::new(code, err.to_string())
    }
}

impl From<EnvError> for FrognanoError {
    fn from(err: EnvError) -> Self {
        let code = match err {
            EnvError::Sandbox(inner) => return FrognanoError::from(inner),
            EnvError::TaskRecord { .. } | EnvError::Task { .. } | EnvError::Patch(_) => {
                FrognanoErrorCode::Task
            }
            EnvError::Repo { .. } => FrognanoErrorCode::Repo,
            EnvError::InvalidOption(_) => FrognanoErrorCode::InvalidOption,
            EnvError::NoEpisode => FrognanoErrorCode::Episode,
            EnvError::Io { .. } => FrognanoErrorCode::Io,
            EnvError::Core(ref failed) if is_onnx_policy_failure(failed) => {
                FrognanoErrorCode::Inference
            }
            EnvError::Core(_) => FrognanoErrorCode::Runtime,
        };
        FrognanoError::new(code, err.to_string())
    }
}

/// Returns the code of an error, or `FROGNANO_ERROR_CODE_OK` when `error` is `NULL`.
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `error` must be `NULL` or an error returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_error_code(error: *const FrognanoError) -> FrognanoErrorCode {
    guard_value(FrognanoErrorCode::Panic, || {
        // SAFETY: the caller passes NULL or an error returned by this library and not yet freed.
        match unsafe { error.as_ref() } {
            Some(error) => error.code,
            None => FrognanoErrorCode::Ok,
        }
    })
}

/// Returns the message of an error (UTF-8, never `NULL`; `"no error"` when `error` is `NULL`).
///
/// The string is borrowed from `error` and stays valid until `frognano_error_free(error)`;
/// do not free it. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `error` must be `NULL` or an error returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_error_message(error: *const FrognanoError) -> *const c_char {
    const NO_ERROR: &CStr = c"no error";
    const PANIC: &CStr = c"internal error (panic) while reading an error message";
    guard_value(PANIC.as_ptr(), || {
        // SAFETY: the caller passes NULL or an error returned by this library and not yet freed.
        match unsafe { error.as_ref() } {
            Some(error) => error.message.as_ptr(),
            None => NO_ERROR.as_ptr(),
        }
    })
}

/// Frees an error returned by this library. `NULL` is accepted and ignored.
///
/// Strings borrowed from the error become invalid. Each error must be freed exactly once.
///
/// # Safety
///
/// `error` must be `NULL` or an error returned by this library and not yet freed; it must not
/// be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_error_free(error: *mut FrognanoError) {
    guard_value((), || {
        if !error.is_null() {
            // SAFETY: a non-NULL `error` was created by `Box::into_raw` in this library and the
            // caller hands back its ownership exactly once.
            drop(unsafe { Box::from_raw(error) });
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Strings and general helpers
// ---------------------------------------------------------------------------------------------

/// Frees a string returned as `char *` by this library (e.g. by `frognano_report_to_json`).
/// `NULL` is accepted and ignored. Never pass a string from any other allocator.
///
/// # Safety
///
/// `string` must be `NULL` or a string returned as `char *` by this library and not yet freed;
/// it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_string_free(string: *mut c_char) {
    guard_value((), || {
        if !string.is_null() {
            // SAFETY: a non-NULL `string` was created by `CString::into_raw` in this library
            // and the caller hands back its ownership exactly once.
            drop(unsafe { CString::from_raw(string) });
        }
    });
}

/// Returns the library's version (e.g. `"0.1.0"`): a static string, never freed.
#[unsafe(no_mangle)]
pub extern "C" fn frognano_version() -> *const c_char {
    const VERSION: &CStr =
        match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
            Ok(version) => version,
            Err(_) => c"unknown",
        };
    VERSION.as_ptr()
}

/// Makes a C string from Rust text; NUL bytes (which would end it early) become U+FFFD.
fn c_string(text: &str) -> CString {
    let text = if text.contains('\0') {
        text.replace('\0', "\u{FFFD}")
    } else {
        text.to_owned()
    };
    CString::new(text).unwrap_or_default()
}

/// Runs the body of a fallible exported function: `Ok` becomes `NULL`, `Err` and panics become
/// an owned error object.
fn guard(body: impl FnOnce() -> Result<(), FrognanoError>) -> *mut FrognanoError {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(error)) => error.into_raw(),
        Err(payload) => FrognanoError::from_panic(payload.as_ref()).into_raw(),
    }
}

/// Runs the body of an infallible exported function; a panic gives `fallback`.
fn guard_value<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// Reads a required C string argument.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unmodified for `'a`.
unsafe fn str_arg<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, FrognanoError> {
    if ptr.is_null() {
        return Err(FrognanoError::null(what));
    }
    // SAFETY: non-NULL, and the caller guarantees a valid NUL-terminated string.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|e| {
        FrognanoError::new(
            FrognanoErrorCode::InvalidUtf8,
            format!("{what} is not valid UTF-8: {e}"),
        )
    })
}

/// Checks that an out-parameter is not NULL.
fn out_arg<T>(out: *mut T, what: &str) -> Result<(), FrognanoError> {
    if out.is_null() {
        Err(FrognanoError::null(what))
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/// Resource limits of one sandboxed run. A plain value: copy it, change fields, pass a pointer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrognanoLimits {
    /// Wall-clock seconds per run (positive and finite).
    pub timeout_s: f64,
    /// Linear-memory cap of the guest, in MiB (1 to 4096).
    pub memory_mb: u64,
    /// Cap on captured stdout plus stderr, in bytes (positive).
    pub output_bytes: usize,
}

impl From<Limits> for FrognanoLimits {
    fn from(limits: Limits) -> Self {
        FrognanoLimits {
            timeout_s: limits.timeout_s,
            memory_mb: limits.memory_mb,
            output_bytes: limits.output_bytes,
        }
    }
}

impl From<FrognanoLimits> for Limits {
    fn from(limits: FrognanoLimits) -> Self {
        Limits {
            timeout_s: limits.timeout_s,
            memory_mb: limits.memory_mb,
            output_bytes: limits.output_bytes,
        }
    }
}

fn validate_limits(limits: Limits) -> Result<Limits, FrognanoError> {
    limits
        .validate()
        .map_err(|e| FrognanoError::from(SandboxError::InvalidOption(e.to_string())))?;
    Ok(limits)
}

/// Returns the default limits (120 s, 1024 MiB, 4 MiB of output).
///
/// Thread safety: may be called from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn frognano_limits_default() -> FrognanoLimits {
    FrognanoLimits::from(Limits::default())
}

/// Checks limits without running anything: `NULL` when they are valid, else an error with
/// `FROGNANO_ERROR_CODE_INVALID_OPTION` saying which field is wrong
/// (`FROGNANO_ERROR_CODE_NULL_POINTER` when `limits` is `NULL`).
///
/// Thread safety: may be called from any thread.
///
/// # Safety
///
/// `limits` must be `NULL` or point to a readable `FrognanoLimits`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_limits_validate(
    limits: *const FrognanoLimits,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a pointer to a readable `FrognanoLimits`.
        let limits = unsafe { limits.as_ref() }.ok_or_else(|| FrognanoError::null("limits"))?;
        validate_limits(Limits::from(*limits)).map(drop)
    })
}

// ---------------------------------------------------------------------------------------------
// Sandbox
// ---------------------------------------------------------------------------------------------

/// A ready-to-run sandbox: the compiled (and snapshotted) CPython-for-WASI runtime.
///
/// Created by `frognano_sandbox_new` or `frognano_sandbox_new_with_progress`, freed with
/// `frognano_sandbox_free`. Creating one is the expensive step (about 0.1 s once the runtime
/// is cached, minutes the very first time on a machine); create it once and reuse it.
/// Thread safety: any number of threads may call `frognano_sandbox_run_tests` on the same
/// sandbox at once; it must not be freed while a call on it is in progress.
#[derive(Debug)]
pub struct FrognanoSandbox {
    /// Shared with the environments created from this sandbox (`frognano_env_new`).
    inner: Arc<Sandbox>,
}

/// Receives a progress message during sandbox creation (fetching, verifying, compiling).
///
/// `message` is a UTF-8 string valid only during the call. `user_data` is the pointer given to
/// `frognano_sandbox_new_with_progress`. The callback may be called from a thread other than
/// the creating one, possibly concurrently, and only before the creating call returns. It must
/// not unwind (C++ exceptions, `longjmp`) out of the call.
pub type FrognanoProgressCallback =
    Option<unsafe extern "C" fn(message: *const c_char, user_data: *mut c_void)>;

/// A C progress callback with its user data.
struct ProgressSink {
    callback: unsafe extern "C" fn(*const c_char, *mut c_void),
    user_data: *mut c_void,
}

// SAFETY: the documented contract of `FrognanoProgressCallback` requires the callback (and
// what it does with `user_data`) to be callable from any thread, possibly concurrently.
unsafe impl Sync for ProgressSink {}

impl ProgressSink {
    fn report(&self, message: &str) {
        let message = c_string(message);
        // SAFETY: the callback was supplied by the caller for exactly this use; `message` is a
        // valid NUL-terminated string for the duration of the call.
        unsafe { (self.callback)(message.as_ptr(), self.user_data) }
    }
}

/// Creates a sandbox for the named image (`"python-3.15"`, the default, or `"python-3.12"`;
/// `NULL` selects the default), preparing the runtime if needed. Progress is not reported; see
/// `frognano_sandbox_new_with_progress`.
///
/// On success writes an owned handle to `*out` (free it with `frognano_sandbox_free`) and
/// returns `NULL`. On failure returns an owned error and leaves `*out` untouched: e.g.
/// `FROGNANO_ERROR_CODE_INVALID_OPTION` for an unknown image, `FROGNANO_ERROR_CODE_ASSET` when
/// the runtime cannot be fetched. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `image` must be `NULL` or a NUL-terminated string; `out` must be `NULL` or point to writable
/// storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_sandbox_new(
    image: *const c_char,
    out: *mut *mut FrognanoSandbox,
) -> *mut FrognanoError {
    // SAFETY: the arguments are forwarded unchanged under the same contract.
    unsafe { frognano_sandbox_new_with_progress(image, None, ptr::null_mut(), out) }
}

/// Like `frognano_sandbox_new`, and calls `progress(message, user_data)` for each setup step
/// (`progress` may be `NULL`). Setup steps only happen the first time on a machine; once the
/// runtime is cached the callback is usually not called at all.
///
/// # Safety
///
/// As for `frognano_sandbox_new`; in addition `progress` must be `NULL` or a function that may
/// be called with `user_data` as `FrognanoProgressCallback` describes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_sandbox_new_with_progress(
    image: *const c_char,
    progress: FrognanoProgressCallback,
    user_data: *mut c_void,
    out: *mut *mut FrognanoSandbox,
) -> *mut FrognanoError {
    guard(|| {
        out_arg(out, "out")?;
        let image = if image.is_null() {
            ImageKind::default()
        } else {
            // SAFETY: non-NULL; the caller passes a valid NUL-terminated string.
            ImageKind::parse(unsafe { str_arg(image, "image") }?)?
        };
        let options = SandboxOptions {
            image,
            ..SandboxOptions::default()
        };
        let sink = progress.map(|callback| ProgressSink {
            callback,
            user_data,
        });
        let inner = Sandbox::new(options, &|message: &str| {
            if let Some(sink) = &sink {
                sink.report(message);
            }
        })?;
        let handle = Box::into_raw(Box::new(FrognanoSandbox {
            inner: Arc::new(inner),
        }));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
        Ok(())
    })
}

/// Frees a sandbox. `NULL` is accepted and ignored. No call on the sandbox may be in
/// progress, and the handle must not be used afterwards. Reports obtained from it stay valid,
/// and so do environments created from it (they share and keep alive its runtime).
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed, with no
/// call on it in progress; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_sandbox_free(sandbox: *mut FrognanoSandbox) {
    guard_value((), || {
        if !sandbox.is_null() {
            // SAFETY: a non-NULL `sandbox` was created by `Box::into_raw` in this library and
            // the caller hands back its ownership exactly once, with no call in progress.
            drop(unsafe { Box::from_raw(sandbox) });
        }
    });
}

/// Returns the name of the sandbox's image (e.g. `"python-3.15"`): a static string, never
/// freed; `NULL` when `sandbox` is `NULL`. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_sandbox_image(sandbox: *const FrognanoSandbox) -> *const c_char {
    guard_value(ptr::null(), || {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let Some(sandbox) = (unsafe { sandbox.as_ref() }) else {
            return ptr::null();
        };
        match sandbox.inner.image() {
            ImageKind::Python315 => c"python-3.15".as_ptr(),
            ImageKind::Python312 => c"python-3.12".as_ptr(),
        }
    })
}

/// Runs the pytest suite of the repository at `repo_dir` (a UTF-8 path) on a fresh copy of it;
/// the directory itself is not modified.
///
/// - `limits`: the run's limits, or `NULL` to take the repository's `frognano.toml` values and
///   the defaults otherwise. Invalid limits give `FROGNANO_ERROR_CODE_INVALID_OPTION`.
/// - `pytest_args`, `n_pytest_args`: extra pytest arguments (node ids, `-k EXPR`, ...), UTF-8
///   strings, appended after the repository's own. `pytest_args` may be `NULL` when
///   `n_pytest_args` is 0. The strings are only read during the call.
///
/// On success writes an owned report to `*out` (free it with `frognano_report_free`) and
/// returns `NULL`. Failing tests, timeouts and memory or output floods are a successful call:
/// read them from the report's outcome. On failure returns an owned error
/// (`FROGNANO_ERROR_CODE_REPO` for a missing directory, `FROGNANO_ERROR_CODE_CONFIG`,
/// `FROGNANO_ERROR_CODE_REQUIREMENTS`, ...) and leaves `*out` untouched.
///
/// Thread safety: several threads may run tests on the same sandbox at once; each call blocks
/// its own thread until the run ends.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed; `repo_dir`
/// must be `NULL` or a NUL-terminated string; `limits` must be `NULL` or point to a readable
/// `FrognanoLimits`; when `n_pytest_args` is not 0, `pytest_args` must be `NULL` or point to
/// `n_pytest_args` readable pointers, each `NULL` or a NUL-terminated string; `out` must be
/// `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_sandbox_run_tests(
    sandbox: *const FrognanoSandbox,
    repo_dir: *const c_char,
    limits: *const FrognanoLimits,
    pytest_args: *const *const c_char,
    n_pytest_args: usize,
    out: *mut *mut FrognanoReport,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live sandbox handle.
        let sandbox = unsafe { sandbox.as_ref() }.ok_or_else(|| FrognanoError::null("sandbox"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let repo_dir = unsafe { str_arg(repo_dir, "repo_dir") }?;
        out_arg(out, "out")?;
        // SAFETY: the caller passes NULL or a pointer to a readable `FrognanoLimits`.
        let limits = match unsafe { limits.as_ref() } {
            Some(limits) => Some(validate_limits(Limits::from(*limits))?),
            None => None,
        };
        let args: &[*const c_char] = if n_pytest_args == 0 {
            &[]
        } else if pytest_args.is_null() {
            return Err(FrognanoError::null("pytest_args"));
        } else {
            // SAFETY: non-NULL, and the caller guarantees `n_pytest_args` readable pointers.
            unsafe { std::slice::from_raw_parts(pytest_args, n_pytest_args) }
        };
        let pytest_args = args
            .iter()
            .enumerate()
            .map(|(i, &arg)| {
                // SAFETY: each element is NULL or a valid NUL-terminated string.
                unsafe { str_arg(arg, &format!("pytest_args[{i}]")) }.map(str::to_owned)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let request = TestRequest {
            pytest_args,
            limits,
            cancel: None,
            ..TestRequest::default()
        };
        let report = sandbox.inner.run_tests(Path::new(repo_dir), &request)?;
        let handle = Box::into_raw(Box::new(FrognanoReport::new(report)));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------------------------

/// How a whole sandboxed run ended.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrognanoRunOutcome {
    /// Every selected test passed (or was skipped, xfailed or xpassed).
    Passed = 0,
    /// At least one test failed or errored.
    Failed = 1,
    /// The wall-clock limit ended the run.
    Timeout = 2,
    /// The guest asked for more memory than its cap.
    MemoryExceeded = 3,
    /// The guest wrote more output than its cap.
    OutputExceeded = 4,
    /// The guest trapped (e.g. stack exhaustion in C code) or the test runner itself failed.
    Crashed = 5,
    /// No test was collected.
    NoTests = 6,
}

impl From<RunOutcome> for FrognanoRunOutcome {
    fn from(outcome: RunOutcome) -> Self {
        match outcome {
            RunOutcome::Passed => FrognanoRunOutcome::Passed,
            RunOutcome::Failed => FrognanoRunOutcome::Failed,
            RunOutcome::Timeout => FrognanoRunOutcome::Timeout,
            RunOutcome::MemoryExceeded => FrognanoRunOutcome::MemoryExceeded,
            RunOutcome::OutputExceeded => FrognanoRunOutcome::OutputExceeded,
            RunOutcome::Crashed => FrognanoRunOutcome::Crashed,
            RunOutcome::NoTests => FrognanoRunOutcome::NoTests,
        }
    }
}

/// The outcome of one test, as pytest reports it.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrognanoTestOutcome {
    /// The test ran and passed.
    Passed = 0,
    /// An assertion or exception failed the test.
    Failed = 1,
    /// Setup or teardown failed, or the test could not be collected.
    Error = 2,
    /// The test was skipped.
    Skipped = 3,
    /// The test failed and was expected to (`xfail`).
    Xfailed = 4,
    /// The test passed but was expected to fail (non-strict `xfail`).
    Xpassed = 5,
}

impl From<TestOutcome> for FrognanoTestOutcome {
    fn from(outcome: TestOutcome) -> Self {
        match outcome {
            TestOutcome::Passed => FrognanoTestOutcome::Passed,
            TestOutcome::Failed => FrognanoTestOutcome::Failed,
            TestOutcome::Error => FrognanoTestOutcome::Error,
            TestOutcome::Skipped => FrognanoTestOutcome::Skipped,
            TestOutcome::Xfailed => FrognanoTestOutcome::Xfailed,
            TestOutcome::Xpassed => FrognanoTestOutcome::Xpassed,
        }
    }
}

/// The structured result of one test run: outcome, counts, per-test records, captured output.
///
/// Returned by `frognano_sandbox_run_tests`, freed with `frognano_report_free`. Immutable:
/// any number of threads may read it at once. Strings read from it are borrowed and stay valid
/// until it is freed. Text from the guest is UTF-8; a NUL byte in it reads as U+FFFD in the
/// borrowed strings (the JSON form keeps it as `\u0000`).
#[derive(Debug)]
pub struct FrognanoReport {
    report: TestReport,
    ids: Vec<CString>,
    messages: Vec<Option<CString>>,
    detail: Option<CString>,
    stdout: CString,
    stderr: CString,
}

impl FrognanoReport {
    fn new(report: TestReport) -> Self {
        FrognanoReport {
            ids: report.tests.iter().map(|t| c_string(&t.id)).collect(),
            messages: report
                .tests
                .iter()
                .map(|t| t.message.as_deref().map(c_string))
                .collect(),
            detail: report.detail.as_deref().map(c_string),
            stdout: c_string(&report.stdout),
            stderr: c_string(&report.stderr),
            report,
        }
    }
}

/// Reads a report argument of an accessor and applies `read`, or gives `fallback` when the
/// report is NULL or the accessor panics.
///
/// # Safety
/// `report` is NULL or a live report handle.
unsafe fn read_report<T>(
    report: *const FrognanoReport,
    fallback: T,
    read: impl FnOnce(&FrognanoReport) -> Option<T>,
) -> T {
    // SAFETY: the caller guarantees `report` is NULL or a live report handle.
    let report = unsafe { report.as_ref() };
    match catch_unwind(AssertUnwindSafe(|| report.and_then(read))) {
        Ok(Some(value)) => value,
        Ok(None) | Err(_) => fallback,
    }
}

/// Returns how the run ended. A `NULL` report reads as `FROGNANO_RUN_OUTCOME_CRASHED`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_outcome(
    report: *const FrognanoReport,
) -> FrognanoRunOutcome {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, FrognanoRunOutcome::Crashed, |r| {
            Some(r.report.outcome.into())
        })
    }
}

/// Returns the run outcome's name as in the JSON form (`"passed"`, `"failed"`, `"timeout"`,
/// `"memory_exceeded"`, `"output_exceeded"`, `"crashed"`, `"no_tests"`): a static string,
/// never freed; `NULL` when `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_outcome_name(
    report: *const FrognanoReport,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, ptr::null(), |r| {
            Some(run_outcome_name(r.report.outcome).as_ptr())
        })
    }
}

fn run_outcome_name(outcome: RunOutcome) -> &'static CStr {
    match outcome {
        RunOutcome::Passed => c"passed",
        RunOutcome::Failed => c"failed",
        RunOutcome::Timeout => c"timeout",
        RunOutcome::MemoryExceeded => c"memory_exceeded",
        RunOutcome::OutputExceeded => c"output_exceeded",
        RunOutcome::Crashed => c"crashed",
        RunOutcome::NoTests => c"no_tests",
    }
}

fn test_outcome_name(outcome: TestOutcome) -> &'static CStr {
    match outcome {
        TestOutcome::Passed => c"passed",
        TestOutcome::Failed => c"failed",
        TestOutcome::Error => c"error",
        TestOutcome::Skipped => c"skipped",
        TestOutcome::Xfailed => c"xfailed",
        TestOutcome::Xpassed => c"xpassed",
    }
}

/// Returns the number of passed tests (xpassed not included); 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_passed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.passed)) }
}

/// Returns the number of failed tests; 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_failed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.failed)) }
}

/// Returns the number of tests with setup, teardown or collection errors; 0 for a `NULL`
/// report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_errors(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.errors)) }
}

/// Returns the number of skipped tests; 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_skipped(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.skipped)) }
}

/// Returns the number of expected failures (`xfail`); 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_xfailed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.xfailed)) }
}

/// Returns the number of unexpected passes (`xpass`); 0 for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_xpassed(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.xpassed)) }
}

/// Returns the wall-clock seconds of the run; NaN for a `NULL` report.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_duration_s(report: *const FrognanoReport) -> f64 {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, f64::NAN, |r| Some(r.report.duration_s)) }
}

/// Writes pytest's exit code to `*out` and returns true when the guest finished normally;
/// returns false (leaving `*out` untouched) when a limit or crash ended the run, or when
/// `report` or `out` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed. `out` must
/// be `NULL` or point to a writable `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_exit_code(
    report: *const FrognanoReport,
    out: *mut i32,
) -> bool {
    // SAFETY: same contract as this function.
    let code = unsafe { read_report(report, None, |r| Some(r.report.exit_code)) };
    match code {
        Some(code) if !out.is_null() => {
            // SAFETY: non-NULL, and the caller guarantees `out` is writable.
            unsafe { out.write(code) };
            true
        }
        _ => false,
    }
}

/// Returns why a limit or crash ended the run (borrowed, valid until the report is freed), or
/// `NULL` when there is no such explanation or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_detail(report: *const FrognanoReport) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, ptr::null(), |r| {
            r.detail.as_ref().map(|d| d.as_ptr())
        })
    }
}

/// Returns the guest's captured standard output (borrowed, valid until the report is freed;
/// capped by the run's output limit); `NULL` when `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_stdout(report: *const FrognanoReport) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, ptr::null(), |r| Some(r.stdout.as_ptr())) }
}

/// Returns the guest's captured standard error (borrowed, valid until the report is freed;
/// capped by the run's output limit); `NULL` when `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_stderr(report: *const FrognanoReport) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, ptr::null(), |r| Some(r.stderr.as_ptr())) }
}

/// Returns the number of per-test records (in the order the tests finished); 0 for a `NULL`
/// report. Valid indices for the `frognano_report_test_*` functions are `0` to this minus 1.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_count(report: *const FrognanoReport) -> usize {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, 0, |r| Some(r.report.tests.len())) }
}

/// Returns the pytest node id of test `index` (e.g. `tests/test_x.py::test_y[1]`), borrowed
/// and valid until the report is freed; `NULL` when `index` is out of range or `report` is
/// `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_id(
    report: *const FrognanoReport,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe { read_report(report, ptr::null(), |r| Some(r.ids.get(index)?.as_ptr())) }
}

/// Returns the outcome of test `index`; `FROGNANO_TEST_OUTCOME_ERROR` when `index` is out of
/// range or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_outcome(
    report: *const FrognanoReport,
    index: usize,
) -> FrognanoTestOutcome {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, FrognanoTestOutcome::Error, |r| {
            Some(r.report.tests.get(index)?.outcome.into())
        })
    }
}

/// Returns the outcome name of test `index` as in the JSON form (`"passed"`, `"failed"`,
/// `"error"`, `"skipped"`, `"xfailed"`, `"xpassed"`): a static string, never freed; `NULL`
/// when `index` is out of range or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_outcome_name(
    report: *const FrognanoReport,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, ptr::null(), |r| {
            Some(test_outcome_name(r.report.tests.get(index)?.outcome).as_ptr())
        })
    }
}

/// Returns the seconds test `index` spent in setup, call and teardown; NaN when `index` is out
/// of range or `report` is `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_duration_s(
    report: *const FrognanoReport,
    index: usize,
) -> f64 {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, f64::NAN, |r| {
            Some(r.report.tests.get(index)?.duration_s)
        })
    }
}

/// Returns the short failure text of test `index` (borrowed, valid until the report is freed),
/// or `NULL` when the test has none (it did not fail), `index` is out of range or `report` is
/// `NULL`.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_test_message(
    report: *const FrognanoReport,
    index: usize,
) -> *const c_char {
    // SAFETY: same contract as this function.
    unsafe {
        read_report(report, ptr::null(), |r| {
            Some(r.messages.get(index)?.as_ref()?.as_ptr())
        })
    }
}

/// Serialises the whole report as one JSON object: `outcome`, the counts (`passed`, `failed`,
/// `errors`, `skipped`, `xfailed`, `xpassed`), `duration_s`, `exit_code` and `detail` (left
/// out when absent), `stdout`, `stderr`, and `tests`, a list of
/// `{id, outcome, duration_s, message?}` (the fields of `frognano test --json` plus the
/// captured output).
///
/// On success writes an owned UTF-8 string to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error and leaves
/// `*out_json` untouched. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed. `out_json`
/// must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_to_json(
    report: *const FrognanoReport,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live report handle.
        let report = unsafe { report.as_ref() }.ok_or_else(|| FrognanoError::null("report"))?;
        out_arg(out_json, "out_json")?;
        let json = serde_json::to_string(&report.report).map_err(|e| {
            FrognanoError::new(
                FrognanoErrorCode::Io,
                format!("serialise report as JSON: {e}"),
            )
        })?;
        // JSON escapes NUL as \u0000, so the text has no interior NUL to replace.
        let json = c_string(&json).into_raw();
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { out_json.write(json) };
        Ok(())
    })
}

/// Frees a report. `NULL` is accepted and ignored. Strings borrowed from it become invalid;
/// no other thread may still be reading it.
///
/// # Safety
///
/// `report` must be `NULL` or a report returned by this library and not yet freed, that no
/// other thread is reading; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_report_free(report: *mut FrognanoReport) {
    guard_value((), || {
        if !report.is_null() {
            // SAFETY: a non-NULL `report` was created by `Box::into_raw` in this library and
            // the caller hands back its ownership exactly once.
            drop(unsafe { Box::from_raw(report) });
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Agent environment: task sets, environments, steps, evaluation
// ---------------------------------------------------------------------------------------------

/// Writes an owned C string to a non-NULL out-parameter.
///
/// # Safety
/// `out` is non-NULL and writable.
unsafe fn write_string(out: *mut *mut c_char, text: &str) {
    let text = c_string(text).into_raw();
    // SAFETY: the caller guarantees `out` is non-NULL and writable.
    unsafe { out.write(text) };
}

/// Serialises a value as JSON text.
fn to_json(value: &impl serde::Serialize, what: &str) -> Result<String, FrognanoError> {
    serde_json::to_string(value).map_err(|e| {
        FrognanoError::new(
            FrognanoErrorCode::Io,
            format!("serialise {what} as JSON: {e}"),
        )
    })
}

/// An immutable set of bug-fix tasks, read from a JSONL file by `frognano_tasks_load` or made
/// by `frognano_synthesize`.
///
/// Freed with `frognano_task_set_free`. Thread safety: immutable, so it may be read from any
/// number of threads at once (including by `frognano_evaluate`); it must not be freed while
/// another thread still uses it.
#[derive(Debug)]
pub struct FrognanoTaskSet {
    tasks: Vec<Task>,
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
        let handle = Box::into_raw(Box::new(FrognanoTaskSet { tasks }));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
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
    guard_value(0, || {
        // SAFETY: the caller passes NULL or a live task-set handle.
        unsafe { tasks.as_ref() }.map_or(0, |t| t.tasks.len())
    })
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
        let tasks = unsafe { tasks.as_ref() }.ok_or_else(|| FrognanoError::null("tasks"))?;
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
        let json = to_json(task, "task")?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(out_json, &json) };
        Ok(())
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
    guard_value((), || {
        if !tasks.is_null() {
            // SAFETY: a non-NULL `tasks` was created by `Box::into_raw` in this library and
            // the caller hands back its ownership exactly once.
            drop(unsafe { Box::from_raw(tasks) });
        }
    });
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
        let sandbox = unsafe { sandbox.as_ref() }.ok_or_else(|| FrognanoError::null("sandbox"))?;
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
        let handle = Box::into_raw(Box::new(FrognanoEnv { inner }));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
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
        let env = unsafe { env.as_mut() }.ok_or_else(|| FrognanoError::null("env"))?;
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
        let env = unsafe { env.as_mut() }.ok_or_else(|| FrognanoError::null("env"))?;
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
        let handle = Box::into_raw(Box::new(step));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
        Ok(())
    })
}

/// Reads a field of a step; `fallback` when the step is NULL or the accessor panics.
///
/// # Safety
/// `step` is NULL or a live step handle.
unsafe fn read_step<T>(
    step: *const FrognanoStep,
    fallback: T,
    read: impl FnOnce(&FrognanoStep) -> T,
) -> T {
    // SAFETY: the caller guarantees `step` is NULL or a live step handle.
    let step = unsafe { step.as_ref() };
    match catch_unwind(AssertUnwindSafe(|| step.map(read))) {
        Ok(Some(value)) => value,
        Ok(None) | Err(_) => fallback,
    }
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
    unsafe { read_step(step, ptr::null(), |s| s.observation.as_ptr()) }
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
    unsafe { read_step(step, f64::NAN, |s| s.reward) }
}

/// Returns true when the agent ended the episode (submit); false when `step` is `NULL`.
///
/// # Safety
///
/// `step` must be `NULL` or a step returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_step_terminated(step: *const FrognanoStep) -> bool {
    // SAFETY: same contract as this function.
    unsafe { read_step(step, false, |s| s.terminated) }
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
    unsafe { read_step(step, false, |s| s.truncated) }
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
    unsafe { read_step(step, false, |s| s.is_error) }
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
    unsafe { read_step(step, ptr::null(), |s| s.info_json.as_ptr()) }
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
    guard_value((), || {
        if !step.is_null() {
            // SAFETY: a non-NULL `step` was created by `Box::into_raw` in this library and the
            // caller hands back its ownership exactly once.
            drop(unsafe { Box::from_raw(step) });
        }
    });
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
        let env = unsafe { env.as_ref() }.ok_or_else(|| FrognanoError::null("env"))?;
        out_arg(out_json, "out_json")?;
        let record = env
            .inner
            .record()
            .ok_or_else(|| FrognanoError::from(EnvError::NoEpisode))?;
        let json = to_json(&record, "episode record")?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(out_json, &json) };
        Ok(())
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
    guard_value((), || {
        if !env.is_null() {
            // SAFETY: a non-NULL `env` was created by `Box::into_raw` in this library and the
            // caller hands back its ownership exactly once, with no call in progress.
            drop(unsafe { Box::from_raw(env) });
        }
    });
}

/// Rolls out a policy over every task of a set, `workers` episodes in parallel, and
/// summarises the episodes.
///
/// `policy` is `"oracle"` (applies each task's gold patch), `"noop"` (submits at once),
/// `"random"` or `"random:SEED"` (random tool calls; seed 0 by default), or `"onnx:MODEL"`: a
/// local chat model (a model folder or registry name, as `frognano_model_load` takes) replying
/// greedily with one command per turn, the episodes of a step generated as one batch.
/// `workers` is the number of parallel environments (0 = the sandbox's worker count, by
/// default the number of CPUs; never more than the tasks).
///
/// On success writes an owned UTF-8 JSON object to `*out_summary_json` (free it with
/// `frognano_string_free`) and returns `NULL`. The object holds `episodes`, `resolved`,
/// `resolved_rate`, `met_failure`, `recovered`, `recovery_rate`, `mean_steps`,
/// `tool_errors`, `test_runs`, `truncated`, plus `steps_per_s` (environment steps per second
/// of wall-clock time) and `failed_tasks` (tasks that could not be reset, e.g. a missing
/// repository; they are skipped, not counted as episodes). On failure returns an owned error
/// and leaves `*out_summary_json` untouched (`FROGNANO_ERROR_CODE_INVALID_OPTION` for an
/// unknown policy, `FROGNANO_ERROR_CODE_INFERENCE` for an `onnx:` model that cannot be
/// loaded). Thread safety: may be called from any thread, also on a sandbox and a
/// task set other threads use at the same time.
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
        let sandbox = unsafe { sandbox.as_ref() }.ok_or_else(|| FrognanoError::null("sandbox"))?;
        // SAFETY: the caller passes NULL or a live task-set handle.
        let tasks = unsafe { tasks.as_ref() }.ok_or_else(|| FrognanoError::null("tasks"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let policy = unsafe { str_arg(policy, "policy") }?;
        out_arg(out_summary_json, "out_summary_json")?;
        let tasks = &tasks.tasks;
        let mut policy: Box<dyn frognano_core::Policy> = match policy.strip_prefix("onnx:") {
            Some(model) => Box::new(onnx_policy(model)?),
            None => frognano_policy::baseline(policy, tasks)
                .map_err(|e| FrognanoError::new(FrognanoErrorCode::InvalidOption, e.to_string()))?,
        };
        let mut pool = EnvPool::for_tasks(
            Arc::clone(&sandbox.inner),
            tasks.len(),
            workers,
            EnvConfig::default(),
        )?;
        let mut records = Vec::new();
        let mut failed_tasks = 0usize;
        let stats = pool.rollout(
            policy.as_mut(),
            tasks,
            |record| records.push(record),
            |_, _| failed_tasks += 1,
        )?;
        let summary = EvalSummary::of(&records);
        let mut value = serde_json::to_value(&summary).map_err(|e| {
            FrognanoError::new(
                FrognanoErrorCode::Io,
                format!("serialise the summary as JSON: {e}"),
            )
        })?;
        if let Some(object) = value.as_object_mut() {
            object.insert("steps_per_s".into(), stats.steps_per_s().into());
            object.insert("failed_tasks".into(), failed_tasks.into());
        }
        let json = to_json(&value, "summary")?;
        // SAFETY: `out_summary_json` is non-NULL (checked above) and the caller guarantees it
        // is writable.
        unsafe { write_string(out_summary_json, &json) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Task synthesis
// ---------------------------------------------------------------------------------------------

fn invalid_option(message: impl AsRef<str>) -> FrognanoError {
    FrognanoError::new(FrognanoErrorCode::InvalidOption, message)
}

/// Reads synthesis options: `NULL` gives the defaults; otherwise a JSON object whose keys are
/// `SynthConfig` fields (missing ones take their defaults, unknown ones are an error rather
/// than silently ignored).
fn synth_config(options_json: Option<&str>) -> Result<SynthConfig, FrognanoError> {
    let Some(text) = options_json else {
        return Ok(SynthConfig::default());
    };
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| invalid_option(format!("options_json is not valid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(invalid_option("options_json must be a JSON object"));
    };
    let defaults = serde_json::to_value(SynthConfig::default())
        .map_err(|e| invalid_option(format!("serialise the default options: {e}")))?;
    if let Some(known) = defaults.as_object()
        && let Some(unknown) = object.keys().find(|key| !known.contains_key(*key))
    {
        let names: Vec<&str> = known.keys().map(String::as_str).collect();
        return Err(invalid_option(format!(
            "options_json: unknown option `{unknown}` (known: {})",
            names.join(", ")
        )));
    }
    let config: SynthConfig =
        serde_json::from_value(value).map_err(|e| invalid_option(format!("options_json: {e}")))?;
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
/// bugs of a multi-bug task lie), `hint_levels` (array of problem-statement hint levels 0 to 3,
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
        let sandbox = unsafe { sandbox.as_ref() }.ok_or_else(|| FrognanoError::null("sandbox"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let repo = unsafe { str_arg(repo, "repo") }?;
        let options_json = if options_json.is_null() {
            None
        } else {
            // SAFETY: non-NULL, and the caller guarantees a valid NUL-terminated string.
            Some(unsafe { str_arg(options_json, "options_json") }?)
        };
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
        let handle = Box::into_raw(Box::new(FrognanoTaskSet { tasks }));
        // SAFETY: `tasks_out` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { tasks_out.write(handle) };
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
        let json = to_json(&frognano_synth::operators(), "mutation operators")?;
        // SAFETY: `json_out` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(json_out, &json) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Training
// ---------------------------------------------------------------------------------------------

impl From<frognano_core::Error> for FrognanoError {
    fn from(err: frognano_core::Error) -> Self {
        let code = match &err {
            frognano_core::Error::Invalid { .. } => FrognanoErrorCode::InvalidOption,
            frognano_core::Error::Path { .. } => FrognanoErrorCode::Repo,
            frognano_core::Error::Io(_) => FrognanoErrorCode::Io,
            failed if is_onnx_policy_failure(failed) => FrognanoErrorCode::Inference,
            frognano_core::Error::Json(_) | frognano_core::Error::Component { .. } => {
                FrognanoErrorCode::Training
            }
        };
        FrognanoError::new(code, err.to_string())
    }
}

impl From<TrainError> for FrognanoError {
    fn from(err: TrainError) -> Self {
        let code = match err {
            TrainError::Env(inner) => return FrognanoError::from(inner),
            TrainError::Synth(inner) => return FrognanoError::from(inner),
            TrainError::Core(inner) => return FrognanoError::from(inner),
            TrainError::Config(_) => FrognanoErrorCode::InvalidOption,
            TrainError::Checkpoint { .. } | TrainError::NoTasks(_) => FrognanoErrorCode::Training,
            TrainError::Io { .. } => FrognanoErrorCode::Io,
            TrainError::Cancelled => FrognanoErrorCode::Cancelled,
        };
        FrognanoError::new(code, err.to_string())
    }
}

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
        let estimator = Estimator::parse(name).map_err(|_| {
            invalid_option(format!(
                "unknown advantage estimator {name:?}: use \"grpo\", \"dr_grpo\" or \"rloo\""
            ))
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

/// Returns the learnability score of a success rate `p` for a target success rate `target`:
/// `p^a (1 - p)^b` with its mode at the target (`a = 2 target`, `b = 2 (1 - target)`), scaled
/// to 1 there. For `target` 0.5 it is `4 p (1 - p)`, proportional to the reward variance of a
/// 0/1 group: tasks solved about half the time teach the most, tasks always or never solved
/// teach nothing. The frontier curriculum chooses task families by this score.
///
/// `p` is clamped to `[0, 1]`; `target` must lie in `[0, 1]` (the curriculum's lie strictly
/// between). A `target` outside `[0, 1]` or a NaN argument gives NaN. Never fails.
/// Thread safety: may be called from any thread.
#[unsafe(no_mangle)]
pub extern "C" fn frognano_learnability(p: f64, target: f64) -> f64 {
    guard_value(f64::NAN, || {
        if p.is_nan() || !(0.0..=1.0).contains(&target) {
            f64::NAN
        } else {
            learnability(p, target)
        }
    })
}

/// The keys of `given` (recursively, into objects whose default is an object) that `known`
/// lacks, as dotted paths.
fn unknown_keys(given: &serde_json::Value, known: &serde_json::Value, prefix: &str) -> Vec<String> {
    let (Some(given), Some(known)) = (given.as_object(), known.as_object()) else {
        return Vec::new();
    };
    let mut unknown = Vec::new();
    for (key, value) in given {
        let path = format!("{prefix}{key}");
        match known.get(key) {
            None => {
                let names: Vec<&str> = known.keys().map(String::as_str).collect();
                unknown.push(format!("`{path}` (known: {})", names.join(", ")));
            }
            Some(default) if default.is_object() => {
                unknown.extend(unknown_keys(value, default, &format!("{path}.")));
            }
            Some(_) => {}
        }
    }
    unknown
}

/// Makes a path absolute against the current directory.
fn absolute_path(path: &Path, what: &str) -> Result<std::path::PathBuf, FrognanoError> {
    std::path::absolute(path).map_err(|e| {
        FrognanoError::new(
            FrognanoErrorCode::Io,
            format!("resolve {what} {}: {e}", path.display()),
        )
    })
}

/// Reads a training configuration: `NULL` gives the defaults; otherwise a JSON object of
/// `TrainConfig` fields (missing ones take their defaults; unknown ones, at any depth, are an
/// error rather than silently ignored). At least one repository is required; repository and
/// output paths are made absolute against the current directory.
fn train_config(config_json: Option<&str>) -> Result<TrainConfig, FrognanoError> {
    let mut config = match config_json {
        None => TrainConfig::default(),
        Some(text) => {
            let value: serde_json::Value = serde_json::from_str(text)
                .map_err(|e| invalid_option(format!("config_json is not valid JSON: {e}")))?;
            if !value.is_object() {
                return Err(invalid_option("config_json must be a JSON object"));
            }
            let defaults = serde_json::to_value(TrainConfig::default())
                .map_err(|e| invalid_option(format!("serialise the default configuration: {e}")))?;
            let unknown = unknown_keys(&value, &defaults, "");
            if let Some(first) = unknown.first() {
                return Err(invalid_option(format!("config_json: unknown key {first}")));
            }
            serde_path_to_error::deserialize(value).map_err(|e| {
                let path = e.path().to_string();
                let inner = e.into_inner();
                if path == "." {
                    invalid_option(format!("config_json: {inner}"))
                } else {
                    invalid_option(format!("config_json: `{path}`: {inner}"))
                }
            })?
        }
    };
    if config.repos.is_empty() {
        return Err(invalid_option(
            "config_json: `repos` must name at least one Python repository (a directory or \
             bundle whose test suite passes) to synthesize tasks from, e.g. \
             {\"repos\": [\"examples/repos/textkit\"]}",
        ));
    }
    for repo in &mut config.repos {
        *repo = absolute_path(repo, "the repository path")?;
    }
    if let Some(out) = &mut config.out {
        *out = absolute_path(out, "the output directory")?;
    }
    config.validate()?;
    Ok(config)
}

/// Reads an optional C string argument (`NULL` gives `None`).
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string that stays valid and unmodified for `'a`.
unsafe fn optional_str_arg<'a>(
    ptr: *const c_char,
    what: &str,
) -> Result<Option<&'a str>, FrognanoError> {
    if ptr.is_null() {
        Ok(None)
    } else {
        // SAFETY: non-NULL, and the caller guarantees a valid NUL-terminated string.
        unsafe { str_arg(ptr, what) }.map(Some)
    }
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
    config: TrainConfig,
    held_out: Vec<Task>,
}

/// Creates a trainer of the bundled repair policy over `sandbox`.
///
/// `config_json` is a JSON object of training settings, each optional except `repos`
/// (`NULL` or `"{}"` take every default, and then fail for want of repositories):
/// `repos` (array of repository paths, directories or `.zip`/`.tar.gz` bundles whose test
/// suites pass, relative to the current directory; required), `curriculum` (`"frontier"`, the
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
/// (default 40), ...)), `policy` (the repair policy: `max_attempts` (default 8),
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
/// `FROGNANO_ERROR_CODE_INVALID_OPTION` for a configuration that is not a JSON object, an
/// unknown key (at any depth), a value of the wrong type or out of range, or no `repos`;
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
        let sandbox = unsafe { sandbox.as_ref() }.ok_or_else(|| FrognanoError::null("sandbox"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let config_json = unsafe { optional_str_arg(config_json, "config_json") }?;
        out_arg(out, "out")?;
        let config = train_config(config_json)?;
        let pools = prepare_pools(&sandbox.inner, &config, &mut Quiet)?;
        let curriculum = make_curriculum(&sandbox.inner, &config, &pools)?;
        let policy = RepairPolicy::new(RepairConfig {
            seed: config.seed,
            greedy: false,
            ..config.policy.clone()
        })?;
        let mut trainer = GrpoTrainer::new(
            Arc::clone(&sandbox.inner),
            Box::new(policy),
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
        let handle = Box::into_raw(Box::new(FrognanoTrainer {
            trainer,
            config,
            held_out: pools.held_out,
        }));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
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
        let trainer = unsafe { trainer.as_mut() }.ok_or_else(|| FrognanoError::null("trainer"))?;
        let metrics = trainer.trainer.iterate()?;
        if !metrics_json.is_null() {
            let json = to_json(&metrics, "iteration metrics")?;
            // SAFETY: `metrics_json` is non-NULL and the caller guarantees it is writable.
            unsafe { write_string(metrics_json, &json) };
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
    guard_value(0, || {
        // SAFETY: the caller passes NULL or a live trainer handle.
        unsafe { trainer.as_ref() }.map_or(0, |t| t.trainer.iteration())
    })
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
        let trainer = unsafe { trainer.as_mut() }.ok_or_else(|| FrognanoError::null("trainer"))?;
        out_arg(summary_json, "summary_json")?;
        if trainer.held_out.is_empty() {
            return Err(FrognanoError::from(TrainError::NoTasks(
                "no held-out task to evaluate on (the configuration's held_out is 0)".into(),
            )));
        }
        let state = trainer.trainer.policy().state()?;
        let mut policy = greedy_policy(&trainer.config.policy, Some(&state))?;
        let (summary, _records) =
            trainer
                .trainer
                .evaluate(&mut policy, &trainer.held_out, |_| {})?;
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
        let json = to_json(&value, "summary")?;
        // SAFETY: `summary_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(summary_json, &json) };
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
    guard(|| {
        // SAFETY: the caller passes NULL or a live trainer handle.
        let trainer = unsafe { trainer.as_ref() }.ok_or_else(|| FrognanoError::null("trainer"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let path = unsafe { str_arg(path, "path") }?;
        trainer.trainer.save_checkpoint(Path::new(path))?;
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
    guard(|| {
        // SAFETY: the caller passes NULL or a live trainer used by this thread only.
        let trainer = unsafe { trainer.as_mut() }.ok_or_else(|| FrognanoError::null("trainer"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let path = unsafe { str_arg(path, "path") }?;
        trainer.trainer.resume(Path::new(path))?;
        Ok(())
    })
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
        let trainer = unsafe { trainer.as_ref() }.ok_or_else(|| FrognanoError::null("trainer"))?;
        out_arg(state_json, "state_json")?;
        let state = trainer.trainer.policy().state()?;
        let json = to_json(&state, "policy state")?;
        // SAFETY: `state_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(state_json, &json) };
        Ok(())
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
    guard_value((), || {
        if !trainer.is_null() {
            // SAFETY: a non-NULL `trainer` was created by `Box::into_raw` in this library and
            // the caller hands back its ownership exactly once, with no call in progress.
            drop(unsafe { Box::from_raw(trainer) });
        }
    });
}

/// Runs a whole training job, as `frognano train` does: synthesizes the held-out set (and the
/// fixed training set of the static and easy-to-hard curricula), evaluates the untrained
/// policy on the held-out set (unless `evaluate_initial` is false), trains for `iterations`
/// iterations, and evaluates the trained policy (greedy) on the held-out set.
///
/// `config_json` is as for `frognano_trainer_new` (`repos` required), plus
/// `evaluate_initial` (default true). With `out` set, the job writes `held_out.jsonl`,
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
        let sandbox = unsafe { sandbox.as_ref() }.ok_or_else(|| FrognanoError::null("sandbox"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let config_json = unsafe { optional_str_arg(config_json, "config_json") }?;
        out_arg(report_json, "report_json")?;
        let config = train_config(config_json)?;
        let pools = prepare_pools(&sandbox.inner, &config, &mut Quiet)?;
        let report = frognano_train::run(&sandbox.inner, &config, &pools, &mut Quiet, None)?;
        let json = to_json(&report, "training report")?;
        // SAFETY: `report_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(report_json, &json) };
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// Local language models
// ---------------------------------------------------------------------------------------------

/// Whether a rollout failed because a local model policy did (frognano-policy reports its
/// errors as this component).
fn is_onnx_policy_failure(err: &frognano_core::Error) -> bool {
    matches!(
        err,
        frognano_core::Error::Component {
            component: "onnx policy",
            ..
        }
    )
}

impl From<InferenceError> for FrognanoError {
    fn from(err: InferenceError) -> Self {
        let code = match &err {
            InferenceError::InvalidRequest(_) => FrognanoErrorCode::InvalidOption,
            InferenceError::Io { .. } => FrognanoErrorCode::Io,
            _ => FrognanoErrorCode::Inference,
        };
        FrognanoError::new(code, err.to_string())
    }
}

/// A local decoder language model on ONNX Runtime, with its tokenizer and chat template.
///
/// Created by `frognano_model_load`, freed with `frognano_model_free`. Thread safety: used by
/// one thread at a time (it may be handed from thread to thread); different models may be used
/// on different threads at once.
#[derive(Debug)]
pub struct FrognanoModel {
    model: DecoderModel,
    codec: TextCodec,
}

/// The options of `frognano_model_load`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ModelLoadOptions {
    intra_threads: usize,
    runtime_library: Option<std::path::PathBuf>,
}

/// Parses a JSON object argument into `T` (missing fields take their defaults, unknown ones
/// are an error), naming the field at fault.
fn json_object_arg<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    what: &str,
) -> Result<T, FrognanoError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            invalid_option(format!("{what}: {inner}"))
        } else {
            invalid_option(format!("{what}: `{path}`: {inner}"))
        }
    })
}

fn parse_json_object(text: &str, what: &str) -> Result<serde_json::Value, FrognanoError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| invalid_option(format!("{what} is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(invalid_option(format!("{what} must be a JSON object")));
    }
    Ok(value)
}

/// Resolves a model argument (a folder, an `.onnx` file or a registry name) and loads an
/// `OnnxPolicy` with the default settings on it: the policy of `"onnx:MODEL"`.
fn onnx_policy(model: &str) -> Result<OnnxPolicy, FrognanoError> {
    let dir = assets::resolve_model(model, &|_| {})?;
    Ok(OnnxPolicy::load(&dir, OnnxPolicyConfig::default())?)
}

/// Loads a local language model.
///
/// - `model`: a model folder (holding `model.onnx`, `config.json`, `tokenizer.json` and,
///   for chat requests, a chat template), an `.onnx` file in one, or a registry name such as
///   `"smollm2-135m"` (int4) or `"smollm2-135m:fp32"`, fetched, verified and converted into the
///   cache on first use (minutes; nothing is printed).
/// - `options_json`: `NULL` for the defaults, or a JSON object with `intra_threads` (ONNX
///   Runtime threads; 0, the default, is one per core) and `runtime_library` (the path of the
///   `libonnxruntime` to load). Unknown keys are an error.
///
/// ONNX Runtime is loaded once per process, by the first model: from `runtime_library`, else
/// `FROGNANO_ORT_LIBRARY` (or `ORT_DYLIB_PATH`), else the inference environment in the cache
/// (`frognano models setup`), else the `onnxruntime` package of the host Python. A later
/// `runtime_library` must name the library already loaded.
///
/// On success writes an owned handle to `*out` (free it with `frognano_model_free`) and returns
/// `NULL`. On failure returns an owned error and leaves `*out` untouched:
/// `FROGNANO_ERROR_CODE_INFERENCE` for a missing or unusable model folder, an unknown registry
/// name or an ONNX Runtime that cannot be found or loaded, `FROGNANO_ERROR_CODE_INVALID_OPTION`
/// for malformed `options_json`. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `model` must be `NULL` or a NUL-terminated string; `options_json` must be `NULL` or a
/// NUL-terminated string; `out` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_load(
    model: *const c_char,
    options_json: *const c_char,
    out: *mut *mut FrognanoModel,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let model = unsafe { str_arg(model, "model") }?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let options_json = unsafe { optional_str_arg(options_json, "options_json") }?;
        out_arg(out, "out")?;
        let options: ModelLoadOptions = match options_json {
            None => ModelLoadOptions::default(),
            Some(text) => {
                json_object_arg(parse_json_object(text, "options_json")?, "options_json")?
            }
        };
        let dir = assets::resolve_model(model, &|_| {})?;
        let model = DecoderModel::load(
            &dir,
            &ModelOptions {
                intra_threads: options.intra_threads,
                runtime_library: options.runtime_library,
            },
        )?;
        let codec = TextCodec::load(&dir)?;
        let handle = Box::into_raw(Box::new(FrognanoModel { model, codec }));
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { out.write(handle) };
        Ok(())
    })
}

/// The token ids of prompt `index` of a request.
fn request_prompt(
    codec: &TextCodec,
    prompt: &serde_json::Value,
    index: usize,
    chat: bool,
) -> Result<Vec<u32>, FrognanoError> {
    use serde_json::Value;
    let at = format!("prompts[{index}]");
    if chat {
        let messages: Vec<ChatMessage> = match prompt {
            Value::String(text) => vec![ChatMessage::new("user", text.clone())],
            Value::Array(_) => serde_json::from_value(prompt.clone()).map_err(|e| {
                invalid_option(format!(
                    "request_json: `{at}`: a conversation is an array of {{\"role\", \"content\"}} \
                     objects: {e}"
                ))
            })?,
            _ => {
                return Err(invalid_option(format!(
                    "request_json: `{at}` must be a string (one user message) or an array of \
                     {{\"role\", \"content\"}} objects when `chat` is true"
                )));
            }
        };
        return Ok(codec.encode(&codec.render_chat(&messages, true)?)?);
    }
    match prompt {
        Value::String(text) => Ok(codec.encode(text)?),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                item.as_u64()
                    .and_then(|id| u32::try_from(id).ok())
                    .ok_or_else(|| {
                        invalid_option(format!(
                            "request_json: `{at}[{i}]`: a token id is an integer from 0 to \
                             4294967295, got {item}"
                        ))
                    })
            })
            .collect(),
        _ => Err(invalid_option(format!(
            "request_json: `{at}` must be a string (raw text) or an array of token ids"
        ))),
    }
}

/// Generates a continuation of each prompt of a request, all rows in one batch.
///
/// `request_json` is a JSON object:
/// - `prompts` (required): an array; each prompt is raw text (encoded with the tokenizer;
///   special-token markup such as `<|im_start|>` is recognised, nothing is added) or an array
///   of token ids. With `"chat": true` each prompt is instead a conversation, an array of
///   `{"role", "content"}` objects (or a string: one user message), rendered with the model's
///   chat template and the header of the assistant's turn.
/// - `chat`: see above (default `false`).
/// - `options`: `max_new_tokens` (default 256), `temperature` (default 1.0; 0 decodes
///   greedily), `top_k` (0: off), `top_p` (1: off), `seed` (row r samples from a generator
///   seeded by (seed, r), so a request is reproducible), `stop` (strings that end a row; the
///   text stops before the first), `stop_token_ids` (default: the model's end-of-sequence
///   tokens). Unknown keys are an error.
///
/// On success writes an owned UTF-8 JSON object to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`: `generations`, one object per prompt with
/// `token_ids` (every token sampled, a final stop token included), `logprobs` (one per token:
/// its log-probability under the distribution it was sampled from), `text` (special tokens
/// removed, cut before a stop string), `finish_reason` (`"eos"`, `"stop"` or `"length"`) and
/// `prompt_tokens`; and `timing` (`prefill_s`, `decode_s`, `first_token_s`, `prompt_tokens`,
/// `generated_tokens`, `decode_steps`). On failure returns an owned error and leaves
/// `*out_json` untouched: `FROGNANO_ERROR_CODE_INVALID_OPTION` for malformed JSON, a bad
/// prompt (empty, a token outside the vocabulary, longer than the context) or bad options,
/// `FROGNANO_ERROR_CODE_INFERENCE` when the tokenizer, the chat template or ONNX Runtime fails.
/// Thread safety: one call at a time per model.
///
/// # Safety
///
/// `model` must be `NULL` or a model returned by this library and not yet freed, with no other
/// call on it in progress; `request_json` must be `NULL` or a NUL-terminated string;
/// `out_json` must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_generate(
    model: *mut FrognanoModel,
    request_json: *const c_char,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live model handle used by this call only.
        let model = unsafe { model.as_mut() }.ok_or_else(|| FrognanoError::null("model"))?;
        // SAFETY: the caller passes NULL or a valid NUL-terminated string.
        let request_json = unsafe { str_arg(request_json, "request_json") }?;
        out_arg(out_json, "out_json")?;
        let serde_json::Value::Object(mut request) =
            parse_json_object(request_json, "request_json")?
        else {
            return Err(invalid_option("request_json must be a JSON object"));
        };
        if let Some(key) = request
            .keys()
            .find(|k| !["prompts", "chat", "options"].contains(&k.as_str()))
        {
            return Err(invalid_option(format!(
                "request_json: unknown key `{key}` (known: prompts, chat, options)"
            )));
        }
        let chat = match request.remove("chat") {
            None | Some(serde_json::Value::Null) => false,
            Some(serde_json::Value::Bool(chat)) => chat,
            Some(other) => {
                return Err(invalid_option(format!(
                    "request_json: `chat` must be true or false, got {other}"
                )));
            }
        };
        let options: GenerationOptions = match request.remove("options") {
            None | Some(serde_json::Value::Null) => GenerationOptions::default(),
            Some(value) => json_object_arg(value, "request_json: `options`")?,
        };
        options.validate()?;
        let Some(serde_json::Value::Array(prompts)) = request.remove("prompts") else {
            return Err(invalid_option(
                "request_json: `prompts` (an array of prompts) is required",
            ));
        };
        let prompts = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| request_prompt(&model.codec, p, i, chat))
            .collect::<Result<Vec<_>, _>>()?;
        let (generations, timing) = generate(&mut model.model, &model.codec, &prompts, &options)?;
        let json = to_json(
            &serde_json::json!({"generations": generations, "timing": timing}),
            "generations",
        )?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(out_json, &json) };
        Ok(())
    })
}

/// Describes a model as one JSON object: `path` (its folder), `num_layers`, `num_kv_heads`,
/// `head_dim`, `vocab_size`, `context_length`, `eos_token_ids`, `bos_token_id` (or `null`),
/// `pad_token_id` and `has_chat_template`.
///
/// On success writes an owned UTF-8 string to `*out_json` (free it with
/// `frognano_string_free`) and returns `NULL`; on failure returns an owned error
/// (`FROGNANO_ERROR_CODE_NULL_POINTER`) and leaves `*out_json` untouched. Thread safety: may be
/// called from any thread while no `frognano_model_generate` runs on the model.
///
/// # Safety
///
/// `model` must be `NULL` or a model returned by this library and not yet freed; `out_json`
/// must be `NULL` or point to writable storage for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_config_json(
    model: *const FrognanoModel,
    out_json: *mut *mut c_char,
) -> *mut FrognanoError {
    guard(|| {
        // SAFETY: the caller passes NULL or a live model handle.
        let model = unsafe { model.as_ref() }.ok_or_else(|| FrognanoError::null("model"))?;
        out_arg(out_json, "out_json")?;
        let config = &model.model.config;
        let json = to_json(
            &serde_json::json!({
                "path": model.model.dir.to_string_lossy(),
                "num_layers": config.num_layers,
                "num_kv_heads": config.num_kv_heads,
                "head_dim": config.head_dim,
                "vocab_size": config.vocab_size,
                "context_length": config.context_length,
                "eos_token_ids": config.eos_token_ids,
                "bos_token_id": config.bos_token_id,
                "pad_token_id": config.pad_token_id,
                "has_chat_template": model.codec.has_chat_template(),
            }),
            "model configuration",
        )?;
        // SAFETY: `out_json` is non-NULL (checked above) and the caller guarantees it is
        // writable.
        unsafe { write_string(out_json, &json) };
        Ok(())
    })
}

/// Frees a model. `NULL` is accepted and ignored. No call on the model may be in progress, and
/// the handle must not be used afterwards. ONNX Runtime itself stays loaded for the process.
///
/// # Safety
///
/// `model` must be `NULL` or a model returned by this library and not yet freed, with no call
/// on it in progress; it must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_model_free(model: *mut FrognanoModel) {
    guard_value((), || {
        if !model.is_null() {
            // SAFETY: a non-NULL `model` was created by `Box::into_raw` in this library and the
            // caller hands back its ownership exactly once, with no call in progress.
            drop(unsafe { Box::from_raw(model) });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_object() {
        let error = guard(|| panic!("boom"));
        assert!(!error.is_null());
        // SAFETY: `error` was just returned by `guard` and is freed once below.
        unsafe {
            assert_eq!(frognano_error_code(error), FrognanoErrorCode::Panic);
            let message = CStr::from_ptr(frognano_error_message(error)).to_string_lossy();
            assert!(message.contains("boom"), "{message}");
            frognano_error_free(error);
        }
    }

    #[test]
    fn a_panic_in_an_accessor_gives_the_fallback() {
        assert_eq!(guard_value(7, || panic!("boom")), 7);
    }

    #[test]
    fn nul_bytes_do_not_truncate_strings() {
        assert_eq!(c_string("a\0b").to_str().ok(), Some("a\u{FFFD}b"));
    }

    #[test]
    fn trainers_may_be_used_from_another_thread() {
        fn assert_send<T: Send>() {}
        assert_send::<FrognanoTrainer>();
        assert_send::<FrognanoEnv>();
        assert_send::<FrognanoModel>();
    }

    #[test]
    fn training_errors_map_to_their_codes() {
        let config = FrognanoError::from(TrainError::Config("bad".into()));
        assert_eq!(config.code, FrognanoErrorCode::InvalidOption);
        let no_tasks = FrognanoError::from(TrainError::NoTasks("none".into()));
        assert_eq!(no_tasks.code, FrognanoErrorCode::Training);
        let checkpoint = FrognanoError::from(TrainError::Checkpoint {
            path: "cp.json".into(),
            reason: "gone".into(),
        });
        assert_eq!(checkpoint.code, FrognanoErrorCode::Training);
        assert!(checkpoint.message.to_string_lossy().contains("cp.json"));
        let cancelled = FrognanoError::from(TrainError::Cancelled);
        assert_eq!(cancelled.code, FrognanoErrorCode::Cancelled);
        let invalid = FrognanoError::from(frognano_core::Error::invalid("policy", "no"));
        assert_eq!(invalid.code, FrognanoErrorCode::InvalidOption);
        let failed = FrognanoError::from(frognano_core::Error::Component {
            component: "trainer",
            message: "learner failed".into(),
        });
        assert_eq!(failed.code, FrognanoErrorCode::Training);
    }

    #[test]
    fn inference_errors_map_to_their_codes() {
        let invalid = FrognanoError::from(InferenceError::InvalidRequest("top_p".into()));
        assert_eq!(invalid.code, FrognanoErrorCode::InvalidOption);
        let runtime = FrognanoError::from(InferenceError::Runtime("not found".into()));
        assert_eq!(runtime.code, FrognanoErrorCode::Inference);
        let model = FrognanoError::from(InferenceError::Model {
            path: "m".into(),
            message: "model.onnx is missing".into(),
        });
        assert_eq!(model.code, FrognanoErrorCode::Inference);
        assert!(
            model
                .message
                .to_string_lossy()
                .contains("model.onnx is missing")
        );
        let io = FrognanoError::from(InferenceError::Io {
            context: "read m/config.json".into(),
            source: std::io::Error::other("gone"),
        });
        assert_eq!(io.code, FrognanoErrorCode::Io);
        let in_rollout = frognano_core::Error::from(InferenceError::Inference("failed".into()));
        assert_eq!(
            FrognanoError::from(EnvError::Core(in_rollout)).code,
            FrognanoErrorCode::Inference
        );
    }

    #[test]
    fn unknown_configuration_keys_are_found_at_any_depth() {
        let defaults = serde_json::to_value(TrainConfig::default()).expect("defaults");
        let given = serde_json::json!({
            "seed": 1,
            "trainer": {"group_size": 2, "env": {"max_steps": 5, "max_stepz": 1}},
            "out": "dir",
        });
        let unknown = unknown_keys(&given, &defaults, "");
        assert_eq!(unknown.len(), 1, "{unknown:?}");
        assert!(
            unknown[0].starts_with("`trainer.env.max_stepz`"),
            "{unknown:?}"
        );
        assert!(unknown_keys(&serde_json::json!({"repos": []}), &defaults, "").is_empty());
    }

    #[test]
    fn version_matches_the_crate() {
        // SAFETY: `frognano_version` returns a static NUL-terminated string.
        let version = unsafe { CStr::from_ptr(frognano_version()) };
        assert_eq!(version.to_str().ok(), Some(env!("CARGO_PKG_VERSION")));
    }
}
