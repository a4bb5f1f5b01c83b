//! The JSON replies of both APIs (`Api`): `Reply` builds a whole reply, the streamed chunks
//! and the `logprobs` and `usage` objects, from a `Prepared` request and what the model
//! generated; `Pending` holds streamed tokens whose text has not been sent yet.

use std::time::{SystemTime, UNIX_EPOCH};

use frognano_llm::TextCodec;
use frognano_llm::generate::{FinishReason, Generation};
use serde_json::{Value, json};

use super::AppState;
use super::request::Prepared;

/// Which of the two APIs a reply is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    Chat,
    Completions,
}

/// What every reply of one request shares.
#[derive(Debug)]
pub(super) struct Reply {
    pub(super) api: Api,
    id: String,
    created: u64,
    model: String,
    pub(super) prepared: Prepared,
}

pub(super) fn finish_reason_text(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Eos | FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Cancelled => "abort",
    }
}

impl Reply {
    pub(super) fn new(state: &AppState, api: Api, prepared: Prepared) -> Self {
        let prefix = match api {
            Api::Chat => "chatcmpl",
            Api::Completions => "cmpl",
        };
        Reply {
            api,
            id: format!("{prefix}-{:032x}", rand::random::<u128>()),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            model: state.model_name.clone(),
            prepared,
        }
    }

    fn token_label(&self, codec: &TextCodec, id: u32) -> String {
        if self.prepared.tokens_as_ids {
            format!("token_id:{id}")
        } else {
            codec.decode(&[id], false).unwrap_or_default()
        }
    }

    /// The `logprobs` object of tokens `ids` (their log-probs `logprobs`); `offsets` are their
    /// character offsets in the reply's text (completions only).
    fn logprobs_json(
        &self,
        codec: &TextCodec,
        ids: &[u32],
        logprobs: &[f32],
        offsets: &[usize],
    ) -> Value {
        if !self.prepared.logprobs {
            return Value::Null;
        }
        let labels: Vec<String> = ids.iter().map(|&id| self.token_label(codec, id)).collect();
        match self.api {
            Api::Chat => {
                let content: Vec<Value> = labels
                    .iter()
                    .zip(logprobs)
                    .map(|(label, &logprob)| {
                        let top = if self.prepared.top_logprobs > 0 {
                            vec![json!({
                                "token": label,
                                "logprob": logprob,
                                "bytes": label.as_bytes(),
                            })]
                        } else {
                            Vec::new()
                        };
                        json!({
                            "token": label,
                            "logprob": logprob,
                            "bytes": label.as_bytes(),
                            "top_logprobs": top,
                        })
                    })
                    .collect();
                json!({"content": content})
            }
            Api::Completions => {
                let top: Vec<Value> = labels
                    .iter()
                    .zip(logprobs)
                    .map(|(label, &logprob)| {
                        if self.prepared.top_logprobs > 0 {
                            json!({label.as_str(): logprob})
                        } else {
                            Value::Null
                        }
                    })
                    .collect();
                json!({
                    "tokens": labels,
                    "token_logprobs": logprobs,
                    "top_logprobs": top,
                    "text_offset": offsets,
                })
            }
        }
    }

    pub(super) fn usage(&self, completion_tokens: usize) -> Value {
        let prompt_tokens = self.prepared.prompt.len();
        json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        })
    }

    /// The whole (non-streamed) reply.
    pub(super) fn complete(&self, codec: &TextCodec, generation: &Generation) -> Value {
        let offsets = if self.prepared.logprobs && self.api == Api::Completions {
            char_offsets(codec, &generation.token_ids)
        } else {
            Vec::new()
        };
        let logprobs =
            self.logprobs_json(codec, &generation.token_ids, &generation.logprobs, &offsets);
        let finish = finish_reason_text(generation.finish_reason);
        let mut choice = match self.api {
            Api::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": generation.text},
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
            Api::Completions => json!({
                "index": 0,
                "text": generation.text,
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
        };
        if self.prepared.return_token_ids {
            choice["token_ids"] = json!(generation.token_ids);
            if self.api == Api::Completions {
                choice["prompt_token_ids"] = json!(self.prepared.prompt);
            }
        }
        let mut reply = json!({
            "id": self.id,
            "object": match self.api {
                Api::Chat => "chat.completion",
                Api::Completions => "text_completion",
            },
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": self.usage(generation.token_ids.len()),
        });
        // vLLM puts a chat reply's prompt ids beside its choices, a completion's in the choice.
        if self.prepared.return_token_ids && self.api == Api::Chat {
            reply["prompt_token_ids"] = json!(self.prepared.prompt);
        }
        reply
    }

    /// One streamed chunk holding `choice` (`index` added).
    pub(super) fn chunk(&self, mut choice: Value) -> Value {
        choice["index"] = json!(0);
        json!({
            "id": self.id,
            "object": match self.api {
                Api::Chat => "chat.completion.chunk",
                Api::Completions => "text_completion",
            },
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        })
    }

    /// A streamed chunk with new text and the tokens it came with.
    pub(super) fn delta_chunk(
        &self,
        codec: &TextCodec,
        text: &str,
        pending: &Pending,
        finish: Option<&str>,
    ) -> Value {
        let logprobs = self.logprobs_json(codec, &pending.ids, &pending.logprobs, &pending.offsets);
        let mut choice = match self.api {
            Api::Chat => json!({
                "delta": if text.is_empty() { json!({}) } else { json!({"content": text}) },
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
            Api::Completions => json!({
                "text": text,
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
        };
        if self.prepared.return_token_ids {
            choice["token_ids"] = json!(pending.ids);
        }
        self.chunk(choice)
    }
}

/// Character offset of each token in the decoded text of `ids`.
fn char_offsets(codec: &TextCodec, ids: &[u32]) -> Vec<usize> {
    (0..ids.len())
        .map(|i| {
            codec
                .decode(&ids[..i], true)
                .map(|t| t.chars().count())
                .unwrap_or(0)
        })
        .collect()
}

/// Tokens streamed whose text has not been sent yet.
#[derive(Debug, Default)]
pub(super) struct Pending {
    pub(super) ids: Vec<u32>,
    pub(super) logprobs: Vec<f32>,
    pub(super) offsets: Vec<usize>,
}

impl Pending {
    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}
