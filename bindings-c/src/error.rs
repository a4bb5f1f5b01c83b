//! Error objects: `FrognanoErrorCode`, `FrognanoError`, the conversions from every library
//! error, and the error accessors.

use std::any::Any;
use std::ffi::{CStr, CString, c_char};

use frognano_core::ErrorKind;

use crate::ffi::{c_string, free_handle, guard_value};

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
    /// A configuration is malformed: a repository's `frognano.toml` or metadata, or a training
    /// configuration (`config_json` of `frognano_trainer_new` and `frognano_train`).
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
    pub(crate) code: FrognanoErrorCode,
    pub(crate) message: CString,
}

impl FrognanoError {
    pub(crate) fn new(code: FrognanoErrorCode, message: impl AsRef<str>) -> Self {
        FrognanoError {
            code,
            message: c_string(message.as_ref()),
        }
    }

    pub(crate) fn null(what: &str) -> Self {
        FrognanoError::new(
            FrognanoErrorCode::NullPointer,
            format!("{what} must not be NULL"),
        )
    }

    pub(crate) fn from_panic(payload: &(dyn Any + Send)) -> Self {
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

    pub(crate) fn into_raw(self) -> *mut FrognanoError {
        Box::into_raw(Box::new(self))
    }
}

/// An error with `FROGNANO_ERROR_CODE_INVALID_OPTION`.
pub(crate) fn invalid_option(message: impl AsRef<str>) -> FrognanoError {
    FrognanoError::new(FrognanoErrorCode::InvalidOption, message)
}

impl FrognanoErrorCode {
    /// The one mapping of the library's error kinds to C codes.
    pub(crate) fn of_kind(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::Setup => FrognanoErrorCode::Asset,
            ErrorKind::Sandbox => FrognanoErrorCode::Runtime,
            ErrorKind::NotFound => FrognanoErrorCode::Repo,
            ErrorKind::Config => FrognanoErrorCode::Config,
            ErrorKind::Requirements => FrognanoErrorCode::Requirements,
            ErrorKind::InvalidArgument | ErrorKind::Action => FrognanoErrorCode::InvalidOption,
            ErrorKind::Task => FrognanoErrorCode::Task,
            ErrorKind::Episode => FrognanoErrorCode::Episode,
            ErrorKind::Synthesis => FrognanoErrorCode::Synthesis,
            ErrorKind::Inference => FrognanoErrorCode::Inference,
            ErrorKind::Cancelled => FrognanoErrorCode::Cancelled,
            ErrorKind::Io => FrognanoErrorCode::Io,
            // A failing component during training (and any kind added later).
            _ => FrognanoErrorCode::Training,
        }
    }
}

/// Every library error converts by its kind ([`frognano_core::KindedError`]), keeping its
/// message.
impl<E: frognano_core::KindedError> From<E> for FrognanoError {
    fn from(err: E) -> Self {
        FrognanoError::new(FrognanoErrorCode::of_kind(err.kind()), err.to_string())
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
    // SAFETY: same contract as this function: `error` is NULL or an owned handle
    // handed back exactly once.
    unsafe { free_handle(error) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_env::EnvError;
    use frognano_policy::llm::InferenceError;
    use frognano_train::TrainError;

    /// Asserts that an error converts to `code`.
    #[track_caller]
    fn assert_code(err: impl Into<FrognanoError>, code: FrognanoErrorCode) {
        assert_eq!(err.into().code, code);
    }

    /// Asserts that an error converts to `code` with a message containing `needle`.
    #[track_caller]
    fn assert_code_and_message(
        err: impl Into<FrognanoError>,
        code: FrognanoErrorCode,
        needle: &str,
    ) {
        let err = err.into();
        assert_eq!(err.code, code);
        assert!(err.message.to_string_lossy().contains(needle));
    }

    #[test]
    fn training_errors_map_to_their_codes() {
        assert_code(TrainError::Config("bad".into()), FrognanoErrorCode::Config);
        assert_code(
            TrainError::NoTasks("none".into()),
            FrognanoErrorCode::Training,
        );
        assert_code_and_message(
            TrainError::Checkpoint {
                path: "cp.json".into(),
                reason: "gone".into(),
            },
            FrognanoErrorCode::Training,
            "cp.json",
        );
        assert_code(TrainError::Cancelled, FrognanoErrorCode::Cancelled);
        assert_code(
            frognano_core::Error::invalid("policy", "no"),
            FrognanoErrorCode::InvalidOption,
        );
        assert_code(
            frognano_core::Error::component(
                "trainer",
                frognano_core::ErrorKind::Training,
                "learner failed".to_string(),
            ),
            FrognanoErrorCode::Training,
        );
    }

    #[test]
    fn inference_errors_map_to_their_codes() {
        assert_code(
            InferenceError::InvalidRequest("top_p".into()),
            FrognanoErrorCode::InvalidOption,
        );
        assert_code(
            InferenceError::Runtime("not found".into()),
            FrognanoErrorCode::Inference,
        );
        assert_code_and_message(
            InferenceError::Model {
                path: "m".into(),
                message: "model.onnx is missing".into(),
            },
            FrognanoErrorCode::Inference,
            "model.onnx is missing",
        );
        assert_code(
            InferenceError::Io {
                context: "read m/config.json".into(),
                source: std::io::Error::other("gone"),
            },
            FrognanoErrorCode::Io,
        );
        let in_rollout = frognano_core::Error::from(InferenceError::Inference("failed".into()));
        assert_eq!(
            FrognanoError::from(EnvError::Core(in_rollout)).code,
            FrognanoErrorCode::Inference
        );
    }
}
