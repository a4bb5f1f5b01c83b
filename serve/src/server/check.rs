//! [`RequestChecker`]: a generation request body checked exactly as the server checks one before
//! queueing it (JSON shape, model name, log-probs, chat template, tokenizer, generation options),
//! with no model thread and no generation. The request path's fuzz target runs on it; a client
//! can use it to validate payloads offline.

use std::sync::{Arc, RwLock, mpsc as std_mpsc};

use frognano_llm::{ModelConfig, TextCodec};

use super::request::{ChatRequest, CompletionRequest};
use super::routes::{ApiError, GenerationRequest, check_generation, parse_body};
use super::{AppState, ModelLimits, ServerConfig};
use crate::error::Result;

/// The two generation endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/completions`.
    Completions,
}

/// A request the server would refuse: the HTTP status and the error message of its reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The reply's status code (400, 404, 413 ...).
    pub status: u16,
    /// The reply's `error.message`.
    pub message: String,
}

/// Checks generation request bodies as a server over the same model folder would.
#[derive(Debug)]
pub struct RequestChecker {
    state: Arc<AppState>,
    max_request_bytes: usize,
}

impl RequestChecker {
    /// Reads the tokenizer and the model's limits from `config.model_dir` (no ONNX session is
    /// made); the served name, default `max_tokens` and request size limit come from `config`.
    pub fn load(config: &ServerConfig) -> Result<Self> {
        config.validate()?;
        let model = ModelConfig::load(&config.model_dir)?;
        let codec = TextCodec::load(&config.model_dir)?;
        // Nothing is ever queued: the receiving end is dropped at once.
        let (jobs, _) = std_mpsc::channel();
        let state = AppState {
            model_name: config.model_name(),
            api_key: None,
            codec: Arc::new(RwLock::new(Arc::new(codec))),
            limits: ModelLimits {
                vocab_size: model.vocab_size,
                context_length: model.context_length,
                eos_token_ids: model.eos_token_ids.clone(),
            },
            default_max_tokens: config.default_max_tokens,
            allow_reload: false,
            jobs,
            counters: Arc::default(),
            created: 0,
        };
        Ok(RequestChecker {
            state: Arc::new(state),
            max_request_bytes: config.max_request_bytes,
        })
    }

    /// The prompt's token count when the server would accept `body` at `endpoint`, else the
    /// status and message of its error reply.
    pub fn check(&self, endpoint: Endpoint, body: &[u8]) -> std::result::Result<usize, Rejection> {
        match endpoint {
            Endpoint::ChatCompletions => self.check_as::<ChatRequest>(body),
            Endpoint::Completions => self.check_as::<CompletionRequest>(body),
        }
    }

    fn check_as<R: GenerationRequest>(&self, body: &[u8]) -> std::result::Result<usize, Rejection> {
        let checked = if body.len() > self.max_request_bytes {
            Err(ApiError::too_large())
        } else {
            parse_body::<R>(Ok(body.to_vec().into()))
                .and_then(|request| check_generation(&self.state, &request))
        };
        checked
            .map(|prepared| prepared.prompt.len())
            .map_err(|err| Rejection {
                status: err.status().as_u16(),
                message: err.message().to_string(),
            })
    }
}
