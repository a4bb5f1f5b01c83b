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

frognano_core::impl_io_constructor!(pub(crate) AssetError);

impl AssetError {
    /// What sort of failure this is: fetch and verification failures are setup failures, I/O
    /// failures are I/O failures.
    pub fn kind(&self) -> ErrorKind {
        match self {
            AssetError::Fetch { .. } => ErrorKind::Setup,
            AssetError::Io { .. } => ErrorKind::Io,
        }
    }
}

frognano_core::impl_kinded_component_error!(AssetError, "assets");

/// `Result` with [`AssetError`].
pub type Result<T, E = AssetError> = std::result::Result<T, E>;
