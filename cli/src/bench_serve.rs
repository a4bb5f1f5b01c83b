//! `frognano bench serve`: `frognano serve` against llama.cpp's server, side by side, and the
//! overhead of the HTTP policy (the measurement lives in `frognano_serve::bench`).

use std::process::ExitCode;

use clap::Args;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use frognano_serve::{ServingBenchConfig, bench_serving};

use crate::models::with_spinner;

#[derive(Args, Debug)]
pub struct BenchServeArgs {
    /// Registry model (its int4 ONNX folder for frognano serve, its GGUF for llama.cpp).
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// Concurrent clients, one measurement each (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,4,8")]
    clients: Vec<usize>,
    /// Requests each client sends in turn.
    #[arg(long, default_value_t = 2)]
    requests: usize,
    /// Rounds of every measurement (the table shows the median round).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Tokens per reply.
    #[arg(long, default_value_t = 96)]
    max_tokens: usize,
    /// Threads of each server (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Leave llama.cpp out (no serving environment needed).
    #[arg(long)]
    no_llama_cpp: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// `frognano bench serve`.
pub fn bench(args: &BenchServeArgs) -> anyhow::Result<ExitCode> {
    let config = ServingBenchConfig {
        model: args.model.clone(),
        clients: args.clients.clone(),
        requests_per_client: args.requests,
        rounds: args.rounds,
        max_tokens: args.max_tokens,
        threads: args.threads,
        llama_cpp: !args.no_llama_cpp,
        ..ServingBenchConfig::default()
    };
    let report = with_spinner("serving bench", |progress| bench_serving(&config, progress))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "server",
        "clients",
        "requests",
        "completion tokens",
        "wall s",
        "tok/s",
        "mean latency s",
    ]);
    for row in &report.throughput {
        table.add_row(vec![
            row.server.clone(),
            row.clients.to_string(),
            row.requests.to_string(),
            row.completion_tokens.to_string(),
            format!("{:.2}", row.wall_s),
            format!("{:.1}", row.tokens_per_s),
            format!("{:.2}", row.mean_latency_s),
        ]);
    }
    println!("{table}");
    println!(
        "median of {} rounds; the servers took turns at every concurrency",
        report.config.rounds
    );
    for (clients, ratio) in &report.ratios {
        println!("{clients} clients: frognano serve / llama.cpp = {ratio:.2}x aggregate tok/s");
    }
    println!(
        "frognano serve ran batches of {:.2} requests on average",
        report.frognano_mean_batch
    );
    println!(
        "HttpPolicy against an instant server: {:.0} requests/s ({:.3} ms of client work per request)",
        report.policy_requests_per_s, report.policy_overhead_ms
    );
    Ok(ExitCode::SUCCESS)
}
