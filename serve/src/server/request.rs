//! The bodies of the two generation endpoints (`ChatRequest`, `CompletionRequest` and the
//! `SamplingParams` they share: stop strings, seed, stream options, vLLM's extras) and their
//! checking: the prompt's tokens (chat template or string / token-id prompt) and the generation
//! options, into a `Prepared` request for the model thread.

use std::sync::Arc;

use axum::http::StatusCode;
use frognano_llm::ChatMessage;
use frognano_llm::generate::{GenerationOptions, seed_of_row};
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::routes::{ApiError, ApiResult};

/// `stop`: a string or a list of strings.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum StopStrings {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// The sampling parameters both generation endpoints share.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SamplingParams {
    pub(super) model: Option<String>,
    max_tokens: Option<i64>,
    max_completion_tokens: Option<i64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<i64>,
    seed: Option<Value>,
    stop: Option<StopStrings>,
    stop_token_ids: Option<Vec<u32>>,
    ignore_eos: Option<bool>,
    n: Option<i64>,
    best_of: Option<i64>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    return_token_ids: Option<bool>,
    return_tokens_as_token_ids: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ChatRequest {
    messages: Vec<ChatRequestMessage>,
    pub(super) logprobs: Option<bool>,
    pub(super) top_logprobs: Option<i64>,
    add_generation_prompt: Option<bool>,
    #[serde(flatten)]
    pub(super) sampling: SamplingParams,
}

#[derive(Debug, Deserialize)]
struct ChatRequestMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Debug, Deserialize)]
pub(super) struct CompletionRequest {
    prompt: Value,
    pub(super) logprobs: Option<i64>,
    echo: Option<bool>,
    suffix: Option<String>,
    #[serde(flatten)]
    pub(super) sampling: SamplingParams,
}

/// What a generation request asks for, checked.
#[derive(Debug)]
pub(super) struct Prepared {
    pub(super) prompt: Vec<u32>,
    pub(super) options: GenerationOptions,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) logprobs: bool,
    /// Alternatives asked per token (only the chosen token is ever listed).
    pub(super) top_logprobs: usize,
    pub(super) return_token_ids: bool,
    pub(super) tokens_as_ids: bool,
}

fn seed_value(seed: &Value) -> ApiResult<u64> {
    seed.as_u64()
        // Negative seeds (some clients send them) wrap: any integer is a valid seed.
        .or_else(|| seed.as_i64().map(|s| s as u64))
        .ok_or_else(|| ApiError::bad_request(format!("seed must be an integer, got {seed}")))
}

fn generation_options(
    state: &AppState,
    params: &SamplingParams,
    prompt_tokens: usize,
) -> ApiResult<GenerationOptions> {
    if let Some(n) = params.n
        && n != 1
    {
        return Err(ApiError::bad_request(format!(
            "n must be 1 (one choice per request), got {n}"
        )));
    }
    if let Some(best_of) = params.best_of
        && best_of != 1
    {
        return Err(ApiError::bad_request(format!(
            "best_of must be 1, got {best_of}"
        )));
    }
    let context = state.limits.context_length;
    if prompt_tokens >= context {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "context_length_exceeded",
            format!(
                "this model's maximum context length is {context} tokens; the prompt has \
                 {prompt_tokens} tokens (and at least one must be generated)"
            ),
        ));
    }
    let room = context - prompt_tokens;
    let max_tokens = match params.max_completion_tokens.or(params.max_tokens) {
        None => state.default_max_tokens.min(room),
        Some(n) if n < 1 => {
            return Err(ApiError::bad_request(format!(
                "max_tokens must be at least 1, got {n}"
            )));
        }
        // More than the context leaves: generate what fits and finish with `length`.
        Some(n) => usize::try_from(n).unwrap_or(usize::MAX).min(room),
    };
    let temperature = params.temperature.unwrap_or(1.0);
    if !temperature.is_finite() || temperature < 0.0 {
        return Err(ApiError::bad_request(format!(
            "temperature must be >= 0, got {temperature}"
        )));
    }
    let top_p = params.top_p.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::bad_request(format!(
            "top_p must be in (0, 1], got {top_p}"
        )));
    }
    let top_k = match params.top_k {
        None | Some(-1) | Some(0) => 0,
        Some(k) if k > 0 => usize::try_from(k).unwrap_or(0),
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "top_k must be -1, 0 (all tokens) or positive, got {k}"
            )));
        }
    };
    let stop = match &params.stop {
        None => Vec::new(),
        Some(StopStrings::One(s)) => vec![s.clone()],
        Some(StopStrings::Many(list)) => list.clone(),
    };
    // Empty stop strings would end every reply at once; clients mean "no stop".
    let stop: Vec<String> = stop.into_iter().filter(|s| !s.is_empty()).collect();
    if stop.len() > 16 {
        return Err(ApiError::bad_request("at most 16 stop strings"));
    }
    let request_seed = match &params.seed {
        None | Some(Value::Null) => rand::random::<u64>(),
        Some(seed) => seed_value(seed)?,
    };
    if let Some(bad) = params
        .stop_token_ids
        .iter()
        .flatten()
        .find(|&&t| t as usize >= state.limits.vocab_size)
    {
        return Err(ApiError::bad_request(format!(
            "stop token {bad} is outside the vocabulary of {}",
            state.limits.vocab_size
        )));
    }
    let stop_token_ids = if params.ignore_eos.unwrap_or(false) {
        Some(params.stop_token_ids.clone().unwrap_or_default())
    } else {
        // vLLM's `stop_token_ids` end a reply in addition to the end-of-sequence tokens;
        // `None` keeps the model's own.
        params.stop_token_ids.as_ref().map(|extra| {
            let mut ids = state.limits.eos_token_ids.clone();
            ids.extend(extra.iter().copied());
            ids
        })
    };
    let options = GenerationOptions {
        max_new_tokens: max_tokens,
        temperature: temperature as f32,
        top_k,
        top_p: top_p as f32,
        // The same seed gives the same reply as `generate` with that seed, alone or batched.
        seed: seed_of_row(request_seed, 0),
        stop,
        stop_token_ids,
    };
    options.validate().map_err(ApiError::from)?;
    Ok(options)
}

