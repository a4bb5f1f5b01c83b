//! Serving benchmarks, side by side in one run (`frognano bench serve`).
//!
//! 1. Aggregate decode throughput of `frognano serve` (in process, the int4 ONNX model) against
//!    llama.cpp's own server (`llama-server`'s code in the serving environment's xllamacpp
//!    wheel, with as many parallel slots as the largest concurrency, so that it batches
//!    concurrent requests too; the Q4_1 GGUF the ONNX model was converted from) with 1, 4 and
//!    8 concurrent clients sending the same
//!    chat requests: completion tokens of all clients over the wall-clock time, the prompt's
//!    prefill included. The two servers run one after the other, each alone on the machine.
//! 2. The overhead of [`HttpPolicy`] itself: episodes' requests per second it sustains
//!    against a server that answers at once.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use frognano_core::{Observation, PolicyContext};
use frognano_llm::assets::{self, Progress};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client::{HttpPolicy, HttpPolicyConfig};
use crate::error::{Result, ServeError};
use crate::server::{ServerConfig, ServerHandle};

/// Starts llama.cpp's server inside the serving environment's Python: argv is the GGUF, the
/// alias, the port, the threads, the parallel slots and the context per slot. The server runs
/// on its own threads; the process stays until it is killed.
const LLAMA_SERVER_LAUNCHER: &str = r#"
import sys, threading
import xllamacpp
gguf, alias, port, threads, slots, context = sys.argv[1:7]
params = xllamacpp.CommonParams()
params.model.path = gguf
params.model_alias = {alias}
params.hostnames = ["127.0.0.1"]
params.port = int(port)
params.n_parallel = int(slots)
params.kv_unified = True
params.n_ctx = int(context) * int(slots)
params.cpuparams.n_threads = int(threads)
params.cpuparams_batch.n_threads = int(threads)
params.verbosity = 0
server = xllamacpp.Server(params)
print(server.listening_address, flush=True)
threading.Event().wait()
"#;

/// Tokens of context each of llama.cpp's slots holds (the longest episode prompt and reply).
const LLAMA_CONTEXT_PER_SLOT: usize = 8192;

/// llama.cpp's OpenAI-compatible server (`llama-server`, embedded in the xllamacpp wheel) as a
/// child process, stopped when dropped.
#[derive(Debug)]
pub struct LlamaCppServer {
    child: Child,
    url: String,
    alias: String,
}

