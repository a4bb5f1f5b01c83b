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
//! one batch with [`generate_with`](frognano_llm::generate::generate_with), each row with its own
//! options and seed, so a request's output does not depend on what it was batched with. A row's
//! result is sent as soon as the row finishes; a row whose client went away is cancelled. A
//! failing batch answers 500 to its requests and the worker goes on.
//!
//! Log-probs are those of [`frognano_llm::sampling`]: over the whole vocabulary at the request's
//! temperature, before top-k / top-p truncation (greedy: the model's own distribution).
//!
//! This module starts and stops servers ([`start`] and [`RunningServer`] in a caller's tokio
//! runtime, [`ServerHandle`] on its own thread, [`serve_until_signal`]; both report their
//! address, model name and counters through [`ServerInfo`]) and holds the state the handlers
//! share. The rest lives in its submodules: `check` ([`RequestChecker`]: a request checked as
//! the server would, without generating), `config` ([`ServerConfig`]), `stats`
//! ([`ServerStats`] and the live counters), `scheduler` (the model thread and its batching),
//! `routes` (the router, handlers and error replies), `request` (request bodies and their
//! checking), `reply` (JSON replies) and `stream` (server-sent events).

use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, RwLock, mpsc as std_mpsc};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use frognano_llm::{ModelOptions, TextCodec};
use tokio::sync::oneshot;

use crate::error::{Result, ServeError};

mod check;
mod config;
mod reply;
mod request;
mod routes;
mod scheduler;
mod stats;
mod stream;

pub use check::{Endpoint, Rejection, RequestChecker};
pub use config::ServerConfig;
pub use stats::ServerStats;

use routes::router;
use scheduler::{Batching, WorkerMessage, load_model, run_worker};
use stats::Counters;

/// The tokenizer the handlers and the model thread share; a reload swaps it.
type SharedCodec = Arc<RwLock<Arc<TextCodec>>>;

/// What the handlers need to know about the model.
#[derive(Debug, Clone)]
struct ModelLimits {
    vocab_size: usize,
    context_length: usize,
    eos_token_ids: Vec<u32>,
}

/// What every handler shares.
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

/// Where a running server listens, what it serves and its counters: what [`RunningServer`] and
/// [`ServerHandle`] both tell (each dereferences to one).
#[derive(Debug, Clone)]
pub struct ServerInfo {
    addr: SocketAddr,
    model_name: String,
    counters: Arc<Counters>,
}

impl ServerInfo {
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
}

/// A server listening in the current tokio runtime (see [`start`]); its address, URL, model
/// name and counters are those of its [`ServerInfo`].
#[derive(Debug)]
pub struct RunningServer {
    info: ServerInfo,
    stop: Option<oneshot::Sender<()>>,
    serving: tokio::task::JoinHandle<std::io::Result<()>>,
    worker: Option<std::thread::JoinHandle<()>>,
    /// Tells the model thread to stop when connections dropped after the grace period still
    /// hold job senders.
    worker_stop: std_mpsc::Sender<WorkerMessage>,
    grace: Duration,
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
    let worker_stop = jobs.clone();
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
        info: ServerInfo {
            addr,
            model_name,
            counters,
        },
        stop: Some(stop),
        serving,
        worker: Some(worker),
        worker_stop,
        grace: Duration::from_secs(config.shutdown_grace_s),
    })
}

impl Deref for RunningServer {
    type Target = ServerInfo;

    fn deref(&self) -> &ServerInfo {
        &self.info
    }
}

impl RunningServer {
    /// Stops accepting connections, lets in-flight requests finish (streams included) within
    /// [`ServerConfig::shutdown_grace_s`], drops those still open after it, then stops the
    /// model thread.
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
        // Requests in flight get the grace period; a client stalled half-way through its
        // request would otherwise hold the stop forever. Connections still open after it are
        // dropped with the runtime.
        let served = match tokio::time::timeout(self.grace, &mut self.serving).await {
            Ok(served) => served,
            Err(_) => {
                self.serving.abort();
                Ok(Ok(()))
            }
        };
        // The model thread ends after its current batch.
        let _ = self.worker_stop.send(WorkerMessage::Stop);
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
/// crates); [`ServerHandle::stop`] or dropping it shuts it down gracefully. Its address, URL,
/// model name and counters are those of its [`ServerInfo`].
#[derive(Debug)]
pub struct ServerHandle {
    info: ServerInfo,
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
                    let _ = ready_tx.send(Ok(server.info.clone()));
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
            Ok(Ok(info)) => Ok(ServerHandle {
                info,
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

    /// Shuts down gracefully (in-flight requests finish within the grace period) and waits
    /// for it.
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

impl Deref for ServerHandle {
    type Target = ServerInfo;

    fn deref(&self) -> &ServerInfo {
        &self.info
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}
