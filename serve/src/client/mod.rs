//! [`HttpPolicy`]: a policy over an OpenAI-compatible server.
//!
//! Each episode's chat (the same prompt as [`frognano_llm::OnnxPolicy`]'s) goes to the server's
//! `/chat/completions` (or, rendered with a chat template, to `/completions`), all episodes of an
//! `act` call in flight at once up to a concurrency bound. The reply's text is the action (or,
//! with `tool_calls`, the first native tool call). Log-probs, and the token ids where the server
//! returns them (vLLM's `return_token_ids` and `return_tokens_as_token_ids`, FrogNano's own
//! server), are recorded in the step records as [`frognano_llm::OnnxPolicy`] records them.
//!
//! A request that fails is retried with exponential backoff when asking again may help (a
//! dropped connection, a timeout, 429 and 5xx answers). When it still fails, that episode's
//! output is [`PolicyOutput::failed`]: the rollout ends that episode as failed and the others go
//! on. Replies are bounded in size and time, so a server that floods or stalls cannot hang the
//! host.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use frognano_core::{Action, Policy, PolicyContext, PolicyOutput};
use frognano_llm::{ChatMessage, GenerationOptions, TextCodec, action_text, episode_messages};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{Result, ServeError};

mod reply;
use reply::{Reply, parse_json, parse_reply, status_error, too_large};

/// Which endpoint of the API a [`HttpPolicy`] asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HttpApi {
    /// `/chat/completions`: the server applies the model's chat template.
    #[default]
    Chat,
    /// `/completions`: the policy renders the prompt itself (see
    /// [`HttpPolicyConfig::chat_template_dir`]).
    Completions,
}

/// How a [`HttpPolicy`] reaches its server, prompts and samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpPolicyConfig {
    /// Base URL of the API, e.g. `http://127.0.0.1:8000/v1` (vLLM, `frognano serve`),
    /// `http://127.0.0.1:11434/v1` (Ollama). A URL with no path gets `/v1`.
    pub base_url: String,
    /// The model name the server knows.
    pub model: String,
    /// Chat or plain completions.
    pub api: HttpApi,
    /// Chat only: send the environment's tools as OpenAI function tools and take the reply's
    /// first tool call as the action (a reply with text only is taken as a text command).
    pub tool_calls: bool,
    /// The environment variable holding the API key sent as `Authorization: Bearer` (nothing
    /// is sent when it is unset or empty).
    pub api_key_env: String,
    /// Sampling: `max_new_tokens` (sent as `max_tokens`), `temperature`, `top_p`, `top_k`
    /// (sent when not 0), `seed` (each request gets its own, derived from it) and `stop`.
    pub generation: GenerationOptions,
    /// Ask for the log-probs of the sampled tokens (and their ids where the server can).
    pub logprobs: bool,
    /// The system prompt (default: [`frognano_llm::DEFAULT_SYSTEM_PROMPT`]).
    pub system_prompt: Option<String>,
    /// Longest prompt in characters; older turns are dropped to fit (0: no limit).
    pub max_prompt_chars: usize,
    /// Completions with `chat_template_dir` only: longest prompt in tokens of that tokenizer;
    /// older turns (then the end of the first observation) are dropped to fit, as a local
    /// [`frognano_llm::OnnxPolicy`] fits its context ([`frognano_llm::fitted_prompt`]), so that
    /// a long episode is cut here instead of failing with the server's 400 (0: no limit).
    pub max_prompt_tokens: usize,
    /// Most requests in flight at once.
    pub concurrency: usize,
    /// Seconds a request may take, the whole reply included.
    pub timeout_s: f64,
    /// Seconds to wait for a connection.
    pub connect_timeout_s: f64,
    /// Retries of a request after a dropped connection, a timeout, 429 or 5xx.
    pub retries: u32,
    /// Seconds before the first retry; doubled after each (a server's `Retry-After` wins).
    pub backoff_s: f64,
    /// Largest reply body accepted, in bytes.
    pub max_reply_bytes: usize,
    /// Completions only: a model folder whose tokenizer and chat template render the prompt;
    /// the prompt ids recorded are its tokens. Absent: the prompt is rendered as ChatML text and
    /// no prompt ids are recorded (unless the server returns them).
    pub chat_template_dir: Option<PathBuf>,
    /// Completions with `chat_template_dir`: send the prompt as token ids, so that the server
    /// runs exactly the recorded ids (vLLM, SGLang, llama.cpp's `llama-server` and
    /// `frognano serve` accept them). Off: the rendered text is sent.
    pub token_id_prompts: bool,
    /// Fields merged into every request body (e.g. `{"chat_template_kwargs": {...}}`).
    pub extra_body: Map<String, Value>,
}

