use std::path::PathBuf;

use frognano_core::ErrorKind;

use frognano_repo::RepoError;
use frognano_sandbox::SandboxError;

use frognano_mutate::MutateError;

/// Errors of task synthesis.
///
/// A candidate bug that turns out not to be a task (no failing test, a timeout, a flaky
/// result) is not an error: it is counted in [`crate::SynthStats`]. These are failures of the
/// input (a repository whose suite cannot run, invalid options) or of the machinery.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// The repository's clean test suite cannot serve to validate bugs.
    #[error("repository {}: {reason}", repo.display())]
    Intake {
        /// The repository.
        repo: PathBuf,
        /// Why its suite cannot be used, in words a user can act on.
        reason: String,
    },
    /// An invalid synthesis option.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A mutation operator failed (unknown name, unparseable source).
    #[error(transparent)]
    Mutate(#[from] MutateError),
    /// The repository layer failed (reading or preparing the repository, applying a diff).
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The sandbox failed (not a test failure or a limit, which are results).
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Synthesis was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl SynthError {
    /// What sort of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SynthError::Intake { .. } => ErrorKind::Synthesis,
            SynthError::Mutate(err) => err.kind(),
            SynthError::InvalidOption(_) => ErrorKind::InvalidArgument,
            SynthError::Repo(err) => err.kind(),
            SynthError::Sandbox(err) => err.kind(),
            SynthError::Cancelled => ErrorKind::Cancelled,
        }
    }
}

impl From<SynthError> for frognano_core::Error {
    fn from(err: SynthError) -> Self {
        match err {
            SynthError::InvalidOption(message) => {
                frognano_core::Error::invalid("synthesis option", message)
            }
            other => {
                let kind = other.kind();
                frognano_core::Error::component("task synthesis", kind, other)
            }
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = SynthError> = std::result::Result<T, E>;

frognano_core::impl_kinded_error!(SynthError);
