//! Measurements of the language-model loop (`frognano bench learner`, and the parity tests):
//! rollout tokens/s in ONNX Runtime, learner tokens/s (forward + backward), hand-back seconds,
//! and log-prob parity between the learner and ONNX Runtime before and after an update.

use std::path::{Path, PathBuf};
use std::time::Instant;

use frognano_core::{
    Observation, Policy, PolicyContext, StepSample, TokenBatch, TrainingBatch, Trajectory,
};
use frognano_llm::{DecoderModel, GenerationOptions, OnnxPolicy, OnnxPolicyConfig, Sampler};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::language::LearnerProcess;
use crate::{Result, TrainError};

/// Log-probabilities of every completion token of `tokens` under the ONNX model `model`,
/// teacher-forced, each under the distribution its step sampled from (the step's temperature,
/// top-k and top-p: [`Sampler::logprob`]), the figures rollouts record.
pub fn onnx_logprobs(model: &mut DecoderModel, tokens: &TokenBatch) -> Result<Vec<f32>> {
    let vocab = model.config.vocab_size;
    let mut out = Vec::with_capacity(tokens.completion_ids.len());
    for s in 0..tokens.steps() {
        let prompt = &tokens.prompt_ids
            [tokens.prompt_offsets[s] as usize..tokens.prompt_offsets[s + 1] as usize];
        let completion = &tokens.completion_ids
            [tokens.completion_offsets[s] as usize..tokens.completion_offsets[s + 1] as usize];
        if completion.is_empty() {
            continue;
        }
        let sequence: Vec<u32> = prompt
            .iter()
            .chain(&completion[..completion.len() - 1])
            .map(|&t| t as u32)
            .collect();
        let logits = model
            .full_logits(&sequence)
            .map_err(frognano_core::Error::from)?;
        let sampler = Sampler {
            temperature: tokens.temperatures[s],
            top_k: usize::try_from(tokens.top_k[s]).unwrap_or(0),
            top_p: tokens.top_p[s],
        };
        for (i, &token) in completion.iter().enumerate() {
            let row = &logits[(prompt.len() - 1 + i) * vocab..(prompt.len() + i) * vocab];
            let token = usize::try_from(token).unwrap_or(usize::MAX);
            let logprob = sampler.logprob(row, token).ok_or_else(|| {
                TrainError::Config(format!(
                    "token {token} lies outside the vocabulary of {vocab}"
                ))
            })?;
            out.push(logprob);
        }
    }
    Ok(out)
}

impl LearnerProcess {
    /// The learner's log-probabilities of every completion token of `tokens` (its `logprobs`
    /// request; `scratch` holds the files exchanged).
    pub fn logprobs(&mut self, tokens: &TokenBatch, scratch: &Path) -> Result<Vec<f32>> {
        std::fs::create_dir_all(scratch)
            .map_err(TrainError::io(format!("create {}", scratch.display())))?;
        let batch = scratch.join("logprobs-batch.safetensors");
        let out = scratch.join("logprobs.safetensors");
        tokens.save(&batch)?;
        self.request(json!({"op": "logprobs", "batch": batch, "out": out}))?;
        let data =
            std::fs::read(&out).map_err(TrainError::io(format!("read {}", out.display())))?;
        let tensors = safetensors::SafeTensors::deserialize(&data)
            .map_err(|e| TrainError::Config(format!("the learner's log-probs: {e}")))?;
        let view = tensors
            .tensor("logprobs")
            .map_err(|e| TrainError::Config(format!("the learner's log-probs: {e}")))?;
        if view.dtype() != safetensors::Dtype::F32 {
            return Err(TrainError::Config(format!(
                "the learner's log-probs are {:?}, not F32",
                view.dtype()
            )));
        }
        Ok(view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

/// Largest |a - b| over two equally long lists (infinite when the lengths differ).
pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::INFINITY;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (f64::from(*x) - f64::from(*y)).abs())
        .fold(0.0, f64::max)
}

/// What `frognano bench learner` measures.
#[derive(Debug, Clone)]
pub struct LearnerBenchOptions {
    /// The fp32 model folder (with `model.safetensors`).
    pub model: PathBuf,
    /// The int4 folder of the same model, to measure int4 rollouts against the fp32 learner.
    pub int4_model: Option<PathBuf>,
    /// Episodes rolled out together.
    pub episodes: usize,
    /// Tokens generated per episode.
    pub new_tokens: usize,
    /// The rollouts' sampling (default: temperature 1, no truncation, no stop: exactly
    /// `new_tokens` per episode, so that speed figures compare like with like).
    /// `max_new_tokens` is `new_tokens` whatever this says.
    pub sampling: Option<GenerationOptions>,
    /// Learner settings.
    pub learner: serde_json::Map<String, Value>,
    /// Interpreter of the learner (default: the managed learner environment).
    pub python: Option<PathBuf>,
    /// Where the exchanged files and the updated weights go.
    pub scratch: PathBuf,
}

/// Quantiles of the importance ratio of int4 rollouts under the fp32 learner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatioSummary {
    /// Tokens compared.
    pub tokens: usize,
    /// Mean ratio.
    pub mean: f64,
    /// 5th, 50th and 95th percentiles.
    pub p05: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Largest |log ratio|.
    pub max_abs_log_ratio: f64,
    /// Fraction of tokens whose ratio lies outside the clip range [0.8, 1.28].
    pub outside_clip: f64,
}

