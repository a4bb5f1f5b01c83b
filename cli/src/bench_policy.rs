//! `frognano bench policy`: FrogNano's generation against onnxruntime-genai on the same ONNX
//! model and the same prompts, each engine in its own process, side by side in one run.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use frognano_policy::llm::bench::{WorkerReport, memory_bandwidth_gbs, run_worker};
use frognano_policy::llm::{DecoderModel, ModelConfig, TextCodec, assets};

use crate::models::{resolve_with_progress, spinner};

#[derive(Args, Debug)]
pub struct BenchPolicyArgs {
    /// Registry model name, or a folder with one model folder per precision (int4/, fp32/).
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// Precisions to measure.
    #[arg(long, value_delimiter = ',', default_value = "int4,fp32")]
    precisions: Vec<String>,
    /// Prompt tokens per row.
    #[arg(long, default_value_t = 128)]
    prompt_tokens: usize,
    /// Tokens generated per row.
    #[arg(long, default_value_t = 64)]
    new_tokens: usize,
    /// Batch sizes.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    batch_sizes: Vec<usize>,
    /// Timed runs per measurement (after one warm-up); medians are reported.
    #[arg(long, default_value_t = 3)]
    repeats: usize,
    /// Rounds: each runs both engines (in alternating order) in fresh processes; the table shows
    /// each figure's median over the rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Only FrogNano (no onnxruntime-genai side).
    #[arg(long)]
    no_genai: bool,
    /// Write results.json here.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct PolicyWorkerArgs {
    #[arg(long)]
    model: PathBuf,
    #[arg(long)]
    prompts: PathBuf,
    #[arg(long)]
    new_tokens: usize,
    #[arg(long, value_delimiter = ',')]
    batch_sizes: Vec<usize>,
    #[arg(long)]
    repeats: usize,
}

/// The hidden worker: FrogNano's side, in its own process; prints one JSON line.
pub fn worker(args: &PolicyWorkerArgs) -> anyhow::Result<ExitCode> {
    let rows = read_prompts(&args.prompts)?;
    let report = run_worker(
        &args.model,
        &rows,
        args.new_tokens,
        &args.batch_sizes,
        args.repeats,
        0,
    )?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(ExitCode::SUCCESS)
}

fn read_prompts(path: &std::path::Path) -> anyhow::Result<Vec<Vec<u32>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)?;
    Ok(serde_json::from_value(value["rows"].clone())?)
}

/// Prompt rows of equal length cut from a real source file, each row starting elsewhere.
fn prompt_rows(codec: &TextCodec, tokens: usize, rows: usize) -> anyhow::Result<Vec<Vec<u32>>> {
    let source = include_str!("../../llm/src/generate.rs");
    let mut ids = codec.encode(source)?;
    while ids.len() < tokens + rows * 7 {
        let more = ids.clone();
        ids.extend(more);
    }
    Ok((0..rows)
        .map(|r| ids[r * 7..r * 7 + tokens].to_vec())
        .collect())
}

