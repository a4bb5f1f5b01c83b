//! Errors: the exception classes of the package, named once, and the one mapping of the
//! library's error kinds onto them.
//!
//! The classes are declared once, in Python (`frognano/_errors.py`, where they can also derive
//! from built-in exceptions such as `FileNotFoundError` and `ValueError`). [`Exception`] names
//! each of them once on this side, and [`load`] looks every one up when the module is imported:
//! a class missing from `_errors.py` fails the import, and a misspelt variant fails the build,
//! never the first error that would raise it.

use frognano_core::ErrorKind;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// Declares [`Exception`] from one table of variants and their class names, with `ALL` (every
/// class, in the order [`load`] keeps them) and `class_name`.
macro_rules! exceptions {
    ($($variant:ident => $class:literal,)*) => {
        /// The exception classes of `frognano._errors`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Exception {
            $($variant,)*
        }

        impl Exception {
            /// Every class, in the order [`load`] keeps them.
            const ALL: &[Exception] = &[$(Exception::$variant,)*];

            /// The class's name in `frognano._errors`.
            fn class_name(self) -> &'static str {
                match self {
                    $(Exception::$variant => $class,)*
                }
            }
        }
    };
}

exceptions! {
    Frognano => "FrognanoError",
    Setup => "SetupError",
    SandboxFailure => "SandboxFailure",
    RepoNotFound => "RepoNotFoundError",
    Config => "ConfigError",
    Requirements => "RequirementsError",
    InvalidArgument => "InvalidArgumentError",
    Task => "TaskError",
    Episode => "EpisodeError",
    Action => "ActionError",
    Synthesis => "SynthesisError",
    Training => "TrainingError",
    Inference => "InferenceError",
}

impl Exception {
    /// The class of an error kind; `None` for a cancelled call (a `KeyboardInterrupt`).
    fn of_kind(kind: ErrorKind) -> Option<Exception> {
        Some(match kind {
            ErrorKind::Setup => Exception::Setup,
            ErrorKind::Sandbox => Exception::SandboxFailure,
            ErrorKind::NotFound => Exception::RepoNotFound,
            ErrorKind::Config => Exception::Config,
            ErrorKind::Requirements => Exception::Requirements,
            ErrorKind::InvalidArgument => Exception::InvalidArgument,
            ErrorKind::Task => Exception::Task,
            ErrorKind::Episode => Exception::Episode,
            ErrorKind::Action => Exception::Action,
            ErrorKind::Synthesis => Exception::Synthesis,
            ErrorKind::Training => Exception::Training,
            ErrorKind::Inference => Exception::Inference,
            ErrorKind::Cancelled => return None,
            // Host I/O, a failing user component without an exception of its own, and any
            // kind added later: the base class.
            _ => Exception::Frognano,
        })
    }

    /// An exception of this class with `message`.
    pub(crate) fn err(self, py: Python<'_>, message: impl Into<String>) -> PyErr {
        let message = message.into();
        match CLASSES.get(py) {
            Some(classes) => PyErr::from_type(classes[self as usize].bind(py).clone(), message),
            // Only before the module finished importing, which raises nothing of its own.
            None => PyRuntimeError::new_err(message),
        }
    }
}

/// The classes of [`Exception::ALL`], looked up once.
static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// Looks up every exception class in `frognano._errors`; called when the module is imported,
/// so a missing class or one that is not an exception fails the import.
pub(crate) fn load(py: Python<'_>) -> PyResult<()> {
    let module = py.import("frognano._errors")?;
    let base = py.get_type::<pyo3::exceptions::PyException>();
    let mut classes = Vec::with_capacity(Exception::ALL.len());
    for (index, exception) in Exception::ALL.iter().enumerate() {
        debug_assert_eq!(*exception as usize, index);
        let class = module
            .getattr(exception.class_name())?
            .cast_into::<PyType>()
            .map_err(PyErr::from)?;
        if !class.is_subclass(&base)? {
            return Err(PyRuntimeError::new_err(format!(
                "frognano._errors.{} is not an exception class",
                exception.class_name()
            )));
        }
        classes.push(class.unbind());
    }
    let _ = CLASSES.set(py, classes);
    Ok(())
}

/// The exception of a library error: the class of its kind, with its message; a cancelled
/// call is a `KeyboardInterrupt`.
pub(crate) fn py_err(py: Python<'_>, err: impl frognano_core::KindedError) -> PyErr {
    match Exception::of_kind(err.kind()) {
        Some(class) => class.err(py, err.to_string()),
        None => PyKeyboardInterrupt::new_err("cancelled"),
    }
}
