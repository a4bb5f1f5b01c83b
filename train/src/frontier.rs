//! [`FrontierSynthesizer`]: online task synthesis at the frontier of learnability.
//!
//! Tasks are grouped into families (operator x bug count x hint level, pooled over the
//! repositories). Each family keeps a Beta posterior of the current policy's success rate,
//! decayed every feedback round so it follows a moving policy. Families are chosen by Thompson
//! sampling on a learnability score that peaks at the target success rate (`p(1-p)` for the
//! default 0.5), with epsilon exploration and a starvation guard, and tasks whose groups were
//! all solved or all failed are retired. A background thread synthesizes and validates new
//! tasks for the families most worth buffering while rollouts run, so in steady state a
//! proposal never waits (the time it did wait is reported).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use frognano_core::{EpisodeOutcome, Task, TaskSynthesizer};
use frognano_synth::Synthesizer;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Beta, Distribution};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::curriculum::FamilyKey;
use crate::{Result, TrainError};

mod worker;

use worker::{Shared, lock, synthesis_loop};

/// Settings of a [`FrontierSynthesizer`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FrontierConfig {
    /// Operators that make families (empty: every operator some repository has sites for).
    pub operators: Vec<String>,
    /// Bug counts that make families.
    pub bug_counts: Vec<usize>,
    /// Hint levels that make families.
    pub hint_levels: Vec<u8>,
    /// Success rate the choice aims at (the learnability score peaks there).
    pub target_success: f64,
    /// Posterior decay per feedback round (1: never forget; lower: follow the policy faster).
    pub decay: f64,
    /// Probability of choosing a uniformly random family for a slot.
    pub exploration: f64,
    /// A family with tasks that was not chosen for this many proposals is chosen next.
    pub max_idle: u64,
    /// Tasks kept ready per promising family.
    pub buffer: usize,
    /// How many of the most promising families are kept buffered.
    pub buffered_families: usize,
    /// Attempts (groups) after which a task is retired even with mixed results.
    pub max_uses: usize,
    /// Seed of the sampling.
    pub seed: u64,
    /// Longest a proposal waits for synthesis before returning what it has.
    pub max_wait_s: f64,
    /// Strength (pseudo-counts) of a family's prior, centred on the success rate of related
    /// families (same operator, or same bug count and hint level): empirical-Bayes back-off, so
    /// one family's results inform its neighbours when there are many families and few rollouts.
    pub prior_strength: f64,
    /// Until some group has a success, propose only from the easiest rung synthesis can still
    /// serve (fewest bugs, then the highest hint level), spread over its operators, least tried
    /// first. Before the first success every family's posterior only falls, so the learnability
    /// score has nothing to calibrate to; a policy that fails everything is best served by many
    /// distinct easy tasks (a reverse curriculum's first rung). Once a group succeeds, Thompson
    /// sampling takes over.
    pub cold_start: bool,
}

impl Default for FrontierConfig {
    fn default() -> Self {
        FrontierConfig {
            operators: Vec::new(),
            bug_counts: vec![1, 2],
            hint_levels: vec![frognano_core::Difficulty::DEFAULT_HINT_LEVEL],
            target_success: 0.5,
            decay: 0.8,
            exploration: 0.1,
            max_idle: 12,
            buffer: 2,
            buffered_families: 4,
            max_uses: 4,
            seed: 0,
            max_wait_s: 600.0,
            prior_strength: 4.0,
            cold_start: true,
        }
    }
}

impl FrontierConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(TrainError::Config(format!("frontier: {m}")));
        if self.bug_counts.is_empty() || self.bug_counts.iter().any(|b| *b == 0 || *b > 8) {
            return bad("bug_counts must be non-empty, each within 1..=8");
        }
        if self.hint_levels.is_empty()
            || self
                .hint_levels
                .iter()
                .any(|h| *h > frognano_core::Difficulty::MAX_HINT_LEVEL)
        {
            return bad(&format!(
                "hint_levels must be non-empty, each within 0..={}",
                frognano_core::Difficulty::MAX_HINT_LEVEL
            ));
        }
        if !(self.target_success > 0.0 && self.target_success < 1.0) {
            return bad("target_success must lie strictly between 0 and 1");
        }
        if !(self.decay > 0.0 && self.decay <= 1.0) {
            return bad("decay must lie in (0, 1]");
        }
        if !(0.0..=1.0).contains(&self.exploration) {
            return bad("exploration must lie in [0, 1]");
        }
        if self.buffer == 0 || self.max_uses == 0 {
            return bad("buffer and max_uses must be positive");
        }
        if !(self.prior_strength.is_finite() && self.prior_strength > 0.0) {
            return bad("prior_strength must be a positive number");
        }
        if !(self.max_wait_s.is_finite() && self.max_wait_s > 0.0) {
            return bad("max_wait_s must be a positive number of seconds");
        }
        Ok(())
    }
}

