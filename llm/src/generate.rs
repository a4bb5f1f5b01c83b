//! Batched generation with a key/value cache.
//!
//! Prompts of different lengths share one batch: they are left-padded (attention mask 0 on the
//! padding, positions counted from each row's first real token), prefilled in one run, then
//! decoded one token per row per run with the cache carried between runs. A row that finished
//! (end-of-sequence token, stop string, token budget) keeps a slot until the batch ends but its
//! output is frozen. Graphs without `position_ids` cannot place left-padded rows, so for them rows
//! of different lengths are generated one at a time.

use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::error::{InferenceError, Result};
use super::model::{DecoderModel, StepInput};
use super::sampling::Sampler;
use super::tokenizer::TextCodec;

/// Options of one generation request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerationOptions {
    /// Most tokens generated per row.
    pub max_new_tokens: usize,
    /// Softmax temperature; 0 (or anything at most 1e-5) decodes greedily.
    pub temperature: f32,
    /// Keep the k most likely tokens (0: all).
    pub top_k: usize,
    /// Nucleus sampling threshold (1: off).
    pub top_p: f32,
    /// Seed of the sampling; row r of a request draws from a generator seeded by (seed, r).
    pub seed: u64,
    /// Strings that end a row's generation; the returned text stops before the first one.
    pub stop: Vec<String>,
    /// Tokens that end a row (default: the model's end-of-sequence tokens).
    pub stop_token_ids: Option<Vec<u32>>,
}

impl Default for GenerationOptions {
    fn default() -> Self {
        GenerationOptions {
            max_new_tokens: 256,
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
            stop: Vec::new(),
            stop_token_ids: None,
        }
    }
}

impl GenerationOptions {
    /// Greedy decoding with at most `max_new_tokens` tokens.
    pub fn greedy(max_new_tokens: usize) -> Self {
        GenerationOptions {
            max_new_tokens,
            temperature: 0.0,
            ..GenerationOptions::default()
        }
    }

    /// Checks the options.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(InferenceError::InvalidRequest(m));
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return bad(format!(
                "temperature must be >= 0, got {}",
                self.temperature
            ));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return bad(format!("top_p must be in (0, 1], got {}", self.top_p));
        }
        if self.max_new_tokens == 0 {
            return bad("max_new_tokens must be at least 1".into());
        }
        if self.stop.iter().any(String::is_empty) {
            return bad("stop strings must not be empty".into());
        }
        Ok(())
    }

    fn sampler(&self) -> Sampler {
        Sampler {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
        }
    }
}

/// Why a row stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It produced an end-of-sequence (or other stop) token.
    Eos,
    /// Its text reached a stop string.
    Stop,
    /// It used `max_new_tokens` (or the model's context).
    Length,
}

/// One row's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// Every token sampled, the final stop token included.
    pub token_ids: Vec<u32>,
    /// Log-probability of each sampled token (see [`super::sampling`] for the distribution).
    pub logprobs: Vec<f32>,
    /// Decoded text, special tokens removed, cut before the first stop string.
    pub text: String,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
}

/// Where the time of a request went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GenerationTiming {
    /// Seconds spent in prefill runs.
    pub prefill_s: f64,
    /// Seconds spent in decode runs (and sampling).
    pub decode_s: f64,
    /// Seconds from the start to the first token of every row.
    pub first_token_s: f64,
    /// Prompt tokens (padding excluded).
    pub prompt_tokens: usize,
    /// Tokens generated, all rows.
    pub generated_tokens: usize,
    /// Decode runs.
    pub decode_steps: usize,
}

impl GenerationTiming {
    fn add(&mut self, other: &GenerationTiming) {
        self.prefill_s += other.prefill_s;
        self.decode_s += other.decode_s;
        self.first_token_s += other.first_token_s;
        self.prompt_tokens += other.prompt_tokens;
        self.generated_tokens += other.generated_tokens;
        self.decode_steps += other.decode_steps;
    }
}

/// Per-row state while decoding.
struct Row {
    tokens: Vec<u32>,
    logprobs: Vec<f32>,
    text: String,
    finish: Option<FinishReason>,
    rng: StdRng,
    next_position: i64,
}

