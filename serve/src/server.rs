//! `frognano serve`: FrogNano's ONNX models behind an OpenAI-compatible HTTP server.
//!
//! Endpoints (under `/v1`): `GET /models`, `POST /chat/completions` (messages rendered with the
//! model's chat template), `POST /completions` (a string prompt or a list of token ids) and
//! `GET /frognano/stats` (batching counters); `GET /health` answers 200 once the model is
//! loaded. With [`ServerConfig::allow_reload`], `POST /frognano/reload` (`{"model_dir": ...}`)
//! swaps in new weights of the same model between batches (what a trainer does after every
//! update); without it that endpoint answers 403. Both generation endpoints take `max_tokens` / `max_completion_tokens`, `temperature`,
//! `top_p`, `top_k`, `seed`, `stop`, `stream` (server-sent events, `stream_options.include_usage`)
//! and `logprobs` (chat: a bool with `top_logprobs`; completions: an integer), and vLLM's
//! `return_token_ids`, `return_tokens_as_token_ids`, `stop_token_ids` and `ignore_eos`.
//!
//! What the server does not do: only `n = 1`; the log-prob of the chosen token is returned but no
//! alternatives (`top_logprobs` lists the chosen token alone); tool calls are not parsed (`tools`
//! is ignored and replies are plain text); penalties, `logit_bias` and `response_format` are
//! ignored, as are other unknown fields; `echo` and `suffix` are rejected.
//!
//! One worker thread owns the model. Requests reach it through a channel; it takes the first
//! waiting request, waits up to `batch_window_ms` for more (at most `max_batch`) and runs them as
//! one batch with [`generate_with`], each row with its own options and seed, so a request's
//! output does not depend on what it was batched with. A row's result is sent as soon as the row
//! finishes; a row whose client went away is cancelled. A failing batch answers 500 to its
//! requests and the worker goes on.
//!
//! Log-probs are those of [`frognano_llm::sampling`]: over the whole vocabulary at the request's
//! temperature, before top-k / top-p truncation (greedy: the model's own distribution).

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, mpsc as std_mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use frognano_llm::generate::{
    FinishReason, Generation, GenerationObserver, GenerationOptions, RowRequest, generate_with,
    seed_of_row,
};
use frognano_llm::{ChatMessage, DecoderModel, InferenceError, ModelOptions, TextCodec};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

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

/// Counters of a running server (`GET /v1/frognano/stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// Generation requests accepted (valid ones, queued for the model).
    pub requests: u64,
    /// Batches run.
    pub batches: u64,
    /// Requests run in those batches (cancelled-before-start ones excluded).
    pub batched_requests: u64,
    /// `batched_requests / batches`.
    pub mean_batch_size: f64,
    /// Largest batch run.
    pub largest_batch: u64,
    /// Prompt tokens of the batched requests.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Batches that failed (their requests got 500).
    pub failed_batches: u64,
    /// Seconds the worker spent generating.
    pub busy_seconds: f64,
    /// Weight reloads done (`POST /v1/frognano/reload`).
    #[serde(default)]
    pub reloads: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    batches: AtomicU64,
    batched_requests: AtomicU64,
    largest_batch: AtomicU64,
    prompt_tokens: AtomicU64,
    generated_tokens: AtomicU64,
    failed_batches: AtomicU64,
    busy_micros: AtomicU64,
    reloads: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> ServerStats {
        let batches = self.batches.load(Ordering::Relaxed);
        let batched = self.batched_requests.load(Ordering::Relaxed);
        ServerStats {
            requests: self.requests.load(Ordering::Relaxed),
            batches,
            batched_requests: batched,
            mean_batch_size: if batches == 0 {
                0.0
            } else {
                batched as f64 / batches as f64
            },
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            generated_tokens: self.generated_tokens.load(Ordering::Relaxed),
            failed_batches: self.failed_batches.load(Ordering::Relaxed),
            busy_seconds: self.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
            reloads: self.reloads.load(Ordering::Relaxed),
        }
    }
}

