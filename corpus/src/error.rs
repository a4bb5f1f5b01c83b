use std::path::PathBuf;

use frognano_core::ErrorKind;

/// Errors of corpus commands: a malformed list or corpus directory, or the machinery failing.
///
/// A package that cannot become an environment (its sdist is malformed, its suite needs a C
/// extension, it hangs) is not an error: its manifest records the reason and the build goes on.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    /// A package spec could not be parsed.
    #[error("{origin}: {message}")]
    Spec {
        /// Where the spec came from (`LIST:LINE` or `argument`).
        origin: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// The corpus directory is missing, or a file in it is malformed.
    #[error("corpus {}: {message}", path.display())]
    Corpus {
        /// The offending path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An invalid option.
    #[error("invalid option: {0}")]
    InvalidOption(String),
    /// The sandbox failed to start.
    #[error(transparent)]
    Sandbox(#[from] frognano_sandbox::SandboxError),
    /// Task synthesis failed outside a single package (options, machinery).
    #[error(transparent)]
    Synth(#[from] frognano_synth::SynthError),
    /// Writing a task set or dataset failed.
    #[error(transparent)]
    Env(#[from] frognano_env::EnvError),
    /// The work was cancelled (Ctrl-C); finished entries are kept.
    #[error("cancelled")]
    Cancelled,
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

frognano_core::impl_io_constructor!(pub(crate) CorpusError);

impl CorpusError {
    /// What sort of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CorpusError::Spec { .. } | CorpusError::InvalidOption(_) => ErrorKind::InvalidArgument,
            CorpusError::Corpus { .. } => ErrorKind::Config,
            CorpusError::Sandbox(err) => err.kind(),
            CorpusError::Synth(err) => err.kind(),
            CorpusError::Env(err) => err.kind(),
            CorpusError::Cancelled => ErrorKind::Cancelled,
            CorpusError::Io { .. } => ErrorKind::Io,
        }
    }
}

frognano_core::impl_kinded_component_error!(CorpusError, "corpus");

/// `Result` with [`CorpusError`].
pub type Result<T, E = CorpusError> = std::result::Result<T, E>;
