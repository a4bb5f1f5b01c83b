//! The HTTP side: the router and its endpoints (models, the two generation endpoints, stats,
//! reload, health), the API-key middleware, request-body parsing, OpenAI-shaped errors
//! (`ApiError`) and `respond`, which queues a checked request for the model thread and answers
//! it as JSON or as a stream.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use frognano_llm::InferenceError;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::AppState;
use super::reply::{Api, Reply};
use super::request::{
    ChatRequest, CompletionRequest, Prepared, prepare_chat, prepare_completion, prepared,
};
use super::scheduler::{Job, JobEvent, ReloadJob, WorkerMessage};
use super::stream::stream_response;

pub(super) fn router(state: Arc<AppState>, max_request_bytes: usize) -> Router {
    let api = Router::new()
        .route("/v1/models", get(list_models))
        .route("/v1/models/{model}", get(show_model))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/frognano/stats", get(stats))
        .route("/v1/frognano/reload", post(reload))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            require_api_key,
        ));
    Router::new()
        .route("/health", get(|| async { StatusCode::OK }))
        .merge(api)
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found_error",
                "not_found",
                "no such endpoint",
            )
        })
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(state)
}

/// An error reply in OpenAI's shape: `{"error": {"message", "type", "code"}}`.
#[derive(Debug)]
pub(super) struct ApiError {
    status: StatusCode,
    kind: &'static str,
    code: &'static str,
    message: String,
}

impl ApiError {
    pub(super) fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        ApiError {
            status,
            kind,
            code,
            message: message.into(),
        }
    }

    pub(super) fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            message,
        )
    }

    /// A body over the server's size limit (413).
    pub(super) fn too_large() -> Self {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            "the request body is larger than the server accepts",
        )
    }

    pub(super) fn status(&self) -> StatusCode {
        self.status
    }

    pub(super) fn message(&self) -> &str {
        &self.message
    }

    pub(super) fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "model_failure",
            message,
        )
    }

    /// The worker that runs the model is gone (the server is shutting down).
    pub(super) fn model_not_running() -> Self {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "shutting_down",
            "the model is not running",
        )
    }

    pub(super) fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<InferenceError> for ApiError {
    fn from(err: InferenceError) -> Self {
        match err {
            InferenceError::InvalidRequest(_)
            | InferenceError::ChatTemplate(_)
            | InferenceError::Tokenizer(_) => ApiError::bad_request(err.to_string()),
            other => ApiError::internal(other.to_string()),
        }
    }
}

pub(super) type ApiResult<T> = std::result::Result<T, ApiError>;

/// Compares without stopping at the first difference, so response times do not reveal how much
/// of a guessed key was right.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = given.len() ^ expected.len();
    for (i, &byte) in expected.iter().enumerate() {
        difference |= (byte ^ given.get(i).copied().unwrap_or(0)) as usize;
    }
    difference == 0
}

async fn require_api_key(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(expected) = &state.api_key {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        match given {
            Some(key) if same_secret(key.as_bytes(), expected.as_bytes()) => {}
            Some(_) => {
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "invalid_request_error",
                    "invalid_api_key",
                    "incorrect API key provided",
                )
                .into_response();
            }
            None => {
                return ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "invalid_request_error",
                    "invalid_api_key",
                    "missing API key: send it as `Authorization: Bearer KEY`",
                )
                .into_response();
            }
        }
    }
    next.run(request).await
}

fn model_card(state: &AppState) -> Value {
    json!({
        "id": state.model_name,
        "object": "model",
        "created": state.created,
        "owned_by": "frognano",
        "max_model_len": state.limits.context_length,
    })
}

async fn list_models(State(state): State<Arc<AppState>>) -> Response {
    axum::Json(json!({"object": "list", "data": [model_card(&state)]})).into_response()
}

async fn show_model(
    State(state): State<Arc<AppState>>,
    UrlPath(model): UrlPath<String>,
) -> Response {
    match check_model(&state, Some(&model)) {
        Ok(()) => axum::Json(model_card(&state)).into_response(),
        Err(err) => err.into_response(),
    }
}

async fn stats(State(state): State<Arc<AppState>>) -> Response {
    axum::Json(state.counters.snapshot()).into_response()
}

/// The body of `POST /v1/frognano/reload`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReloadRequest {
    /// The model folder (on the server's machine) whose weights serve next.
    model_dir: PathBuf,
}

/// `POST /v1/frognano/reload`: queues the swap behind the requests already waiting and answers
/// `{"model_dir", "reloads"}` once the new weights serve.
async fn reload(
    State(state): State<Arc<AppState>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    if !state.allow_reload {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "permission_error",
            "reload_not_allowed",
            "this server does not reload weights (start it with --allow-reload)",
        )
        .into_response();
    }
    let request: ReloadRequest = match parse_body(body) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    if !request.model_dir.join("model.onnx").is_file() {
        return ApiError::bad_request(format!("{}: no model.onnx", request.model_dir.display()))
            .into_response();
    }
    let (answer, answered) = oneshot::channel();
    let job = ReloadJob {
        model_dir: request.model_dir.clone(),
        answer,
    };
    if state.jobs.send(WorkerMessage::Reload(job)).is_err() {
        return ApiError::model_not_running().into_response();
    }
    match answered.await {
        Ok(Ok(reloads)) => {
            axum::Json(json!({"model_dir": request.model_dir, "reloads": reloads})).into_response()
        }
        Ok(Err(message)) => ApiError::bad_request(message).into_response(),
        Err(_) => ApiError::internal("the model stopped before reloading").into_response(),
    }
}

