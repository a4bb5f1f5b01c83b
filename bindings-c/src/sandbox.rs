//! Sandboxes: resource limits, the sandbox handle, its progress callback and test runs.

use std::ffi::{c_char, c_void};
use std::path::Path;
use std::ptr;
use std::sync::Arc;

use frognano_core::Limits;
use frognano_sandbox::{ImageKind, Sandbox, SandboxError, SandboxOptions, TestRequest};

use crate::error::FrognanoError;
use crate::ffi::{
    HandleArg, c_string, free_handle, guard, out_arg, read_handle, str_arg, write_handle,
};
use crate::report::FrognanoReport;

/// Resource limits of one sandboxed run. A plain value: copy it, change fields, pass a pointer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrognanoLimits {
    /// Seconds of the guest's own time per run: its CPU time and its sleeps, not its waits for
    /// a core (positive and finite).
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
        let limits = unsafe { limits.live("limits") }?;
        validate_limits(Limits::from(*limits)).map(drop)
    })
}

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
    pub(crate) inner: Arc<Sandbox>,
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
        let inner = Arc::new(inner);
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { write_handle(out, FrognanoSandbox { inner }) };
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
    // SAFETY: same contract as this function: `sandbox` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(sandbox) };
}

/// Returns the name of the sandbox's image (e.g. `"python-3.15"`): a static string, never
/// freed; `NULL` when `sandbox` is `NULL`. Thread safety: may be called from any thread.
///
/// # Safety
///
/// `sandbox` must be `NULL` or a sandbox returned by this library and not yet freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn frognano_sandbox_image(sandbox: *const FrognanoSandbox) -> *const c_char {
    // SAFETY: the caller passes NULL or a live sandbox handle.
    unsafe {
        read_handle(sandbox, ptr::null(), |s| {
            Some(match s.inner.image() {
                ImageKind::Python315 => c"python-3.15".as_ptr(),
                ImageKind::Python312 => c"python-3.12".as_ptr(),
            })
        })
    }
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
        let sandbox = unsafe { sandbox.live("sandbox") }?;
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
        // SAFETY: `out` is non-NULL (checked above) and the caller guarantees it is writable.
        unsafe { write_handle(out, FrognanoReport::new(report)) };
        Ok(())
    })
}
