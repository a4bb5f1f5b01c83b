use std::path::PathBuf;

use frognano_sandbox::SandboxError;

/// Errors of the environment layer.
///
/// What an agent does wrong (a malformed action, a path outside the workspace, an edit that
/// does not match) is never an error here: it becomes an error observation. These are failures
/// of the caller's input (task files, repositories, configuration) or of the machinery.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    /// A task-set file holds a malformed record.
    #[error("{}:{line}: {message}", path.display())]
    TaskRecord {
        /// The task file.
        path: PathBuf,
        /// 1-based line of the record.
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// A task is invalid (no repository, a patch that does not apply, ...).
    #[error("task {task}: {message}")]
    Task {
        /// The task id.
        task: String,
        /// What is wrong.
        message: String,
    },
    /// A unified diff could not be parsed or applied.
    #[error("patch: {0}")]
    Patch(String),
    /// A repository (directory or bundle) cannot be used.
    #[error("repository {}: {message}", path.display())]
    Repo {
        /// The repository or bundle.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// An invalid environment option.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// `step` was called without a running episode.
    #[error("no episode is running: call reset(task) first (the last one ended)")]
    NoEpisode,
    /// The sandbox failed (not a test failure or a limit, which are results).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// A domain-level validation error.
    #[error(transparent)]
    Core(#[from] frognano_core::Error),
    /// Reading or writing a host file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl EnvError {
    /// Wraps an I/O error with what was being done.
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> EnvError {
        let context = context.into();
        move |source| EnvError::Io { context, source }
    }
}

impl From<EnvError> for frognano_core::Error {
    fn from(err: EnvError) -> Self {
        match err {
            EnvError::Core(inner) => inner,
            other => frognano_core::Error::Component {
                component: "environment",
                message: other.to_string(),
            },
        }
    }
}

/// `Result` with [`EnvError`].
pub type Result<T, E = EnvError> = std::result::Result<T, E>;
