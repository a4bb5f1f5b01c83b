//! `frognano models ...` (inference environment, model registry) and `frognano generate`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use frognano_policy::llm::{
    ChatMessage, DecoderModel, GenerationOptions, ModelOptions, TextCodec, assets, generate,
};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Install the inference environment (pinned, hash-checked Python packages, including the
    /// ONNX Runtime library) into the cache. Idempotent.
    Setup(SetupArgs),
    /// Download, verify and convert a known model to ONNX (int4 and fp32). Idempotent.
    Fetch(FetchArgs),
    /// Check a known model against an independent numpy forward pass over its GGUF weights.
    Check(FetchArgs),
    /// List the known models and whether they are cached.
    List,
    /// Write a tiny randomly initialised model (same layout as the real ones; for tests).
    Tiny(TinyArgs),
    /// Convert a Hugging Face checkpoint (safetensors; llama, qwen2, mistral) into ONNX model
    /// folders OUT/fp32 (also a checkpoint again) and OUT/int4, which OnnxPolicy runs and
    /// `frognano train` trains further.
    Convert(ConvertArgs),
}

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// The checkpoint folder (config.json, model.safetensors, tokenizer files).
    checkpoint: PathBuf,
    /// Output folder.
    #[arg(short, long)]
    out: PathBuf,
    /// Precisions to write, comma-separated (fp32, int4).
    #[arg(long, default_value = "fp32,int4", value_delimiter = ',')]
    precisions: Vec<String>,
}

#[derive(Args, Debug)]
pub struct SetupArgs {
    /// Also install onnxruntime-genai (for `frognano bench policy`).
    #[arg(long)]
    genai: bool,
    /// Also install the learner environment (torch, transformers, peft; about 3 GB), which
    /// `frognano train` with a language model and `frognano bench learner` use.
    #[arg(long)]
    learner: bool,
    /// Also install the serving environment (llama.cpp's OpenAI-compatible server from the
    /// prebuilt xllamacpp wheel; the openai client; pytest), a third-party server for tests
    /// and benchmarks.
    #[arg(long)]
    serving: bool,
}

#[derive(Args, Debug)]
pub struct FetchArgs {
    /// Model name (see `frognano models list`).
    name: String,
}

