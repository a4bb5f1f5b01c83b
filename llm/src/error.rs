//! Errors of the local-model stack.

use std::path::PathBuf;

/// Everything that can go wrong loading or running a local model.
#[derive(Debug, thiserror::Error)]
pub enum InferenceError {
    /// The ONNX Runtime shared library could not be found or loaded.
    #[error("ONNX Runtime: {0}")]
    Runtime(String),
    /// A model folder is missing a file or holds something unusable.
    #[error("model {}: {message}", path.display())]
    Model {
        /// The model folder or file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The tokenizer failed to load, encode or decode.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The chat template failed to parse or render.
    #[error("chat template: {0}")]
    ChatTemplate(String),
    /// A request's options are invalid (temperature, top-p, empty prompt, ...).
    #[error("invalid generation request: {0}")]
    InvalidRequest(String),
    /// ONNX Runtime failed while running the model.
    #[error("inference: {0}")]
    Inference(String),
    /// Setting up the inference environment or fetching/converting a model failed.
    #[error("model setup: {0}")]
    Setup(String),
    /// A file could not be read or written.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias for the local-model stack.
pub type Result<T, E = InferenceError> = std::result::Result<T, E>;

frognano_core::impl_io_constructor!(pub(crate) InferenceError);

impl InferenceError {
    pub(crate) fn model(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        InferenceError::Model {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl From<ort::Error> for InferenceError {
    fn from(err: ort::Error) -> Self {
        InferenceError::Inference(err.to_string())
    }
}

impl InferenceError {
    /// What sort of failure this is: invalid requests are invalid arguments, host I/O failures
    /// I/O errors, everything else an inference failure.
    pub fn kind(&self) -> frognano_core::ErrorKind {
        match self {
            InferenceError::InvalidRequest(_) => frognano_core::ErrorKind::InvalidArgument,
            InferenceError::Io { .. } => frognano_core::ErrorKind::Io,
            _ => frognano_core::ErrorKind::Inference,
        }
    }
}

/// A local model carried upwards as a component (an `OnnxPolicy` acting in a rollout, a model
/// a policy name loads) has failed as a whole: its errors are inference failures whatever their
/// own kind, as every surface has always reported them; the original error stays the source.
impl From<InferenceError> for frognano_core::Error {
    fn from(err: InferenceError) -> Self {
        frognano_core::Error::component("onnx policy", frognano_core::ErrorKind::Inference, err)
    }
}

impl From<frognano_assets::AssetError> for InferenceError {
    fn from(err: frognano_assets::AssetError) -> Self {
        InferenceError::Setup(err.to_string())
    }
}

frognano_core::impl_kinded_error!(InferenceError);