/// What the worker tells a request's handler.
#[derive(Debug)]
enum JobEvent {
    /// A sampled token (only for streamed requests).
    Token { id: u32, logprob: f32 },
    /// The row finished.
    Finished(Generation),
    /// The batch failed.
    Failed(String),
}

/// A request waiting for the model.
#[derive(Debug)]
struct Job {
    prompt: Vec<u32>,
    options: GenerationOptions,
    stream: bool,
    events: mpsc::UnboundedSender<JobEvent>,
}

/// A reload request waiting for the model thread.
#[derive(Debug)]
struct ReloadJob {
    model_dir: PathBuf,
    /// The reload count once the new weights serve, or why the folder was refused.
    answer: oneshot::Sender<std::result::Result<u64, String>>,
}

/// What the model thread is asked to do, in arrival order.
#[derive(Debug)]
enum WorkerMessage {
    /// Generate a reply (batched with others).
    Generate(Job),
    /// Swap in other weights between batches.
    Reload(ReloadJob),
}

/// The tokenizer the handlers and the model thread share; a reload swaps it.
type SharedCodec = Arc<RwLock<Arc<TextCodec>>>;

/// What the handlers need to know about the model.
#[derive(Debug, Clone)]
struct ModelLimits {
    vocab_size: usize,
    context_length: usize,
    eos_token_ids: Vec<u32>,
}

#[derive(Debug)]
struct AppState {
    model_name: String,
    api_key: Option<String>,
    codec: SharedCodec,
    limits: ModelLimits,
    default_max_tokens: usize,
    allow_reload: bool,
    jobs: std_mpsc::Sender<WorkerMessage>,
    counters: Arc<Counters>,
    created: u64,
}