impl Default for HttpPolicyConfig {
    fn default() -> Self {
        HttpPolicyConfig {
            base_url: "http://127.0.0.1:8000/v1".to_string(),
            model: String::new(),
            api: HttpApi::Chat,
            tool_calls: false,
            api_key_env: "OPENAI_API_KEY".to_string(),
            generation: GenerationOptions::greedy(384),
            logprobs: true,
            system_prompt: None,
            max_prompt_chars: 0,
            max_prompt_tokens: 0,
            concurrency: 8,
            timeout_s: 300.0,
            connect_timeout_s: 10.0,
            retries: 3,
            backoff_s: 0.5,
            max_reply_bytes: 4 << 20,
            chat_template_dir: None,
            token_id_prompts: false,
            extra_body: Map::new(),
        }
    }
}

impl HttpPolicyConfig {
    /// A configuration for `model` at `base_url`, everything else by default.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        HttpPolicyConfig {
            base_url: base_url.into(),
            model: model.into(),
            ..HttpPolicyConfig::default()
        }
    }

    /// Checks the options and returns the normalised base URL (no trailing slash).
    pub fn validate(&self) -> Result<String> {
        let url = reqwest::Url::parse(&self.base_url).map_err(|e| {
            ServeError::invalid(
                "base_url",
                format!(
                    "{:?} is not a URL ({e}); e.g. http://127.0.0.1:8000/v1",
                    self.base_url
                ),
            )
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ServeError::invalid(
                "base_url",
                format!("{:?}: only http and https are supported", self.base_url),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(ServeError::invalid(
                "model",
                "name the model the server serves (e.g. qwen2.5-coder:7b for Ollama)",
            ));
        }
        self.generation
            .validate()
            .map_err(|e| ServeError::invalid("generation", e.to_string()))?;
        if self.concurrency == 0 {
            return Err(ServeError::invalid("concurrency", "must be at least 1"));
        }
        for (name, value) in [
            ("timeout_s", self.timeout_s),
            ("connect_timeout_s", self.connect_timeout_s),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(ServeError::invalid(
                    "timeout",
                    format!("{name} must be a positive number of seconds, got {value}"),
                ));
            }
        }
        if !(self.backoff_s.is_finite() && self.backoff_s >= 0.0) {
            return Err(ServeError::invalid(
                "backoff_s",
                format!("must be >= 0, got {}", self.backoff_s),
            ));
        }
        if self.max_reply_bytes < 1024 {
            return Err(ServeError::invalid(
                "max_reply_bytes",
                "must be at least 1024",
            ));
        }
        if self.tool_calls && self.api == HttpApi::Completions {
            return Err(ServeError::invalid(
                "tool_calls",
                "native tool calls need the chat API (api = \"chat\")",
            ));
        }
        if self.max_prompt_tokens > 0
            && (self.api != HttpApi::Completions || self.chat_template_dir.is_none())
        {
            return Err(ServeError::invalid(
                "max_prompt_tokens",
                "counting prompt tokens needs the tokenizer that renders the prompt: the \
                 completions API with chat_template_dir (with the chat API, use max_prompt_chars)",
            ));
        }
        let mut base = self.base_url.trim_end_matches('/').to_string();
        if url.path() == "/" || url.path().is_empty() {
            base.push_str("/v1");
        }
        Ok(base)
    }
}

/// A [`Policy`] whose actions come from a model behind an OpenAI-compatible server.
#[derive(Debug)]
pub struct HttpPolicy {
    config: HttpPolicyConfig,
    base_url: String,
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
    api_key: Option<String>,
    codec: Option<TextCodec>,
    calls: u64,
}