/// The learnability score of success rate `p` for a target `target`: `p^a (1-p)^b` with the
/// mode at the target (`a = 2 target`, `b = 2 (1 - target)`), scaled to 1 at the mode. For the
/// default target 0.5 it is `4 p (1 - p)`: the reward variance of a 0/1 group.
pub fn learnability(p: f64, target: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    let (a, b) = (2.0 * target, 2.0 * (1.0 - target));
    let peak = target.powf(a) * (1.0 - target).powf(b);
    if peak <= 0.0 {
        return 0.0;
    }
    p.powf(a) * (1.0 - p).powf(b) / peak
}

/// [`learnability`] of a caller's arguments, checked: `target` must lie strictly between 0 and 1
/// and `p` be a number (rates outside 0..=1 are clamped). Out-of-range arguments are
/// [`ErrorKind::InvalidArgument`](frognano_core::ErrorKind::InvalidArgument) errors. What the
/// bindings' `learnability` calls.
pub fn checked_learnability(p: f64, target: f64) -> crate::Result<f64> {
    if !(target > 0.0 && target < 1.0) {
        return Err(crate::TrainError::Core(frognano_core::Error::invalid(
            "learnability target",
            format!("target must lie strictly between 0 and 1, got {target}"),
        )));
    }
    if p.is_nan() {
        return Err(crate::TrainError::Core(frognano_core::Error::invalid(
            "success rate",
            "p must be a number, got NaN",
        )));
    }
    Ok(learnability(p, target))
}

/// What the frontier believes about one family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyState {
    /// The family.
    pub key: FamilyKey,
    /// Beta posterior successes + 1.
    pub alpha: f64,
    /// Beta posterior failures + 1.
    pub beta: f64,
    /// Groups attempted.
    pub groups: u64,
    /// Times chosen for a slot.
    pub chosen: u64,
    /// Proposal number when last chosen.
    pub last_chosen: u64,
    /// Synthesis found no task for it in any repository.
    pub barren: bool,
}

impl FamilyState {
    /// Posterior mean success rate.
    pub fn mean(&self) -> f64 {
        self.alpha / (self.alpha + self.beta)
    }
}

#[derive(Debug)]
struct ActiveTask {
    family: usize,
    task: Task,
    uses: usize,
    last_used: u64,
}

/// Online, learnability-calibrated task synthesis. See the module documentation.
pub struct FrontierSynthesizer {
    config: FrontierConfig,
    families: Vec<FamilyState>,
    shared: Arc<(Mutex<Shared>, Condvar)>,
    cancel: Arc<AtomicBool>,
    worker: Option<JoinHandle<()>>,
    active: HashMap<String, ActiveTask>,
    calls: u64,
    // Since the last `metrics` call:
    wait_s: f64,
    chosen: Vec<usize>,
    retired: u64,
    retired_total: u64,
    /// Some group has succeeded (ends the cold start).
    signal_seen: bool,
}

impl std::fmt::Debug for FrontierSynthesizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontierSynthesizer")
            .field("families", &self.families.len())
            .field("active", &self.active.len())
            .field("calls", &self.calls)
            .finish()
    }
}

/// How easy a family is, easiest first when sorted: fewer bugs, then a higher hint level (a
/// statement that gives more of the fix away).
type Rung = (usize, std::cmp::Reverse<u8>);

fn rung(key: &FamilyKey) -> Rung {
    (key.bugs, std::cmp::Reverse(key.hint))
}

