use frognano_core::ErrorKind;
use frognano_env::EnvError;
use frognano_synth::SynthError;

/// Errors of training: invalid configurations, checkpoints that cannot be used, and failures of
/// the layers below (environments, synthesis, the policy).
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// An invalid option or configuration file.
    #[error("invalid training configuration: {0}")]
    Config(String),
    /// A checkpoint that cannot be written or read back.
    #[error("checkpoint {path}: {reason}")]
    Checkpoint {
        /// The checkpoint file.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// No tasks could be proposed (every family ran dry, or an empty task set).
    #[error("no tasks to train on: {0}")]
    NoTasks(String),
    /// The environment layer failed.
    #[error(transparent)]
    Env(#[from] EnvError),
    /// Task synthesis failed.
    #[error(transparent)]
    Synth(#[from] SynthError),
    /// A component (policy, learner, synthesizer) failed.
    #[error(transparent)]
    Core(#[from] frognano_core::Error),
    /// Reading or writing metrics, plots or task files failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
    /// The learner process failed a request or died.
    #[error("learner ({kind}): {message}")]
    Learner {
        /// What failed, as the learner names it (`batch`, `config`, `model`, `io`,
        /// `internal`), or `died` / `protocol` / `setup` for the process itself.
        kind: String,
        /// The learner's message (for a process that died: the last lines it wrote).
        message: String,
    },
    /// Training was cancelled.
    #[error("cancelled")]
    Cancelled,
}

frognano_core::impl_io_constructor!(pub(crate) TrainError);

impl TrainError {
    /// What sort of failure this is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TrainError::Config(_) => ErrorKind::Config,
            TrainError::Checkpoint { .. } | TrainError::NoTasks(_) => ErrorKind::Training,
            TrainError::Env(err) => err.kind(),
            TrainError::Synth(err) => err.kind(),
            TrainError::Core(err) => err.kind(),
            TrainError::Io { .. } => ErrorKind::Io,
            TrainError::Cancelled => ErrorKind::Cancelled,
            TrainError::Learner { kind, .. } => match kind.as_str() {
                "batch" => ErrorKind::InvalidArgument,
                "config" => ErrorKind::Config,
                "setup" => ErrorKind::Setup,
                "io" => ErrorKind::Io,
                _ => ErrorKind::Training,
            },
        }
    }
}

impl From<TrainError> for frognano_core::Error {
    fn from(err: TrainError) -> Self {
        match err {
            TrainError::Core(e) => e,
            TrainError::Config(message) => frognano_core::Error::invalid_as(
                ErrorKind::Config,
                "training configuration",
                message,
            ),
            other => {
                let kind = other.kind();
                frognano_core::Error::component("trainer", kind, other)
            }
        }
    }
}

/// `Result` with [`TrainError`].
pub type Result<T, E = TrainError> = std::result::Result<T, E>;

frognano_core::impl_kinded_error!(TrainError);