impl HttpPolicy {
    /// A policy for `config`; nothing is sent until the first `act` (see
    /// [`HttpPolicy::connect`] to check the server first).
    pub fn new(config: HttpPolicyConfig) -> Result<Self> {
        let base_url = config.validate()?;
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(config.timeout_s))
            .connect_timeout(Duration::from_secs_f64(config.connect_timeout_s))
            .pool_max_idle_per_host(config.concurrency)
            .build()
            .map_err(|e| ServeError::invalid("http client", e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| ServeError::Io {
                context: "start the HTTP client's runtime".into(),
                source,
            })?;
        let api_key = std::env::var(&config.api_key_env)
            .ok()
            .filter(|k| !k.trim().is_empty());
        let codec = match (&config.api, &config.chat_template_dir) {
            (HttpApi::Completions, Some(dir)) => {
                let codec = TextCodec::load(dir)?;
                if !codec.has_chat_template() {
                    return Err(ServeError::invalid(
                        "chat_template_dir",
                        format!("{} has no chat template", dir.display()),
                    ));
                }
                Some(codec)
            }
            _ => None,
        };
        Ok(HttpPolicy {
            config,
            base_url,
            client,
            runtime,
            api_key,
            codec,
            calls: 0,
        })
    }

    /// [`HttpPolicy::new`], then checks that the server answers and, when it lists its models
    /// (`GET /models`), that it serves this one: a server that is not running or a wrong model
    /// name is a clear error here rather than a run of failed episodes.
    pub fn connect(config: HttpPolicyConfig) -> Result<Self> {
        let policy = HttpPolicy::new(config)?;
        let served = policy.models()?;
        if let Some(served) = served
            && !served.is_empty()
            && !served.iter().any(|m| m == &policy.config.model)
        {
            return Err(ServeError::Status {
                url: format!("{}/models", policy.base_url),
                status: 404,
                message: format!(
                    "the server does not serve model {:?}; it serves: {}",
                    policy.config.model,
                    served.join(", ")
                ),
            });
        }
        Ok(policy)
    }

    /// The model names the server lists, or `None` when it has no `/models` endpoint.
    pub fn models(&self) -> Result<Option<Vec<String>>> {
        let url = format!("{}/models", self.base_url);
        let reply = self.block_on(async {
            let mut request = self.client.get(&url);
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let response = request
                .send()
                .await
                .map_err(|e| transport_error(&url, e, &self.config))?;
            let status = response.status();
            if status == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            let body =
                read_bounded(&url, response, self.config.max_reply_bytes, &self.config).await?;
            if !status.is_success() {
                return Err(status_error(&url, status.as_u16(), &body));
            }
            Ok(Some(parse_json(&url, &body)?))
        })?;
        Ok(reply.map(|value: Value| {
            value
                .get("data")
                .and_then(Value::as_array)
                .map(|models| {
                    models
                        .iter()
                        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        }))
    }

    /// The configuration.
    pub fn config(&self) -> &HttpPolicyConfig {
        &self.config
    }

    /// The normalised base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// Changes how replies are sampled (e.g. greedy for evaluation, sampling for rollouts).
    pub fn set_generation(&mut self, generation: GenerationOptions) -> Result<()> {
        generation
            .validate()
            .map_err(|e| ServeError::invalid("generation", e.to_string()))?;
        self.config.generation = generation;
        Ok(())
    }

    /// Runs a future on the policy's runtime, from a thread of its own when the caller is
    /// already inside an async runtime (where blocking on another would panic).
    fn block_on<F: std::future::Future + Send>(&self, future: F) -> F::Output
    where
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                scope
                    .spawn(|| self.runtime.block_on(future))
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
        } else {
            self.runtime.block_on(future)
        }
    }

    /// The messages `render(skip)` makes of an episode with its `skip` oldest turns left out,
    /// for the fewest left out that fit `max_prompt_chars` (counted by `chars`; 0: no limit),
    /// and that number.
    fn char_fitted<M>(
        &self,
        context: &PolicyContext,
        render: impl Fn(usize) -> Vec<M>,
        chars: impl Fn(&M) -> usize,
    ) -> (Vec<M>, usize) {
        let mut skip = 0;
        loop {
            let messages = render(skip);
            let total: usize = messages.iter().map(&chars).sum();
            if self.config.max_prompt_chars == 0
                || total <= self.config.max_prompt_chars
                || skip >= context.history.len()
            {
                return (messages, skip);
            }
            skip += 1;
        }
    }

