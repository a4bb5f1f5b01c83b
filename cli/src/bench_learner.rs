//! `frognano bench learner`: rollout and learner tokens/s, hand-back seconds and log-prob
//! parity of the language-model loop (the measurement lives in `frognano_train`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use frognano_train::{LanguageModelConfig, LearnerBenchOptions, bench_learner};

use crate::models::with_spinner;

#[derive(Args, Debug)]
pub struct BenchLearnerArgs {
    /// Model name or fp32 folder (with model.safetensors).
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// Episodes rolled out in one batch.
    #[arg(long, default_value_t = 4)]
    episodes: usize,
    /// Tokens generated per episode.
    #[arg(long, default_value_t = 48)]
    tokens: usize,
    /// Learner settings as a JSON object (e.g. '{"learning_rate": 1e-5, "device": "cuda"}').
    #[arg(long, default_value = "{}")]
    learner: String,
    /// Python interpreter of the learner (default: the managed learner environment).
    #[arg(long)]
    python: Option<PathBuf>,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
}

/// `frognano bench learner`.
pub fn bench(args: &BenchLearnerArgs) -> anyhow::Result<ExitCode> {
    let learner: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&args.learner)
            .context("--learner must be a JSON object of learner settings")?;
    let config = LanguageModelConfig {
        model: args.model.clone(),
        ..LanguageModelConfig::default()
    };
    let figures = with_spinner("learner bench", |progress| -> anyhow::Result<_> {
        let model = config.start_folder(progress)?;
        let int4 = model
            .parent()
            .map(|p| p.join("int4"))
            .filter(|p| p.join("model.onnx").is_file());
        let scratch = tempfile::Builder::new()
            .prefix("frognano-bench-learner-")
            .tempdir()
            .context("create a scratch folder")?;
        let options = LearnerBenchOptions {
            model,
            int4_model: int4,
            episodes: args.episodes,
            new_tokens: args.tokens,
            sampling: None,
            learner,
            python: args.python.clone(),
            scratch: scratch.path().to_path_buf(),
        };
        Ok(bench_learner(&options, progress)?)
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&figures)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = comfy_table::Table::new();
    table.set_header(["measure", "value"]);
    let rows: Vec<(&str, String)> = vec![
        ("model", figures.model.clone()),
        ("learner device", figures.device.clone()),
        (
            "batch",
            format!(
                "{} episodes, {} completion tokens",
                args.episodes, figures.tokens
            ),
        ),
        (
            "rollout tokens/s (ONNX Runtime, one batch)",
            format!("{:.1}", figures.rollout_tokens_per_s),
        ),
        (
            "learner tokens/s (forward + backward, prompt and completion)",
            format!("{:.1}", figures.learner_tokens_per_s),
        ),
        (
            "hand-back seconds (export + reload)",
            format!("{:.2}", figures.handback_s),
        ),
        (
            "log-prob change, positive advantage",
            format!("{:+.4}", figures.positive_logprob_change),
        ),
        (
            "log-prob change, negative advantage",
            format!("{:+.4}", figures.negative_logprob_change),
        ),
        (
            "after hand-back: max |learner - ONNX Runtime|",
            format!("{:.2e}", figures.handback_parity_max_abs_diff),
        ),
    ];
    for (name, value) in rows {
        table.add_row([name.to_string(), value]);
    }
    if let Some(ratio) = &figures.int4_ratio {
        table.add_row([
            "int4 rollouts / fp32 learner: ratio p05 / p50 / p95".to_string(),
            format!("{:.3} / {:.3} / {:.3}", ratio.p05, ratio.p50, ratio.p95),
        ]);
        table.add_row([
            "int4: mean ratio, max |log ratio|, outside [0.8, 1.28]".to_string(),
            format!(
                "{:.3}, {:.3}, {:.1}%",
                ratio.mean,
                ratio.max_abs_log_ratio,
                100.0 * ratio.outside_clip
            ),
        ]);
    }
    println!("{table}");
    println!(
        "parity max |logprob diff| {:.3e}",
        figures.parity_max_abs_diff
    );
    Ok(ExitCode::SUCCESS)
}
