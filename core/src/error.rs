use std::path::PathBuf;

/// What sort of failure an error is, kept typed from the crate that raised it to the bindings.
///
/// Every crate error has a `kind()`; when it is carried upwards as a [`Error`] the kind travels
/// with it (and the original error stays reachable through [`std::error::Error::source`]), so a
/// binding maps kinds to its exceptions or error codes in one place instead of matching text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// A runtime asset (interpreter image, wheels, model files) could not be fetched, verified
    /// or prepared.
    Setup,
    /// The WebAssembly runtime failed (not the code inside it).
    Sandbox,
    /// A repository, bundle or other named path does not exist or cannot be read.
    NotFound,
    /// A configuration file (`frognano.toml`, a training configuration) is malformed.
    Config,
    /// A test requirement cannot be provided as a pure-Python wheel.
    Requirements,
    /// An argument or option is out of range or unknown.
    InvalidArgument,
    /// A task record or task file is malformed, or its bug does not apply.
    Task,
    /// An environment was stepped with no running episode.
    Episode,
    /// An action could not be understood.
    Action,
    /// Task synthesis could not go on (a suite that cannot validate bugs, a failing mutation).
    Synthesis,
    /// Training could not go on (no tasks, an unusable checkpoint, a failing component).
    Training,
    /// A model, local or served, could not be loaded, reached or run.
    Inference,
    /// The caller cancelled the operation.
    Cancelled,
    /// Reading or writing a host file failed.
    Io,
    /// A component supplied by the user (a Python or C policy, learner or task source) failed.
    External,
}

impl ErrorKind {
    /// A stable lowercase name (`"not_found"`, `"invalid_argument"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Setup => "setup",
            ErrorKind::Sandbox => "sandbox",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Config => "config",
            ErrorKind::Requirements => "requirements",
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::Task => "task",
            ErrorKind::Episode => "episode",
            ErrorKind::Action => "action",
            ErrorKind::Synthesis => "synthesis",
            ErrorKind::Training => "training",
            ErrorKind::Inference => "inference",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Io => "io",
            ErrorKind::External => "external",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The boxed source a [`Error::Component`] carries.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of the domain layer: invalid records, actions and configurations, and the errors
/// of the components behind the traits, carried with their kind.
///
/// Sandbox limits (timeouts, memory caps) are not errors: they are [`crate::RunOutcome`]s
/// of a report, because a policy that writes an infinite loop has produced a result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A record (task, config, action) failed validation.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// What kind of failure this is (a task, an action, an argument, a configuration).
        kind: ErrorKind,
        /// What was being validated, e.g. "task" or "limits".
        what: &'static str,
        /// What was wrong and, where possible, how to fix it.
        message: String,
    },
    /// A file or directory the caller named does not exist or is not usable.
    #[error("{}: {message}", path.display())]
    Path {
        /// The offending path.
        path: PathBuf,
        /// Why it cannot be used.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A JSON record could not be parsed or written.
    #[error("JSON error: {0}")]
    Json(#[from] serde_json::Error),
    /// A component (environment, policy, synthesizer, trainer) failed; the original error is
    /// its [`source`](std::error::Error::source).
    #[error("{component}: {source}")]
    Component {
        /// Which component failed.
        component: &'static str,
        /// What sort of failure it is.
        kind: ErrorKind,
        /// The component's own error.
        #[source]
        source: BoxError,
    },
}

impl Error {
    /// A validation error of an argument or option (`ErrorKind::InvalidArgument`).
    pub fn invalid(what: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            kind: ErrorKind::InvalidArgument,
            what,
            message: message.into(),
        }
    }

    /// A validation error of the given kind (a task, an action, a configuration).
    pub fn invalid_as(kind: ErrorKind, what: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            kind,
            what,
            message: message.into(),
        }
    }

    /// Carries a component's error upwards with its kind.
    pub fn component(
        component: &'static str,
        kind: ErrorKind,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Component {
            component,
            kind,
            source: source.into(),
        }
    }

    /// What sort of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Invalid { kind, .. } | Error::Component { kind, .. } => *kind,
            Error::Path { .. } => ErrorKind::NotFound,
            Error::Io(err) if err.kind() == std::io::ErrorKind::NotFound => ErrorKind::NotFound,
            Error::Io(_) => ErrorKind::Io,
            Error::Json(_) => ErrorKind::InvalidArgument,
        }
    }

    /// The component's own error of type `E`, when this error carries one (for example the
    /// exception a Python policy raised, to re-raise it as itself).
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Error::Component { source, .. } => source.downcast_ref::<E>(),
            _ => None,
        }
    }
}

