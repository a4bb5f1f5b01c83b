//! Batched generation with a key/value cache.
//!
//! Prompts of different lengths share one batch: they are left-padded (attention mask 0 on the
//! padding, positions counted from each row's first real token), prefilled in one run, then
//! decoded one token per row per run with the cache carried between runs. A row that finished
//! (end-of-sequence token, stop string, token budget) keeps a slot until the batch ends but its
//! output is frozen. Graphs without `position_ids` cannot place left-padded rows, so for them rows
//! of different lengths are generated one at a time.
//!
//! [`generate`] runs one set of options over every row. [`generate_with`] gives each row its own
//! options and seed (a server batches unrelated requests that way: a row's output does not depend
//! on what else is in its batch) and reports each sampled token and each finished row to a
//! [`GenerationObserver`] as it happens (streaming; a row can be cancelled).

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
    /// Its [`GenerationObserver`] stopped it (only with [`generate_with`]).
    Cancelled,
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
    budget: usize,
    sampler: Sampler,
    stop_tokens: Vec<u32>,
    longest_stop: usize,
}

fn row_seed(seed: u64, row: usize) -> u64 {
    seed ^ (row as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The generator seed [`generate`] gives row `row` of a request with seed `seed`: pass it as a
/// [`RowRequest`]'s `options.seed` to reproduce that row with [`generate_with`].
pub fn seed_of_row(seed: u64, row: usize) -> u64 {
    row_seed(seed, row)
}

/// One row of a [`generate_with`] batch: a prompt and its own options.
#[derive(Debug, Clone, PartialEq)]
pub struct RowRequest<'a> {
    /// The prompt's token ids.
    pub prompt: &'a [u32],
    /// This row's options. Its `seed` seeds this row's generator as is (where [`generate`]
    /// derives one seed per row from the request's; see [`seed_of_row`]).
    pub options: GenerationOptions,
}

/// Watches a [`generate_with`] batch as it runs. Rows are numbered as the requests were given.
pub trait GenerationObserver {
    /// Row `row` sampled `token_id` with log-probability `logprob` (its final stop token
    /// included). Returning false stops the row: it finishes with [`FinishReason::Cancelled`]
    /// and nothing more is sampled for it (its slot in the batch stays until the batch ends).
    fn on_token(&mut self, row: usize, token_id: u32, logprob: f32) -> bool {
        let _ = (row, token_id, logprob);
        true
    }

    /// Row `row` finished; `generation` is what the batch returns for it. Called once per row,
    /// as soon as it finishes (before the rest of the batch does).
    fn on_finish(&mut self, row: usize, generation: &Generation) {
        let _ = (row, generation);
    }
}

/// Observes nothing.
impl GenerationObserver for () {}

/// Passes a one-row run's events on under the row's index in the whole request.
struct Renumbered<'a> {
    inner: &'a mut dyn GenerationObserver,
    row: usize,
}

impl GenerationObserver for Renumbered<'_> {
    fn on_token(&mut self, _row: usize, token_id: u32, logprob: f32) -> bool {
        self.inner.on_token(self.row, token_id, logprob)
    }

    fn on_finish(&mut self, _row: usize, generation: &Generation) {
        self.inner.on_finish(self.row, generation);
    }
}

/// Generates a continuation of each prompt (token ids), all rows in one batch.
pub fn generate(
    model: &mut DecoderModel,
    codec: &TextCodec,
    prompts: &[Vec<u32>],
    options: &GenerationOptions,
) -> Result<(Vec<Generation>, GenerationTiming)> {
    options.validate()?;
    let rows: Vec<RowRequest<'_>> = prompts
        .iter()
        .enumerate()
        .map(|(row, prompt)| RowRequest {
            prompt,
            options: GenerationOptions {
                seed: row_seed(options.seed, row),
                ..options.clone()
            },
        })
        .collect();
    generate_with(model, codec, &rows, &mut ())
}