impl RatioSummary {
    /// Summarises `exp(learner - rollout)` per token.
    pub fn of(learner: &[f32], rollout: &[f32]) -> Self {
        let mut ratios: Vec<f64> = learner
            .iter()
            .zip(rollout)
            .map(|(l, r)| (f64::from(*l) - f64::from(*r)).exp())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let n = ratios.len();
        let at = |q: f64| {
            if n == 0 {
                f64::NAN
            } else {
                ratios[((n - 1) as f64 * q).round() as usize]
            }
        };
        RatioSummary {
            tokens: n,
            mean: ratios.iter().sum::<f64>() / n.max(1) as f64,
            p05: at(0.05),
            p50: at(0.5),
            p95: at(0.95),
            max_abs_log_ratio: ratios.iter().map(|r| r.ln().abs()).fold(0.0, f64::max),
            outside_clip: ratios.iter().filter(|r| **r < 0.8 || **r > 1.28).count() as f64
                / n.max(1) as f64,
        }
    }
}

/// The figures of `frognano bench learner`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnerBench {
    /// The model measured.
    pub model: String,
    /// The learner's device.
    pub device: String,
    /// Generated tokens per second of the rollouts (ONNX Runtime, one batch).
    pub rollout_tokens_per_s: f64,
    /// Tokens the learner processed per second in its update (forward + backward).
    pub learner_tokens_per_s: f64,
    /// Seconds from the learner's updated weights to rollouts running them (export +
    /// reload).
    pub handback_s: f64,
    /// max |learner - ONNX Runtime| log-prob of the rollout tokens, before the update (fp32).
    pub parity_max_abs_diff: f64,
    /// The same after the update and hand-back (the learner against the new ONNX folder).
    pub handback_parity_max_abs_diff: f64,
    /// Mean log-prob change of the positive-advantage tokens after the update (> 0 learns).
    pub positive_logprob_change: f64,
    /// Mean log-prob change of the negative-advantage tokens (< 0 learns).
    pub negative_logprob_change: f64,
    /// Completion tokens in the batch.
    pub tokens: usize,
    /// int4 rollouts scored by the fp32 learner, when an int4 folder was given.
    pub int4_ratio: Option<RatioSummary>,
    /// The learner's statistics of the update.
    pub learner_stats: Value,
}

const BENCH_PROMPTS: [&str; 4] = [
    "Problem: tests in tests/test_text.py fail: `slugify('Hello World')` returns \
     'hello_world' instead of 'hello-world'. The bug is in src/textkit/slug.py.",
    "Problem: `parse_int('42')` raises ValueError in tests/test_parse.py::test_int. Look at \
     src/tinyparse/numbers.py.",
    "Problem: `SortedList.insert` keeps the list unsorted when the new item is the largest \
     (tests/test_sorted.py::test_insert_end).",
    "Problem: `word_count('a  b')` returns 3 instead of 2 (tests/test_count.py).",
];

fn contexts(episodes: usize) -> Vec<PolicyContext> {
    (0..episodes)
        .map(|i| PolicyContext {
            task_id: format!("bench-{i}"),
            initial: Observation {
                text: BENCH_PROMPTS[i % BENCH_PROMPTS.len()].to_string(),
                is_error: false,
                test_run: None,
            },
            history: Vec::new(),
        })
        .collect()
}

