//! The synthesizer: candidate bugs from the mutation operators, validated in the sandbox
//! against the repository's own tests, written as task records.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use frognano_core::{
    Difficulty, EpisodeOutcome, Limits, RepoSource, RunOutcome, Task, TaskSynthesizer, TestRecord,
};
use frognano_mutate::{self as mutate, Mutation};
use frognano_repo::{CleanRepo, FileTree, RepoCache, diff_trees, materialise};
use frognano_sandbox::{Sandbox, TestRequest};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};

use crate::impact::{ChangedSpan, ImpactIndex, SelectionKind, test_file};
use crate::intake::{Intake, IntakeOptions, run_intake};
use crate::options::{
    CombineScope, ProgressFn, Rejection, SynthConfig, SynthProgress, SynthRequest, SynthStats,
};
use crate::outcomes::{bucket, failing_records, module_name, reason_name};
use crate::statement::{MAX_HINT_LEVEL, StatementInput, excerpt_around, fix_hunk, write_statement};
use crate::{Result, SynthError};

mod task_record;
mod validation;

/// One mutation site: a candidate single bug.
#[derive(Debug, Clone)]
struct Site {
    file: String,
    mutation: Mutation,
}

/// A single bug that validated, kept to build multi-bug tasks from.
#[derive(Debug, Clone)]
struct Single {
    site: usize,
}

#[derive(Debug, Clone)]
struct Candidate {
    sites: Vec<usize>,
    files: FileTree,
    key: String,
}

#[derive(Debug, Clone)]
struct Validated {
    fail_to_pass: Vec<String>,
    pass_to_pass: Vec<String>,
    failing_records: Vec<TestRecord>,
    selection: SelectionKind,
    tests_run: usize,
    runs: usize,
    selection_miss: bool,
}

#[derive(Debug)]
enum Verdict {
    Valid(Validated),
    Rejected(Rejection, usize, Option<SelectionKind>, usize),
}

