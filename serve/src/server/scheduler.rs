//! The model thread: the messages it takes (`WorkerMessage`: a `Job` to generate, a
//! `ReloadJob` to swap weights), how it gathers jobs into batches (`Batching`, `run_worker`),
//! runs a batch and routes each row's tokens and result to its handler (`run_batch`,
//! `JobRouter`), and how it loads the model and reloads compatible weights between batches.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, mpsc as std_mpsc};
use std::time::{Duration, Instant};

use frognano_llm::generate::{
    Generation, GenerationObserver, GenerationOptions, RowRequest, generate_with,
};
use frognano_llm::{DecoderModel, ModelOptions, TextCodec};
use tokio::sync::{mpsc, oneshot};

use super::SharedCodec;
use super::config::ServerConfig;
use super::stats::Counters;
use crate::error::Result;

/// What the worker tells a request's handler.
#[derive(Debug)]
pub(super) enum JobEvent {
    /// A sampled token (only for streamed requests).
    Token { id: u32, logprob: f32 },
    /// The row finished.
    Finished(Generation),
    /// The batch failed.
    Failed(String),
}

/// A request waiting for the model.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) prompt: Vec<u32>,
    pub(super) options: GenerationOptions,
    pub(super) stream: bool,
    pub(super) events: mpsc::UnboundedSender<JobEvent>,
}

/// A reload request waiting for the model thread.
#[derive(Debug)]
pub(super) struct ReloadJob {
    pub(super) model_dir: PathBuf,
    /// The reload count once the new weights serve, or why the folder was refused.
    pub(super) answer: oneshot::Sender<std::result::Result<u64, String>>,
}

/// What the model thread is asked to do, in arrival order.
#[derive(Debug)]
pub(super) enum WorkerMessage {
    /// Generate a reply (batched with others).
    Generate(Job),
    /// Swap in other weights between batches.
    Reload(ReloadJob),
    /// Stop after the batch running now: the server has stopped, and connections it dropped
    /// after its grace period may still hold job senders.
    Stop,
}

pub(super) fn load_model(config: &ServerConfig) -> Result<(DecoderModel, Arc<TextCodec>)> {
    let model = DecoderModel::load(
        &config.model_dir,
        &ModelOptions {
            intra_threads: config.intra_threads,
            runtime_library: None,
        },
    )?;
    let codec = TextCodec::load(&config.model_dir)?;
    Ok((model, Arc::new(codec)))
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Batching {
    pub(super) max_batch: usize,
    pub(super) window: Duration,
}

/// The model thread: batches waiting jobs and runs them, and swaps in new weights when asked,
/// until every job sender is gone or it is told to stop.
pub(super) fn run_worker(
    mut model: DecoderModel,
    codec: &SharedCodec,
    queue: &std_mpsc::Receiver<WorkerMessage>,
    batching: Batching,
    model_options: &ModelOptions,
    counters: &Counters,
) {
    while let Ok(message) = queue.recv() {
        let first = match message {
            WorkerMessage::Generate(job) => job,
            WorkerMessage::Reload(reload) => {
                reload_weights(&mut model, codec, reload, model_options, counters);
                continue;
            }
            WorkerMessage::Stop => return,
        };
        let mut batch = vec![first];
        // A reload that arrives while the batch gathers runs right after it; requests that
        // arrive after the reload wait for the new weights.
        let mut reload_after = None;
        let mut stop_after = false;
        let deadline = Instant::now() + batching.window;
        while batch.len() < batching.max_batch {
            // Requests that queued while the previous batch ran join without waiting.
            let next = match queue.try_recv() {
                Ok(message) => Some(message),
                Err(std_mpsc::TryRecvError::Disconnected) => break,
                Err(std_mpsc::TryRecvError::Empty) => {
                    let now = Instant::now();
                    if now >= deadline {
                        break;
                    }
                    queue.recv_timeout(deadline - now).ok()
                }
            };
            match next {
                Some(WorkerMessage::Generate(job)) => batch.push(job),
                Some(WorkerMessage::Reload(reload)) => {
                    reload_after = Some(reload);
                    break;
                }
                Some(WorkerMessage::Stop) => {
                    stop_after = true;
                    break;
                }
                None => break,
            }
        }
        // Clients that left while waiting cost nothing.
        batch.retain(|job| !job.events.is_closed());
        if !batch.is_empty() {
            let codec_now = Arc::clone(&codec.read().unwrap_or_else(|p| p.into_inner()));
            run_batch(&mut model, &codec_now, batch, counters);
        }
        if let Some(reload) = reload_after {
            reload_weights(&mut model, codec, reload, model_options, counters);
        }
        if stop_after {
            return;
        }
    }
}

/// Loads the weights of `reload.model_dir` and, when they are the same model (vocabulary,
/// end-of-sequence tokens, context), makes them serve; answers the reload count, or why the
/// folder was refused (the old weights keep serving).
fn reload_weights(
    model: &mut DecoderModel,
    codec: &SharedCodec,
    reload: ReloadJob,
    model_options: &ModelOptions,
    counters: &Counters,
) {
    let outcome =
        load_compatible(model, &reload.model_dir, model_options).map(|(new_model, new_codec)| {
            *model = new_model;
            *codec.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new_codec);
            counters.reloads.fetch_add(1, Ordering::Relaxed) + 1
        });
    let _ = reload.answer.send(outcome);
}