impl AppState {
    /// The tokenizer of the weights serving now.
    fn codec(&self) -> Arc<TextCodec> {
        Arc::clone(&self.codec.read().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A server listening in the current tokio runtime (see [`start`]).
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    model_name: String,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

/// Loads the model, binds the address and starts serving in the current tokio runtime; returns
/// once the server accepts requests.
pub async fn start(config: ServerConfig) -> Result<RunningServer> {
    config.validate()?;
    let listener = tokio::net::TcpListener::bind((config.host.trim(), config.port))
        .await
        .map_err(|source| ServeError::Io {
            context: format!("listen on {}:{}", config.host, config.port),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io {
        context: "read the bound address".into(),
        source,
    })?;
    let counters = Arc::new(Counters::default());
    let (jobs, job_queue) = std_mpsc::channel::<WorkerMessage>();
    let (loaded_tx, loaded_rx) = oneshot::channel();
    let worker_config = config.clone();
    let worker_counters = Arc::clone(&counters);
    let worker = std::thread::Builder::new()
        .name("frognano-serve-model".into())
        .spawn(move || {
            let loaded = load_model(&worker_config);
            let (model, codec) = match loaded {
                Ok((model, codec)) => {
                    let limits = ModelLimits {
                        vocab_size: model.config.vocab_size,
                        context_length: model.config.context_length,
                        eos_token_ids: model.config.eos_token_ids.clone(),
                    };
                    let shared: SharedCodec = Arc::new(RwLock::new(codec));
                    let _ = loaded_tx.send(Ok((Arc::clone(&shared), limits)));
                    (model, shared)
                }
                Err(err) => {
                    let _ = loaded_tx.send(Err(err));
                    return;
                }
            };
            let batching = Batching {
                max_batch: worker_config.max_batch,
                window: Duration::from_millis(worker_config.batch_window_ms),
            };
            let model_options = ModelOptions {
                intra_threads: worker_config.intra_threads,
                runtime_library: None,
            };
            run_worker(
                model,
                &codec,
                &job_queue,
                batching,
                &model_options,
                &worker_counters,
            );
        })
        .map_err(|source| ServeError::Io {
            context: "start the model thread".into(),
            source,
        })?;
    let (codec, limits) = match loaded_rx.await {
        Ok(Ok(loaded)) => loaded,
        Ok(Err(err)) => return Err(err),
        Err(_) => {
            return Err(ServeError::invalid(
                "model",
                "the model thread stopped while loading",
            ));
        }
    };
    let model_name = config.model_name();
    let state = Arc::new(AppState {
        model_name: model_name.clone(),
        api_key: config.api_key.clone(),
        codec,
        limits,
        default_max_tokens: config.default_max_tokens,
        allow_reload: config.allow_reload,
        jobs,
        counters: Arc::clone(&counters),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    });
    let router = router(state, config.max_request_bytes);
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    Ok(RunningServer {
        addr,
        model_name,
        counters,
        stop: Some(stop),
        serving,
        worker: Some(worker),
    })
}

impl RunningServer {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API's base URL, `http://ADDR/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The name clients pass as `model`.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    /// The batching counters so far.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// Stops accepting connections, lets in-flight requests finish (streams included), then
    /// stops the model thread.
    pub async fn shutdown(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.wait().await
    }

    /// Serves until `signal` resolves, then shuts down gracefully.
    pub async fn run_until(self, signal: impl Future<Output = ()>) -> Result<()> {
        signal.await;
        self.shutdown().await
    }

    async fn wait(&mut self) -> Result<()> {
        let served = (&mut self.serving).await;
        // The router (and with it every job sender) is gone: the model thread ends after its
        // current batch.
        if let Some(worker) = self.worker.take() {
            let _ = tokio::task::spawn_blocking(move || worker.join()).await;
        }
        match served {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(ServeError::Io {
                context: "serve HTTP".into(),
                source,
            }),
            Err(join) => Err(ServeError::Io {
                context: "serve HTTP".into(),
                source: std::io::Error::other(join.to_string()),
            }),
        }
    }
}

/// Resolves on Ctrl-C or (on Unix) SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

/// Serves `config` on a new tokio runtime until Ctrl-C or SIGTERM, then shuts down gracefully;
/// `on_ready` is called once the server listens (to print its URL).
pub fn serve_until_signal(
    config: ServerConfig,
    on_ready: impl FnOnce(&RunningServer),
) -> Result<()> {
    let runtime = build_runtime()?;
    runtime.block_on(async move {
        let server = start(config).await?;
        on_ready(&server);
        server.run_until(shutdown_signal()).await
    })
}

fn build_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("frognano-serve-http")
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io {
            context: "start the HTTP runtime".into(),
            source,
        })
}

/// A server running on its own thread and tokio runtime, for callers without one (tests, other
/// crates); [`ServerHandle::stop`] or dropping it shuts it down gracefully.
#[derive(Debug)]
pub struct ServerHandle {
    addr: SocketAddr,
    model_name: String,
    counters: Arc<Counters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
}

impl ServerHandle {
    /// Starts serving `config` on a background thread; returns once it accepts requests.
    pub fn spawn(config: ServerConfig) -> Result<ServerHandle> {
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("frognano-serve".into())
            .spawn(move || -> Result<()> {
                let runtime = match build_runtime() {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = ready_tx.send(Err(err));
                        return Ok(());
                    }
                };
                runtime.block_on(async move {
                    let server = match start(config).await {
                        Ok(server) => server,
                        Err(err) => {
                            let _ = ready_tx.send(Err(err));
                            return Ok(());
                        }
                    };
                    let _ = ready_tx.send(Ok((
                        server.addr(),
                        server.model_name().to_string(),
                        Arc::clone(&server.counters),
                    )));
                    server
                        .run_until(async {
                            let _ = stopped.await;
                        })
                        .await
                })
            })
            .map_err(|source| ServeError::Io {
                context: "start the server thread".into(),
                source,
            })?;
        match ready_rx.recv() {
            Ok(Ok((addr, model_name, counters))) => Ok(ServerHandle {
                addr,
                model_name,
                counters,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(err)) => {
                let _ = thread.join();
                Err(err)
            }
            Err(_) => {
                let _ = thread.join();
                Err(ServeError::invalid(
                    "server",
                    "the server thread stopped while starting",
                ))
            }
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API's base URL, `http://ADDR/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The name clients pass as `model`.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    /// The batching counters so far.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// Shuts down gracefully (in-flight requests finish) and waits for it.
    pub fn stop(mut self) -> Result<()> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ServeError::invalid("server", "the server thread panicked")),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

fn load_model(config: &ServerConfig) -> Result<(DecoderModel, Arc<TextCodec>)> {
    let model = DecoderModel::load(
        &config.model_dir,
        &ModelOptions {
            intra_threads: config.intra_threads,
            runtime_library: None,
        },
    )?;
    let codec = TextCodec::load(&config.model_dir)?;
    Ok((model, Arc::new(codec)))
}

#[derive(Debug, Clone, Copy)]
struct Batching {
    max_batch: usize,
    window: Duration,
}

/// The model thread: batches waiting jobs and runs them, and swaps in new weights when asked,
/// until every job sender is gone.
fn run_worker(
    mut model: DecoderModel,
    codec: &SharedCodec,
    queue: &std_mpsc::Receiver<WorkerMessage>,
    batching: Batching,
    model_options: &ModelOptions,
    counters: &Counters,
) {
    while let Ok(message) = queue.recv() {
        let first = match message {
            WorkerMessage::Generate(job) => job,
            WorkerMessage::Reload(reload) => {
                reload_weights(&mut model, codec, reload, model_options, counters);
                continue;
            }
        };
        let mut batch = vec![first];
        // A reload that arrives while the batch gathers runs right after it; requests that
        // arrive after the reload wait for the new weights.
        let mut reload_after = None;
        let deadline = Instant::now() + batching.window;
        while batch.len() < batching.max_batch {
            // Requests that queued while the previous batch ran join without waiting.
            let next = match queue.try_recv() {
                Ok(message) => Some(message),
                Err(std_mpsc::TryRecvError::Disconnected) => break,
                Err(std_mpsc::TryRecvError::Empty) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    queue.recv_timeout(deadline - now).ok()
                }
            };
            match next {
                Some(WorkerMessage::Generate(job)) => batch.push(job),
                Some(WorkerMessage::Reload(reload)) => {
                    reload_after = Some(reload);
                    break;
                }
                None => break,
            }
        }
        // Clients that left while waiting cost nothing.
        batch.retain(|job| !job.events.is_closed());
        if !batch.is_empty() {
            let codec_now = Arc::clone(&codec.read().unwrap_or_else(|p| p.into_inner()));
            run_batch(&mut model, &codec_now, batch, counters);
        }
        if let Some(reload) = reload_after {
            reload_weights(&mut model, codec, reload, model_options, counters);
        }
    }
}

/// Loads the weights of `reload.model_dir` and, when they are the same model (vocabulary,
/// end-of-sequence tokens, context), makes them serve; answers the reload count, or why the
/// folder was refused (the old weights keep serving).
fn reload_weights(
    model: &mut DecoderModel,
    codec: &SharedCodec,
    reload: ReloadJob,
    model_options: &ModelOptions,
    counters: &Counters,
) {
    let outcome =
        load_compatible(model, &reload.model_dir, model_options).map(|(new_model, new_codec)| {
            *model = new_model;
            *codec.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new_codec);
            counters.reloads.fetch_add(1, Ordering::Relaxed) + 1
        });
    let _ = reload.answer.send(outcome);
}

/// The model and tokenizer of `dir`, when they can replace `current` without the handlers'
/// checks (vocabulary, context length, end-of-sequence tokens) changing.
fn load_compatible(
    current: &DecoderModel,
    dir: &std::path::Path,
    model_options: &ModelOptions,
) -> std::result::Result<(DecoderModel, TextCodec), String> {
    let shown = dir.display();
    let new_model = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        DecoderModel::load(dir, model_options)
    }))
    .map_err(|_| format!("{shown}: loading the model panicked"))?
    .map_err(|e| format!("{shown}: cannot load the model: {e}"))?;
    let new_codec =
        TextCodec::load(dir).map_err(|e| format!("{shown}: cannot load the tokenizer: {e}"))?;
    let (old, new) = (&current.config, &new_model.config);
    if new.vocab_size != old.vocab_size || new_codec.vocab_size() != new.vocab_size {
        return Err(format!(
            "{shown}: a different vocabulary ({} tokens, tokenizer {}; the served model has {})",
            new.vocab_size,
            new_codec.vocab_size(),
            old.vocab_size
        ));
    }
    if new.eos_token_ids != old.eos_token_ids {
        return Err(format!(
            "{shown}: different end-of-sequence tokens ({:?}; the served model has {:?})",
            new.eos_token_ids, old.eos_token_ids
        ));
    }
    if new.context_length != old.context_length {
        return Err(format!(
            "{shown}: a different context length ({}; the served model has {})",
            new.context_length, old.context_length
        ));
    }
    Ok((new_model, new_codec))
}

