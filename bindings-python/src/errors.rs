//! Error mapping: the library crates' errors onto the `frognano` exception hierarchy.
//!
//! The classes are defined in Python (`frognano._errors`); a failure to import them raises
//! the import error instead.

use frognano_env::EnvError;
use frognano_policy::llm::InferenceError;
use frognano_sandbox::SandboxError;
use frognano_synth::{MutateError, SynthError};
use frognano_train::TrainError;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;

/// An exception of the class `class` of `frognano._errors` (a `RuntimeError` when that name is
/// not a class).
pub(crate) fn error_class(py: Python<'_>, class: &str, message: String) -> PyErr {
    match py.import("frognano._errors").and_then(|m| m.getattr(class)) {
        Ok(class) => PyErr::from_type(
            class
                .cast_into()
                .unwrap_or_else(|_| py.get_type::<PyRuntimeError>()),
            message,
        ),
        Err(import_error) => import_error,
    }
}

/// Maps a sandbox error to the `frognano` exception hierarchy (defined in `frognano._errors`).
pub(crate) fn to_py_err(py: Python<'_>, err: SandboxError) -> PyErr {
    let class = match &err {
        SandboxError::Asset { .. } => "SetupError",
        SandboxError::Runtime(_) => "SandboxFailure",
        SandboxError::Repo { .. } => "RepoNotFoundError",
        SandboxError::Config { .. } => "ConfigError",
        SandboxError::Requirements { .. } => "RequirementsError",
        SandboxError::InvalidOption(_) => "InvalidArgumentError",
        SandboxError::Cancelled => {
            return PyKeyboardInterrupt::new_err("cancelled");
        }
        _ => "FrognanoError",
    };
    error_class(py, class, err.to_string())
}

/// Maps environment errors onto the exception hierarchy.
pub(crate) fn env_err(py: Python<'_>, err: EnvError) -> PyErr {
    match err {
        EnvError::Sandbox(inner) => to_py_err(py, inner),
        EnvError::TaskRecord { .. } | EnvError::Task { .. } | EnvError::Patch(_) => {
            error_class(py, "TaskError", err.to_string())
        }
        EnvError::Repo { .. } => error_class(py, "RepoNotFoundError", err.to_string()),
        EnvError::InvalidOption(_) => error_class(py, "InvalidArgumentError", err.to_string()),
        EnvError::NoEpisode => error_class(py, "EpisodeError", err.to_string()),
        other => error_class(py, "FrognanoError", other.to_string()),
    }
}

/// Core errors out of an evaluation's rollouts: an invalid record is a `TaskError`, a failing
/// local model an `InferenceError`, anything else a `FrognanoError`.
pub(crate) fn core_err(py: Python<'_>, err: frognano_core::Error) -> PyErr {
    match err {
        frognano_core::Error::Invalid { .. } => error_class(py, "TaskError", err.to_string()),
        ref failed if is_onnx_policy_failure(failed) => {
            error_class(py, "InferenceError", err.to_string())
        }
        other => error_class(py, "FrognanoError", other.to_string()),
    }
}

/// Core errors out of a trainer or task source: an invalid training configuration is a
/// `ConfigError`, anything else a `TrainingError`.
pub(crate) fn train_core_err(py: Python<'_>, err: frognano_core::Error) -> PyErr {
    match &err {
        frognano_core::Error::Invalid {
            what: "training configuration",
            ..
        } => error_class(py, "ConfigError", err.to_string()),
        failed if is_onnx_policy_failure(failed) => {
            error_class(py, "InferenceError", err.to_string())
        }
        _ => error_class(py, "TrainingError", err.to_string()),
    }
}

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

/// Maps local-model errors onto the exception hierarchy: an invalid request (options, prompts)
/// is an `InvalidArgumentError`, everything else an `InferenceError`.
pub(crate) fn inference_err(py: Python<'_>, err: InferenceError) -> PyErr {
    let class = match &err {
        InferenceError::InvalidRequest(_) => "InvalidArgumentError",
        _ => "InferenceError",
    };
    error_class(py, class, err.to_string())
}

/// Maps synthesis errors onto the exception hierarchy: an unusable repository is a
/// `SynthesisError`, a bad option an `InvalidArgumentError`, sandbox and environment errors
/// keep their usual classes, and cancellation is a `KeyboardInterrupt`.
pub(crate) fn synth_err(py: Python<'_>, err: SynthError) -> PyErr {
    match err {
        SynthError::Intake { .. } => error_class(py, "SynthesisError", err.to_string()),
        SynthError::InvalidOption(_) | SynthError::Mutate(MutateError::UnknownOperator(_)) => {
            error_class(py, "InvalidArgumentError", err.to_string())
        }
        SynthError::Mutate(_) => error_class(py, "SynthesisError", err.to_string()),
        SynthError::Repo(inner) => env_err(py, inner.into()),
        SynthError::Sandbox(inner) => to_py_err(py, inner),
        SynthError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
    }
}

/// Maps training errors onto the exception hierarchy: an invalid configuration is a
/// `ConfigError`, environment and synthesis failures keep their usual classes, cancellation is
/// a `KeyboardInterrupt`, and the rest (checkpoints, no tasks, failing components) is a
/// `TrainingError`.
pub(crate) fn train_err(py: Python<'_>, err: TrainError) -> PyErr {
    match err {
        TrainError::Config(_) => error_class(py, "ConfigError", err.to_string()),
        TrainError::Env(inner) => env_err(py, inner),
        TrainError::Synth(inner) => synth_err(py, inner),
        TrainError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
        TrainError::Core(inner) => train_core_err(py, inner),
        other => error_class(py, "TrainingError", other.to_string()),
    }
}
