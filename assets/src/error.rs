//! Errors of asset fetching and caching.

use frognano_core::ErrorKind;

/// Everything that can go wrong fetching, verifying or caching an asset.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    /// An asset could not be fetched (pip is missing or failed), is not where it should be, or
    /// failed verification.
    #[error("asset {name}: {message}")]
    Fetch {
        /// Which asset.
        name: String,
        /// What went wrong and what to do.
        message: String,
    },
    /// A host I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl AssetError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| AssetError::Io { context, source }
    }

    /// What sort of failure this is: fetch and verification failures are setup failures, I/O
    /// failures are I/O failures.
    pub fn kind(&self) -> ErrorKind {
        match self {
            AssetError::Fetch { .. } => ErrorKind::Setup,
            AssetError::Io { .. } => ErrorKind::Io,
        }
    }
}

impl From<AssetError> for frognano_core::Error {
    fn from(err: AssetError) -> Self {
        let kind = err.kind();
        frognano_core::Error::component("assets", kind, err)
    }
}

/// `Result` with [`AssetError`].
pub type Result<T, E = AssetError> = std::result::Result<T, E>;