impl FrontierSynthesizer {
    /// A frontier over one synthesizer per repository; `exclude` holds task ids never to
    /// propose (a held-out evaluation set), and bug-function keys whose tasks are never
    /// proposed either ([`crate::held_out_exclusions`] gives both). Starts the synthesis thread.
    pub fn new(
        synthesizers: Vec<Synthesizer>,
        config: FrontierConfig,
        exclude: BTreeSet<String>,
    ) -> Result<Self> {
        config.validate()?;
        if synthesizers.is_empty() {
            return Err(TrainError::Config(
                "the frontier needs at least one repository".into(),
            ));
        }
        let sites: Vec<BTreeMap<String, usize>> = synthesizers
            .iter()
            .map(|s| s.sites_per_operator())
            .collect();
        let known: BTreeSet<String> = frognano_synth::operators()
            .iter()
            .map(|o| o.name.to_string())
            .collect();
        let operators: Vec<String> = if config.operators.is_empty() {
            let mut ops: BTreeSet<String> = BTreeSet::new();
            for s in &sites {
                ops.extend(s.iter().filter(|(_, n)| **n > 0).map(|(o, _)| o.clone()));
            }
            ops.into_iter().collect()
        } else {
            if let Some(bad) = config.operators.iter().find(|o| !known.contains(*o)) {
                return Err(TrainError::Config(format!(
                    "frontier: unknown operator {bad:?}"
                )));
            }
            config.operators.clone()
        };
        let mut families = Vec::new();
        let mut dry = Vec::new();
        for op in &operators {
            for &bugs in &config.bug_counts {
                for &hint in &config.hint_levels {
                    // A repository can serve the family if it has enough sites.
                    let repo_dry: Vec<bool> = sites
                        .iter()
                        .map(|s| s.get(op).copied().unwrap_or(0) < bugs)
                        .collect();
                    let barren = repo_dry.iter().all(|d| *d);
                    families.push(FamilyState {
                        key: FamilyKey {
                            operator: op.clone(),
                            bugs,
                            hint,
                        },
                        alpha: 1.0,
                        beta: 1.0,
                        groups: 0,
                        chosen: 0,
                        last_chosen: 0,
                        barren,
                    });
                    dry.push(repo_dry);
                }
            }
        }
        if families.iter().all(|f| f.barren) {
            return Err(TrainError::NoTasks(
                "no repository has mutation sites for the frontier's operators".into(),
            ));
        }
        let n = families.len();
        let shared = Arc::new((
            Mutex::new(Shared {
                buffers: vec![VecDeque::new(); n],
                made: vec![0; n],
                targets: vec![1; n],
                priority: vec![1.0; n],
                dry,
                next_repo: vec![0; n],
                seen: exclude,
                capacity: config.buffer * config.buffered_families.max(1),
                ..Shared::default()
            }),
            Condvar::new(),
        ));
        let cancel = Arc::new(AtomicBool::new(false));
        let mut synthesizers = synthesizers;
        for s in &mut synthesizers {
            s.set_cancel_flag(cancel.clone());
        }
        let keys: Vec<FamilyKey> = families.iter().map(|f| f.key.clone()).collect();
        let worker = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("frontier-synthesis".into())
                .spawn(move || synthesis_loop(synthesizers, keys, shared))
                .map_err(TrainError::io("start the synthesis thread"))?
        };
        let mut frontier = FrontierSynthesizer {
            config,
            families,
            shared,
            cancel,
            worker: Some(worker),
            active: HashMap::new(),
            calls: 0,
            wait_s: 0.0,
            chosen: Vec::new(),
            retired: 0,
            retired_total: 0,
            signal_seen: false,
        };
        frontier.set_targets();
        Ok(frontier)
    }

    /// The families and what is believed about them.
    pub fn families(&self) -> &[FamilyState] {
        &self.families
    }

    /// Seconds proposals have waited for synthesis since the last [`TaskSynthesizer::metrics`].
    pub fn wait_s(&self) -> f64 {
        self.wait_s
    }

    /// Whether proposals are still in the cold start (see [`FrontierConfig::cold_start`]).
    pub fn in_cold_start(&self) -> bool {
        self.config.cold_start && !self.signal_seen
    }

    /// In the cold start, the easiest rung with a family that can still give a task (buffered,
    /// active, or not yet dry in some repository); `None` outside the cold start.
    fn cold_rung(&self, shared: &Shared) -> Option<Rung> {
        if !self.in_cold_start() {
            return None;
        }
        (0..self.families.len())
            .filter(|&f| {
                !self.families[f].barren
                    && (shared.dry[f].iter().any(|d| !*d)
                        || !shared.buffers[f].is_empty()
                        || self.active.values().any(|a| a.family == f))
            })
            .map(|f| rung(&self.families[f].key))
            .min()
    }

    /// The Beta posterior of family `f`: its own (decayed) evidence on top of a prior of
    /// strength `prior_strength` centred on the success rate of its relatives (same operator, or
    /// same bug count and hint level; Laplace-smoothed), so a family no one has tried yet is
    /// expected to do about as well as its neighbours.
    pub fn posterior(&self, f: usize) -> (f64, f64) {
        let me = &self.families[f];
        let (mut successes, mut trials) = (0.0, 0.0);
        for (i, other) in self.families.iter().enumerate() {
            let related = other.key.operator == me.key.operator
                || (other.key.bugs == me.key.bugs && other.key.hint == me.key.hint);
            if i != f && related {
                successes += other.alpha - 1.0;
                trials += other.alpha + other.beta - 2.0;
            }
        }
        let pooled = (1.0 + successes) / (2.0 + trials);
        let k = self.config.prior_strength;
        (
            k * pooled + (me.alpha - 1.0),
            k * (1.0 - pooled) + (me.beta - 1.0),
        )
    }

    fn sample_p(&self, f: usize, rng: &mut StdRng) -> f64 {
        let (a, b) = self.posterior(f);
        Beta::new(a, b)
            .map(|d| d.sample(rng))
            .unwrap_or(a / (a + b))
    }

    fn score(&self, p: f64) -> f64 {
        learnability(p, self.config.target_success)
    }

    /// Buffer targets and worker priorities from the posterior means: the most promising
    /// families keep `buffer` tasks ready, the others none.
    fn set_targets(&mut self) {
        let mut order: Vec<usize> = (0..self.families.len())
            .filter(|&f| !self.families[f].barren)
            .collect();
        // Ranked by a Thompson draw, like the choice itself: uncertain families get their
        // turn at being buffered, and ties do not favour any order.
        let mut rng = StdRng::seed_from_u64(
            self.config.seed ^ 0x5EED_B0FF ^ self.calls.wrapping_mul(0xD1B5_4A32_D192_ED03),
        );
        let scores: Vec<f64> = (0..self.families.len())
            .map(|f| self.score(self.sample_p(f, &mut rng)))
            .collect();
        let mut shared = lock(&self.shared);
        let cold = self.cold_rung(&shared);
        if let Some(cold) = cold {
            // Cold start: only the easiest rung is buffered, its least tried families first.
            order.retain(|&f| rung(&self.families[f].key) == cold);
            order.sort_by(|a, b| {
                let tried = |f: usize| self.families[f].chosen;
                tried(*a)
                    .cmp(&tried(*b))
                    .then(scores[*b].total_cmp(&scores[*a]))
                    .then(a.cmp(b))
            });
            shared.targets.iter_mut().for_each(|t| *t = 0);
        } else {
            order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
        }
        for (rank, &f) in order.iter().enumerate() {
            // Only the most promising families are kept buffered: synthesis shares the cores
            // with rollouts, so it makes what the next proposals are likely to take.
            shared.targets[f] = if rank < self.config.buffered_families {
                self.config.buffer
            } else {
                0
            };
            // In the cold start the rung outranks every other family in the worker's order
            // (scores lie in 0..=1) and is evicted last; its families tie, so the worker fills
            // them in turn (largest deficit first) and a proposal finds several operators.
            shared.priority[f] = if cold.is_some() { 2.0 } else { scores[f] };
        }
        for f in 0..self.families.len() {
            if self.families[f].barren {
                shared.targets[f] = 0;
            }
        }
        self.shared.1.notify_all();
    }

    /// Families with a task to hand out now (active and unused in this call, or buffered).
    fn available(&self, shared: &Shared, used: &BTreeSet<String>) -> Vec<usize> {
        let mut has = vec![false; self.families.len()];
        for (id, a) in &self.active {
            if !used.contains(id) {
                has[a.family] = true;
            }
        }
        for (f, b) in shared.buffers.iter().enumerate() {
            if !b.is_empty() {
                has[f] = true;
            }
        }
        (0..self.families.len())
            .filter(|&f| has[f] && !self.families[f].barren)
            .collect()
    }

    fn pick_family(&mut self, available: &[usize], rng: &mut StdRng) -> usize {
        // Starvation guard: the family idle longest beyond `max_idle`.
        let starving = available
            .iter()
            .copied()
            .filter(|&f| {
                self.calls.saturating_sub(self.families[f].last_chosen) > self.config.max_idle
            })
            .max_by_key(|&f| {
                (
                    self.calls - self.families[f].last_chosen,
                    std::cmp::Reverse(f),
                )
            });
        if let Some(f) = starving {
            return f;
        }
        if rng.random::<f64>() < self.config.exploration {
            return available[rng.random_range(0..available.len())];
        }
        let mut best = available[0];
        let mut best_score = f64::NEG_INFINITY;
        for &f in available {
            let s = self.score(self.sample_p(f, rng));
            if s > best_score {
                best_score = s;
                best = f;
            }
        }
        best
    }

    /// The cold start's choice: the family given the fewest slots so far (breadth over the
    /// rung's operators), ties broken at random.
    fn least_tried(&self, available: &[usize], rng: &mut StdRng) -> usize {
        let fewest = available
            .iter()
            .map(|&f| self.families[f].chosen)
            .min()
            .unwrap_or(0);
        let tied: Vec<usize> = available
            .iter()
            .copied()
            .filter(|&f| self.families[f].chosen == fewest)
            .collect();
        tied[rng.random_range(0..tied.len())]
    }

    /// A task of family `f`: an active one not used in this call (least recently used first),
    /// else a fresh one from the buffer.
    fn take_task(
        &mut self,
        f: usize,
        shared: &mut Shared,
        used: &BTreeSet<String>,
    ) -> Option<Task> {
        let reuse = self
            .active
            .iter()
            .filter(|(id, a)| a.family == f && !used.contains(*id))
            .min_by_key(|(id, a)| (a.last_used, (*id).clone()))
            .map(|(id, _)| id.clone());
        if let Some(id) = reuse
            && let Some(a) = self.active.get_mut(&id)
        {
            a.uses += 1;
            a.last_used = self.calls;
            return Some(a.task.clone());
        }
        let task = shared.buffers[f].pop_front()?;
        self.active.insert(
            task.id.clone(),
            ActiveTask {
                family: f,
                task: task.clone(),
                uses: 1,
                last_used: self.calls,
            },
        );
        Some(task)
    }
}