fn check_model(state: &AppState, model: Option<&str>) -> ApiResult<()> {
    match model {
        // Some clients send no model, or an empty one: the served one is meant.
        None | Some("") => Ok(()),
        Some(name) if name == state.model_name => Ok(()),
        Some(name) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!(
                "the model `{name}` does not exist; this server serves `{}`",
                state.model_name
            ),
        )),
    }
}

/// The request body as JSON of type `T` (400 when malformed, 413 when too large).
pub(super) fn parse_body<T: serde::de::DeserializeOwned>(
    body: std::result::Result<Bytes, BytesRejection>,
) -> ApiResult<T> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large()
        } else {
            ApiError::bad_request(format!("cannot read the request body: {rejection}"))
        }
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

/// Runs CPU-heavy request preparation (template, tokenizer) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|_| Err(ApiError::internal("request preparation panicked")))
}

/// What the two generation endpoints differ in: how a request names its log-probs and renders
/// its prompt. Everything else (parsing, the model check, preparation off the async threads,
/// queueing and the reply) is [`generation_reply`].
pub(super) trait GenerationRequest: serde::de::DeserializeOwned + Send + 'static {
    /// The endpoint.
    const API: Api;
    /// The sampling parameters.
    fn sampling(&self) -> &super::request::SamplingParams;
    /// Whether log-probs are asked for, and how many alternatives per token.
    fn logprobs(&self) -> ApiResult<(bool, usize)>;
    /// The prompt's token ids.
    fn prompt(&self, state: &Arc<AppState>) -> ApiResult<Vec<u32>>;
}

impl GenerationRequest for ChatRequest {
    const API: Api = Api::Chat;

    fn sampling(&self) -> &super::request::SamplingParams {
        &self.sampling
    }

    fn logprobs(&self) -> ApiResult<(bool, usize)> {
        let top = match self.top_logprobs {
            None => 0,
            Some(k) if (0..=20).contains(&k) => k as usize,
            Some(k) => {
                return Err(ApiError::bad_request(format!(
                    "top_logprobs must be in 0..=20, got {k}"
                )));
            }
        };
        Ok((self.logprobs.unwrap_or(false), top))
    }

    fn prompt(&self, state: &Arc<AppState>) -> ApiResult<Vec<u32>> {
        prepare_chat(state, self)
    }
}

impl GenerationRequest for CompletionRequest {
    const API: Api = Api::Completions;

    fn sampling(&self) -> &super::request::SamplingParams {
        &self.sampling
    }

    fn logprobs(&self) -> ApiResult<(bool, usize)> {
        match self.logprobs {
            None => Ok((false, 0)),
            Some(k) if (0..=20).contains(&k) => Ok((true, k as usize)),
            Some(k) => Err(ApiError::bad_request(format!(
                "logprobs must be in 0..=20, got {k}"
            ))),
        }
    }

    fn prompt(&self, state: &Arc<AppState>) -> ApiResult<Vec<u32>> {
        prepare_completion(state, self)
    }
}

/// Checks a parsed generation request and prepares it for the model thread: the model name,
/// the log-probs asked, the prompt's tokens (template and tokenizer) and the generation options.
/// CPU-heavy: the server runs it off the async threads.
pub(super) fn check_generation<R: GenerationRequest>(
    state: &Arc<AppState>,
    request: &R,
) -> ApiResult<Prepared> {
    check_model(state, request.sampling().model.as_deref())?;
    let (logprobs, top_logprobs) = request.logprobs()?;
    let prompt = request.prompt(state)?;
    prepared(state, prompt, request.sampling(), logprobs, top_logprobs)
}

/// Parses a generation request, checks and prepares it off the async threads, and answers it.
async fn generation_reply<R: GenerationRequest>(
    state: Arc<AppState>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    let request: R = match parse_body(body) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    let prompt_state = Arc::clone(&state);
    match blocking(move || check_generation(&prompt_state, &request)).await {
        Ok(prepared) => respond(state, R::API, prepared).await,
        Err(err) => err.into_response(),
    }
}

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    generation_reply::<ChatRequest>(state, body).await
}

async fn completions(
    State(state): State<Arc<AppState>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    generation_reply::<CompletionRequest>(state, body).await
}

/// Queues the request and answers it, at once as JSON or as a stream of events.
async fn respond(state: Arc<AppState>, api: Api, prepared: Prepared) -> Response {
    let (events_tx, events) = mpsc::unbounded_channel();
    let job = Job {
        prompt: prepared.prompt.clone(),
        options: prepared.options.clone(),
        stream: prepared.stream,
        events: events_tx,
    };
    if state.jobs.send(WorkerMessage::Generate(job)).is_err() {
        return ApiError::model_not_running().into_response();
    }
    state.counters.requests.fetch_add(1, Ordering::Relaxed);
    let reply = Reply::new(&state, api, prepared);
    if reply.prepared.stream {
        return stream_response(state, reply, events);
    }
    let mut events = events;
    loop {
        match events.recv().await {
            Some(JobEvent::Token { .. }) => {}
            Some(JobEvent::Finished(generation)) => {
                return axum::Json(reply.complete(&state.codec(), &generation)).into_response();
            }
            Some(JobEvent::Failed(message)) => {
                return ApiError::internal(format!("generation failed: {message}")).into_response();
            }
            None => {
                return ApiError::internal("the model stopped before answering").into_response();
            }
        }
    }
}