/// Routes a batch's events to each request's handler.
struct JobRouter<'a> {
    jobs: &'a [Job],
    finished: Vec<bool>,
    counters: &'a Counters,
}

impl GenerationObserver for JobRouter<'_> {
    fn on_token(&mut self, row: usize, token_id: u32, logprob: f32) -> bool {
        self.counters
            .generated_tokens
            .fetch_add(1, Ordering::Relaxed);
        let Some(job) = self.jobs.get(row) else {
            return false;
        };
        if job.stream {
            job.events
                .send(JobEvent::Token {
                    id: token_id,
                    logprob,
                })
                .is_ok()
        } else {
            !job.events.is_closed()
        }
    }

    fn on_finish(&mut self, row: usize, generation: &Generation) {
        if let Some(job) = self.jobs.get(row) {
            let _ = job.events.send(JobEvent::Finished(generation.clone()));
            self.finished[row] = true;
        }
    }
}

fn run_batch(model: &mut DecoderModel, codec: &TextCodec, jobs: Vec<Job>, counters: &Counters) {
    let started = Instant::now();
    // Counted before any reply goes out, so a client that got its reply sees its batch.
    let size = jobs.len() as u64;
    counters.batches.fetch_add(1, Ordering::Relaxed);
    counters.batched_requests.fetch_add(size, Ordering::Relaxed);
    counters.largest_batch.fetch_max(size, Ordering::Relaxed);
    counters.prompt_tokens.fetch_add(
        jobs.iter().map(|j| j.prompt.len() as u64).sum(),
        Ordering::Relaxed,
    );
    let rows: Vec<RowRequest<'_>> = jobs
        .iter()
        .map(|job| RowRequest {
            prompt: &job.prompt,
            options: job.options.clone(),
        })
        .collect();
    let mut router = JobRouter {
        jobs: &jobs,
        finished: vec![false; jobs.len()],
        counters,
    };
    // A panic inside the runtime or the tokenizer fails this batch, not the server.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        generate_with(model, codec, &rows, &mut router)
    }));
    let failure = match outcome {
        Ok(Ok(_)) => None,
        Ok(Err(err)) => Some(err.to_string()),
        Err(_) => Some("the model panicked".to_string()),
    };
    counters
        .busy_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    if let Some(message) = failure {
        counters.failed_batches.fetch_add(1, Ordering::Relaxed);
        for (job, finished) in jobs.iter().zip(&router.finished) {
            if !finished {
                let _ = job.events.send(JobEvent::Failed(message.clone()));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP

fn router(state: Arc<AppState>, max_request_bytes: usize) -> Router {
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
struct ApiError {
    status: StatusCode,
    kind: &'static str,
    code: &'static str,
    message: String,
}

impl ApiError {
    fn new(
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

    fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            message,
        )
    }

    fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "model_failure",
            message,
        )
    }

    fn body(&self) -> Value {
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

type ApiResult<T> = std::result::Result<T, ApiError>;

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
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "shutting_down",
            "the model is not running",
        )
        .into_response();
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
fn parse_body<T: serde::de::DeserializeOwned>(
    body: std::result::Result<Bytes, BytesRejection>,
) -> ApiResult<T> {
    let bytes = body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request_error",
                "request_too_large",
                "the request body is larger than the server accepts",
            )
        } else {
            ApiError::bad_request(format!("cannot read the request body: {rejection}"))
        }
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON body: {e}")))
}

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
struct SamplingParams {
    model: Option<String>,
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
struct ChatRequest {
    messages: Vec<ChatRequestMessage>,
    logprobs: Option<bool>,
    top_logprobs: Option<i64>,
    add_generation_prompt: Option<bool>,
    #[serde(flatten)]
    sampling: SamplingParams,
}

#[derive(Debug, Deserialize)]
struct ChatRequestMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct CompletionRequest {
    prompt: Value,
    logprobs: Option<i64>,
    echo: Option<bool>,
    suffix: Option<String>,
    #[serde(flatten)]
    sampling: SamplingParams,
}

/// What a generation request asks for, checked.
#[derive(Debug)]
struct Prepared {
    prompt: Vec<u32>,
    options: GenerationOptions,
    stream: bool,
    include_usage: bool,
    logprobs: bool,
    /// Alternatives asked per token (only the chosen token is ever listed).
    top_logprobs: usize,
    return_token_ids: bool,
    tokens_as_ids: bool,
}

/// Which of the two APIs a reply is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Chat,
    Completions,
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

/// Runs CPU-heavy request preparation (template, tokenizer) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|_| Err(ApiError::internal("request preparation panicked")))
}