impl LlamaCppServer {
    /// Starts the server of the serving environment (installed on first use) on `gguf`, known
    /// to clients as `alias`, on a free loopback port, with `slots` requests decoded together
    /// (continuous batching), and waits until it answers.
    pub fn start(
        gguf: &Path,
        alias: &str,
        threads: usize,
        slots: usize,
        progress: Progress<'_>,
    ) -> Result<Self> {
        let env = assets::ensure_serving_env(progress)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|source| ServeError::Io {
                context: "find a free port".into(),
                source,
            })?
            .port();
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(2, |n| n.get())
        } else {
            threads
        };
        progress("starting llama.cpp's server");
        let mut child = Command::new(&env.python)
            .args(["-c", LLAMA_SERVER_LAUNCHER])
            .arg(gguf)
            .arg(alias)
            .args([
                port.to_string(),
                threads.to_string(),
                slots.max(1).to_string(),
                LLAMA_CONTEXT_PER_SLOT.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ServeError::Io {
                context: "start llama.cpp's server".into(),
                source,
            })?;
        // Its log is kept for the error message should it not come up.
        let (log_tx, log_rx) = std::sync::mpsc::channel::<String>();
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                    if log_tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut server = LlamaCppServer {
            child,
            url: format!("http://127.0.0.1:{port}/v1"),
            alias: alias.to_string(),
        };
        let started = Instant::now();
        loop {
            let probe = HttpPolicyConfig {
                retries: 0,
                timeout_s: 5.0,
                ..HttpPolicyConfig::new(server.url.clone(), alias)
            };
            if HttpPolicy::connect(probe).is_ok() {
                return Ok(server);
            }
            let exited = server.child.try_wait().ok().flatten();
            if exited.is_some() || started.elapsed() > Duration::from_secs(120) {
                let log: Vec<String> = log_rx.try_iter().collect();
                let tail = log[log.len().saturating_sub(12)..].join("\n");
                return Err(ServeError::Connect {
                    url: server.url.clone(),
                    message: format!(
                        "llama.cpp's server {}; its last output:\n{tail}",
                        match exited {
                            Some(status) => format!("exited ({status})"),
                            None => "did not answer within 120 s".to_string(),
                        }
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Its API's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The model name it answers to.
    pub fn model_name(&self) -> &str {
        &self.alias
    }
}

impl Drop for LlamaCppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What `frognano bench serve` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServingBenchConfig {
    /// Registry model (its int4 ONNX folder for FrogNano, its GGUF for llama.cpp).
    pub model: String,
    /// Concurrent clients, one measurement each.
    pub clients: Vec<usize>,
    /// Requests each client sends, one after another.
    pub requests_per_client: usize,
    /// Rounds of every measurement; each figure is the median round.
    pub rounds: usize,
    /// Tokens per reply.
    pub max_tokens: usize,
    /// Threads each server computes with (0: one per core).
    pub threads: usize,
    /// Also measure llama.cpp's server (the side-by-side peer).
    pub llama_cpp: bool,
    /// The user message every request sends.
    pub prompt: String,
    /// Episodes per `act` call in the policy-overhead measurement.
    pub overhead_batch: usize,
    /// `act` calls in the policy-overhead measurement.
    pub overhead_calls: usize,
}

impl Default for ServingBenchConfig {
    fn default() -> Self {
        ServingBenchConfig {
            model: "smollm2-135m".into(),
            clients: vec![1, 4, 8],
            requests_per_client: 2,
            rounds: 2,
            max_tokens: 96,
            threads: 0,
            llama_cpp: true,
            prompt: "Write a Python function that checks whether a string is a palindrome, \
                     with a docstring and three doctests."
                .into(),
            overhead_batch: 64,
            overhead_calls: 20,
        }
    }
}

/// One server at one concurrency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputRow {
    /// `frognano serve` or `llama.cpp`.
    pub server: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Requests answered.
    pub requests: usize,
    /// Completion tokens of all requests (the servers' `usage`).
    pub completion_tokens: u64,
    /// Wall-clock seconds.
    pub wall_s: f64,
    /// completion_tokens / wall_s.
    pub tokens_per_s: f64,
    /// Mean seconds per request.
    pub mean_latency_s: f64,
}

/// The report of a serving benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingBenchReport {
    /// The settings.
    pub config: ServingBenchConfig,
    /// The median round of each server at each concurrency.
    pub throughput: Vec<ThroughputRow>,
    /// Every round of every measurement, in the order they ran.
    pub rounds: Vec<ThroughputRow>,
    /// Per concurrency: FrogNano's tok/s over llama.cpp's.
    pub ratios: Vec<(usize, f64)>,
    /// Mean batch size `frognano serve` ran.
    pub frognano_mean_batch: f64,
    /// Episodes' requests per second `HttpPolicy` sustains against an instant server.
    pub policy_requests_per_s: f64,
    /// Mean milliseconds of client-side work per request (serialising, parsing, bookkeeping).
    pub policy_overhead_ms: f64,
}

/// Runs the benchmark; `progress` hears what it is doing.
pub fn bench_serving(
    config: &ServingBenchConfig,
    progress: Progress<'_>,
) -> Result<ServingBenchReport> {
    if config.clients.is_empty()
        || config.clients.contains(&0)
        || config.requests_per_client == 0
        || config.rounds == 0
    {
        return Err(ServeError::invalid(
            "bench",
            "clients must be at least 1 each, and requests_per_client and rounds at least 1",
        ));
    }
    let cache = assets::resolve_model(&format!("{}:int4", config.model), progress)?;
    let mut throughput = Vec::new();
    let largest = config.clients.iter().copied().max().unwrap_or(1);

    progress("starting frognano serve");
    let server = ServerHandle::spawn(ServerConfig {
        port: 0,
        max_batch: largest.max(1),
        intra_threads: config.threads,
        served_model_name: Some(config.model.clone()),
        ..ServerConfig::new(&cache)
    })?;
    let llama = if config.llama_cpp {
        let gguf = assets::model_gguf(&config.model, progress)?;
        Some(LlamaCppServer::start(
            &gguf,
            &config.model,
            config.threads,
            largest,
            progress,
        )?)
    } else {
        None
    };
    // One unmeasured request each (first-request allocations, page faults), then the two
    // servers take turns at every concurrency and round, so that drifts of the machine hit
    // both; each figure is the median of its rounds.
    let warm_up = ServingBenchConfig {
        requests_per_client: 1,
        ..config.clone()
    };
    progress("warming up");
    load(
        &warm_up,
        "frognano serve",
        &server.url(),
        server.model_name(),
        1,
    )?;
    if let Some(llama) = &llama {
        load(&warm_up, "llama.cpp", llama.url(), llama.model_name(), 1)?;
    }
    let warm = server.stats();
    let mut rounds: Vec<ThroughputRow> = Vec::new();
    for round in 0..config.rounds.max(1) {
        for &clients in &config.clients {
            progress(&format!(
                "round {}: frognano serve, {clients} clients",
                round + 1
            ));
            let url = server.url();
            rounds.push(load(
                config,
                "frognano serve",
                &url,
                server.model_name(),
                clients,
            )?);
            if let Some(llama) = &llama {
                progress(&format!(
                    "round {}: llama.cpp, {clients} clients",
                    round + 1
                ));
                rounds.push(load(
                    config,
                    "llama.cpp",
                    llama.url(),
                    llama.model_name(),
                    clients,
                )?);
            }
        }
    }
    let stats = server.stats();
    let frognano_mean_batch = stats.batched_requests.saturating_sub(warm.batched_requests) as f64
        / stats.batches.saturating_sub(warm.batches).max(1) as f64;
    drop(llama);
    server.stop()?;
    for name in ["frognano serve", "llama.cpp"] {
        for &clients in &config.clients {
            let mut runs: Vec<&ThroughputRow> = rounds
                .iter()
                .filter(|r| r.server == name && r.clients == clients)
                .collect();
            runs.sort_by(|a, b| a.tokens_per_s.total_cmp(&b.tokens_per_s));
            if let Some(median) = runs.get(runs.len() / 2) {
                throughput.push((*median).clone());
            }
        }
    }
    let ratios = config
        .clients
        .iter()
        .filter_map(|&c| {
            let of = |name: &str| {
                throughput
                    .iter()
                    .find(|r| r.server == name && r.clients == c)
                    .map(|r| r.tokens_per_s)
            };
            Some((c, of("frognano serve")? / of("llama.cpp")?.max(1e-9)))
        })
        .collect();

    progress("HttpPolicy against an instant server");
    let (policy_requests_per_s, policy_overhead_ms) = policy_overhead(config)?;
    Ok(ServingBenchReport {
        config: config.clone(),
        throughput,
        rounds,
        ratios,
        frognano_mean_batch,
        policy_requests_per_s,
        policy_overhead_ms,
    })
}

/// `clients` concurrent clients, each sending `requests_per_client` chat requests in turn.
fn load(
    config: &ServingBenchConfig,
    server: &str,
    url: &str,
    model: &str,
    clients: usize,
) -> Result<ThroughputRow> {
    let runtime = bench_runtime(2, "start the benchmark's runtime")?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()
        .map_err(|e| ServeError::invalid("http client", e.to_string()))?;
    let endpoint = format!("{url}/chat/completions");
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": config.prompt}],
        "max_tokens": config.max_tokens,
        "temperature": 0.0,
        "seed": 0,
    });
    let started = Instant::now();
    let results: Vec<Result<(u64, f64)>> = runtime.block_on(async {
        let tasks: Vec<_> = (0..clients)
            .map(|_| {
                let (client, endpoint, body) = (client.clone(), endpoint.clone(), body.clone());
                let requests = config.requests_per_client;
                tokio::spawn(async move {
                    let mut tokens = 0u64;
                    let mut latency = 0.0;
                    for _ in 0..requests {
                        let asked = Instant::now();
                        let reply: Value = client
                            .post(&endpoint)
                            .json(&body)
                            .send()
                            .await
                            .and_then(reqwest::Response::error_for_status)
                            .map_err(|e| ServeError::Connect {
                                url: endpoint.clone(),
                                message: e.to_string(),
                            })?
                            .json()
                            .await
                            .map_err(|e| ServeError::BadReply {
                                url: endpoint.clone(),
                                message: e.to_string(),
                            })?;
                        latency += asked.elapsed().as_secs_f64();
                        tokens += reply["usage"]["completion_tokens"].as_u64().unwrap_or(0);
                    }
                    Ok((tokens, latency))
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.unwrap_or_else(|e| {
                Err(ServeError::invalid(
                    "bench",
                    format!("a client failed: {e}"),
                ))
            }));
        }
        results
    });
    let wall_s = started.elapsed().as_secs_f64();
    let mut completion_tokens = 0;
    let mut latency = 0.0;
    for result in results {
        let (tokens, seconds) = result?;
        completion_tokens += tokens;
        latency += seconds;
    }
    let requests = clients * config.requests_per_client;
    Ok(ThroughputRow {
        server: server.to_string(),
        clients,
        requests,
        completion_tokens,
        wall_s,
        tokens_per_s: completion_tokens as f64 / wall_s.max(1e-9),
        mean_latency_s: latency / requests as f64,
    })
}

/// A multi-threaded runtime of `threads` workers; `context` says what failed to start.
fn bench_runtime(threads: usize, context: &str) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|source| ServeError::Io {
            context: context.into(),
            source,
        })
}

/// Requests per second and client milliseconds per request of `HttpPolicy` against a server
/// that answers every request at once with a fixed reply.
fn policy_overhead(config: &ServingBenchConfig) -> Result<(f64, f64)> {
    use axum::routing::{get, post};
    let runtime = bench_runtime(1, "start the instant server's runtime")?;
    let reply = json!({
        "object": "chat.completion",
        "model": "instant",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "submit"},
            "finish_reason": "stop",
            "logprobs": {"content": [{"token": "token_id:1", "logprob": -0.1}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    });
    let app = axum::Router::new()
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"data": [{"id": "instant"}]})) }),
        )
        .route(
            "/v1/chat/completions",
            post(move || {
                let reply = reply.clone();
                async move { axum::Json(reply) }
            }),
        );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(|source| ServeError::Io {
            context: "bind the instant server".into(),
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io {
        context: "the instant server's address".into(),
        source,
    })?;
    runtime.spawn(async move { axum::serve(listener, app).await });
    let mut policy = HttpPolicy::connect(HttpPolicyConfig {
        concurrency: config.overhead_batch.max(1),
        ..HttpPolicyConfig::new(format!("http://{addr}/v1"), "instant")
    })?;
    // A realistic prompt: an episode's first observation of a few kilobytes.
    let context = PolicyContext {
        task_id: "t".into(),
        initial: Observation {
            text: "Fix the failing test in src/pkg/module.py. ".repeat(80),
            ..Observation::default()
        },
        history: Vec::new(),
    };
    let contexts = vec![context; config.overhead_batch.max(1)];
    policy.reply(&contexts)?; // warm the connections
    let started = Instant::now();
    for _ in 0..config.overhead_calls.max(1) {
        let outputs = policy.reply(&contexts)?;
        if let Some(error) = outputs.iter().find_map(|o| o.error.clone()) {
            return Err(ServeError::invalid("bench", error));
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let requests = (config.overhead_calls.max(1) * contexts.len()) as f64;
    runtime.shutdown_background();
    Ok((requests / seconds, 1e3 * seconds / requests))
}
