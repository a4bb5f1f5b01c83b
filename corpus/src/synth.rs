//! Tasks across a corpus: every ready entry gets an equal share of the tasks asked for, and
//! what it made (or why it made nothing) goes into its manifest.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use frognano_core::Task;
use frognano_sandbox::Sandbox;
use frognano_synth::{SynthConfig, SynthError, Synthesizer};

use crate::manifest::{Manifest, SynthesisSummary};
use crate::workers::{is_cancelled, job_count, run_on_threads};
use crate::{Corpus, CorpusError, Result};

/// Options of [`synthesize`].
#[derive(Debug, Clone)]
pub struct CorpusSynthOptions {
    /// Tasks to make across the corpus.
    pub count: usize,
    /// How each entry's synthesizer works (seed, operators, bugs, hint levels).
    pub config: SynthConfig,
    /// An entry stops after trying this many candidates per task of its share (low-yield
    /// entries cannot eat the budget of the others).
    pub candidates_per_task: usize,
    /// Entries synthesized at once (0: the sandbox's worker count).
    pub jobs: usize,
    /// Only these entry ids (empty: every ready entry).
    pub only: Vec<String>,
    /// Set it to stop; tasks made so far are returned.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for CorpusSynthOptions {
    fn default() -> Self {
        CorpusSynthOptions {
            count: 100,
            config: SynthConfig::default(),
            candidates_per_task: 12,
            jobs: 0,
            only: Vec::new(),
            cancel: None,
        }
    }
}

/// What corpus synthesis reports as it goes.
#[derive(Debug)]
pub enum SynthEvent<'a> {
    /// The plan.
    Planned {
        /// Ready entries taking part.
        entries: usize,
        /// Tasks asked for.
        count: usize,
    },
    /// An entry made a task.
    Task {
        /// The entry.
        id: &'a str,
    },
    /// An entry finished.
    Finished {
        /// The entry.
        id: &'a str,
        /// What it made.
        summary: &'a SynthesisSummary,
    },
}