fn prepare_chat(state: &Arc<AppState>, request: &ChatRequest) -> ApiResult<Vec<u32>> {
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

fn prepare_completion(state: &Arc<AppState>, request: &CompletionRequest) -> ApiResult<Vec<u32>> {
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

async fn chat_completions(
    State(state): State<Arc<AppState>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    let request: ChatRequest = match parse_body(body) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    if let Err(err) = check_model(&state, request.sampling.model.as_deref()) {
        return err.into_response();
    }
    let top_logprobs = match request.top_logprobs {
        None => 0,
        Some(k) if (0..=20).contains(&k) => k as usize,
        Some(k) => {
            return ApiError::bad_request(format!("top_logprobs must be in 0..=20, got {k}"))
                .into_response();
        }
    };
    let logprobs = request.logprobs.unwrap_or(false);
    let prompt_state = Arc::clone(&state);
    let prepared = blocking(move || {
        let prompt = prepare_chat(&prompt_state, &request)?;
        prepared(
            &prompt_state,
            prompt,
            &request.sampling,
            logprobs,
            top_logprobs,
        )
    })
    .await;
    match prepared {
        Ok(prepared) => respond(state, Api::Chat, prepared).await,
        Err(err) => err.into_response(),
    }
}

async fn completions(
    State(state): State<Arc<AppState>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    let request: CompletionRequest = match parse_body(body) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    if let Err(err) = check_model(&state, request.sampling.model.as_deref()) {
        return err.into_response();
    }
    let top_logprobs = match request.logprobs {
        None => None,
        Some(k) if (0..=20).contains(&k) => Some(k as usize),
        Some(k) => {
            return ApiError::bad_request(format!("logprobs must be in 0..=20, got {k}"))
                .into_response();
        }
    };
    let prompt_state = Arc::clone(&state);
    let prepared = blocking(move || {
        let prompt = prepare_completion(&prompt_state, &request)?;
        prepared(
            &prompt_state,
            prompt,
            &request.sampling,
            top_logprobs.is_some(),
            top_logprobs.unwrap_or(0),
        )
    })
    .await;
    match prepared {
        Ok(prepared) => respond(state, Api::Completions, prepared).await,
        Err(err) => err.into_response(),
    }
}

fn prepared(
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
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "shutting_down",
            "the model is not running",
        )
        .into_response();
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

/// What every reply of one request shares.
#[derive(Debug)]
struct Reply {
    api: Api,
    id: String,
    created: u64,
    model: String,
    prepared: Prepared,
}

fn finish_reason_text(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Eos | FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::Cancelled => "abort",
    }
}

impl Reply {
    fn new(state: &AppState, api: Api, prepared: Prepared) -> Self {
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

    fn usage(&self, completion_tokens: usize) -> Value {
        let prompt_tokens = self.prepared.prompt.len();
        json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        })
    }

    /// The whole (non-streamed) reply.
    fn complete(&self, codec: &TextCodec, generation: &Generation) -> Value {
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
    fn chunk(&self, mut choice: Value) -> Value {
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
    fn delta_chunk(
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
struct Pending {
    ids: Vec<u32>,
    logprobs: Vec<f32>,
    offsets: Vec<usize>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

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

fn stream_response(
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
