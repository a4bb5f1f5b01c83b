//! Measurements for `frognano bench policy`: generation speed of one engine in its own process
//! (so its peak resident memory is its own), and the machine's memory read bandwidth, which
//! bounds how fast a memory-bound decoder can read its weights.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::error::Result;
use super::generate::{GenerationOptions, generate};
use super::model::{DecoderModel, ModelOptions};
use super::tokenizer::TextCodec;

/// One batch size's figures (medians over the repeats).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchFigures {
    /// Rows generated at once.
    pub batch: usize,
    /// Prompt tokens per row.
    pub prompt_tokens: usize,
    /// Tokens generated per row.
    pub new_tokens: usize,
    /// Prompt tokens (all rows) per second of prefill.
    pub prefill_tok_s: f64,
    /// Milliseconds from the request to the first token of every row.
    pub ttft_ms: f64,
    /// Generated tokens (all rows) per second of decoding after the first token.
    pub decode_tok_s: f64,
}

/// What one engine measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Engine name.
    pub engine: String,
    /// Seconds to load the model.
    pub load_s: f64,
    /// Peak resident memory of the process, MB (VmHWM).
    pub peak_rss_mb: f64,
    /// Figures per batch size.
    pub batches: Vec<BatchFigures>,
}

/// Peak resident set of this process in MB (Linux; 0 elsewhere).
pub fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        0.0
    } else {
        values[values.len() / 2]
    }
}

/// Runs FrogNano's generation over `prompts` (the first `batch` rows for each batch size), one
/// warm-up then `repeats` timed runs, greedy, exactly `new_tokens` tokens per row.
pub fn run_worker(
    model_dir: &Path,
    prompts: &[Vec<u32>],
    new_tokens: usize,
    batch_sizes: &[usize],
    repeats: usize,
    threads: usize,
) -> Result<WorkerReport> {
    let started = Instant::now();
    let mut model = DecoderModel::load(
        model_dir,
        &ModelOptions {
            intra_threads: threads,
            runtime_library: None,
        },
    )?;
    let codec = TextCodec::load(model_dir)?;
    let load_s = started.elapsed().as_secs_f64();
    let options = GenerationOptions {
        stop_token_ids: Some(Vec::new()),
        ..GenerationOptions::greedy(new_tokens)
    };
    let mut batches = Vec::new();
    for &batch in batch_sizes {
        let rows = &prompts[..batch.min(prompts.len())];
        let prompt_tokens = rows.iter().map(Vec::len).sum::<usize>();
        let (mut prefill, mut ttft, mut decode) = (Vec::new(), Vec::new(), Vec::new());
        for repeat in 0..=repeats {
            let (_, timing) = generate(&mut model, &codec, rows, &options)?;
            if repeat == 0 {
                continue; // warm-up
            }
            prefill.push(prompt_tokens as f64 / timing.prefill_s.max(1e-9));
            ttft.push(timing.first_token_s * 1e3);
            let decoded = (timing.generated_tokens - rows.len()) as f64;
            decode.push(
                decoded / (timing.decode_s - (timing.first_token_s - timing.prefill_s)).max(1e-9),
            );
        }
        batches.push(BatchFigures {
            batch: rows.len(),
            prompt_tokens: rows.first().map_or(0, Vec::len),
            new_tokens,
            prefill_tok_s: median(prefill),
            ttft_ms: median(ttft),
            decode_tok_s: median(decode),
        });
    }
    Ok(WorkerReport {
        engine: "frognano".into(),
        load_s,
        peak_rss_mb: peak_rss_mb(),
        batches,
    })
}

/// Memory read bandwidth in GB/s: the best of several passes summing a buffer much larger than
/// the caches, on one thread and on all threads (the larger is returned with the thread count).
pub fn memory_bandwidth_gbs(buffer_mb: usize) -> (f64, usize) {
    let words = buffer_mb * (1 << 20) / 8;
    let buffer: Vec<u64> = (0..words as u64).collect();
    let pass = |threads: usize| -> f64 {
        let chunk = words.div_ceil(threads);
        let start = Instant::now();
        let total: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = buffer
                .chunks(chunk)
                .map(|part| scope.spawn(move || part.iter().fold(0u64, |a, &b| a.wrapping_add(b))))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(0))
                .fold(0u64, u64::wrapping_add)
        });
        std::hint::black_box(total);
        (words * 8) as f64 / start.elapsed().as_secs_f64() / 1e9
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut best = (0.0, 1);
    for threads in [1, cores] {
        for _ in 0..5 {
            let gbs = pass(threads);
            if gbs > best.0 {
                best = (gbs, threads);
            }
        }
    }
    best
}