/// Generates a continuation of each row's prompt with that row's options, all rows in one
/// batch, reporting tokens and finished rows to `observer` as they come.
///
/// A row's tokens depend only on its prompt and options, not on the other rows, except that
/// every row's budget is also capped by the context left after the batch's longest prompt.
pub fn generate_with(
    model: &mut DecoderModel,
    codec: &TextCodec,
    rows: &[RowRequest<'_>],
    observer: &mut dyn GenerationObserver,
) -> Result<(Vec<Generation>, GenerationTiming)> {
    if rows.is_empty() {
        return Ok((Vec::new(), GenerationTiming::default()));
    }
    let vocab = model.config.vocab_size as u32;
    for (row, request) in rows.iter().enumerate() {
        request.options.validate()?;
        let prompt = request.prompt;
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
    let uneven = rows.iter().any(|r| r.prompt.len() != rows[0].prompt.len());
    if uneven && !model.has_position_ids() {
        let mut results = Vec::with_capacity(rows.len());
        let mut timing = GenerationTiming::default();
        for (row, request) in rows.iter().enumerate() {
            let mut renumbered = Renumbered {
                inner: &mut *observer,
                row,
            };
            let (mut one, t) =
                generate_batch(model, codec, std::slice::from_ref(request), &mut renumbered)?;
            results.append(&mut one);
            timing.add(&t);
        }
        return Ok((results, timing));
    }
    generate_batch(model, codec, rows, observer)
}

/// What a finished row returns.
fn finished_generation(
    codec: &TextCodec,
    row: &Row,
    finish: FinishReason,
    prompt_tokens: usize,
) -> Result<Generation> {
    let text = if finish == FinishReason::Stop {
        row.text.clone()
    } else {
        codec.decode(&row.tokens, true)?
    };
    Ok(Generation {
        token_ids: row.tokens.clone(),
        logprobs: row.logprobs.clone(),
        text,
        finish_reason: finish,
        prompt_tokens,
    })
}

fn generate_batch(
    model: &mut DecoderModel,
    codec: &TextCodec,
    requests: &[RowRequest<'_>],
    observer: &mut dyn GenerationObserver,
) -> Result<(Vec<Generation>, GenerationTiming)> {
    let start = Instant::now();
    let batch = requests.len();
    let longest = requests.iter().map(|r| r.prompt.len()).max().unwrap_or(0);
    let context_left = model.config.context_length.saturating_sub(longest);
    let pad = model.config.pad_token_id as i64;

    let mut input_ids = Vec::with_capacity(batch * longest);
    let mut mask = Vec::with_capacity(batch * longest);
    let mut positions = Vec::with_capacity(batch * longest);
    let mut rows = Vec::with_capacity(batch);
    for request in requests {
        let prompt = request.prompt;
        let options = &request.options;
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
            rng: StdRng::seed_from_u64(options.seed),
            next_position: prompt.len() as i64,
            budget: options.max_new_tokens.min(context_left),
            sampler: options.sampler(),
            stop_tokens: options
                .stop_token_ids
                .clone()
                .unwrap_or_else(|| model.config.eos_token_ids.clone()),
            longest_stop: options.stop.iter().map(String::len).max().unwrap_or(0),
        });
    }
    let steps = rows.iter().map(|row| row.budget).max().unwrap_or(0);
    // Mask row by row: [batch, total]; rebuilt each step from the per-row padding.
    let paddings: Vec<usize> = requests.iter().map(|r| longest - r.prompt.len()).collect();
    let build_mask = |total: usize, mask: &mut Vec<i64>| {
        mask.clear();
        for &padding in &paddings {
            mask.extend(std::iter::repeat_n(0i64, padding));
            mask.extend(std::iter::repeat_n(1i64, total - padding));
        }
    };
    build_mask(longest, &mut mask);

    let mut timing = GenerationTiming {
        prompt_tokens: requests.iter().map(|r| r.prompt.len()).sum(),
        ..GenerationTiming::default()
    };
    let mut results: Vec<Option<Generation>> = vec![None; batch];
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
    for step in 0..steps {
        for (r, row) in rows.iter_mut().enumerate() {
            if row.finish.is_some() {
                step_ids[r] = pad;
                step_positions[r] = row.next_position;
                continue;
            }
            let (token, logprob) = row
                .sampler
                .choose(&logits[r * vocab..(r + 1) * vocab], &mut row.rng);
            row.tokens.push(token);
            row.logprobs.push(logprob);
            timing.generated_tokens += 1;
            let stop = &requests[r].options.stop;
            if row.stop_tokens.contains(&token) {
                row.finish = Some(FinishReason::Eos);
            } else if !stop.is_empty() {
                let before = row.text.len();
                row.text = codec.decode(&row.tokens, true)?;
                // Only the tail can hold a stop string that was not there before.
                let mut from = before.saturating_sub(row.longest_stop);
                while !row.text.is_char_boundary(from) {
                    from -= 1;
                }
                if let Some(cut) = stop
                    .iter()
                    .filter_map(|s| row.text[from..].find(s.as_str()).map(|i| from + i))
                    .min()
                {
                    row.text.truncate(cut);
                    row.finish = Some(FinishReason::Stop);
                }
            }
            if row.finish.is_none() && row.tokens.len() >= row.budget {
                row.finish = Some(FinishReason::Length);
            }
            if !observer.on_token(r, token, logprob) && row.finish.is_none() {
                row.finish = Some(FinishReason::Cancelled);
            }
            if let Some(finish) = row.finish {
                let generation = finished_generation(codec, row, finish, requests[r].prompt.len())?;
                observer.on_finish(r, &generation);
                results[r] = Some(generation);
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
    let mut generations = Vec::with_capacity(batch);
    for (r, result) in results.into_iter().enumerate() {
        let generation = match result {
            Some(generation) => generation,
            // Every row reaches its budget within `steps`; this only guards the invariant.
            None => {
                let generation = finished_generation(
                    codec,
                    &rows[r],
                    FinishReason::Length,
                    requests[r].prompt.len(),
                )?;
                observer.on_finish(r, &generation);
                generation
            }
        };
        generations.push(generation);
    }
    Ok((generations, timing))
}