impl TaskSynthesizer for FrontierSynthesizer {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        self.calls += 1;
        let mut rng = StdRng::seed_from_u64(
            self.config.seed ^ self.calls.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let mut out: Vec<Task> = Vec::new();
        let mut used: BTreeSet<String> = BTreeSet::new();
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(self.config.max_wait_s);
        let shared_pair = self.shared.clone();
        let mut shared = lock(&shared_pair);
        while out.len() < n {
            let mut available = self.available(&shared, &used);
            let cold = self.cold_rung(&shared);
            if let Some(cold) = cold {
                // The cold start waits for its rung rather than hand out a harder task, until
                // the deadline.
                let on_rung: Vec<usize> = available
                    .iter()
                    .copied()
                    .filter(|&f| rung(&self.families[f].key) == cold)
                    .collect();
                if !on_rung.is_empty() || Instant::now() < deadline {
                    available = on_rung;
                }
            }
            if available.is_empty() {
                let exhausted = (0..self.families.len()).all(|f| {
                    self.families[f].barren
                        || (shared.dry[f].iter().all(|d| *d) && shared.buffers[f].is_empty())
                });
                if exhausted || shared.stop || Instant::now() >= deadline {
                    break;
                }
                // Ask for more (of the rung, in the cold start) and wait for the worker.
                for f in 0..self.families.len() {
                    let wanted = cold.is_none_or(|c| rung(&self.families[f].key) == c);
                    if wanted && !self.families[f].barren && shared.targets[f] == 0 {
                        shared.targets[f] = 1;
                    }
                }
                shared_pair.1.notify_all();
                let timeout = deadline
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(500));
                shared = shared_pair
                    .1
                    .wait_timeout(shared, timeout)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
                continue;
            }
            let f = if cold.is_some() {
                self.least_tried(&available, &mut rng)
            } else {
                self.pick_family(&available, &mut rng)
            };
            if let Some(task) = self.take_task(f, &mut shared, &used) {
                self.families[f].chosen += 1;
                self.families[f].last_chosen = self.calls;
                self.chosen.push(f);
                used.insert(task.id.clone());
                out.push(task);
            }
        }
        // Families synthesis found dry everywhere, with nothing left to hand out, are barren.
        for f in 0..self.families.len() {
            if shared.dry[f].iter().all(|d| *d)
                && shared.buffers[f].is_empty()
                && !self.active.values().any(|a| a.family == f)
            {
                self.families[f].barren = true;
            }
        }
        let errors = std::mem::take(&mut shared.errors);
        drop(shared);
        self.wait_s += started.elapsed().as_secs_f64();
        self.set_targets();
        if out.is_empty() {
            let detail = if errors.is_empty() {
                "every family ran out of tasks".to_string()
            } else {
                errors.join("; ")
            };
            return Err(TrainError::NoTasks(detail).into());
        }
        Ok(out)
    }

    fn feedback(&mut self, outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        let decay = self.config.decay;
        for fam in &mut self.families {
            fam.alpha = 1.0 + decay * (fam.alpha - 1.0);
            fam.beta = 1.0 + decay * (fam.beta - 1.0);
        }
        let mut groups: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for o in outcomes {
            let g = groups.entry(o.task_id.as_str()).or_default();
            g.0 += usize::from(o.resolved);
            g.1 += 1;
        }
        for (id, (solved, n)) in groups {
            let Some(active) = self.active.get(id) else {
                continue;
            };
            if solved > 0 && !self.signal_seen {
                // The cold start ends: idleness counts from here, so the starvation guard does
                // not spend the next proposals on every family the cold start passed over.
                self.signal_seen = true;
                let now = self.calls;
                self.families.iter_mut().for_each(|f| f.last_chosen = now);
            }
            let fam = &mut self.families[active.family];
            fam.alpha += solved as f64;
            fam.beta += (n - solved) as f64;
            fam.groups += 1;
            // No signal left in this task for the current policy, or used enough: retire.
            if solved == 0 || solved == n || active.uses >= self.config.max_uses {
                self.active.remove(id);
                self.retired += 1;
                self.retired_total += 1;
            }
        }
        self.set_targets();
        Ok(())
    }

    fn metrics(&mut self) -> serde_json::Map<String, serde_json::Value> {
        let shared = lock(&self.shared);
        let mut m = serde_json::Map::new();
        m.insert("synthesis_wait_s".into(), json!(self.wait_s));
        m.insert("families".into(), json!(self.families.len()));
        m.insert(
            "families_barren".into(),
            json!(self.families.iter().filter(|f| f.barren).count()),
        );
        m.insert(
            "buffered".into(),
            json!(shared.buffers.iter().map(VecDeque::len).sum::<usize>()),
        );
        m.insert("active_tasks".into(), json!(self.active.len()));
        m.insert(
            "generated_total".into(),
            json!(shared.made.iter().sum::<u64>()),
        );
        m.insert("evicted_total".into(), json!(shared.evicted));
        m.insert("synthesis_s_total".into(), json!(shared.synth_s));
        m.insert("retired".into(), json!(self.retired));
        m.insert("retired_total".into(), json!(self.retired_total));
        m.insert("cold_start".into(), json!(self.in_cold_start()));
        let chosen_scores: Vec<f64> = self
            .chosen
            .iter()
            .map(|&f| {
                let (a, b) = self.posterior(f);
                self.score(a / (a + b))
            })
            .collect();
        m.insert(
            "mean_chosen_learnability".into(),
            json!(if chosen_scores.is_empty() {
                0.0
            } else {
                chosen_scores.iter().sum::<f64>() / chosen_scores.len() as f64
            }),
        );
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for &f in &self.chosen {
            *counts.entry(self.families[f].key.label()).or_default() += 1;
        }
        m.insert("chosen_families".into(), json!(counts));
        let mut ranked: Vec<&FamilyState> = self.families.iter().filter(|f| f.groups > 0).collect();
        ranked.sort_by(|a, b| {
            learnability(b.mean(), self.config.target_success)
                .total_cmp(&learnability(a.mean(), self.config.target_success))
        });
        m.insert(
            "top_families".into(),
            json!(
                ranked
                    .iter()
                    .take(5)
                    .map(|f| json!({"family": f.key.label(), "p": f.mean(), "groups": f.groups}))
                    .collect::<Vec<_>>()
            ),
        );
        drop(shared);
        self.wait_s = 0.0;
        self.chosen.clear();
        self.retired = 0;
        m
    }

    fn state(&self) -> frognano_core::Result<serde_json::Value> {
        Ok(json!({
            "kind": "frontier",
            "calls": self.calls,
            "signal_seen": self.signal_seen,
            "families": self.families,
        }))
    }

    fn load_state(&mut self, state: &serde_json::Value) -> frognano_core::Result<()> {
        let saved: Vec<FamilyState> = serde_json::from_value(state["families"].clone())
            .map_err(|e| frognano_core::Error::invalid("frontier state", e.to_string()))?;
        let by_key: HashMap<&FamilyKey, &FamilyState> = saved.iter().map(|f| (&f.key, f)).collect();
        for fam in &mut self.families {
            if let Some(s) = by_key.get(&fam.key) {
                fam.alpha = s.alpha;
                fam.beta = s.beta;
                fam.groups = s.groups;
                fam.chosen = s.chosen;
                fam.last_chosen = s.last_chosen;
                fam.barren = fam.barren || s.barren;
            }
        }
        self.calls = state["calls"].as_u64().unwrap_or(0);
        // States saved before the cold start existed: a family with successes is signal.
        self.signal_seen = state["signal_seen"]
            .as_bool()
            .unwrap_or_else(|| saved.iter().any(|f| f.alpha > 1.0));
        self.set_targets();
        Ok(())
    }
}

