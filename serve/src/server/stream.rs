//! Streamed replies (server-sent events): `StreamState` turns the model thread's token events
//! into chunks, holding back text that may still become a stop string or an incomplete
//! character, and ends with the finish reason, the usage and `[DONE]`; `stream_response` is the
//! event-stream response around it.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use frognano_llm::TextCodec;
use frognano_llm::generate::Generation;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::AppState;
use super::reply::{Api, Pending, Reply, finish_reason_text};
use super::routes::ApiError;
use super::scheduler::JobEvent;

fn sse_event(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// The state of one streamed reply.
struct StreamState {
    state: Arc<AppState>,
    reply: Reply,
    events: mpsc::UnboundedReceiver<JobEvent>,
    started: bool,
    done: bool,
    tokens: Vec<u32>,
    /// Characters of the decoded text before the latest token (its offset).
    decoded_chars: usize,
    sent: String,
    pending: Pending,
    longest_stop: usize,
}

impl StreamState {
    /// The text that is safe to send now: the decoded tokens, cut at a stop string, without a
    /// tail that may still become a stop string or that ends in an incomplete character.
    fn safe_text(&self, decoded: &str) -> usize {
        let stops = &self.reply.prepared.options.stop;
        if let Some(cut) = stops.iter().filter_map(|s| decoded.find(s.as_str())).min() {
            return cut;
        }
        let mut end = decoded
            .len()
            .saturating_sub(self.longest_stop.saturating_sub(1));
        while !decoded.is_char_boundary(end) {
            end -= 1;
        }
        let kept = decoded[..end].trim_end_matches('\u{FFFD}');
        kept.len()
    }

    /// The next piece of the event stream, or `None` once it is over.
    async fn next_piece(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        let codec = self.state.codec();
        if !self.started {
            self.started = true;
            if self.reply.api == Api::Chat {
                let mut chunk = self.reply.chunk(json!({
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": null,
                    "finish_reason": null,
                }));
                if self.reply.prepared.return_token_ids {
                    chunk["prompt_token_ids"] = json!(self.reply.prepared.prompt);
                }
                return Some(sse_event(&chunk));
            }
        }
        loop {
            match self.events.recv().await {
                Some(JobEvent::Token { id, logprob }) => {
                    self.tokens.push(id);
                    self.pending.ids.push(id);
                    self.pending.logprobs.push(logprob);
                    self.pending.offsets.push(self.decoded_chars);
                    let decoded = codec.decode(&self.tokens, true).unwrap_or_default();
                    self.decoded_chars = decoded.chars().count();
                    let end = self.safe_text(&decoded);
                    if end > self.sent.len() && decoded.starts_with(self.sent.as_str()) {
                        let delta = decoded[self.sent.len()..end].to_string();
                        self.sent.push_str(&delta);
                        let pending = std::mem::take(&mut self.pending);
                        let mut chunk = self.reply.delta_chunk(&codec, &delta, &pending, None);
                        if self.reply.api == Api::Completions
                            && self.reply.prepared.return_token_ids
                            && self.tokens.len() == pending.ids.len()
                        {
                            chunk["choices"][0]["prompt_token_ids"] =
                                json!(self.reply.prepared.prompt);
                        }
                        return Some(sse_event(&chunk));
                    }
                }
                Some(JobEvent::Finished(generation)) => {
                    self.done = true;
                    return Some(self.finish(&codec, &generation));
                }
                Some(JobEvent::Failed(message)) => {
                    self.done = true;
                    let error = ApiError::internal(format!("generation failed: {message}"));
                    return Some(format!("{}data: [DONE]\n\n", sse_event(&error.body())));
                }
                None => {
                    self.done = true;
                    let error = ApiError::internal("the model stopped before answering");
                    return Some(format!("{}data: [DONE]\n\n", sse_event(&error.body())));
                }
            }
        }
    }

    /// The final events: the rest of the text, the finish reason, the usage, `[DONE]`.
    fn finish(&mut self, codec: &TextCodec, generation: &Generation) -> String {
        // Tokens the stream has not seen (a non-streamed row) come with the final text.
        for (i, (&id, &logprob)) in generation
            .token_ids
            .iter()
            .zip(&generation.logprobs)
            .enumerate()
            .skip(self.tokens.len())
        {
            self.tokens.push(id);
            self.pending.ids.push(id);
            self.pending.logprobs.push(logprob);
            self.pending.offsets.push(
                codec
                    .decode(&generation.token_ids[..i], true)
                    .map(|t| t.chars().count())
                    .unwrap_or(0),
            );
        }
        let rest = generation
            .text
            .strip_prefix(self.sent.as_str())
            .unwrap_or_default()
            .to_string();
        let finish = finish_reason_text(generation.finish_reason);
        let first_completion_chunk = self.tokens.len() == self.pending.ids.len();
        let pending = std::mem::take(&mut self.pending);
        let mut out = String::new();
        if !rest.is_empty() || !pending.is_empty() {
            let mut chunk = self.reply.delta_chunk(codec, &rest, &pending, None);
            if self.reply.api == Api::Completions
                && self.reply.prepared.return_token_ids
                && first_completion_chunk
            {
                chunk["choices"][0]["prompt_token_ids"] = json!(self.reply.prepared.prompt);
            }
            out.push_str(&sse_event(&chunk));
        }
        out.push_str(&sse_event(&self.reply.delta_chunk(
            codec,
            "",
            &Pending::default(),
            Some(finish),
        )));
        if self.reply.prepared.include_usage {
            let mut usage = self.reply.chunk(json!({}));
            usage["choices"] = json!([]);
            usage["usage"] = self.reply.usage(generation.token_ids.len());
            out.push_str(&sse_event(&usage));
        }
        out.push_str("data: [DONE]\n\n");
        out
    }
}

pub(super) fn stream_response(
    state: Arc<AppState>,
    reply: Reply,
    events: mpsc::UnboundedReceiver<JobEvent>,
) -> Response {
    let longest_stop = reply
        .prepared
        .options
        .stop
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0);
    let stream_state = StreamState {
        state,
        reply,
        events,
        started: false,
        done: false,
        tokens: Vec::new(),
        decoded_chars: 0,
        sent: String::new(),
        pending: Pending::default(),
        longest_stop,
    };
    // Dropping the body (a client that left) drops the receiver: the worker sees it and
    // cancels the row.
    let body = futures_util::stream::unfold(stream_state, |mut stream| async move {
        let piece = stream.next_piece().await?;
        Some((Ok::<Bytes, Infallible>(Bytes::from(piece)), stream))
    });
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    (headers, Body::from_stream(body)).into_response()
}