    /// The request body of one episode's next action (and the prompt ids, when the policy
    /// tokenizes the prompt itself).
    fn request_body(
        &self,
        context: &PolicyContext,
        seed: u64,
    ) -> Result<(String, Value, Option<Vec<u32>>)> {
        let generation = &self.config.generation;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        body.insert("max_tokens".into(), json!(generation.max_new_tokens));
        body.insert("temperature".into(), json!(generation.temperature));
        if generation.top_p < 1.0 {
            body.insert("top_p".into(), json!(generation.top_p));
        }
        if generation.top_k > 0 {
            body.insert("top_k".into(), json!(generation.top_k));
        }
        body.insert("seed".into(), json!(seed));
        if !generation.stop.is_empty() {
            body.insert("stop".into(), json!(generation.stop));
        }
        let system = self.config.system_prompt.as_deref();
        let mut prompt_ids = None;
        let path = match self.config.api {
            HttpApi::Chat => {
                let (messages, _) = self.char_fitted(
                    context,
                    |skip| {
                        if self.config.tool_calls {
                            tool_messages(system, context, skip)
                        } else {
                            episode_messages(system, context, skip)
                                .into_iter()
                                .map(|m| json!({"role": m.role, "content": m.content}))
                                .collect()
                        }
                    },
                    |m| m.get("content").and_then(Value::as_str).map_or(0, str::len),
                );
                body.insert("messages".into(), Value::Array(messages));
                if self.config.tool_calls {
                    body.insert("tools".into(), frognano_env::protocol::tool_schemas());
                }
                if self.config.logprobs {
                    body.insert("logprobs".into(), json!(true));
                    // 1, not 0: llama.cpp's server returns no log-probs at all for 0.
                    body.insert("top_logprobs".into(), json!(1));
                }
                "chat/completions"
            }
            HttpApi::Completions => {
                // Tool calls are chat-only (the configuration says so), so the chat is plain.
                let (chat, skipped) = self.char_fitted(
                    context,
                    |skip| episode_messages(system, context, skip),
                    |m: &ChatMessage| m.content.len(),
                );
                match &self.codec {
                    Some(codec) => {
                        // The chat template renders it, with at least the turns the character
                        // budget dropped left out, fitted to the token budget.
                        let budget = match self.config.max_prompt_tokens {
                            0 => usize::MAX,
                            tokens => tokens,
                        };
                        let (text, ids) =
                            frognano_llm::fitted_prompt(codec, system, context, budget, skipped)?;
                        if self.config.token_id_prompts {
                            body.insert("prompt".into(), json!(ids));
                        } else {
                            body.insert("prompt".into(), json!(text));
                        }
                        prompt_ids = Some(ids);
                    }
                    None => {
                        body.insert("prompt".into(), json!(chatml(&chat)));
                    }
                }
                if self.config.logprobs {
                    body.insert("logprobs".into(), json!(1));
                }
                "completions"
            }
        };
        if self.config.logprobs {
            // vLLM's extensions (FrogNano's server speaks them too); other servers ignore them.
            body.insert("return_token_ids".into(), json!(true));
            body.insert("return_tokens_as_token_ids".into(), json!(true));
        }
        for (key, value) in &self.config.extra_body {
            body.insert(key.clone(), value.clone());
        }
        Ok((
            format!("{}/{path}", self.base_url),
            Value::Object(body),
            prompt_ids,
        ))
    }

    /// Replies to several episodes at once; an episode whose request failed gets a
    /// [`PolicyOutput::failed`].
    pub fn reply(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        let call = self.calls;
        self.calls += 1;
        let mut requests = Vec::with_capacity(contexts.len());
        for (row, context) in contexts.iter().enumerate() {
            let seed = request_seed(self.config.generation.seed, call, row);
            requests.push(self.request_body(context, seed)?);
        }
        let this = &*self;
        let asks: Vec<_> = requests
            .iter()
            .map(|(url, body, _)| this.timed_ask(url.as_str(), body))
            .collect();
        let replies: Vec<(Result<Reply>, u32, f64)> = this.block_on(
            futures_util::stream::iter(asks)
                .buffered(this.config.concurrency)
                .collect(),
        );
        Ok(replies
            .into_iter()
            .zip(requests)
            .map(
                |((reply, attempts, latency_s), (_, _, local_prompt_ids))| match reply {
                    Ok(reply) => self.output(reply, local_prompt_ids, attempts, latency_s),
                    Err(e) => PolicyOutput::failed(e.to_string()),
                },
            )
            .collect())
    }