/// `Result` with the domain [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Gives a crate's error type, which has an `Io { context: String, source: std::io::Error }`
/// variant, the constructor `io(context)` for `map_err`: it wraps an I/O error with what was
/// being done.
///
/// ```
/// #[derive(Debug)]
/// enum MyError {
///     Io { context: String, source: std::io::Error },
/// }
/// frognano_core::impl_io_constructor!(pub(crate) MyError);
/// let err = MyError::io("read x")(std::io::ErrorKind::NotFound.into());
/// assert!(matches!(err, MyError::Io { context, .. } if context == "read x"));
/// ```
#[macro_export]
macro_rules! impl_io_constructor {
    ($vis:vis $error:ident) => {
        impl $error {
            /// Wraps an I/O error with what was being done.
            $vis fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> $error {
                let context = context.into();
                move |source| $error::Io { context, source }
            }
        }
    };
}

/// Carries a crate's error type (one with a `kind()`) into [`Error`] as the failure of the named
/// component, keeping its kind and the error itself as the source.
#[macro_export]
macro_rules! impl_into_component_error {
    ($error:ty, $component:literal) => {
        impl From<$error> for $crate::Error {
            fn from(err: $error) -> Self {
                let kind = err.kind();
                $crate::Error::component($component, kind, err)
            }
        }
    };
}

/// Implements [`KindedError`] for a crate's error type through its inherent `kind()`: the
/// bindings reach every library error's kind this one way.
#[macro_export]
macro_rules! impl_kinded_error {
    ($error:ty) => {
        impl $crate::KindedError for $error {
            fn kind(&self) -> $crate::ErrorKind {
                <$error>::kind(self)
            }
        }
    };
}

/// Both [`impl_into_component_error!`] and [`impl_kinded_error!`]: what a crate whose errors
/// all travel into [`Error`] as the named component's failure needs.
#[macro_export]
macro_rules! impl_kinded_component_error {
    ($error:ty, $component:literal) => {
        $crate::impl_into_component_error!($error, $component);
        $crate::impl_kinded_error!($error);
    };
}

/// An error of any FrogNano crate, by what kind of failure it is: the one way the bindings
/// reach every library error's kind (Python's exception class, C's error code), each crate's
/// error type implementing it beside its definition.
pub trait KindedError: std::error::Error + Send + Sync + 'static {
    /// What sort of failure this is.
    fn kind(&self) -> ErrorKind;
}

impl KindedError for Error {
    fn kind(&self) -> ErrorKind {
        Error::kind(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("inner failure")]
    struct Inner;

    #[test]
    fn component_errors_keep_their_kind_and_source() {
        let err = Error::component("trainer", ErrorKind::Training, Inner);
        assert_eq!(err.kind(), ErrorKind::Training);
        assert_eq!(err.to_string(), "trainer: inner failure");
        assert!(err.downcast_ref::<Inner>().is_some());
        let source = std::error::Error::source(&err).map(|s| s.to_string());
        assert_eq!(source.as_deref(), Some("inner failure"));
    }

    #[test]
    fn io_not_found_is_not_found() {
        let err = Error::from(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert_eq!(
            Error::invalid("limits", "x").kind(),
            ErrorKind::InvalidArgument
        );
    }
}