/// Makes validated bug-fix tasks from one repository.
///
/// The repository's clean suite is run at construction ([`run_intake`], cached). Each
/// [`Synthesizer::generate`] call draws new candidates (never the same bug twice), validates
/// them in parallel in the sandbox and returns task records that `RepoEnv` and `frognano eval`
/// read. Implements [`TaskSynthesizer`] (feedback is ignored: this synthesizer does not adapt).
pub struct Synthesizer {
    sandbox: Arc<Sandbox>,
    repo: Arc<CleanRepo>,
    source: RepoSource,
    repo_name: String,
    config: SynthConfig,
    intake: Intake,
    index: ImpactIndex,
    sites: Vec<Site>,
    /// Per operator: sites not yet tried, in seeded order.
    queues: BTreeMap<String, VecDeque<usize>>,
    next_operator: usize,
    singles: Vec<Single>,
    seen: HashSet<String>,
    rng: StdRng,
    stats: SynthStats,
    /// Single bugs validated beyond what a call asked for, handed out by later calls first.
    ready: Vec<(Candidate, Validated)>,
    cancel: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for Synthesizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synthesizer")
            .field("repo", &self.repo.root)
            .field("sites", &self.sites.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Synthesizer {
    /// Loads `repo` (a directory or bundle), runs its intake and finds every mutation site
    /// some test reaches.
    pub fn new(sandbox: Arc<Sandbox>, repo: &Path, config: SynthConfig) -> Result<Self> {
        Self::new_cancellable(sandbox, repo, config, None)
    }

    /// Like [`Synthesizer::new`]; setting `cancel` stops the intake and, later, generation
    /// (calls then return [`SynthError::Cancelled`]).
    pub fn new_cancellable(
        sandbox: Arc<Sandbox>,
        repo: &Path,
        config: SynthConfig,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Self> {
        let cache = RepoCache::new(sandbox.clone());
        let bundle = repo.is_file();
        let source = if bundle {
            RepoSource::Bundle {
                path: repo.to_path_buf(),
                content_hash: None,
            }
        } else {
            RepoSource::Path {
                path: repo.to_path_buf(),
                content_hash: None,
            }
        };
        let clean = cache.get(&source)?;
        Self::with_repo_cancellable(sandbox, clean, source, config, cancel)
    }

    /// Like [`Synthesizer::new`] with a repository already loaded (e.g. shared with an
    /// environment pool's cache).
    pub fn with_repo(
        sandbox: Arc<Sandbox>,
        repo: Arc<CleanRepo>,
        source: RepoSource,
        config: SynthConfig,
    ) -> Result<Self> {
        Self::with_repo_cancellable(sandbox, repo, source, config, None)
    }

    fn with_repo_cancellable(
        sandbox: Arc<Sandbox>,
        repo: Arc<CleanRepo>,
        source: RepoSource,
        config: SynthConfig,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Self> {
        config.validate()?;
        let started = Instant::now();
        let options = IntakeOptions {
            cancel: cancel.clone(),
            ..IntakeOptions::default()
        };
        let intake = match run_intake(&sandbox, &repo, &options) {
            Err(SynthError::Sandbox(frognano_sandbox::SandboxError::Cancelled)) => {
                return Err(SynthError::Cancelled);
            }
            other => other?,
        };
        let intake_s = started.elapsed().as_secs_f64();
        let roots = repo.prepared.config.import_roots.clone();
        let index = ImpactIndex::build(&repo.files, &roots, &intake);
        let source = match source {
            RepoSource::Path { path, .. } => RepoSource::Path {
                path,
                content_hash: Some(repo.content_hash.clone()),
            },
            RepoSource::Bundle { path, .. } => RepoSource::Bundle {
                path,
                content_hash: Some(repo.content_hash.clone()),
            },
        };
        let repo_name = source
            .path()
            .file_stem()
            .and_then(|s| s.to_str())
            .map(|s| s.trim_end_matches(".tar"))
            .unwrap_or("repo")
            .to_string();
        let mut synth = Synthesizer {
            rng: StdRng::seed_from_u64(config.seed),
            sandbox,
            repo,
            source,
            repo_name,
            config,
            intake,
            index,
            sites: Vec::new(),
            queues: BTreeMap::new(),
            next_operator: 0,
            singles: Vec::new(),
            seen: HashSet::new(),
            stats: SynthStats {
                intake_s,
                ..SynthStats::default()
            },
            ready: Vec::new(),
            cancel,
        };
        synth.find_sites()?;
        Ok(synth)
    }

    /// A flag that stops generation early (the call returns [`SynthError::Cancelled`]).
    pub fn set_cancel_flag(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// The clean suite's classification.
    pub fn intake(&self) -> &Intake {
        &self.intake
    }

    /// Counters so far.
    pub fn stats(&self) -> &SynthStats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &SynthConfig {
        &self.config
    }

    /// The repository as task records name it.
    pub fn source(&self) -> &RepoSource {
        &self.source
    }

    /// Number of candidate single-bug sites per operator that some test reaches.
    pub fn sites_per_operator(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for site in &self.sites {
            *counts.entry(site.mutation.operator.clone()).or_insert(0) += 1;
        }
        counts
    }

    /// Files the mutation operators work on: Python modules that are not tests, conftest or
    /// setup scripts, and that some test executed (or imports, without coverage).
    fn source_files(&self) -> Vec<String> {
        let test_files: BTreeSet<&str> = self
            .intake
            .passing
            .iter()
            .chain(&self.intake.failing)
            .chain(&self.intake.skipped)
            .chain(&self.intake.flaky)
            .map(|id| test_file(id))
            .collect();
        self.repo
            .files
            .keys()
            .filter(|path| path.ends_with(".py"))
            .filter(|path| !test_files.contains(path.as_str()))
            .filter(|path| {
                let name = path.rsplit('/').next().unwrap_or(path);
                let is_test_name = name.starts_with("test_")
                    || name.ends_with("_test.py")
                    || name == "conftest.py"
                    || name == "setup.py"
                    || name == "noxfile.py";
                let in_test_dir = path
                    .split('/')
                    .any(|part| matches!(part, "tests" | "test" | "testing" | "docs"));
                !is_test_name && !in_test_dir
            })
            .cloned()
            .collect()
    }

    fn find_sites(&mut self) -> Result<()> {
        let operators: Vec<&str> = self.config.operators.iter().map(String::as_str).collect();
        for file in self.source_files() {
            let Some(data) = self.repo.files.get(&file) else {
                continue;
            };
            let Ok(source) = std::str::from_utf8(data) else {
                continue;
            };
            let mutations = match mutate::find_mutations(source, &operators) {
                Ok(found) => found,
                // A file tree-sitter cannot parse is left alone, not fatal for the repository.
                Err(mutate::MutateError::Parse) => continue,
                Err(err) => return Err(err.into()),
            };
            for mutation in mutations {
                let span = ChangedSpan {
                    file: &file,
                    start_line: mutation.start_line,
                    end_line: mutation.end_line,
                    in_function_body: mutation.in_function_body,
                };
                let entry = self
                    .stats
                    .by_operator
                    .entry(mutation.operator.clone())
                    .or_default();
                if !self.index.is_reached(&span) {
                    entry.unreached += 1;
                    if self.config.skip_unreached {
                        continue;
                    }
                }
                entry.sites += 1;
                self.sites.push(Site {
                    file: file.clone(),
                    mutation,
                });
            }
        }
        for (i, site) in self.sites.iter().enumerate() {
            self.queues
                .entry(site.mutation.operator.clone())
                .or_default()
                .push_back(i);
        }
        for queue in self.queues.values_mut() {
            queue.make_contiguous().shuffle(&mut self.rng);
        }
        Ok(())
    }

    /// Makes up to `count` tasks with the configuration's operators, bug counts and hints.
    pub fn generate(&mut self, count: usize, progress: ProgressFn<'_>) -> Result<Vec<Task>> {
        let request = SynthRequest {
            count,
            operators: Vec::new(),
            min_bugs: 1,
            max_bugs: self.config.max_bugs,
            hint_levels: Vec::new(),
        };
        self.generate_request(&request, progress)
    }

    /// Makes up to `request.count` tasks (fewer when the repository runs out of candidates
    /// or `max_candidates` is reached).
    pub fn generate_request(
        &mut self,
        request: &SynthRequest,
        progress: ProgressFn<'_>,
    ) -> Result<Vec<Task>> {
        if request.min_bugs == 0 || request.min_bugs > request.max_bugs || request.max_bugs > 8 {
            return Err(SynthError::InvalidOption(format!(
                "bug counts {}..={} must lie within 1..=8",
                request.min_bugs, request.max_bugs
            )));
        }
        for name in &request.operators {
            if !mutate::operators().iter().any(|o| o.name == name) {
                return Err(mutate::MutateError::UnknownOperator(name.clone()).into());
            }
        }
        if let Some(bad) = request.hint_levels.iter().find(|l| **l > MAX_HINT_LEVEL) {
            return Err(SynthError::InvalidOption(format!(
                "hint level {bad} is out of range 0..={MAX_HINT_LEVEL}"
            )));
        }
        let started = Instant::now();
        let result = self.generate_inner(request, progress);
        self.stats.elapsed_s += started.elapsed().as_secs_f64();
        result
    }

    fn generate_inner(
        &mut self,
        request: &SynthRequest,
        progress: ProgressFn<'_>,
    ) -> Result<Vec<Task>> {
        let kinds = request.max_bugs - request.min_bugs + 1;
        // Tasks still wanted per bug count, spread evenly, the remainder to the fewest bugs.
        let mut wanted: BTreeMap<usize, usize> = (request.min_bugs..=request.max_bugs)
            .enumerate()
            .map(|(i, k)| {
                (
                    k,
                    request.count / kinds + usize::from(i < request.count % kinds),
                )
            })
            .collect();
        let operators: Vec<String> = if request.operators.is_empty() {
            self.config.operators.clone()
        } else {
            request.operators.clone()
        };
        let hint_levels = if request.hint_levels.is_empty() {
            self.config.hint_levels.clone()
        } else {
            request.hint_levels.clone()
        };
        let workers = if self.config.workers == 0 {
            // One more than the sandbox's workers: a validation spends part of its time
            // writing workspaces and parsing results, which another run can overlap.
            self.sandbox.workers() + 1
        } else {
            self.config.workers
        }
        .max(1);
        let batch_size = workers * 3;
        let mut tasks = Vec::new();
        let mut tried = 0usize;
        if wanted.get(&1).is_some_and(|w| *w > 0) {
            let ready = std::mem::take(&mut self.ready);
            for (candidate, validated) in ready {
                let operator = &self.sites[candidate.sites[0]].mutation.operator;
                let fits = operators.is_empty() || operators.contains(operator);
                match wanted.get_mut(&1) {
                    Some(w) if *w > 0 && fits => {
                        *w -= 1;
                        let level = hint_levels[self.rng.random_range(0..hint_levels.len())];
                        tasks.push(self.make_task(&candidate, &validated, level)?);
                        self.stats.valid += 1;
                    }
                    _ => self.ready.push((candidate, validated)),
                }
            }
        }
        loop {
            if self
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err(SynthError::Cancelled);
            }
            let remaining: usize = wanted.values().sum();
            if remaining == 0 {
                break;
            }
            if self.config.max_candidates > 0 && self.stats.candidates >= self.config.max_candidates
            {
                break;
            }
            let batch = self.next_batch(&wanted, &operators, batch_size, request.min_bugs);
            if batch.is_empty() {
                break;
            }
            let verdicts =
                self.validate_all(&batch, workers, progress, tasks.len(), request.count, tried);
            for (candidate, verdict) in batch.iter().zip(verdicts) {
                tried += 1;
                self.stats.candidates += 1;
                let key = self.operator_key(candidate);
                let entry = self.stats.by_operator.entry(key).or_default();
                entry.tried += 1;
                match verdict {
                    Verdict::Rejected(reason, runs, selection, tests_run) => {
                        *entry
                            .rejected
                            .entry(reason_name(reason).into())
                            .or_insert(0) += 1;
                        self.stats.validation_runs += runs;
                        self.stats.tests_run += tests_run;
                        if let Some(selection) = selection {
                            *self
                                .stats
                                .by_selection
                                .entry(selection.as_str().into())
                                .or_insert(0) += runs;
                        }
                    }
                    Verdict::Valid(validated) => {
                        entry.valid += 1;
                        self.stats.validation_runs += validated.runs;
                        self.stats.tests_run += validated.tests_run;
                        self.stats.selection_misses += usize::from(validated.selection_miss);
                        *self
                            .stats
                            .by_selection
                            .entry(validated.selection.as_str().into())
                            .or_insert(0) += validated.runs;
                        let bugs = candidate.sites.len();
                        if bugs == 1 {
                            self.singles.push(Single {
                                site: candidate.sites[0],
                            });
                        }
                        let accept = bugs >= request.min_bugs
                            && wanted.get(&bugs).is_some_and(|w| *w > 0)
                            && (bugs > 1
                                || operators.is_empty()
                                || operators
                                    .contains(&self.sites[candidate.sites[0]].mutation.operator));
                        if accept {
                            if let Some(w) = wanted.get_mut(&bugs) {
                                *w -= 1;
                            }
                            let level = hint_levels[self.rng.random_range(0..hint_levels.len())];
                            let task = self.make_task(candidate, &validated, level)?;
                            self.stats.valid += 1;
                            tasks.push(task);
                        } else if bugs == 1 {
                            self.ready.push((candidate.clone(), validated));
                        }
                    }
                }
            }
            progress(&SynthProgress {
                valid: tasks.len(),
                target: request.count,
                tried,
            });
        }
        Ok(tasks)
    }

    fn operator_key(&self, candidate: &Candidate) -> String {
        if candidate.sites.len() == 1 {
            self.sites[candidate.sites[0]].mutation.operator.clone()
        } else {
            format!("{} bugs", candidate.sites.len())
        }
    }

    /// The next candidates, deterministic given the seed and the results so far: multi-bug
    /// combinations of validated single bugs first, then new single bugs round-robin over the
    /// operators.
    fn next_batch(
        &mut self,
        wanted: &BTreeMap<usize, usize>,
        operators: &[String],
        size: usize,
        min_bugs: usize,
    ) -> Vec<Candidate> {
        let mut batch = Vec::new();
        let mut want_combos = 0;
        for (&bugs, &count) in wanted.range(2..) {
            want_combos += count;
            let mut attempts = 0;
            let mut made = 0;
            while made < count && batch.len() < size && attempts < count * 8 + 8 {
                attempts += 1;
                if let Some(candidate) = self.combination(bugs) {
                    batch.push(candidate);
                    made += 1;
                }
            }
        }
        let want_singles = wanted.get(&1).copied().unwrap_or(0) > 0 && min_bugs <= 1;
        // Single bugs are also the material of combinations.
        let need_material = want_combos > 0 && batch.len() < want_combos.min(size);
        if want_singles || need_material {
            let mut names: Vec<String> = self
                .queues
                .iter()
                .filter(|(name, queue)| {
                    !queue.is_empty() && (operators.is_empty() || operators.contains(name))
                })
                .map(|(name, _)| name.clone())
                .collect();
            while batch.len() < size && !names.is_empty() {
                let pick = self.next_operator % names.len();
                self.next_operator = self.next_operator.wrapping_add(1);
                let name = names[pick].clone();
                let Some(site) = self.queues.get_mut(&name).and_then(|q| q.pop_front()) else {
                    names.remove(pick);
                    continue;
                };
                if let Some(candidate) = self.candidate(&[site]) {
                    batch.push(candidate);
                }
            }
        }
        batch
    }

    /// A new combination of `bugs` validated single bugs within the configured scope.
    fn combination(&mut self, bugs: usize) -> Option<Candidate> {
        if self.singles.len() < bugs {
            return None;
        }
        let anchor = self.singles[self.rng.random_range(0..self.singles.len())].site;
        let anchor_site = &self.sites[anchor];
        let mut others: Vec<usize> = self
            .singles
            .iter()
            .map(|s| s.site)
            .filter(|&s| s != anchor)
            .filter(|&s| {
                let site = &self.sites[s];
                match self.config.scope {
                    CombineScope::Function => {
                        site.file == anchor_site.file
                            && !site.mutation.scope.is_empty()
                            && site.mutation.scope == anchor_site.mutation.scope
                    }
                    CombineScope::File => site.file == anchor_site.file,
                    CombineScope::Repo => site.file != anchor_site.file,
                }
            })
            .collect();
        others.shuffle(&mut self.rng);
        let mut chosen = vec![anchor];
        for other in others {
            if chosen.len() == bugs {
                break;
            }
            let site = &self.sites[other];
            let clash = chosen.iter().any(|&c| {
                let c = &self.sites[c];
                c.file == site.file
                    && (mutate::overlaps(&c.mutation, &site.mutation)
                        || (self.config.scope == CombineScope::Repo))
            });
            if !clash {
                chosen.push(other);
            }
        }
        if chosen.len() < bugs {
            return None;
        }
        chosen.sort_unstable();
        self.candidate(&chosen)
    }

    /// The buggy tree of a set of sites, unless it is unparseable or already made.
    fn candidate(&mut self, sites: &[usize]) -> Option<Candidate> {
        let mut by_file: BTreeMap<&str, Vec<&Mutation>> = BTreeMap::new();
        for &s in sites {
            by_file
                .entry(self.sites[s].file.as_str())
                .or_default()
                .push(&self.sites[s].mutation);
        }
        let mut files = FileTree::new();
        for (file, mutations) in by_file {
            let source = std::str::from_utf8(self.repo.files.get(file)?).ok()?;
            let mutation = if mutations.len() == 1 {
                mutations[0].clone()
            } else {
                mutate::combine(source, &mutations)?
            };
            let buggy = mutate::apply(source, &mutation.edits).ok()?;
            if buggy == source || !mutate::parses(&buggy) {
                return None;
            }
            files.insert(file.to_string(), Arc::new(buggy.into_bytes()));
        }
        let mut hasher = Sha256::new();
        for (path, data) in &files {
            hasher.update(path.as_bytes());
            hasher.update([0]);
            hasher.update(data.as_slice());
            hasher.update([0]);
        }
        let key = hex::encode(hasher.finalize());
        if !self.seen.insert(key.clone()) {
            self.stats.duplicates += 1;
            return None;
        }
        Some(Candidate {
            sites: sites.to_vec(),
            files,
            key,
        })
    }
}

impl TaskSynthesizer for Synthesizer {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        Ok(self.generate(n, &|_| {})?)
    }

    fn feedback(&mut self, _outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        Ok(())
    }
}
