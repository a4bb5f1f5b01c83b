use std::path::PathBuf;

use frognano_core::ErrorKind;

use frognano_repo::RepoError;
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
    /// A domain-level validation error, or the failure of a component behind a trait (a
    /// policy, another environment).
    #[error(transparent)]
    Core(frognano_core::Error),
    /// Reading or writing a host file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

frognano_core::impl_io_constructor!(pub(crate) EnvError);

impl EnvError {
    /// What sort of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            EnvError::TaskRecord { .. } | EnvError::Task { .. } | EnvError::Patch(_) => {
                ErrorKind::Task
            }
            EnvError::Repo { .. } => ErrorKind::NotFound,
            EnvError::InvalidOption(_) => ErrorKind::InvalidArgument,
            EnvError::NoEpisode => ErrorKind::Episode,
            EnvError::Sandbox(err) => err.kind(),
            EnvError::Core(err) => err.kind(),
            EnvError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            EnvError::Io { .. } => ErrorKind::Io,
        }
    }
}

/// Repository errors keep their variants' meaning here: a missing repository is
/// [`EnvError::Repo`], a diff that does not apply [`EnvError::Patch`].
impl From<RepoError> for EnvError {
    fn from(err: RepoError) -> Self {
        match err {
            RepoError::NotFound { path, message } => EnvError::Repo { path, message },
            RepoError::Patch(message) => EnvError::Patch(message),
            RepoError::Sandbox(inner) => EnvError::Sandbox(inner),
            RepoError::Io { context, source } => EnvError::Io { context, source },
        }
    }
}

/// The inverse of `From<EnvError> for frognano_core::Error`: an environment error carried
/// through the [`frognano_core::Environment`] trait comes back as itself.
impl From<frognano_core::Error> for EnvError {
    fn from(err: frognano_core::Error) -> Self {
        match err {
            frognano_core::Error::Component {
                component,
                kind,
                source,
            } => match source.downcast::<EnvError>() {
                Ok(inner) => *inner,
                Err(source) => EnvError::Core(frognano_core::Error::Component {
                    component,
                    kind,
                    source,
                }),
            },
            other => EnvError::Core(other),
        }
    }
}

impl From<EnvError> for frognano_core::Error {
    fn from(err: EnvError) -> Self {
        match err {
            EnvError::Core(inner) => inner,
            other => {
                let kind = other.kind();
                frognano_core::Error::component("environment", kind, other)
            }
        }
    }
}

/// `Result` with [`EnvError`].
pub type Result<T, E = EnvError> = std::result::Result<T, E>;

frognano_core::impl_kinded_error!(EnvError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_round_trip_through_the_domain_error() {
        let err = EnvError::Task {
            task: "t".into(),
            message: "bad".into(),
        };
        let text = err.to_string();
        let back = EnvError::from(frognano_core::Error::from(err));
        assert!(matches!(back, EnvError::Task { .. }), "{back:?}");
        assert_eq!(back.to_string(), text);
        let invalid = frognano_core::Error::invalid("limits", "x");
        assert_eq!(EnvError::from(invalid).kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn repository_errors_keep_their_kind() {
        let missing = EnvError::from(RepoError::NotFound {
            path: "/nowhere".into(),
            message: "not a directory".into(),
        });
        assert!(matches!(missing, EnvError::Repo { .. }));
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        assert_eq!(missing.to_string(), "repository /nowhere: not a directory");
        let patch = EnvError::from(RepoError::Patch("m.py: no such file".into()));
        assert_eq!(patch.kind(), ErrorKind::Task);
        assert_eq!(patch.to_string(), "patch: m.py: no such file");
    }
}
