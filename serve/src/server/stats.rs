//! [`ServerStats`], the counters `GET /v1/frognano/stats` reports, and `Counters`, the atomic
//! counters the model thread and the handlers bump while the server runs.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Counters of a running server (`GET /v1/frognano/stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStats {
    /// Generation requests accepted (valid ones, queued for the model).
    pub requests: u64,
    /// Batches run.
    pub batches: u64,
    /// Requests run in those batches (cancelled-before-start ones excluded).
    pub batched_requests: u64,
    /// `batched_requests / batches`.
    pub mean_batch_size: f64,
    /// Largest batch run.
    pub largest_batch: u64,
    /// Prompt tokens of the batched requests.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Batches that failed (their requests got 500).
    pub failed_batches: u64,
    /// Seconds the worker spent generating.
    pub busy_seconds: f64,
    /// Weight reloads done (`POST /v1/frognano/reload`).
    #[serde(default)]
    pub reloads: u64,
}

/// The live counters behind [`ServerStats`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) batches: AtomicU64,
    pub(super) batched_requests: AtomicU64,
    pub(super) largest_batch: AtomicU64,
    pub(super) prompt_tokens: AtomicU64,
    pub(super) generated_tokens: AtomicU64,
    pub(super) failed_batches: AtomicU64,
    pub(super) busy_micros: AtomicU64,
    pub(super) reloads: AtomicU64,
}

impl Counters {
    /// The counters now.
    pub(super) fn snapshot(&self) -> ServerStats {
        let batches = self.batches.load(Ordering::Relaxed);
        let batched = self.batched_requests.load(Ordering::Relaxed);
        ServerStats {
            requests: self.requests.load(Ordering::Relaxed),
            batches,
            batched_requests: batched,
            mean_batch_size: if batches == 0 {
                0.0
            } else {
                batched as f64 / batches as f64
            },
            largest_batch: self.largest_batch.load(Ordering::Relaxed),
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            generated_tokens: self.generated_tokens.load(Ordering::Relaxed),
            failed_batches: self.failed_batches.load(Ordering::Relaxed),
            busy_seconds: self.busy_micros.load(Ordering::Relaxed) as f64 / 1e6,
            reloads: self.reloads.load(Ordering::Relaxed),
        }
    }
}