fn message_text(index: usize, content: Option<&Value>) -> ApiResult<String> {
    match content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("text");
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("text", Some(text)) => texts.push(text),
                    ("text", None) => {
                        return Err(ApiError::bad_request(format!(
                            "messages[{index}]: a text part has no `text` string"
                        )));
                    }
                    (other, _) => {
                        return Err(ApiError::bad_request(format!(
                            "messages[{index}]: content parts of type `{other}` are not \
                             supported (text only)"
                        )));
                    }
                }
            }
            Ok(texts.join("\n"))
        }
        Some(other) => Err(ApiError::bad_request(format!(
            "messages[{index}].content must be a string or a list of text parts, got {other}"
        ))),
    }
}

pub(super) fn prepare_chat(state: &Arc<AppState>, request: &ChatRequest) -> ApiResult<Vec<u32>> {
    if request.messages.is_empty() {
        return Err(ApiError::bad_request("messages must not be empty"));
    }
    let messages = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            Ok(ChatMessage::new(
                &m.role,
                message_text(i, m.content.as_ref())?,
            ))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let codec = state.codec();
    if !codec.has_chat_template() {
        return Err(ApiError::bad_request(
            "this model has no chat template; use /v1/completions",
        ));
    }
    let rendered = codec.render_chat(&messages, request.add_generation_prompt.unwrap_or(true))?;
    Ok(codec.encode(&rendered)?)
}

pub(super) fn prepare_completion(
    state: &Arc<AppState>,
    request: &CompletionRequest,
) -> ApiResult<Vec<u32>> {
    if request.echo.unwrap_or(false) {
        return Err(ApiError::bad_request("echo is not supported"));
    }
    if request.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::bad_request("suffix is not supported"));
    }
    let token_ids = |items: &[Value]| -> ApiResult<Vec<u32>> {
        items
            .iter()
            .map(|v| {
                v.as_u64()
                    .and_then(|t| u32::try_from(t).ok())
                    .filter(|&t| (t as usize) < state.limits.vocab_size)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "prompt token {v} is not a token id of this model (vocabulary: {})",
                            state.limits.vocab_size
                        ))
                    })
            })
            .collect()
    };
    let prompt = match &request.prompt {
        Value::String(text) => state.codec().encode(text)?,
        Value::Array(items) if items.iter().all(Value::is_number) => token_ids(items)?,
        // A batch of one prompt (what some clients always send).
        Value::Array(items) if items.len() == 1 => match &items[0] {
            Value::String(text) => state.codec().encode(text)?,
            Value::Array(inner) => token_ids(inner)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "prompt must be a string or a list of token ids, got [{other}]"
                )));
            }
        },
        Value::Array(_) => {
            return Err(ApiError::bad_request(
                "several prompts in one request are not supported; send one request per prompt",
            ));
        }
        other => {
            return Err(ApiError::bad_request(format!(
                "prompt must be a string or a list of token ids, got {other}"
            )));
        }
    };
    Ok(prompt)
}

pub(super) fn prepared(
    state: &AppState,
    prompt: Vec<u32>,
    params: &SamplingParams,
    logprobs: bool,
    top_logprobs: usize,
) -> ApiResult<Prepared> {
    if prompt.is_empty() {
        return Err(ApiError::bad_request("the prompt is empty"));
    }
    let options = generation_options(state, params, prompt.len())?;
    Ok(Prepared {
        prompt,
        options,
        stream: params.stream.unwrap_or(false),
        include_usage: params
            .stream_options
            .and_then(|o| o.include_usage)
            .unwrap_or(false),
        logprobs,
        top_logprobs,
        return_token_ids: params.return_token_ids.unwrap_or(false),
        tokens_as_ids: params.return_tokens_as_token_ids.unwrap_or(false),
    })
}
