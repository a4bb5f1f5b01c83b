use std::path::PathBuf;

/// Errors of the domain layer: invalid records, actions and configurations.
///
/// Sandbox limits (timeouts, memory caps) are not errors: they are [`crate::RunOutcome`]s
/// of a report, because a policy that writes an infinite loop has produced a result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A record (task, config, action) failed validation.
    #[error("invalid {kind}: {message}")]
    Invalid {
        /// What was being validated, e.g. "task" or "limits".
        kind: &'static str,
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
    /// A component (environment, policy, synthesizer, trainer) failed.
    #[error("{component}: {message}")]
    Component {
        /// Which component failed.
        component: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl Error {
    /// A validation error for a record of the given kind.
    pub fn invalid(kind: &'static str, message: impl Into<String>) -> Self {
        Error::Invalid {
            kind,
            message: message.into(),
        }
    }
}

/// `Result` with the domain [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
