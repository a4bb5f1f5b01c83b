//! `frognano serve`: a local model behind an OpenAI-compatible HTTP server until Ctrl-C or
//! SIGTERM.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use frognano_serve::server::{ServerConfig, serve_until_signal};

use crate::models::resolve_with_progress;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Model folder, registry name (`smollm2-135m`, `smollm2-135m:fp32`) or `tiny`.
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// Address to listen on; anything but loopback lets other machines in.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: any free port).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Environment variable holding the API key clients must send as a bearer token.
    #[arg(long, value_name = "VAR")]
    api_key_env: Option<String>,
    /// The name clients pass as `model` (default: the registry name, else the folder's name).
    #[arg(long)]
    served_model_name: Option<String>,
    /// Most requests generated together in one batch.
    #[arg(long, default_value_t = 8)]
    max_batch: usize,
    /// How long the batcher waits for more requests once one arrived, in milliseconds.
    #[arg(long, default_value_t = 20)]
    batch_window_ms: u64,
    /// Tokens generated when a request sets no `max_tokens`.
    #[arg(long, default_value_t = 256)]
    default_max_tokens: usize,
    /// ONNX Runtime threads (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Let clients load other weights into the server (`POST /v1/frognano/reload` with a model
    /// folder on this machine): for a trainer's rollouts, which reload after every update.
    #[arg(long)]
    allow_reload: bool,
    /// Seconds a stop (Ctrl-C, SIGTERM) waits for requests in flight before dropping them.
    #[arg(long, default_value_t = 10)]
    shutdown_grace: u64,
}

pub fn serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let api_key = match &args.api_key_env {
        None => None,
        Some(var) => match std::env::var(var) {
            Ok(key) if !key.trim().is_empty() => Some(key.trim().to_string()),
            _ => bail!("--api-key-env {var}: the environment variable is unset or empty"),
        },
    };
    let model_dir = resolve_with_progress(&args.model)?;
    // A registry model lands in a cache folder named after its precision; clients should see
    // the name they know.
    let served_model_name = args
        .served_model_name
        .clone()
        .or_else(|| (!Path::new(&args.model).exists()).then(|| args.model.clone()));
    let config = ServerConfig {
        model_dir,
        served_model_name,
        host: args.host.clone(),
        port: args.port,
        api_key,
        max_batch: args.max_batch,
        batch_window_ms: args.batch_window_ms,
        default_max_tokens: args.default_max_tokens,
        intra_threads: args.threads,
        allow_reload: args.allow_reload,
        shutdown_grace_s: args.shutdown_grace,
        ..ServerConfig::default()
    };
    config.validate()?;
    if !config.is_loopback() && config.api_key.is_none() {
        eprintln!(
            "warning: listening on {} without an API key: anyone who can reach this machine \
             can use the model (set --api-key-env)",
            config.host
        );
    }
    serve_until_signal(config, |server| {
        println!("serving {} at {}", server.model_name(), server.url());
    })
    .context("serve")?;
    Ok(ExitCode::SUCCESS)
}