/// The model and tokenizer of `dir`, when they can replace `current` without the handlers'
/// checks (vocabulary, context length, end-of-sequence tokens) changing.
fn load_compatible(
    current: &DecoderModel,
    dir: &std::path::Path,
    model_options: &ModelOptions,
) -> std::result::Result<(DecoderModel, TextCodec), String> {
    let shown = dir.display();
    let new_model = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        DecoderModel::load(dir, model_options)
    }))
    .map_err(|_| format!("{shown}: loading the model panicked"))?
    .map_err(|e| format!("{shown}: cannot load the model: {e}"))?;
    let new_codec =
        TextCodec::load(dir).map_err(|e| format!("{shown}: cannot load the tokenizer: {e}"))?;
    let (old, new) = (&current.config, &new_model.config);
    if new.vocab_size != old.vocab_size || new_codec.vocab_size() != new.vocab_size {
        return Err(format!(
            "{shown}: a different vocabulary ({} tokens, tokenizer {}; the served model has {})",
            new.vocab_size,
            new_codec.vocab_size(),
            old.vocab_size
        ));
    }
    if new.eos_token_ids != old.eos_token_ids {
        return Err(format!(
            "{shown}: different end-of-sequence tokens ({:?}; the served model has {:?})",
            new.eos_token_ids, old.eos_token_ids
        ));
    }
    if new.context_length != old.context_length {
        return Err(format!(
            "{shown}: a different context length ({}; the served model has {})",
            new.context_length, old.context_length
        ));
    }
    Ok((new_model, new_codec))
}

/// Routes a batch's events to each request's handler.
struct JobRouter<'a> {
    jobs: &'a [Job],
    finished: Vec<bool>,
    counters: &'a Counters,
}

impl GenerationObserver for JobRouter<'_> {
    fn on_token(&mut self, row: usize, token_id: u32, logprob: f32) -> bool {
        self.counters
            .generated_tokens
            .fetch_add(1, Ordering::Relaxed);
        let Some(job) = self.jobs.get(row) else {
            return false;
        };
        if job.stream {
            job.events
                .send(JobEvent::Token {
                    id: token_id,
                    logprob,
                })
                .is_ok()
        } else {
            !job.events.is_closed()
        }
    }

    fn on_finish(&mut self, row: usize, generation: &Generation) {
        if let Some(job) = self.jobs.get(row) {
            let _ = job.events.send(JobEvent::Finished(generation.clone()));
            self.finished[row] = true;
        }
    }
}

fn run_batch(model: &mut DecoderModel, codec: &TextCodec, jobs: Vec<Job>, counters: &Counters) {
    let started = Instant::now();
    // Counted before any reply goes out, so a client that got its reply sees its batch.
    let size = jobs.len() as u64;
    counters.batches.fetch_add(1, Ordering::Relaxed);
    counters.batched_requests.fetch_add(size, Ordering::Relaxed);
    counters.largest_batch.fetch_max(size, Ordering::Relaxed);
    counters.prompt_tokens.fetch_add(
        jobs.iter().map(|j| j.prompt.len() as u64).sum(),
        Ordering::Relaxed,
    );
    let rows: Vec<RowRequest<'_>> = jobs
        .iter()
        .map(|job| RowRequest {
            prompt: &job.prompt,
            options: job.options.clone(),
        })
        .collect();
    let mut router = JobRouter {
        jobs: &jobs,
        finished: vec![false; jobs.len()],
        counters,
    };
    // A panic inside the runtime or the tokenizer fails this batch, not the server.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        generate_with(model, codec, &rows, &mut router)
    }));
    let failure = match outcome {
        Ok(Ok(_)) => None,
        Ok(Err(err)) => Some(err.to_string()),
        Err(_) => Some("the model panicked".to_string()),
    };
    counters
        .busy_micros
        .fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
    if let Some(message) = failure {
        counters.failed_batches.fetch_add(1, Ordering::Relaxed);
        for (job, finished) in jobs.iter().zip(&router.finished) {
            if !finished {
                let _ = job.events.send(JobEvent::Failed(message.clone()));
            }
        }
    }
}
