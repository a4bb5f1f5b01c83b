use std::path::PathBuf;

use frognano_core::ErrorKind;

/// Errors of the sandbox: setup, configuration and host-side failures.
///
/// What the guest does (failing tests, timeouts, memory or output floods, traps) is never an
/// error: it is a [`frognano_core::RunOutcome`] in the returned report.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A runtime asset (CPython image, pytest wheels) is missing, could not be fetched or
    /// failed verification.
    #[error("asset {name}: {message}")]
    Asset {
        /// Which asset.
        name: String,
        /// What went wrong and what to do.
        message: String,
    },
    /// A repository directory is missing or unusable.
    #[error("repository {}: {message}", path.display())]
    Repo {
        /// The repository path the caller gave.
        path: PathBuf,
        /// Why it cannot be used.
        message: String,
    },
    /// `frognano.toml` or the repository metadata is malformed.
    #[error("config {}: {message}", path.display())]
    Config {
        /// The offending file.
        path: PathBuf,
        /// What is wrong in it.
        message: String,
    },
    /// Limits or options are invalid.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// A repository's test requirement could not be provided as a pure-Python wheel.
    #[error("requirements {requirements:?}: {message}")]
    Requirements {
        /// The requirements that failed.
        requirements: Vec<String>,
        /// pip's explanation.
        message: String,
    },
    /// wasmtime failed to compile, instantiate or snapshot the runtime.
    #[error("wasm runtime: {0}")]
    Runtime(String),
    /// The caller cancelled the run.
    #[error("cancelled")]
    Cancelled,
    /// A host I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What the sandbox was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

frognano_core::impl_io_constructor!(pub(crate) SandboxError);

impl SandboxError {
    pub(crate) fn runtime(err: impl std::fmt::Display) -> Self {
        SandboxError::Runtime(format!("{err:#}"))
    }

    /// What sort of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SandboxError::Asset { .. } => ErrorKind::Setup,
            SandboxError::Repo { .. } => ErrorKind::NotFound,
            SandboxError::Config { .. } => ErrorKind::Config,
            SandboxError::InvalidOption(_) => ErrorKind::InvalidArgument,
            SandboxError::Requirements { .. } => ErrorKind::Requirements,
            SandboxError::Runtime(_) => ErrorKind::Sandbox,
            SandboxError::Cancelled => ErrorKind::Cancelled,
            SandboxError::Io { .. } => ErrorKind::Io,
        }
    }
}

impl From<frognano_assets::AssetError> for SandboxError {
    fn from(err: frognano_assets::AssetError) -> Self {
        match err {
            frognano_assets::AssetError::Fetch { name, message } => {
                SandboxError::Asset { name, message }
            }
            frognano_assets::AssetError::Io { context, source } => {
                SandboxError::Io { context, source }
            }
        }
    }
}

frognano_core::impl_kinded_component_error!(SandboxError, "sandbox");

/// `Result` with [`SandboxError`].
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;
