use std::path::PathBuf;

use frognano_core::ErrorKind;
use frognano_sandbox::SandboxError;

/// Errors of the repository layer: repositories and bundles that cannot be used, diffs that do
/// not parse or apply, and host I/O.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// A repository (directory or bundle) does not exist or cannot be used.
    #[error("repository {}: {message}", path.display())]
    NotFound {
        /// The repository or bundle.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// A unified diff could not be parsed or applied.
    #[error("patch: {0}")]
    Patch(String),
    /// The sandbox could not prepare a repository (configuration, requirements).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Reading or writing a host file failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The I/O error.
        source: std::io::Error,
    },
}

frognano_core::impl_io_constructor!(pub RepoError);

impl RepoError {
    /// What sort of failure this is: missing repositories and bundles are
    /// [`ErrorKind::NotFound`], diffs that do not parse or apply [`ErrorKind::Task`].
    pub fn kind(&self) -> ErrorKind {
        match self {
            RepoError::NotFound { .. } => ErrorKind::NotFound,
            RepoError::Patch(_) => ErrorKind::Task,
            RepoError::Sandbox(err) => err.kind(),
            RepoError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                ErrorKind::NotFound
            }
            RepoError::Io { .. } => ErrorKind::Io,
        }
    }
}

frognano_core::impl_kinded_component_error!(RepoError, "repository");

/// `Result` with [`RepoError`].
pub type Result<T, E = RepoError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let missing = RepoError::NotFound {
            path: "/nowhere".into(),
            message: "not a directory".into(),
        };
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        assert_eq!(missing.to_string(), "repository /nowhere: not a directory");
        assert_eq!(RepoError::Patch("x".into()).kind(), ErrorKind::Task);
        let denied =
            RepoError::io("write x")(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert_eq!(denied.kind(), ErrorKind::Io);
        let gone = RepoError::io("read x")(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(gone.kind(), ErrorKind::NotFound);
        assert_eq!(frognano_core::Error::from(gone).kind(), ErrorKind::NotFound);
    }
}