fn row_seed(seed: u64, row: usize) -> u64 {
    seed ^ (row as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Generates a continuation of each prompt (token ids), all rows in one batch.
pub fn generate(
    model: &mut DecoderModel,
    codec: &TextCodec,
    prompts: &[Vec<u32>],
    options: &GenerationOptions,
) -> Result<(Vec<Generation>, GenerationTiming)> {
    options.validate()?;
    if prompts.is_empty() {
        return Ok((Vec::new(), GenerationTiming::default()));
    }
    let vocab = model.config.vocab_size as u32;
    for (row, prompt) in prompts.iter().enumerate() {
        if prompt.is_empty() {
            return Err(InferenceError::InvalidRequest(format!(
                "prompt {row} is empty"
            )));
        }
        if let Some(bad) = prompt.iter().find(|&&t| t >= vocab) {
            return Err(InferenceError::InvalidRequest(format!(
                "prompt {row} has token {bad}, outside the vocabulary of {vocab}"
            )));
        }
        if prompt.len() >= model.config.context_length {
            return Err(InferenceError::InvalidRequest(format!(
                "prompt {row} has {} tokens; the model's context is {}",
                prompt.len(),
                model.config.context_length
            )));
        }
    }
    let uneven = prompts.iter().any(|p| p.len() != prompts[0].len());
    if uneven && !model.has_position_ids() {
        let mut results = Vec::with_capacity(prompts.len());
        let mut timing = GenerationTiming::default();
        for (row, prompt) in prompts.iter().enumerate() {
            let row_options = GenerationOptions {
                seed: row_seed(options.seed, row),
                ..options.clone()
            };
            let (mut one, t) = generate_batch(
                model,
                codec,
                std::slice::from_ref(prompt),
                &row_options,
                true,
            )?;
            results.append(&mut one);
            timing.add(&t);
        }
        return Ok((results, timing));
    }
    let (results, timing) = generate_batch(model, codec, prompts, options, false)?;
    Ok((results, timing))
}

fn generate_batch(
    model: &mut DecoderModel,
    codec: &TextCodec,
    prompts: &[Vec<u32>],
    options: &GenerationOptions,
    seed_is_row_seed: bool,
) -> Result<(Vec<Generation>, GenerationTiming)> {
    let start = Instant::now();
    let batch = prompts.len();
    let longest = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let budget = options
        .max_new_tokens
        .min(model.config.context_length.saturating_sub(longest));
    let stop_tokens = options
        .stop_token_ids
        .clone()
        .unwrap_or_else(|| model.config.eos_token_ids.clone());
    let pad = model.config.pad_token_id as i64;
    let sampler = options.sampler();
    let longest_stop = options.stop.iter().map(String::len).max().unwrap_or(0);

    let mut input_ids = Vec::with_capacity(batch * longest);
    let mut mask = Vec::with_capacity(batch * (longest + budget));
    let mut positions = Vec::with_capacity(batch * longest);
    let mut rows = Vec::with_capacity(batch);
    for (r, prompt) in prompts.iter().enumerate() {
        let padding = longest - prompt.len();
        input_ids.extend(std::iter::repeat_n(pad, padding));
        input_ids.extend(prompt.iter().map(|&t| t as i64));
        positions.extend(std::iter::repeat_n(0i64, padding));
        positions.extend(0..prompt.len() as i64);
        rows.push(Row {
            tokens: Vec::new(),
            logprobs: Vec::new(),
            text: String::new(),
            finish: None,
            rng: StdRng::seed_from_u64(if seed_is_row_seed {
                options.seed
            } else {
                row_seed(options.seed, r)
            }),
            next_position: prompt.len() as i64,
        });
    }
    // Mask row by row: [batch, total]; rebuilt each step from the per-row padding.
    let paddings: Vec<usize> = prompts.iter().map(|p| longest - p.len()).collect();
    let build_mask = |total: usize, mask: &mut Vec<i64>| {
        mask.clear();
        for &padding in &paddings {
            mask.extend(std::iter::repeat_n(0i64, padding));
            mask.extend(std::iter::repeat_n(1i64, total - padding));
        }
    };
    build_mask(longest, &mut mask);

    let mut timing = GenerationTiming {
        prompt_tokens: prompts.iter().map(Vec::len).sum(),
        ..GenerationTiming::default()
    };
    let cache = model.empty_cache(batch)?;
    let (mut logits, mut cache) = model.step(
        &StepInput {
            batch,
            seq: longest,
            input_ids: &input_ids,
            attention_mask: &mask,
            position_ids: &positions,
        },
        cache,
    )?;
    timing.prefill_s = start.elapsed().as_secs_f64();
    let decode_start = Instant::now();
    let vocab = model.config.vocab_size;
    let mut step_ids = vec![0i64; batch];
    let mut step_positions = vec![0i64; batch];
    for step in 0..budget {
        for (r, row) in rows.iter_mut().enumerate() {
            if row.finish.is_some() {
                step_ids[r] = pad;
                step_positions[r] = row.next_position;
                continue;
            }
            let (token, logprob) =
                sampler.choose(&logits[r * vocab..(r + 1) * vocab], &mut row.rng);
            row.tokens.push(token);
            row.logprobs.push(logprob);
            timing.generated_tokens += 1;
            if stop_tokens.contains(&token) {
                row.finish = Some(FinishReason::Eos);
            } else if !options.stop.is_empty() {
                let before = row.text.len();
                row.text = codec.decode(&row.tokens, true)?;
                // Only the tail can hold a stop string that was not there before.
                let mut from = before.saturating_sub(longest_stop);
                while !row.text.is_char_boundary(from) {
                    from -= 1;
                }
                if let Some(cut) = options
                    .stop
                    .iter()
                    .filter_map(|s| row.text[from..].find(s.as_str()).map(|i| from + i))
                    .min()
                {
                    row.text.truncate(cut);
                    row.finish = Some(FinishReason::Stop);
                }
            }
            if row.finish.is_none() && row.tokens.len() >= budget {
                row.finish = Some(FinishReason::Length);
            }
            step_ids[r] = token as i64;
            step_positions[r] = row.next_position;
            row.next_position += 1;
        }
        if step == 0 {
            timing.first_token_s = start.elapsed().as_secs_f64();
        }
        if rows.iter().all(|row| row.finish.is_some()) {
            break;
        }
        let total = cache.len + 1;
        build_mask(total, &mut mask);
        let (next_logits, next_cache) = model.step(
            &StepInput {
                batch,
                seq: 1,
                input_ids: &step_ids,
                attention_mask: &mask,
                position_ids: &step_positions,
            },
            cache,
        )?;
        timing.decode_steps += 1;
        logits = next_logits;
        cache = next_cache;
    }
    timing.decode_s = decode_start.elapsed().as_secs_f64();
    let mut results = Vec::with_capacity(batch);
    for (row, prompt) in rows.into_iter().zip(prompts) {
        let finish = row.finish.unwrap_or(FinishReason::Length);
        let text = if finish == FinishReason::Stop {
            row.text
        } else {
            codec.decode(&row.tokens, true)?
        };
        results.push(Generation {
            token_ids: row.tokens,
            logprobs: row.logprobs,
            text,
            finish_reason: finish,
            prompt_tokens: prompt.len(),
        });
    }
    Ok((results, timing))
}
