//! Replies of OpenAI-compatible servers read into what a policy needs: text or a tool call,
//! log-probs and token ids in every form the servers send them, and the errors that name what
//! was wrong with a reply.

use frognano_core::ToolCall;
use serde_json::{Map, Value};

use super::HttpApi;
use crate::error::{Result, ServeError};

/// What one request brought back.
#[derive(Debug, Default)]
pub(super) struct Reply {
    pub(super) text: String,
    pub(super) tool_call: Option<ToolCall>,
    pub(super) finish_reason: Option<String>,
    pub(super) logprobs: Vec<f32>,
    pub(super) token_ids: Option<Vec<u32>>,
    pub(super) prompt_ids: Option<Vec<u32>>,
    pub(super) usage: Option<Value>,
}

pub(super) fn too_large(url: &str, limit: usize) -> ServeError {
    ServeError::BadReply {
        url: url.to_string(),
        message: format!("the reply is larger than {limit} bytes (max_reply_bytes)"),
    }
}

pub(super) fn parse_json(url: &str, bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| ServeError::BadReply {
        url: url.to_string(),
        message: format!("not JSON ({e}): {}", snippet(bytes)),
    })
}

fn snippet(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

pub(super) fn status_error(url: &str, status: u16, body: &[u8]) -> ServeError {
    // OpenAI's shape is {"error": {"message": ...}}; some servers send {"error": "..."} or
    // {"detail": ...} (FastAPI), others plain text.
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            let error = v.get("error").or_else(|| v.get("detail"))?;
            Some(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| match error {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    }),
            )
        })
        .unwrap_or_else(|| snippet(body));
    ServeError::Status {
        url: url.to_string(),
        status,
        message,
    }
}

/// `"token_id:123"` (vLLM's `return_tokens_as_token_ids`) as 123.
fn token_id_of(token: &str) -> Option<u32> {
    token.strip_prefix("token_id:")?.parse().ok()
}

fn ids_of(value: Option<&Value>) -> Option<Vec<u32>> {
    value?
        .as_array()?
        .iter()
        .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}

/// The action, log-probs and token ids of a chat or completions reply.
pub(super) fn parse_reply(url: &str, value: &Value, api: HttpApi) -> Result<Reply> {
    let bad = |message: &str| ServeError::BadReply {
        url: url.to_string(),
        message: format!("{message}: {}", snippet(value.to_string().as_bytes())),
    };
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        return Err(ServeError::Status {
            url: url.to_string(),
            status: 500,
            message: error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_string),
        });
    }
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| bad("no choices"))?;
    let mut reply = Reply {
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: value.get("usage").cloned(),
        prompt_ids: ids_of(value.get("prompt_token_ids"))
            .or_else(|| ids_of(choice.get("prompt_token_ids"))),
        token_ids: ids_of(choice.get("token_ids")),
        ..Reply::default()
    };
    let logprobs = choice.get("logprobs").filter(|l| !l.is_null());
    let mut ids_from_tokens: Option<Vec<u32>> = Some(Vec::new());
    match api {
        HttpApi::Chat => {
            let message = choice.get("message").ok_or_else(|| bad("no message"))?;
            reply.text = match message.get("content") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(_) => return Err(bad("the message content is not text")),
            };
            if let Some(call) = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .and_then(|calls| calls.first())
            {
                let function = call
                    .get("function")
                    .ok_or_else(|| bad("a tool call without a function"))?;
                let name = function
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("a tool call without a name"))?;
                // Arguments are a JSON string by the API; some servers send the object.
                let arguments = match function.get("arguments") {
                    Some(Value::String(s)) => {
                        serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                    }
                    Some(other) => other.clone(),
                    None => Value::Object(Map::new()),
                };
                reply.tool_call = Some(ToolCall {
                    name: name.to_string(),
                    arguments,
                });
            }
            if let Some(entries) = logprobs
                .and_then(|l| l.get("content"))
                .and_then(Value::as_array)
            {
                push_logprob_entries(entries, &mut reply.logprobs, &mut ids_from_tokens)
                    .map_err(bad)?;
            }
        }
        HttpApi::Completions => {
            reply.text = choice
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("a completion without text"))?
                .to_string();
            // llama.cpp's server answers completions with the chat form (a `content` list);
            // vLLM and OpenAI's legacy form has `token_logprobs` and `tokens` arrays.
            if let Some(entries) = logprobs
                .and_then(|l| l.get("content"))
                .and_then(Value::as_array)
            {
                push_logprob_entries(entries, &mut reply.logprobs, &mut ids_from_tokens)
                    .map_err(bad)?;
            } else if let Some(logprobs) = logprobs {
                let values = logprobs
                    .get("token_logprobs")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for v in &values {
                    // The first prompt token's log-prob is null when a server echoes the prompt.
                    reply.logprobs.push(v.as_f64().unwrap_or(f64::NAN) as f32);
                }
                match logprobs.get("tokens").and_then(Value::as_array) {
                    Some(tokens) => {
                        for token in tokens {
                            match (&mut ids_from_tokens, token.as_str().and_then(token_id_of)) {
                                (Some(ids), Some(id)) => ids.push(id),
                                _ => ids_from_tokens = None,
                            }
                        }
                    }
                    None => ids_from_tokens = None,
                }
            }
        }
    }
    if reply.logprobs.iter().any(|l| !l.is_finite()) {
        return Err(bad("a log-prob is not a finite number"));
    }
    if reply.token_ids.is_none() {
        reply.token_ids = ids_from_tokens.filter(|ids| !ids.is_empty());
    }
    Ok(reply)
}

/// Appends the log-probs of OpenAI's chat form (`[{"token", "logprob", ...}]`) and the token
/// ids spelled in its tokens (`token_id:N`), if every token spells one.
fn push_logprob_entries(
    entries: &[Value],
    logprobs: &mut Vec<f32>,
    ids_from_tokens: &mut Option<Vec<u32>>,
) -> std::result::Result<(), &'static str> {
    for entry in entries {
        let logprob = entry
            .get("logprob")
            .and_then(Value::as_f64)
            .ok_or("a log-prob entry without a logprob")?;
        logprobs.push(logprob as f32);
        let id = entry
            .get("token")
            .and_then(Value::as_str)
            .and_then(token_id_of);
        match (&mut *ids_from_tokens, id) {
            (Some(ids), Some(id)) => ids.push(id),
            _ => *ids_from_tokens = None,
        }
    }
    Ok(())
}