/// The tasks, in corpus order (entry by entry), and each entry's summary.
#[derive(Debug, Clone, Default)]
pub struct CorpusTasks {
    /// Every task made.
    pub tasks: Vec<Task>,
    /// Per entry id.
    pub entries: BTreeMap<String, SynthesisSummary>,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Makes about `options.count` tasks spread evenly over the corpus's ready entries (an entry
/// that makes fewer than its share leaves the rest unmade: shares are not moved, so that one
/// productive package cannot dominate the set). Each entry's manifest gets its
/// [`SynthesisSummary`].
pub fn synthesize(
    corpus: &Corpus,
    sandbox: &Arc<Sandbox>,
    options: &CorpusSynthOptions,
    events: &(dyn Fn(&SynthEvent<'_>) + Sync),
) -> Result<CorpusTasks> {
    options.config.validate()?;
    if options.count == 0 {
        return Err(CorpusError::InvalidOption(
            "ask for at least one task".into(),
        ));
    }
    let started = Instant::now();
    let entries: Vec<(Manifest, PathBuf)> = corpus
        .manifests()?
        .into_iter()
        .filter(Manifest::is_ready)
        .filter(|m| options.only.is_empty() || options.only.contains(&m.id))
        .filter_map(|m| {
            let repo = corpus.root().join(m.repo.as_deref()?);
            repo.is_dir().then_some((m, repo))
        })
        .collect();
    if entries.is_empty() {
        return Err(CorpusError::InvalidOption(
            "the corpus has no ready entries: run `frognano corpus build` first".into(),
        ));
    }
    let n = entries.len();
    let shares: Vec<usize> = (0..n)
        .map(|i| options.count / n + usize::from(i < options.count % n))
        .collect();
    events(&SynthEvent::Planned {
        entries: shares.iter().filter(|s| **s > 0).count(),
        count: options.count,
    });
    let jobs = job_count(options.jobs, sandbox, n);
    let workers = (sandbox.workers() / jobs).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Mutex<Vec<Option<EntryTasks>>> = Mutex::new((0..n).map(|_| None).collect());
    let failure: Mutex<Option<CorpusError>> = Mutex::new(None);
    run_on_threads(jobs, || {
        loop {
            if is_cancelled(options.cancel.as_ref()) {
                return;
            }
            let i = next.fetch_add(1, Ordering::SeqCst);
            if i >= n {
                return;
            }
            if shares[i] == 0 {
                continue;
            }
            let (manifest, repo) = &entries[i];
            let config = SynthConfig {
                workers,
                max_candidates: shares[i] * options.candidates_per_task.max(1),
                ..options.config.clone()
            };
            let (tasks, summary) =
                synthesize_entry(sandbox, manifest, repo, config, shares[i], options, events);
            let mut updated = manifest.clone();
            updated.synthesis = Some(summary.clone());
            if let Err(err) = corpus.write_manifest(&updated)
                && let Ok(mut f) = failure.lock()
            {
                f.get_or_insert(err);
            }
            events(&SynthEvent::Finished {
                id: &manifest.id,
                summary: &summary,
            });
            if let Ok(mut r) = results.lock() {
                r[i] = Some((tasks, summary));
            }
        }
    });
    if let Some(err) = failure.into_inner().ok().flatten() {
        return Err(err);
    }
    let mut out = CorpusTasks::default();
    for (i, result) in results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        if let Some((tasks, summary)) = result {
            out.tasks.extend(tasks);
            out.entries.insert(entries[i].0.id.clone(), summary);
        }
    }
    out.seconds = started.elapsed().as_secs_f64();
    Ok(out)
}

/// One entry's tasks and summary.
type EntryTasks = (Vec<Task>, SynthesisSummary);

fn synthesize_entry(
    sandbox: &Arc<Sandbox>,
    manifest: &Manifest,
    repo: &std::path::Path,
    config: SynthConfig,
    share: usize,
    options: &CorpusSynthOptions,
    events: &(dyn Fn(&SynthEvent<'_>) + Sync),
) -> EntryTasks {
    let started = Instant::now();
    let mut summary = SynthesisSummary::default();
    let mut synth =
        match Synthesizer::new_cancellable(sandbox.clone(), repo, config, options.cancel.clone()) {
            Ok(synth) => synth,
            Err(err) => {
                summary.error = Some(error_text(&err));
                summary.seconds = started.elapsed().as_secs_f64();
                return (Vec::new(), summary);
            }
        };
    let id = manifest.id.as_str();
    let made = std::sync::atomic::AtomicUsize::new(0);
    let tasks = match synth.generate(share, &|p| {
        while made.load(Ordering::SeqCst) < p.valid {
            made.fetch_add(1, Ordering::SeqCst);
            events(&SynthEvent::Task { id });
        }
    }) {
        Ok(tasks) => tasks,
        Err(err) => {
            summary.error = Some(error_text(&err));
            Vec::new()
        }
    };
    let stats = synth.stats();
    summary.tasks = tasks.len();
    summary.candidates = stats.candidates;
    for task in &tasks {
        let family = task
            .difficulty()
            .map(|d| d.operator_family())
            .unwrap_or_else(|| "unknown".into());
        *summary.tasks_by_operator.entry(family).or_insert(0) += 1;
    }
    summary.yield_by_operator = stats
        .by_operator
        .iter()
        .map(|(op, s)| (op.clone(), (s.tried, s.valid)))
        .collect();
    let intake = synth.intake();
    summary.unstable_tests = intake.flaky.len() + intake.order_dependent.len();
    summary.seconds = started.elapsed().as_secs_f64();
    (tasks, summary)
}

fn error_text(err: &SynthError) -> String {
    match err {
        // The entry's path is known from the manifest; keep the reason only.
        SynthError::Intake { reason, .. } => reason.clone(),
        other => other.to_string(),
    }
}
