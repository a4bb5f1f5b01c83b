//! [`ServerConfig`]: how `frognano serve` serves a model (folder, name, address, API key,
//! batching, limits, reloads), its defaults, its redacted `Debug` and its validation.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Result, ServeError};

/// How `frognano serve` serves a model.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The model folder (holding `model.onnx`, the tokenizer and the chat template).
    pub model_dir: PathBuf,
    /// The name clients pass as `model` (default: the model folder's name).
    pub served_model_name: Option<String>,
    /// Address to listen on (default 127.0.0.1: this machine only).
    pub host: String,
    /// Port (default 8000; 0: any free port).
    pub port: u16,
    /// Key clients must send as `Authorization: Bearer KEY` (default: none asked).
    pub api_key: Option<String>,
    /// Most requests generated together in one batch.
    pub max_batch: usize,
    /// How long the batcher waits for more requests once one arrived, in milliseconds. Batches
    /// are static (a request that arrives while one runs waits for it to end), so clients that
    /// send together but a few milliseconds apart should land in one batch: with 8 clients on
    /// a 135M model, 20 ms gave full batches and about 20% more tokens/s than 2 ms, at 20 ms
    /// more latency for a lone request.
    pub batch_window_ms: u64,
    /// Largest request body accepted, in bytes (larger: 413).
    pub max_request_bytes: usize,
    /// Tokens generated when a request gives no `max_tokens` (capped by the context left).
    pub default_max_tokens: usize,
    /// ONNX Runtime threads inside an operator (0: one per core).
    pub intra_threads: usize,
    /// Whether clients may make the server load other weights (`POST /v1/frognano/reload`
    /// with a model folder on this machine). Off by default: a client must not make a server
    /// read arbitrary folders unless its operator allowed it.
    pub allow_reload: bool,
    /// Seconds a graceful stop waits for requests in flight (streams included) before it drops
    /// them, so that a client that stalls half-way through its request cannot hold a stop
    /// forever (default 10).
    pub shutdown_grace_s: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            model_dir: PathBuf::new(),
            served_model_name: None,
            host: "127.0.0.1".into(),
            port: 8000,
            api_key: None,
            max_batch: 8,
            batch_window_ms: 20,
            max_request_bytes: 4 << 20,
            default_max_tokens: 256,
            intra_threads: 0,
            allow_reload: false,
            shutdown_grace_s: 10,
        }
    }
}

// The API key stays out of logs and panics.
impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("model_dir", &self.model_dir)
            .field("served_model_name", &self.served_model_name)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("max_batch", &self.max_batch)
            .field("batch_window_ms", &self.batch_window_ms)
            .field("max_request_bytes", &self.max_request_bytes)
            .field("default_max_tokens", &self.default_max_tokens)
            .field("intra_threads", &self.intra_threads)
            .field("allow_reload", &self.allow_reload)
            .field("shutdown_grace_s", &self.shutdown_grace_s)
            .finish()
    }
}

impl ServerConfig {
    /// A configuration serving the model folder `model_dir` with the defaults.
    pub fn new(model_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            model_dir: model_dir.into(),
            ..ServerConfig::default()
        }
    }

    /// Checks the configuration.
    pub fn validate(&self) -> Result<()> {
        let bad = |what, message: String| Err(ServeError::invalid(what, message));
        if !self.model_dir.join("model.onnx").is_file() {
            return bad(
                "model folder",
                format!("{}: no model.onnx", self.model_dir.display()),
            );
        }
        if self.served_model_name.as_deref().is_some_and(str::is_empty) {
            return bad("served model name", "must not be empty".into());
        }
        if self.host.trim().is_empty() {
            return bad("host", "must not be empty".into());
        }
        if self.api_key.as_deref().is_some_and(str::is_empty) {
            return bad("API key", "must not be empty".into());
        }
        if !(1..=256).contains(&self.max_batch) {
            return bad(
                "max_batch",
                format!("must be in 1..=256, got {}", self.max_batch),
            );
        }
        if self.batch_window_ms > 10_000 {
            return bad(
                "batch_window_ms",
                format!("must be at most 10000, got {}", self.batch_window_ms),
            );
        }
        if self.max_request_bytes < 1024 {
            return bad(
                "max_request_bytes",
                format!("must be at least 1024, got {}", self.max_request_bytes),
            );
        }
        if self.default_max_tokens == 0 {
            return bad("default_max_tokens", "must be at least 1".into());
        }
        Ok(())
    }

    /// The name clients pass as `model`: `served_model_name`, else the model folder's name.
    pub fn model_name(&self) -> String {
        self.served_model_name.clone().unwrap_or_else(|| {
            self.model_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "model".into())
        })
    }

    /// Whether `host` only reaches this machine (`localhost` or a loopback address).
    pub fn is_loopback(&self) -> bool {
        let host = self
            .host
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}