fn run_json(command: &mut Command, what: &str) -> anyhow::Result<WorkerReport> {
    let output = command
        .output()
        .with_context(|| format!("start the {what} worker"))?;
    if !output.status.success() {
        bail!(
            "the {what} worker failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .rev()
                .take(8)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    serde_json::from_str(line).with_context(|| format!("read the {what} worker's report {line:?}"))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Per-figure medians over rounds of the same engine.
fn median_report(rounds: &[WorkerReport]) -> WorkerReport {
    let mut merged = rounds[0].clone();
    merged.load_s = median(rounds.iter().map(|r| r.load_s).collect());
    merged.peak_rss_mb = median(rounds.iter().map(|r| r.peak_rss_mb).collect());
    for (i, batch) in merged.batches.iter_mut().enumerate() {
        let pick = |f: &dyn Fn(&frognano_policy::llm::bench::BatchFigures) -> f64| {
            median(
                rounds
                    .iter()
                    .filter_map(|r| r.batches.get(i))
                    .map(f)
                    .collect(),
            )
        };
        batch.prefill_tok_s = pick(&|b| b.prefill_tok_s);
        batch.ttft_ms = pick(&|b| b.ttft_ms);
        batch.decode_tok_s = pick(&|b| b.decode_tok_s);
    }
    merged
}

/// Weight bytes a decode step reads: the ONNX files minus the embedding table, of which a step
/// reads one row per token (the tied output projection is a separate, full-size weight).
fn bytes_read_per_token(dir: &std::path::Path, config: &ModelConfig) -> anyhow::Result<u64> {
    let files = DecoderModel::weight_file_bytes(dir)?;
    let hf: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap_or_default())
            .unwrap_or_default();
    let hidden = hf["hidden_size"].as_u64().unwrap_or(0);
    let embedding = config.vocab_size as u64 * hidden * 4;
    Ok(if embedding > 0 && embedding < files {
        files - embedding
    } else {
        files
    })
}

pub fn bench_policy(args: &BenchPolicyArgs) -> anyhow::Result<ExitCode> {
    if args.batch_sizes.is_empty() || args.batch_sizes.contains(&0) {
        bail!("--batch-sizes must be positive");
    }
    if args.new_tokens < 2 || args.prompt_tokens == 0 || args.repeats == 0 {
        bail!("--new-tokens must be at least 2, --prompt-tokens and --repeats at least 1");
    }
    let bar = spinner("setup");
    let progress = |m: &str| bar.set_message(m.to_string());
    let genai_env = if args.no_genai {
        None
    } else {
        Some(assets::ensure_inference_env(true, &progress)?)
    };
    bar.finish_and_clear();
    let work = tempfile::tempdir()?;
    let genai_script = work.path().join("bench_genai.py");
    std::fs::write(
        &genai_script,
        include_str!("../../llm/python/bench_genai.py"),
    )?;
    let me = std::env::current_exe()?;
    let max_batch = args.batch_sizes.iter().copied().max().unwrap_or(1);

    let bar = spinner("memory bandwidth");
    bar.set_message("reading a 1 GB buffer");
    let (bandwidth_gbs, bandwidth_threads) = memory_bandwidth_gbs(1024);
    bar.finish_and_clear();

    let mut results = Vec::new();
    for precision in &args.precisions {
        // A folder holding one subfolder per precision, or a registry name.
        let local = std::path::Path::new(&args.model).join(precision);
        let dir = if local.join("model.onnx").is_file() {
            local
        } else {
            resolve_with_progress(&format!("{}:{precision}", args.model))?
        };
        let config = ModelConfig::load(&dir)?;
        let codec = TextCodec::load(&dir)?;
        if args.prompt_tokens + args.new_tokens > config.context_length {
            bail!(
                "prompt + new tokens exceed the model's context of {}",
                config.context_length
            );
        }
        let rows = prompt_rows(&codec, args.prompt_tokens, max_batch)?;
        let prompts = work.path().join(format!("prompts-{precision}.json"));
        std::fs::write(&prompts, serde_json::json!({ "rows": rows }).to_string())?;
        let weight_bytes = bytes_read_per_token(&dir, &config)?;
        let batches = args
            .batch_sizes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let bar = spinner(precision);
        // Both workers take the same options after their own program and arguments.
        let worker_command = |program: &std::ffi::OsStr, leading: &[&std::ffi::OsStr]| {
            let mut command = Command::new(program);
            command
                .args(leading)
                .arg("--model")
                .arg(&dir)
                .arg("--prompts")
                .arg(&prompts)
                .args(["--new-tokens", &args.new_tokens.to_string()])
                .args(["--batch-sizes", &batches])
                .args(["--repeats", &args.repeats.to_string()]);
            command
        };
        let ours_command =
            || worker_command(me.as_ref(), &["bench".as_ref(), "policy-worker".as_ref()]);
        let peer_command =
            |python: &std::path::Path| worker_command(python.as_ref(), &[genai_script.as_ref()]);
        let mut ours_rounds = Vec::new();
        let mut peer_rounds = Vec::new();
        for round in 0..args.rounds.max(1) {
            // Alternate which engine goes first, so drift on a noisy machine hits both.
            let peer_first = round % 2 == 1;
            for engine in 0..2 {
                let run_peer = (engine == 0) == peer_first;
                if run_peer {
                    if let Some(env) = &genai_env {
                        bar.set_message(format!("round {}: onnxruntime-genai", round + 1));
                        peer_rounds.push(run_json(
                            &mut peer_command(&env.python),
                            "onnxruntime-genai",
                        )?);
                    }
                } else {
                    bar.set_message(format!("round {}: FrogNano", round + 1));
                    ours_rounds.push(run_json(&mut ours_command(), "FrogNano")?);
                }
            }
        }
        let ours = median_report(&ours_rounds);
        let peer = (!peer_rounds.is_empty()).then(|| median_report(&peer_rounds));
        bar.finish_and_clear();
        results.push((precision.clone(), weight_bytes, ours, peer));
    }

    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "model",
        "batch",
        "engine",
        "prefill tok/s",
        "TTFT ms",
        "decode tok/s",
        "peak RSS MB",
        "floor tok/s (batch 1)",
    ]);
    let mut json_rows = Vec::new();
    for (precision, weight_bytes, ours, peer) in &results {
        let floor = bandwidth_gbs * 1e9 / *weight_bytes as f64;
        for (i, figures) in ours.batches.iter().enumerate() {
            let peer_figures = peer.as_ref().and_then(|p| p.batches.get(i));
            let ratio = |a: f64, b: Option<f64>| match b {
                Some(b) if b > 0.0 => format!(" ({:.2}x)", a / b),
                _ => String::new(),
            };
            table.add_row(vec![
                format!("{} {precision}", args.model),
                figures.batch.to_string(),
                "frognano".into(),
                format!(
                    "{:.0}{}",
                    figures.prefill_tok_s,
                    ratio(figures.prefill_tok_s, peer_figures.map(|p| p.prefill_tok_s))
                ),
                format!(
                    "{:.1}{}",
                    figures.ttft_ms,
                    ratio(figures.ttft_ms, peer_figures.map(|p| p.ttft_ms))
                ),
                format!(
                    "{:.1}{}",
                    figures.decode_tok_s,
                    ratio(figures.decode_tok_s, peer_figures.map(|p| p.decode_tok_s))
                ),
                format!(
                    "{:.0}{}",
                    ours.peak_rss_mb,
                    ratio(ours.peak_rss_mb, peer.as_ref().map(|p| p.peak_rss_mb))
                ),
                format!("{floor:.0}"),
            ]);
            if let (Some(peer), Some(p)) = (peer, peer_figures) {
                table.add_row(vec![
                    String::new(),
                    p.batch.to_string(),
                    peer.engine.clone(),
                    format!("{:.0}", p.prefill_tok_s),
                    format!("{:.1}", p.ttft_ms),
                    format!("{:.1}", p.decode_tok_s),
                    format!("{:.0}", peer.peak_rss_mb),
                    String::new(),
                ]);
            }
        }
        json_rows.push(serde_json::json!({
            "precision": precision,
            "weight_bytes": weight_bytes,
            "bandwidth_floor_tok_s_batch1": floor,
            "frognano": ours,
            "peer": peer,
        }));
    }
    println!("{table}");
    println!(
        "ratios in brackets: FrogNano / onnxruntime-genai (higher is better for tok/s, lower for \
         TTFT and memory). Memory read bandwidth {bandwidth_gbs:.1} GB/s ({bandwidth_threads} \
         thread(s)); floor = bandwidth / weight bytes, the decode rate if every token read every \
         weight once. {} prompt tokens, {} new tokens per row, greedy; each figure is the median over {} rounds of the median of {} runs.",
        args.prompt_tokens, args.new_tokens, args.rounds, args.repeats
    );
    let report = serde_json::json!({
        "model": args.model,
        "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens,
        "repeats": args.repeats,
        "rounds": args.rounds,
        "memory_bandwidth_gbs": bandwidth_gbs,
        "results": json_rows,
    });
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        let path = out.join("results.json");
        frognano_repo::write_atomically(&path, serde_json::to_string_pretty(&report)?.as_bytes())?;
        println!("results: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