    fn output(
        &self,
        reply: Reply,
        local_prompt_ids: Option<Vec<u32>>,
        attempts: u32,
        latency_s: f64,
    ) -> PolicyOutput {
        let action = match reply.tool_call {
            Some(call) => Action::Tool(call),
            None => Action::Text { text: reply.text },
        };
        // Token ids are kept only when they line up with the log-probs, as a learner needs.
        let token_ids = reply
            .token_ids
            .filter(|ids| !ids.is_empty() && ids.len() == reply.logprobs.len());
        PolicyOutput {
            action,
            decision: Some(json!({
                "model": self.config.model,
                "finish_reason": reply.finish_reason,
                "usage": reply.usage,
                "temperature": self.config.generation.temperature,
                "top_k": self.config.generation.top_k,
                "top_p": self.config.generation.top_p,
                "attempts": attempts,
                "latency_s": latency_s,
            })),
            loss_mask: token_ids.as_ref().map(|ids| vec![true; ids.len()]),
            prompt_ids: local_prompt_ids.or(reply.prompt_ids),
            token_ids,
            logprobs: reply.logprobs,
            error: None,
        }
    }

    async fn timed_ask(&self, url: &str, body: &Value) -> (Result<Reply>, u32, f64) {
        let started = Instant::now();
        let (reply, attempts) = self.ask_with_retries(url, body).await;
        (reply, attempts, started.elapsed().as_secs_f64())
    }

    async fn ask_with_retries(&self, url: &str, body: &Value) -> (Result<Reply>, u32) {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.ask(url, body).await {
                Ok(reply) => return (Ok(reply), attempt),
                Err((e, retry_after)) => {
                    if !e.is_retryable() || attempt > self.config.retries {
                        return (Err(e), attempt);
                    }
                    let backoff = self.config.backoff_s * f64::from(1u32 << (attempt - 1).min(16));
                    let wait = retry_after.unwrap_or(backoff).min(30.0);
                    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                }
            }
        }
    }

    /// One request; on failure the error and the server's `Retry-After` seconds, if any.
    async fn ask(
        &self,
        url: &str,
        body: &Value,
    ) -> std::result::Result<Reply, (ServeError, Option<f64>)> {
        let mut request = self.client.post(url).json(body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| (transport_error(url, e, &self.config), None))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0);
        let bytes = read_bounded(url, response, self.config.max_reply_bytes, &self.config)
            .await
            .map_err(|e| (e, None))?;
        if !status.is_success() {
            return Err((status_error(url, status.as_u16(), &bytes), retry_after));
        }
        let value: Value = parse_json(url, &bytes).map_err(|e| (e, None))?;
        parse_reply(url, &value, self.config.api).map_err(|e| (e, None))
    }
}

impl Policy for HttpPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        Ok(self.reply(contexts)?)
    }
}

/// The seed of row `row` of call `call`: distinct per request, reproducible from the base.
fn request_seed(base: u64, call: u64, row: usize) -> u64 {
    let mixed = base
        ^ call.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (row as u64 + 1).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    // Many servers take the seed as a signed 32- or 64-bit integer.
    mixed & 0x7FFF_FFFF
}

/// The chat with native tool calls: an action that was a tool call is the assistant's
/// `tool_calls` and its observation a `tool` message; a text action stays text.
fn tool_messages(system: Option<&str>, context: &PolicyContext, skip: usize) -> Vec<Value> {
    let plain = episode_messages(system, context, skip);
    // The first messages (system, first observation, the omission note) are plain.
    let head = plain.len() - 2 * context.history.len().saturating_sub(skip);
    let mut messages: Vec<Value> = plain[..head]
        .iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    for (i, turn) in context.history.iter().enumerate().skip(skip) {
        match &turn.action {
            Action::Tool(call) => {
                let id = format!("call_{i}");
                messages.push(json!({
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "id": id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments.to_string()},
                    }],
                }));
                messages.push(
                    json!({"role": "tool", "tool_call_id": id, "content": turn.observation.text}),
                );
            }
            action => {
                messages.push(json!({"role": "assistant", "content": action_text(action)}));
                messages.push(json!({"role": "user", "content": turn.observation.text}));
            }
        }
    }
    messages
}