impl Drop for FrontierSynthesizer {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        lock(&self.shared).stop = true;
        self.shared.1.notify_all();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_learnability_rejects_what_the_score_cannot_mean() {
        assert_eq!(checked_learnability(0.5, 0.5).ok(), Some(1.0));
        for (p, target) in [(0.5, 0.0), (0.5, 1.0), (0.5, f64::NAN), (f64::NAN, 0.5)] {
            let err = checked_learnability(p, target).expect_err("out of range");
            assert_eq!(err.kind(), frognano_core::ErrorKind::InvalidArgument);
        }
    }

    #[test]
    fn learnability_peaks_at_the_target() {
        assert!((learnability(0.5, 0.5) - 1.0).abs() < 1e-12);
        assert!((learnability(0.25, 0.5) - 0.75).abs() < 1e-12);
        assert_eq!(learnability(0.0, 0.5), 0.0);
        assert_eq!(learnability(1.0, 0.5), 0.0);
        let t = 0.3;
        let best = (1..100)
            .map(|i| i as f64 / 100.0)
            .max_by(|a, b| learnability(*a, t).total_cmp(&learnability(*b, t)))
            .unwrap_or(0.0);
        assert!((best - t).abs() < 0.011, "{best}");
    }

    #[test]
    fn configs_are_checked() {
        assert!(FrontierConfig::default().validate().is_ok());
        for bad in [
            FrontierConfig {
                target_success: 1.0,
                ..FrontierConfig::default()
            },
            FrontierConfig {
                bug_counts: vec![],
                ..FrontierConfig::default()
            },
            FrontierConfig {
                decay: 0.0,
                ..FrontierConfig::default()
            },
            FrontierConfig {
                hint_levels: vec![frognano_core::Difficulty::MAX_HINT_LEVEL + 1],
                ..FrontierConfig::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