#[derive(Args, Debug)]
pub struct TinyArgs {
    /// Output folder (gets tiny.gguf, fp32/ and int4/).
    out: PathBuf,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// A spinner whose message follows the steps of a long job.
pub fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {prefix}: {wide_msg} [{elapsed}]")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_prefix(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Runs `work` under a spinner labelled `what` that shows the progress messages it is handed;
/// the spinner is cleared when `work` returns.
pub fn with_spinner<T>(what: &str, work: impl FnOnce(&(dyn Fn(&str) + Sync)) -> T) -> T {
    let bar = spinner(what);
    let progress = |message: &str| bar.set_message(message.to_string());
    let result = work(&progress);
    bar.finish_and_clear();
    result
}

/// Resolves a model argument (folder or registry name), fetching it with a spinner if needed.
pub fn resolve_with_progress(spec: &str) -> anyhow::Result<PathBuf> {
    Ok(with_spinner(spec, |progress| {
        assets::resolve_model(spec, progress)
    })?)
}

fn folder_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

pub fn models(command: &ModelsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ModelsCommand::Convert(args) => {
            let precisions: Vec<&str> = args.precisions.iter().map(String::as_str).collect();
            let summary = with_spinner("convert", |progress| {
                frognano_policy::llm::convert_checkpoint(
                    &args.checkpoint,
                    &args.out,
                    &precisions,
                    progress,
                )
            })?;
            if let Some(folders) = summary["folders"].as_object() {
                for (precision, folder) in folders {
                    let folder = folder.as_str().unwrap_or_default();
                    println!(
                        "{precision}  {folder}  ({:.1} MB)",
                        folder_size(Path::new(folder)) as f64 / 1e6
                    );
                }
            }
        }
        ModelsCommand::Setup(args) => {
            let env = with_spinner("inference environment", |progress| {
                assets::ensure_inference_env(args.genai, progress)
            })?;
            println!("inference environment: {}", env.dir.display());
            println!("ONNX Runtime library: {}", env.runtime_library.display());
            if args.learner {
                let env = with_spinner("learner environment", assets::ensure_learner_env)?;
                println!("learner environment: {}", env.dir.display());
            }
            if args.serving {
                let env = with_spinner("serving environment", assets::ensure_serving_env)?;
                println!("serving environment: {}", env.dir.display());
            }
        }
        ModelsCommand::Fetch(args) => {
            let dir = with_spinner(&args.name, |progress| {
                assets::fetch_model(&args.name, progress)
            })?;
            for precision in assets::PRECISIONS {
                let sub = dir.join(precision);
                println!(
                    "{}:{precision}  {}  ({:.1} MB)",
                    args.name,
                    sub.display(),
                    folder_size(&sub) as f64 / 1e6
                );
            }
        }
        ModelsCommand::Check(args) => {
            let summaries = with_spinner(&args.name, |progress| {
                assets::check_model(&args.name, progress)
            })?;
            let mut all_ok = true;
            for summary in summaries {
                let ok = summary["ok"].as_bool().unwrap_or(false);
                all_ok &= ok;
                let figure = |key: &str| {
                    format!(
                        "max |diff| {:.2e}, argmax {:.1}%",
                        summary[key]["max_abs_diff"].as_f64().unwrap_or(f64::NAN),
                        100.0
                            * summary[key]["argmax_agreement"]
                                .as_f64()
                                .unwrap_or(f64::NAN)
                    )
                };
                println!(
                    "{} {}: vs reference {}; cached vs full {}; padded batch vs single {} \
                     (logit scale {:.1}) -> {}",
                    args.name,
                    summary["precision"].as_str().unwrap_or("?"),
                    figure("vs_reference"),
                    figure("cached_vs_full"),
                    figure("padded_vs_single"),
                    summary["logit_scale"].as_f64().unwrap_or(f64::NAN),
                    if ok {
                        "ok".to_string()
                    } else {
                        format!("FAILED {}", summary["failures"])
                    }
                );
            }
            if !all_ok {
                return Ok(ExitCode::from(1));
            }
        }
        ModelsCommand::List => {
            for model in assets::KNOWN_MODELS {
                let dir = assets::model_cache_dir(model.name);
                let state = if dir.join(".complete").is_file() {
                    format!("cached at {}", dir.display())
                } else {
                    "not fetched".to_string()
                };
                println!("{}  {}  [{state}]", model.name, model.description);
            }
        }
        ModelsCommand::Tiny(args) => {
            with_spinner("tiny model", |progress| {
                assets::make_tiny_model(&args.out, args.seed, progress)
            })?;
            println!("{}", args.out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How a model's replies are sampled: the options of `frognano generate`, `eval` and `agent`,
/// read into [`GenerationOptions`] in one place.
#[derive(Args, Debug, Clone, PartialEq)]
pub struct GenerationArgs {
    /// Most tokens per reply (default: 128 for generate, 384 for eval and agent).
    #[arg(long)]
    max_new_tokens: Option<usize>,
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Keep only the k most likely tokens when sampling (0: all).
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p (1: all).
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    /// Sampling seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Stop string (repeatable); a reply ends before it.
    #[arg(long = "stop")]
    stop: Vec<String>,
}

impl GenerationArgs {
    /// The options, with `default_max_new_tokens` where `--max-new-tokens` is not given.
    pub fn options(&self, default_max_new_tokens: usize) -> GenerationOptions {
        GenerationOptions {
            max_new_tokens: self.max_new_tokens.unwrap_or(default_max_new_tokens),
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
            stop: self.stop.clone(),
            stop_token_ids: None,
        }
    }

    /// Whether every option is left at its default.
    pub fn is_default(&self) -> bool {
        self.max_new_tokens.is_none()
            && self.temperature == 0.0
            && self.top_k == 0
            && self.top_p == 1.0
            && self.seed == 0
            && self.stop.is_empty()
    }
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Model folder or registry name (`smollm2-135m`, `smollm2-135m:fp32`).
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// The prompt; several give a batch.
    #[arg(long, required = true)]
    prompt: Vec<String>,
    /// Use the prompt as raw text instead of a user message in the chat template.
    #[arg(long)]
    raw: bool,
    #[command(flatten)]
    generation: GenerationArgs,
    /// Print each row as JSON (token ids, log-probs, finish reason) and the timing.
    #[arg(long)]
    json: bool,
}

pub fn generate_command(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    let dir = resolve_with_progress(&args.model)?;
    let mut model = DecoderModel::load(&dir, &ModelOptions::default())?;
    let codec = TextCodec::load(&dir)?;
    let prompts = args
        .prompt
        .iter()
        .map(|p| {
            let text = if args.raw {
                p.clone()
            } else {
                codec.render_chat(&[ChatMessage::new("user", p.clone())], true)?
            };
            codec.encode(&text)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let options = args.generation.options(128);
    let (generations, timing) =
        generate(&mut model, &codec, &prompts, &options).context("generation failed")?;
    for generation in &generations {
        if args.json {
            println!("{}", serde_json::to_string(generation)?);
        } else {
            println!("{}", generation.text);
            println!("---");
        }
    }
    if args.json {
        println!("{}", serde_json::json!({ "timing": timing }));
    } else {
        eprintln!(
            "{} prompt tokens, {} generated; prefill {:.3} s, decode {:.3} s ({:.1} tokens/s)",
            timing.prompt_tokens,
            timing.generated_tokens,
            timing.prefill_s,
            timing.decode_s,
            timing.generated_tokens as f64 / timing.decode_s.max(1e-9)
        );
    }
    Ok(ExitCode::SUCCESS)
}