/// Rolls out a batch, scores it with the learner, takes one update with advantages of
/// alternating sign, hands the weights back, and measures each part.
pub fn bench_learner(
    options: &LearnerBenchOptions,
    progress: &dyn Fn(&str),
) -> Result<LearnerBench> {
    let sampling = GenerationOptions {
        max_new_tokens: options.new_tokens,
        ..options.sampling.clone().unwrap_or(GenerationOptions {
            temperature: 1.0,
            seed: 7,
            stop_token_ids: Some(Vec::new()),
            ..GenerationOptions::greedy(options.new_tokens)
        })
    };
    let config = OnnxPolicyConfig {
        generation: sampling,
        ..OnnxPolicyConfig::default()
    };
    progress("loading the model in ONNX Runtime");
    let mut policy =
        OnnxPolicy::load(&options.model, config.clone()).map_err(frognano_core::Error::from)?;
    let contexts = contexts(options.episodes.max(1));
    progress("rolling out");
    // A warm-up call, then the timed one.
    policy.act(&contexts[..1])?;
    let started = Instant::now();
    let outputs = policy.act(&contexts)?;
    let rollout_s = started.elapsed().as_secs_f64();
    let generated: usize = outputs
        .iter()
        .map(|o| o.token_ids.as_ref().map_or(0, Vec::len))
        .sum();
    // Alternate rollouts count as resolved, advantages +1 and -1.
    let batch = TrainingBatch::one_group(
        outputs
            .iter()
            .zip(&contexts)
            .enumerate()
            .map(|(i, (output, context))| {
                let resolved = i % 2 == 0;
                let reward = if resolved { 1.0 } else { 0.0 };
                Trajectory::single_step(&context.task_id, output, reward, 2.0 * reward - 1.0)
            })
            .collect(),
    );
    let tokens = TokenBatch::from_batch(&batch)?;
    progress("starting the learner");
    let quiet = |_: &str| {};
    // The bench's replies run to their token limit on purpose; a learner that left such
    // replies out (its default) would have nothing to measure.
    let mut learner_settings = options.learner.clone();
    learner_settings
        .entry("mask_length_limited")
        .or_insert(Value::Bool(false));
    // A learner on the starting weights.
    let start_learner = || {
        LearnerProcess::start(
            options.python.as_deref(),
            &options.model,
            &learner_settings,
            &quiet,
        )
    };
    let mut learner = start_learner()?;
    let device = learner.info["device"].as_str().unwrap_or("?").to_string();
    progress("scoring the rollouts with the learner");
    let before = learner.logprobs(&tokens, &options.scratch)?;
    let parity = max_abs_diff(&before, &tokens.rollout_logprobs);
    progress("one update");
    let path = options.scratch.join("bench-batch.safetensors");
    tokens.save(&path)?;
    let answer = learner.request(json!({"op": "learn", "batch": path}))?;
    let stats = answer["stats"].clone();
    progress("handing the weights back to ONNX Runtime");
    let handing = Instant::now();
    let export = options.scratch.join("updated");
    let _ = std::fs::remove_dir_all(&export);
    learner.request(json!({"op": "export_onnx", "dir": export, "precisions": ["fp32"]}))?;
    let folder = if export.join("fp32").is_dir() {
        export.join("fp32")
    } else {
        export.clone()
    };
    policy.reload(&folder).map_err(frognano_core::Error::from)?;
    let handback_s = handing.elapsed().as_secs_f64();
    progress("scoring after the update");
    let after = learner.logprobs(&tokens, &options.scratch)?;
    let onnx_after = onnx_logprobs(policy.model(), &tokens)?;
    let handback_parity = max_abs_diff(&after, &onnx_after);
    let (mut positive, mut negative) = ((0.0, 0usize), (0.0, 0usize));
    for s in 0..tokens.steps() {
        let range =
            tokens.completion_offsets[s] as usize..tokens.completion_offsets[s + 1] as usize;
        for i in range {
            let change = f64::from(after[i]) - f64::from(before[i]);
            if tokens.step_advantages[s] > 0.0 {
                positive = (positive.0 + change, positive.1 + 1);
            } else {
                negative = (negative.0 + change, negative.1 + 1);
            }
        }
    }
    let int4_ratio = match &options.int4_model {
        Some(int4) if int4.join("model.onnx").is_file() => {
            progress("int4 rollouts scored by the fp32 learner");
            // The learner is back on the starting weights for this comparison.
            let mut fresh = start_learner()?;
            let mut int4_policy =
                OnnxPolicy::load(int4, config).map_err(frognano_core::Error::from)?;
            let outputs = int4_policy.act(&contexts)?;
            let int4_batch = TrainingBatch {
                trajectories: batch
                    .trajectories
                    .iter()
                    .zip(&outputs)
                    .map(|(t, o)| Trajectory {
                        steps: vec![StepSample::from_output(o, String::new())],
                        ..t.clone()
                    })
                    .collect(),
                ..batch.clone()
            };
            let int4_tokens = TokenBatch::from_batch(&int4_batch)?;
            let learner_view = fresh.logprobs(&int4_tokens, &options.scratch)?;
            Some(RatioSummary::of(
                &learner_view,
                &int4_tokens.rollout_logprobs,
            ))
        }
        _ => None,
    };
    let mean = |(sum, n): (f64, usize)| if n == 0 { 0.0 } else { sum / n as f64 };
    Ok(LearnerBench {
        model: options.model.display().to_string(),
        device,
        rollout_tokens_per_s: generated as f64 / rollout_s.max(1e-9),
        learner_tokens_per_s: stats["learner_tokens_per_s"].as_f64().unwrap_or(f64::NAN),
        handback_s,
        parity_max_abs_diff: parity,
        handback_parity_max_abs_diff: handback_parity,
        positive_logprob_change: mean(positive),
        negative_logprob_change: mean(negative),
        tokens: tokens.completion_ids.len(),
        int4_ratio,
        learner_stats: stats,
    })
}