/// A chat rendered as ChatML, the prompt format of the completions API when no chat template
/// is given.
fn chatml(messages: &[ChatMessage]) -> String {
    let mut text = String::new();
    for m in messages {
        text.push_str(&format!(
            "<|im_start|>{}\n{}<|im_end|>\n",
            m.role, m.content
        ));
    }
    text.push_str("<|im_start|>assistant\n");
    text
}

fn transport_error(url: &str, e: reqwest::Error, config: &HttpPolicyConfig) -> ServeError {
    if e.is_timeout() {
        ServeError::Timeout {
            url: url.to_string(),
            seconds: config.timeout_s,
        }
    } else {
        // The source chain says why (refused, reset, DNS).
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(&format!(": {s}"));
            source = s.source();
        }
        ServeError::Connect {
            url: url.to_string(),
            message,
        }
    }
}

/// Reads a body, at most `limit` bytes; a longer one is an error, not a wait or a flood.
async fn read_bounded(
    url: &str,
    mut response: reqwest::Response,
    limit: usize,
    config: &HttpPolicyConfig,
) -> Result<Vec<u8>> {
    if let Some(length) = response.content_length()
        && length > limit as u64
    {
        return Err(too_large(url, limit));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| transport_error(url, e, config))?
    {
        if body.len() + chunk.len() > limit {
            return Err(too_large(url, limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::ToolCall;
    use frognano_core::{Observation, Turn};

    fn context(turns: usize) -> PolicyContext {
        PolicyContext {
            task_id: "t".into(),
            initial: Observation {
                text: "fix it".into(),
                ..Observation::default()
            },
            history: (0..turns)
                .map(|i| Turn {
                    action: if i % 2 == 0 {
                        Action::Text {
                            text: "test".into(),
                        }
                    } else {
                        Action::Tool(ToolCall {
                            name: "view".into(),
                            arguments: json!({"path": "a.py"}),
                        })
                    },
                    observation: Observation {
                        text: format!("observation {i}"),
                        ..Observation::default()
                    },
                })
                .collect(),
        }
    }

    #[test]
    fn configs_are_validated_and_urls_normalised() {
        let ok = HttpPolicyConfig::new("http://127.0.0.1:8000", "m");
        assert_eq!(
            ok.validate().ok().as_deref(),
            Some("http://127.0.0.1:8000/v1")
        );
        let ollama = HttpPolicyConfig::new("http://localhost:11434/v1/", "qwen2.5-coder:7b");
        assert_eq!(
            ollama.validate().ok().as_deref(),
            Some("http://localhost:11434/v1")
        );
        for bad in [
            HttpPolicyConfig::new("not a url", "m"),
            HttpPolicyConfig::new("ftp://host/v1", "m"),
            HttpPolicyConfig::new("http://host/v1", " "),
            HttpPolicyConfig {
                concurrency: 0,
                ..HttpPolicyConfig::new("http://host/v1", "m")
            },
            HttpPolicyConfig {
                timeout_s: f64::NAN,
                ..HttpPolicyConfig::new("http://host/v1", "m")
            },
            HttpPolicyConfig {
                tool_calls: true,
                api: HttpApi::Completions,
                ..HttpPolicyConfig::new("http://host/v1", "m")
            },
        ] {
            assert!(
                matches!(bad.validate(), Err(ServeError::Invalid { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn tool_messages_pair_calls_with_their_results() {
        let messages = tool_messages(None, &context(2), 0);
        let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "user", "assistant", "tool"]
        );
        assert_eq!(
            messages[4]["tool_calls"][0]["id"],
            messages[5]["tool_call_id"]
        );
        assert_eq!(messages[4]["tool_calls"][0]["function"]["name"], "view");
        let skipped = tool_messages(None, &context(4), 3);
        let roles: Vec<&str> = skipped.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["system", "user", "user", "assistant", "tool"]);
    }

    #[test]
    fn the_character_budget_leaves_out_the_same_turns_in_both_apis() {
        let context = context(6);
        let whole: usize = episode_messages(None, &context, 0)
            .iter()
            .map(|m| m.content.len())
            .sum();
        let body = |api| {
            let policy = HttpPolicy::new(HttpPolicyConfig {
                api,
                max_prompt_chars: whole / 2,
                ..HttpPolicyConfig::new("http://127.0.0.1:9/v1", "m")
            })
            .expect("policy");
            policy.request_body(&context, 0).expect("request body").1
        };
        let chat = body(HttpApi::Chat);
        // System, first observation and the omission note, then two messages per kept turn.
        let kept = (chat["messages"].as_array().expect("messages").len() - 3) / 2;
        let skipped = context.history.len() - kept;
        assert!(skipped > 0, "{chat}");
        let completions = body(HttpApi::Completions);
        assert_eq!(
            completions["prompt"],
            json!(chatml(&episode_messages(None, &context, skipped)))
        );
    }

    #[test]
    fn completions_replies_in_the_chat_form_give_logprobs() {
        // llama.cpp's server: the chat form's `content` list on a completions reply.
        let value = json!({"choices": [{"text": "ab", "logprobs": {"content": [
            {"token": "a", "logprob": -0.25, "bytes": [97]},
            {"token": "b", "logprob": -0.5, "bytes": [98]}]}}]});
        let reply = parse_reply("u", &value, HttpApi::Completions).expect("reply");
        assert_eq!(reply.text, "ab");
        assert_eq!(reply.logprobs, vec![-0.25, -0.5]);
        let missing =
            json!({"choices": [{"text": "a", "logprobs": {"content": [{"token": "a"}]}}]});
        assert!(parse_reply("u", &missing, HttpApi::Completions).is_err());
    }

    #[test]
    fn chat_replies_give_actions_logprobs_and_ids() {
        let value = json!({
            "choices": [{
                "message": {"role": "assistant", "content": "submit"},
                "finish_reason": "stop",
                "logprobs": {"content": [
                    {"token": "token_id:7", "logprob": -0.5},
                    {"token": "token_id:2", "logprob": -0.1}
                ]}
            }],
            "prompt_token_ids": [1, 2, 3],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}
        });
        let reply = parse_reply("u", &value, HttpApi::Chat).expect("parses");
        assert_eq!(reply.text, "submit");
        assert_eq!(reply.logprobs, vec![-0.5, -0.1]);
        assert_eq!(reply.token_ids, Some(vec![7, 2]));
        assert_eq!(reply.prompt_ids, Some(vec![1, 2, 3]));
        // Text tokens (llama.cpp) give log-probs but no ids.
        let text_tokens = json!({"choices": [{"message": {"content": "x"},
            "logprobs": {"content": [{"token": "x", "logprob": -1.0}]}}]});
        let reply = parse_reply("u", &text_tokens, HttpApi::Chat).expect("parses");
        assert_eq!((reply.logprobs.len(), reply.token_ids), (1, None));
        let tool = json!({"choices": [{"message": {"content": null, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "view", "arguments": "{\"path\": \"a.py\"}"}}
        ]}}]});
        let reply = parse_reply("u", &tool, HttpApi::Chat).expect("parses");
        assert_eq!(
            reply.tool_call,
            Some(ToolCall {
                name: "view".into(),
                arguments: json!({"path": "a.py"})
            })
        );
    }

    #[test]
    fn malformed_replies_are_errors() {
        for value in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{"message": {"content": 5}}]}),
            json!({"choices": [{"message": {"content": "x"},
                "logprobs": {"content": [{"token": "x"}]}}]}),
            json!({"error": {"message": "boom"}}),
        ] {
            assert!(parse_reply("u", &value, HttpApi::Chat).is_err(), "{value}");
        }
        assert!(
            parse_reply(
                "u",
                &json!({"choices": [{"message": {}}]}),
                HttpApi::Completions
            )
            .is_err()
        );
    }

    #[test]
    fn status_errors_carry_the_servers_message() {
        let e = status_error("u", 404, br#"{"error": {"message": "model not found"}}"#);
        assert!(e.to_string().contains("model not found"), "{e}");
        assert!(!e.is_retryable());
        assert!(status_error("u", 503, b"busy").is_retryable());
        assert!(status_error("u", 429, b"").is_retryable());
        let e = status_error("u", 422, br#"{"detail": [{"msg": "bad"}]}"#);
        assert!(e.to_string().contains("bad"), "{e}");
    }

    #[test]
    fn seeds_differ_per_request_and_repeat_per_base() {
        assert_ne!(request_seed(0, 0, 0), request_seed(0, 0, 1));
        assert_ne!(request_seed(0, 0, 0), request_seed(0, 1, 0));
        assert_eq!(request_seed(5, 3, 2), request_seed(5, 3, 2));
    }
}
