//! [`ServeError`]: what can go wrong talking to, or serving, a model over HTTP.

use thiserror::Error;

/// Errors of the served-model client and server.
#[derive(Debug, Error)]
pub enum ServeError {
    /// A configuration or request was invalid (bad URL, empty model name, bad option).
    #[error("invalid {what}: {message}")]
    Invalid {
        /// What was invalid.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The server could not be reached, or the connection dropped (after the retries).
    #[error("cannot reach the model server at {url}: {message}")]
    Connect {
        /// The URL asked.
        url: String,
        /// Why.
        message: String,
    },
    /// The server did not answer in time.
    #[error("the model server at {url} did not answer within {seconds} s")]
    Timeout {
        /// The URL asked.
        url: String,
        /// The per-request timeout.
        seconds: f64,
    },
    /// The server answered with an error status.
    #[error("the model server answered {status} to {url}: {message}")]
    Status {
        /// The URL asked.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The error message the server gave (trimmed).
        message: String,
    },
    /// The server's answer was not the API's shape (not JSON, missing fields, too large).
    #[error("bad reply from the model server at {url}: {message}")]
    BadReply {
        /// The URL asked.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The local model behind `frognano serve` failed.
    #[error(transparent)]
    Inference(#[from] frognano_llm::InferenceError),
    /// A socket or file could not be used.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl ServeError {
    pub(crate) fn invalid(what: &'static str, message: impl Into<String>) -> Self {
        ServeError::Invalid {
            what,
            message: message.into(),
        }
    }

    /// Whether asking again may succeed (dropped connections, timeouts, 429 and 5xx).
    pub fn is_retryable(&self) -> bool {
        match self {
            ServeError::Connect { .. } | ServeError::Timeout { .. } => true,
            ServeError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// Results of this crate.
pub type Result<T, E = ServeError> = std::result::Result<T, E>;

impl ServeError {
    /// What sort of failure this is: invalid options are `InvalidArgument`, file and socket
    /// failures `Io`, everything about the model or its server `Inference`.
    pub fn kind(&self) -> frognano_core::ErrorKind {
        use frognano_core::ErrorKind;
        match self {
            ServeError::Invalid { .. } => ErrorKind::InvalidArgument,
            ServeError::Io { .. } => ErrorKind::Io,
            ServeError::Inference(e) => e.kind(),
            _ => ErrorKind::Inference,
        }
    }
}

frognano_core::impl_kinded_component_error!(ServeError, "served model");
