//! [`RepairPolicy`]: a small policy that learns from reward through the tool protocol.
//!
//! Each episode it runs the tests, localises the bug from the failures (traceback locations,
//! the modules the problem statement names, the names in the failing tests), reads the file in
//! chunks with `view`, enumerates candidate repairs (the inverse of common bug patterns:
//! flipped comparisons, changed operators and constants, swapped operands, arguments and
//! statements, inverted branches, a dropped or added `not`), and chooses one with a softmax
//! over hand-made features and learned weights. It edits, re-runs the tests, keeps the edit when
//! the failures shrank without new ones, undoes it otherwise, and submits when the suite passes
//! or its attempts run out.
//!
//! The policy is stateless between calls: everything is rebuilt from the episode's history, so
//! one instance serves any number of concurrent episodes. Every choice records its candidates'
//! features (sparse) and the index chosen in [`PolicyOutput::decision`], so a learner can
//! recompute the choice's probability from the batch alone; [`RepairPolicy`] is its own
//! learner (policy gradient with Adam).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use frognano_core::{
    Action, LearnStats, Learner, Observation, PolicyContext, PolicyOutput, Result, TrainingBatch,
};
use frognano_env::{ToolRequest, parse_action};
use frognano_synth::mutate;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Operators from the synthesis catalogue whose inverse is themselves (or within their own
/// family), so applying them to buggy code can restore the original.
const SYNTH_REPAIRS: &[&str] = &[
    "op_change",
    "op_change_const",
    "op_swap",
    "flip_operators",
    "boundary_condition",
    "off_by_one_range",
    "off_by_one_slice",
    "swap_call_args",
    "ctrl_invert_if",
    "ctrl_shuffle",
    "wrong_return_value",
    "drop_not",
    "wrong_exception_type",
];

/// The repair this policy adds itself: insert a `not` (the inverse of `drop_not`).
const ADD_NOT: &str = "add_not";

/// Kinds of failure the features distinguish.
const ERROR_KINDS: &[&str] = &[
    "assertion",
    "type",
    "lookup",
    "value",
    "name",
    "other",
    "limit",
];

/// Groups of repair operators for the failure-kind interaction features.
const REPAIR_GROUPS: &[&str] = &["compare", "arith", "const", "order", "value"];

fn repair_group(operator: &str) -> usize {
    match operator {
        "flip_operators" | "boundary_condition" | "op_swap" => 0,
        "op_change" => 1,
        "op_change_const" | "off_by_one_range" | "off_by_one_slice" => 2,
        "swap_call_args" | "ctrl_invert_if" | "ctrl_shuffle" => 3,
        _ => 4,
    }
}

/// All repair operators, in feature order.
pub fn repair_operators() -> Vec<&'static str> {
    SYNTH_REPAIRS.iter().copied().chain([ADD_NOT]).collect()
}

const LOCATION_FEATURES: &[&str] = &[
    "on_traceback_line",
    "near_traceback",
    "in_traceback_scope",
    "scope_named_in_failures",
    "line_identifiers_in_failures",
    "line_literal_in_failures",
    "return_line",
    "condition_line",
    "small_change",
];

/// The names of the features, in the order of [`RepairPolicy::weights`].
pub fn feature_names() -> &'static [String] {
    static NAMES: OnceLock<Vec<String>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names: Vec<String> = repair_operators()
            .iter()
            .map(|op| format!("op:{op}"))
            .collect();
        names.extend(LOCATION_FEATURES.iter().map(|f| f.to_string()));
        for kind in ERROR_KINDS {
            for group in REPAIR_GROUPS {
                names.push(format!("{kind}x{group}"));
            }
        }
        names
    })
}

fn feature_index(name: &str) -> usize {
    feature_names()
        .iter()
        .position(|n| n == name)
        .unwrap_or_default()
}

/// Settings of a [`RepairPolicy`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RepairConfig {
    /// Seed of the sampling generator.
    pub seed: u64,
    /// Edits tried per episode before submitting.
    pub max_attempts: usize,
    /// Lines per `view` when reading a file.
    pub view_chunk: usize,
    /// Files longer than this are not read (the policy skips them).
    pub max_file_lines: usize,
    /// Candidates scored per choice (the closest to the failure are kept).
    pub max_candidates: usize,
    /// Softmax temperature (1: the learned distribution; lower: greedier).
    pub temperature: f64,
    /// Always take the most probable candidate (evaluation).
    pub greedy: bool,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Weight of the entropy bonus in the update.
    pub entropy_bonus: f64,
    /// Importance ratios (current / rollout probability) are capped at this.
    pub ratio_cap: f64,
}

impl Default for RepairConfig {
    fn default() -> Self {
        RepairConfig {
            seed: 0,
            max_attempts: 8,
            view_chunk: 100,
            max_file_lines: 1200,
            max_candidates: 40,
            temperature: 1.0,
            greedy: false,
            learning_rate: 0.1,
            entropy_bonus: 0.0,
            ratio_cap: 2.0,
        }
    }
}

impl RepairConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(frognano_core::Error::invalid("repair policy config", m));
        if self.max_attempts == 0 {
            return bad("max_attempts must be positive");
        }
        if self.view_chunk < 10 {
            return bad("view_chunk must be at least 10 lines");
        }
        if self.max_candidates == 0 {
            return bad("max_candidates must be positive");
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return bad("temperature must be a positive number");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate >= 0.0) {
            return bad("learning_rate must be a non-negative number");
        }
        if !(self.entropy_bonus.is_finite() && self.entropy_bonus >= 0.0) {
            return bad("entropy_bonus must be a non-negative number");
        }
        if !(self.ratio_cap.is_finite() && self.ratio_cap >= 1.0) {
            return bad("ratio_cap must be at least 1");
        }
        Ok(())
    }
}

/// Adam moments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Adam {
    m: Vec<f64>,
    v: Vec<f64>,
    t: u64,
}

/// The learned repair chooser. See the module documentation.
#[derive(Debug, Clone)]
pub struct RepairPolicy {
    config: RepairConfig,
    weights: Vec<f64>,
    adam: Adam,
    rng: StdRng,
    updates: u64,
}

/// Sparse features of one candidate: `(feature index, value)`.
type Sparse = Vec<(usize, f64)>;

impl RepairPolicy {
    /// A policy with all weights zero (uniform choice among candidates).
    pub fn new(config: RepairConfig) -> Result<Self> {
        config.validate()?;
        let n = feature_names().len();
        Ok(RepairPolicy {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            weights: vec![0.0; n],
            adam: Adam {
                m: vec![0.0; n],
                v: vec![0.0; n],
                t: 0,
            },
            updates: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &RepairConfig {
        &self.config
    }

    /// Switches between sampling (training) and taking the most probable candidate.
    pub fn set_greedy(&mut self, greedy: bool) {
        self.config.greedy = greedy;
    }

    /// The weights, in the order of [`feature_names`].
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The weights by feature name.
    pub fn named_weights(&self) -> BTreeMap<String, f64> {
        feature_names()
            .iter()
            .cloned()
            .zip(self.weights.iter().copied())
            .collect()
    }

    /// Updates applied so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    fn choose(&mut self, context: &PolicyContext) -> PolicyOutput {
        let state = EpisodeState::replay(context);
        match state.next_move(&self.config) {
            Move::Tool(request) => PolicyOutput::action(Action::Tool(request.to_tool_call())),
            Move::Choose(candidates) => self.sample(candidates),
        }
    }

    fn sample(&mut self, candidates: Vec<Candidate>) -> PolicyOutput {
        let features: Vec<&Sparse> = candidates.iter().map(|c| &c.features).collect();
        let probs = softmax(&self.weights, &features, self.config.temperature);
        let chosen = if self.config.greedy {
            argmax(&probs)
        } else {
            let u: f64 = self.rng.random();
            let mut acc = 0.0;
            let mut pick = probs.len() - 1;
            for (i, p) in probs.iter().enumerate() {
                acc += p;
                if u < acc {
                    pick = i;
                    break;
                }
            }
            pick
        };
        let candidate = &candidates[chosen];
        let logprob = probs[chosen].max(f64::MIN_POSITIVE).ln();
        let request = ToolRequest::Edit {
            path: candidate.path.clone(),
            search: candidate.search.clone(),
            replace: candidate.replace.clone(),
        };
        PolicyOutput {
            logprobs: vec![logprob as f32],
            decision: Some(json!({
                "chosen": chosen,
                "operator": candidate.operator,
                "temperature": self.config.temperature,
                "features": candidates.iter().map(|c| &c.features).collect::<Vec<_>>(),
            })),
            ..PolicyOutput::action(Action::Tool(request.to_tool_call()))
        }
    }
}

fn softmax(weights: &[f64], features: &[&Sparse], temperature: f64) -> Vec<f64> {
    let logits: Vec<f64> = features
        .iter()
        .map(|f| {
            f.iter()
                .map(|&(i, v)| weights.get(i).copied().unwrap_or(0.0) * v)
                .sum::<f64>()
                / temperature
        })
        .collect();
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best
}

impl frognano_core::Policy for RepairPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        Ok(contexts.iter().map(|c| self.choose(c)).collect())
    }
}

/// A decision as recorded in a batch.
#[derive(Debug, Deserialize)]
struct RecordedDecision {
    chosen: usize,
    #[serde(default = "one")]
    temperature: f64,
    features: Vec<Sparse>,
}

fn one() -> f64 {
    1.0
}

impl Learner for RepairPolicy {
    /// One policy-gradient step: for every decision of every trajectory, the advantage times
    /// the gradient of the chosen candidate's log-probability (features of the choice minus
    /// their expectation under the softmax), with the importance ratio against the rollout's
    /// log-probability capped at `ratio_cap`; averaged over trajectories (a constant normaliser,
    /// as Dr. GRPO), then an Adam step.
    fn learn(&mut self, batch: &TrainingBatch) -> Result<LearnStats> {
        let n = self.weights.len();
        let mut grad = vec![0.0; n];
        let mut decisions = 0usize;
        let mut entropy_sum = 0.0;
        let mut skipped = 0usize;
        for trajectory in &batch.trajectories {
            for step in &trajectory.steps {
                let Some(value) = &step.decision else {
                    continue;
                };
                let Ok(decision) = serde_json::from_value::<RecordedDecision>(value.clone()) else {
                    skipped += 1;
                    continue;
                };
                if decision.chosen >= decision.features.len() {
                    skipped += 1;
                    continue;
                }
                let temperature = if decision.temperature > 0.0 {
                    decision.temperature
                } else {
                    1.0
                };
                let features: Vec<&Sparse> = decision.features.iter().collect();
                let probs = softmax(&self.weights, &features, temperature);
                let mut expected = vec![0.0; n];
                for (p, f) in probs.iter().zip(&features) {
                    for &(i, v) in f.iter() {
                        if i < n {
                            expected[i] += p * v;
                        }
                    }
                }
                let ratio = match step.logprobs.first() {
                    Some(&old) => {
                        ((probs[decision.chosen].max(f64::MIN_POSITIVE).ln() - old as f64).exp())
                            .min(self.config.ratio_cap)
                    }
                    None => 1.0,
                };
                let scale = trajectory.advantage * ratio / temperature;
                for &(i, v) in &decision.features[decision.chosen] {
                    if i < n {
                        grad[i] += scale * v;
                    }
                }
                for (g, e) in grad.iter_mut().zip(&expected) {
                    *g -= scale * e;
                }
                let entropy: f64 = -probs
                    .iter()
                    .filter(|p| **p > 0.0)
                    .map(|p| p * p.ln())
                    .sum::<f64>();
                entropy_sum += entropy;
                if self.config.entropy_bonus > 0.0 {
                    // d(entropy)/dw = -sum_j p_j (log p_j + H) (phi_j - E[phi]) / T
                    for (p, f) in probs.iter().zip(&features) {
                        if *p <= 0.0 {
                            continue;
                        }
                        let c = -self.config.entropy_bonus * p * (p.ln() + entropy) / temperature;
                        for &(i, v) in f.iter() {
                            if i < n {
                                grad[i] += c * v;
                            }
                        }
                        for (g, e) in grad.iter_mut().zip(&expected) {
                            *g -= c * e;
                        }
                    }
                }
                decisions += 1;
            }
        }
        let trajectories = batch.trajectories.len().max(1) as f64;
        for g in &mut grad {
            *g /= trajectories;
        }
        let grad_norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        if decisions > 0 && grad_norm > 0.0 {
            self.adam_step(&grad);
            self.updates += 1;
        }
        let mut stats = LearnStats::new();
        stats.insert("decisions".into(), json!(decisions));
        stats.insert("grad_norm".into(), json!(grad_norm));
        stats.insert(
            "mean_entropy".into(),
            json!(if decisions > 0 {
                entropy_sum / decisions as f64
            } else {
                0.0
            }),
        );
        if skipped > 0 {
            stats.insert("skipped_decisions".into(), json!(skipped));
        }
        Ok(stats)
    }

    fn state(&self) -> Result<serde_json::Value> {
        Ok(json!({
            "kind": "repair",
            "features": feature_names(),
            "weights": self.weights,
            "adam": self.adam,
            "updates": self.updates,
            "config": self.config,
        }))
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let bad = |m: String| frognano_core::Error::invalid("repair policy state", m);
        let names: Vec<String> = serde_json::from_value(state["features"].clone())
            .map_err(|e| bad(format!("features: {e}")))?;
        let weights: Vec<f64> = serde_json::from_value(state["weights"].clone())
            .map_err(|e| bad(format!("weights: {e}")))?;
        if names.len() != weights.len() {
            return Err(bad("features and weights differ in length".into()));
        }
        // Map by name, so a checkpoint survives features being added or reordered.
        let by_name: BTreeMap<&str, f64> = names
            .iter()
            .map(String::as_str)
            .zip(weights.iter().copied())
            .collect();
        let current = feature_names();
        self.weights = current
            .iter()
            .map(|n| by_name.get(n.as_str()).copied().unwrap_or(0.0))
            .collect();
        let n = current.len();
        self.adam = match serde_json::from_value::<Adam>(state["adam"].clone()) {
            Ok(adam) if adam.m.len() == n && adam.v.len() == n && names.as_slice() == current => {
                adam
            }
            _ => Adam {
                m: vec![0.0; n],
                v: vec![0.0; n],
                t: 0,
            },
        };
        self.updates = state["updates"].as_u64().unwrap_or(0);
        Ok(())
    }
}

impl RepairPolicy {
    /// Gradient ascent with Adam (the gradient is of the objective, to be maximised).
    fn adam_step(&mut self, grad: &[f64]) {
        const BETA1: f64 = 0.9;
        const BETA2: f64 = 0.999;
        const EPS: f64 = 1e-8;
        self.adam.t += 1;
        let t = self.adam.t as i32;
        let moments = self.adam.m.iter_mut().zip(self.adam.v.iter_mut());
        for ((w, g), (m, v)) in self.weights.iter_mut().zip(grad).zip(moments) {
            *m = BETA1 * *m + (1.0 - BETA1) * g;
            *v = BETA2 * *v + (1.0 - BETA2) * g * g;
            let m_hat = *m / (1.0 - BETA1.powi(t));
            let v_hat = *v / (1.0 - BETA2.powi(t));
            *w += self.config.learning_rate * m_hat / (v_hat.sqrt() + EPS);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the episode back from its history.

/// One test run as the agent saw it.
#[derive(Debug, Clone, Default)]
struct TestRun {
    failed: usize,
    /// The run ended abnormally (limit, crash, nothing collected).
    abnormal: bool,
    failing: BTreeSet<String>,
    /// Traceback locations outside test files: (path, line).
    locations: Vec<(String, usize)>,
    /// Text of the failure sections.
    failure_text: String,
}

impl TestRun {
    fn passed(&self) -> bool {
        self.failed == 0 && !self.abnormal
    }

    /// The run is strictly better than `base`: fewer failures, none new, no abnormal end.
    fn improves_on(&self, base: &TestRun) -> bool {
        !self.abnormal
            && self.failed < base.failed
            && (base.abnormal || self.failing.is_subset(&base.failing))
    }
}

fn regexes() -> &'static (Regex, Regex, Regex, Regex, Regex) {
    static RE: OnceLock<(Regex, Regex, Regex, Regex, Regex)> = OnceLock::new();
    RE.get_or_init(|| {
        let build = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("pattern {p}: {e}"));
        (
            build(r"^Ran (\d+) tests in [0-9.]+ s: (\d+) passed, (\d+) failed"),
            build(r"^(FAILED|ERROR|XPASSED) (.+)$"),
            build(r"^\s*([^\s:]+\.py):(\d+):"),
            build(r"^\s*(\d+)\t(.*)$"),
            build(r"^(\S+\.py) \((\d+) lines\)"),
        )
    })
}

fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    path.starts_with("tests/")
        || path.contains("/tests/")
        || path.starts_with("test/")
        || path.contains("/test/")
        || name.starts_with("test_")
        || name.ends_with("_test.py")
        || name == "conftest.py"
}

fn parse_test_run(text: &str) -> TestRun {
    let (header, failing_re, location_re, _, _) = regexes();
    let mut run = TestRun::default();
    let mut in_failure = false;
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            match header.captures(line) {
                Some(c) => {
                    run.failed = c[3].parse().unwrap_or(0);
                    let total: usize = c[1].parse().unwrap_or(0);
                    run.abnormal = total == 0;
                }
                None => run.abnormal = true,
            }
            continue;
        }
        if line.starts_with("The run hit")
            || line.starts_with("The interpreter crashed")
            || line.starts_with("No tests were collected")
        {
            run.abnormal = true;
        }
        if let Some(c) = failing_re.captures(line) {
            run.failing.insert(c[2].trim().to_string());
            in_failure = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("[")
            && let Some((_, ids)) = rest.split_once("more failing: ")
        {
            for id in ids.trim_end_matches(']').split(", ") {
                if id != "..." && !id.is_empty() {
                    run.failing.insert(id.to_string());
                }
            }
            in_failure = false;
            continue;
        }
        if in_failure {
            run.failure_text.push_str(line);
            run.failure_text.push('\n');
            if let Some(c) = location_re.captures(line) {
                let path = c[1].trim_start_matches("./").to_string();
                if !path.starts_with('/') && !is_test_file(&path) {
                    let line_no = c[2].parse().unwrap_or(0);
                    if line_no > 0 && !run.locations.contains(&(path.clone(), line_no)) {
                        run.locations.push((path, line_no));
                    }
                }
            }
        }
    }
    run
}

/// What the agent knows of one file.
#[derive(Debug, Clone, Default)]
struct FileView {
    lines: BTreeMap<usize, String>,
    /// Number of lines, once known (repository map or a view past the end).
    total: Option<usize>,
}

impl FileView {
    /// The first line not yet seen.
    fn first_missing(&self) -> Option<usize> {
        let total = self.total?;
        (1..=total).find(|l| !self.lines.contains_key(l))
    }

    fn text(&self) -> Option<String> {
        let total = self.total?;
        if self.first_missing().is_some() {
            return None;
        }
        let mut text = String::new();
        for l in 1..=total {
            text.push_str(self.lines.get(&l)?);
            text.push('\n');
        }
        Some(text)
    }
}

/// An edit the tool applied (kept to undo it in the agent's copy).
#[derive(Debug, Clone)]
struct Applied {
    path: String,
    before: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Pending {
    Nothing,
    /// An edit was applied: run the tests that failed before it.
    TestFailing,
    /// Fewer of those fail: run the whole suite.
    TestAll,
    /// The tests after an edit did not improve: undo it.
    Undo,
}

/// Failing tests re-run by id after an edit (more: the whole suite at once).
const SUBSET_LIMIT: usize = 25;

#[derive(Debug, Default)]
struct EpisodeState {
    statement: String,
    repo_files: BTreeMap<String, usize>,
    views: BTreeMap<String, FileView>,
    /// Current text of each fully read file (views plus the agent's own edits).
    texts: BTreeMap<String, String>,
    applied: Vec<Applied>,
    /// Edits tried (path, search, replace), kept or not.
    tried: BTreeSet<(String, String, String)>,
    attempts: usize,
    baseline: Option<TestRun>,
    /// Failures of the first run: the statement of what is broken.
    first_failures: Option<TestRun>,
    runs: usize,
    pending: Option<Pending>,
    submitted: bool,
}

enum Move {
    Tool(ToolRequest),
    Choose(Vec<Candidate>),
}

impl EpisodeState {
    fn replay(context: &PolicyContext) -> Self {
        let (_, _, _, _, map_re) = regexes();
        let mut state = EpisodeState {
            statement: context.initial.text.clone(),
            ..EpisodeState::default()
        };
        for line in context.initial.text.lines() {
            if let Some(c) = map_re.captures(line) {
                state
                    .repo_files
                    .insert(c[1].to_string(), c[2].parse().unwrap_or(0));
            }
        }
        for turn in &context.history {
            state.apply_turn(&turn.action, &turn.observation);
        }
        state
    }

    fn apply_turn(&mut self, action: &Action, observation: &Observation) {
        let Ok(request) = parse_action(action) else {
            return;
        };
        match request {
            ToolRequest::View { path, start, end } if !observation.is_error => {
                self.read_view(&path, start, end, &observation.text)
            }
            ToolRequest::View { path, .. } => {
                // "PATH has N lines; line X is past the end."
                if let Some(n) = observation
                    .text
                    .split_once(" has ")
                    .and_then(|(_, rest)| rest.split_once(" lines"))
                    .and_then(|(n, _)| n.trim().parse::<usize>().ok())
                {
                    let view = self.views.entry(path.clone()).or_default();
                    view.total = Some(n);
                    self.complete(&path);
                }
            }
            ToolRequest::Edit {
                path,
                search,
                replace,
            } => {
                self.attempts += 1;
                self.tried
                    .insert((path.clone(), search.clone(), replace.clone()));
                if !observation.is_error
                    && let Some(text) = self.texts.get_mut(&path)
                {
                    let before = text.clone();
                    *text = text.replacen(&search, &replace, 1);
                    self.applied.push(Applied { path, before });
                    self.pending = Some(Pending::TestFailing);
                } else {
                    self.pending = Some(Pending::Nothing);
                }
            }
            ToolRequest::RunTests { tests } => {
                let run = parse_test_run(&observation.text);
                self.runs += 1;
                if self.first_failures.is_none() {
                    self.first_failures = Some(run.clone());
                }
                match (self.pending, &self.baseline) {
                    (Some(Pending::TestFailing), Some(base)) if !tests.is_empty() => {
                        // Only the previously failing tests ran: go on if fewer fail.
                        self.pending = Some(if !run.abnormal && run.failed < tests.len() {
                            Pending::TestAll
                        } else {
                            Pending::Undo
                        });
                        let _ = base;
                    }
                    (Some(Pending::TestFailing | Pending::TestAll), Some(base)) => {
                        if run.improves_on(base) {
                            self.baseline = Some(run);
                            self.pending = Some(Pending::Nothing);
                        } else {
                            self.pending = Some(Pending::Undo);
                        }
                    }
                    _ => {
                        self.baseline = Some(run);
                        self.pending = Some(Pending::Nothing);
                    }
                }
            }
            ToolRequest::Undo => {
                // A failed undo (nothing to undo) must not be retried forever.
                if let Some(applied) = self.applied.pop()
                    && !observation.is_error
                {
                    self.texts.insert(applied.path, applied.before);
                }
                self.pending = Some(Pending::Nothing);
            }
            ToolRequest::Submit => self.submitted = true,
            _ => {}
        }
    }

    fn read_view(&mut self, path: &str, start: Option<usize>, end: Option<usize>, text: &str) {
        let (_, _, _, numbered, _) = regexes();
        let view = self.views.entry(path.to_string()).or_default();
        if view.total.is_none() {
            view.total = self.repo_files.get(path).copied();
        }
        let mut last_seen = 0;
        for line in text.lines() {
            if let Some(c) = numbered.captures(line)
                && let Ok(n) = c[1].parse::<usize>()
            {
                view.lines.insert(n, c[2].to_string());
                last_seen = last_seen.max(n);
            }
        }
        // A ranged view that stopped short of its end reached the end of the file.
        if let (Some(s), Some(e)) = (start, end)
            && last_seen >= s
            && last_seen < e
            && !text.contains("characters omitted")
            && !text.contains("truncated")
            && view.total.is_none()
        {
            view.total = Some(last_seen);
        }
        self.complete(path);
    }

    fn complete(&mut self, path: &str) {
        if self.texts.contains_key(path) {
            return;
        }
        if let Some(text) = self.views.get(path).and_then(FileView::text) {
            self.texts.insert(path.to_string(), text);
        }
    }

    /// Files worth repairing, most likely first: traceback locations of the current failures
    /// (innermost last in pytest's output, so reversed), then modules the statement names.
    fn target_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        let push = |f: String, files: &mut Vec<String>| {
            if !files.contains(&f) {
                files.push(f);
            }
        };
        if let Some(base) = &self.baseline {
            for (path, _) in base.locations.iter().rev() {
                if self.repo_files.contains_key(path) {
                    push(path.clone(), &mut files);
                }
            }
        }
        for module in statement_modules(&self.statement) {
            let rel = module.replace('.', "/");
            for file in self.repo_files.keys() {
                if is_test_file(file) {
                    continue;
                }
                let hit = file == &format!("{rel}.py")
                    || file.ends_with(&format!("/{rel}.py"))
                    || file == &format!("{rel}/__init__.py")
                    || file.ends_with(&format!("/{rel}/__init__.py"));
                if hit {
                    push(file.clone(), &mut files);
                }
            }
        }
        if files.is_empty() {
            // Nothing named: the source files whose names the failing tests mention.
            let words = self
                .baseline
                .as_ref()
                .map(|b| identifiers(&b.failing.iter().cloned().collect::<Vec<_>>().join(" ")))
                .unwrap_or_default();
            for file in self.repo_files.keys() {
                let stem = file
                    .rsplit('/')
                    .next()
                    .unwrap_or(file)
                    .trim_end_matches(".py");
                if file.ends_with(".py")
                    && !is_test_file(file)
                    && words.iter().any(|w| w.contains(stem))
                {
                    push(file.clone(), &mut files);
                }
            }
        }
        files
    }

    fn next_move(&self, config: &RepairConfig) -> Move {
        let submit = Move::Tool(ToolRequest::Submit);
        if self.submitted {
            return submit;
        }
        let all = Move::Tool(ToolRequest::RunTests { tests: Vec::new() });
        match self.pending {
            None | Some(Pending::TestAll) => return all,
            Some(Pending::TestFailing) => {
                let failing = self
                    .baseline
                    .as_ref()
                    .filter(|b| !b.abnormal && b.failing.len() == b.failed)
                    .map(|b| b.failing.iter().cloned().collect::<Vec<_>>())
                    .unwrap_or_default();
                if failing.is_empty() || failing.len() > SUBSET_LIMIT {
                    return all;
                }
                return Move::Tool(ToolRequest::RunTests { tests: failing });
            }
            Some(Pending::Undo) => return Move::Tool(ToolRequest::Undo),
            Some(Pending::Nothing) => {}
        }
        let Some(base) = &self.baseline else {
            return Move::Tool(ToolRequest::RunTests { tests: Vec::new() });
        };
        if base.passed() || self.attempts >= config.max_attempts {
            return submit;
        }
        for path in self.target_files() {
            let total = self
                .views
                .get(&path)
                .and_then(|v| v.total)
                .or_else(|| self.repo_files.get(&path).copied())
                .unwrap_or(0);
            if total > config.max_file_lines {
                continue;
            }
            let Some(text) = self.texts.get(&path) else {
                let first = self
                    .views
                    .get(&path)
                    .and_then(|v| {
                        if v.total.is_some() {
                            v.first_missing()
                        } else {
                            v.lines.keys().last().map(|l| l + 1)
                        }
                    })
                    .unwrap_or(1);
                return Move::Tool(ToolRequest::View {
                    path: path.clone(),
                    start: Some(first),
                    end: Some(first + config.view_chunk - 1),
                });
            };
            let candidates = self.candidates(&path, text, base, config);
            if !candidates.is_empty() {
                return Move::Choose(candidates);
            }
        }
        submit
    }

    /// Untried repairs of `path`, with features, closest to the failure first.
    fn candidates(
        &self,
        path: &str,
        text: &str,
        base: &TestRun,
        config: &RepairConfig,
    ) -> Vec<Candidate> {
        let mutations = repair_mutations(text);
        let evidence = Evidence::of(path, base, self.first_failures.as_ref(), text);
        let lines: Vec<&str> = text.lines().collect();
        let mut seen_targets = BTreeSet::new();
        let mut out: Vec<(f64, Candidate)> = Vec::new();
        for m in mutations.iter() {
            let Ok(target) = mutate::apply(text, &m.edits) else {
                continue;
            };
            if target == text || !seen_targets.insert(target.clone()) {
                continue;
            }
            let Some((search, replace)) = single_edit(text, &target) else {
                continue;
            };
            if self
                .tried
                .contains(&(path.to_string(), search.clone(), replace.clone()))
            {
                continue;
            }
            let features = evidence.features(m, &lines);
            let closeness = evidence.closeness(m);
            out.push((
                closeness,
                Candidate {
                    path: path.to_string(),
                    operator: m.operator.clone(),
                    search,
                    replace,
                    features,
                },
            ));
        }
        // Focus: when some candidates lie in the functions the failures point at, only those.
        let focused: Vec<(f64, Candidate)> = {
            let in_focus = |c: &Candidate| {
                c.features.iter().any(|&(i, v)| {
                    v > 0.0
                        && (i == feature_index("in_traceback_scope")
                            || i == feature_index("scope_named_in_failures"))
                })
            };
            if out.iter().any(|(_, c)| in_focus(c)) {
                out.into_iter().filter(|(_, c)| in_focus(c)).collect()
            } else {
                out
            }
        };
        let mut focused = focused;
        // Stable order (by closeness, then text) so sampling is reproducible.
        focused.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then_with(|| a.1.search.cmp(&b.1.search))
                .then_with(|| a.1.replace.cmp(&b.1.replace))
        });
        focused.truncate(config.max_candidates);
        focused.into_iter().map(|(_, c)| c).collect()
    }
}

/// Every repair mutation of `text`, cached by content: the rollouts of a group (and the
/// decisions of an episode) read the same files.
fn repair_mutations(text: &str) -> Arc<Vec<mutate::Mutation>> {
    type Cache = Mutex<VecDeque<(u64, Arc<Vec<mutate::Mutation>>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    const ENTRIES: usize = 64;
    let key = {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut h);
        h.finish()
    };
    let cache = CACHE.get_or_init(|| Mutex::new(VecDeque::new()));
    if let Ok(entries) = cache.lock()
        && let Some((_, found)) = entries.iter().find(|(k, _)| *k == key)
    {
        return found.clone();
    }
    let mut mutations = mutate::find_mutations(text, SYNTH_REPAIRS).unwrap_or_default();
    mutations.extend(add_not_mutations(text));
    let mutations = Arc::new(mutations);
    if let Ok(mut entries) = cache.lock() {
        if entries.len() >= ENTRIES {
            entries.pop_front();
        }
        entries.push_back((key, mutations.clone()));
    }
    mutations
}

/// Dotted module names in backticks in the problem statement (`pkg.mod`).
fn statement_modules(statement: &str) -> Vec<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"`([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`")
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let mut out = Vec::new();
    for c in re.captures_iter(statement) {
        let m = c[1].to_string();
        if !out.contains(&m) {
            out.push(m);
        }
    }
    out
}

fn identifiers(text: &str) -> BTreeSet<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re =
        RE.get_or_init(|| Regex::new(r"[A-Za-z_][A-Za-z0-9_]*").unwrap_or_else(|e| panic!("{e}")));
    re.find_iter(text)
        .map(|m| m.as_str().to_string())
        .filter(|w| w.len() > 1)
        .collect()
}

fn literals(text: &str) -> BTreeSet<String> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"\b\d+\b").unwrap_or_else(|e| panic!("{e}")));
    re.find_iter(text).map(|m| m.as_str().to_string()).collect()
}

/// A repair the policy may try.
#[derive(Debug, Clone)]
struct Candidate {
    path: String,
    operator: String,
    search: String,
    replace: String,
    features: Sparse,
}

/// What the failures say about one file.
struct Evidence {
    /// Traceback lines in this file.
    lines: Vec<usize>,
    /// Scopes (dotted) enclosing those lines.
    scopes: BTreeSet<String>,
    /// Identifiers in the failure text and failing test ids.
    names: BTreeSet<String>,
    literals: BTreeSet<String>,
    /// Share of each failure kind.
    kinds: [f64; 7],
}

impl Evidence {
    fn of(path: &str, base: &TestRun, first: Option<&TestRun>, text: &str) -> Self {
        let lines: Vec<usize> = base
            .locations
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, l)| *l)
            .collect();
        let scopes = lines.iter().filter_map(|&l| scope_at(text, l)).collect();
        let mut failure_text = base.failure_text.clone();
        let mut ids: Vec<String> = base.failing.iter().cloned().collect();
        if let Some(first) = first {
            ids.extend(first.failing.iter().cloned());
        }
        failure_text.push_str(&ids.join(" "));
        let mut names = identifiers(&failure_text);
        // Test names like `test_wrap_long_words` also name `wrap`.
        for id in &ids {
            let name = id.rsplit("::").next().unwrap_or(id);
            let name = name.split('[').next().unwrap_or(name);
            for part in name.trim_start_matches("test_").split('_') {
                if part.len() > 2 {
                    names.insert(part.to_string());
                }
            }
        }
        let mut kinds = [0.0; 7];
        let mut total = 0.0;
        if base.abnormal {
            kinds[6] = 1.0;
            total = 1.0;
        }
        for line in base.failure_text.lines() {
            let t = line.trim_start();
            let kind = if let Some(rest) = t.strip_prefix("E ") {
                let rest = rest.trim_start();
                let word = rest.split([':', ' ', '(']).next().unwrap_or("");
                Some(match word {
                    "AssertionError" | "assert" => 0,
                    "TypeError" => 1,
                    "IndexError" | "KeyError" | "StopIteration" => 2,
                    "ValueError" | "ZeroDivisionError" | "OverflowError" => 3,
                    "AttributeError" | "NameError" | "UnboundLocalError" => 4,
                    w if w.ends_with("Error") || w.ends_with("Exception") => 5,
                    _ => continue,
                })
            } else {
                None
            };
            if let Some(k) = kind {
                kinds[k] += 1.0;
                total += 1.0;
            }
        }
        if total > 0.0 {
            for k in &mut kinds {
                *k /= total;
            }
        } else {
            kinds[5] = 1.0;
        }
        Evidence {
            lines,
            scopes,
            names,
            literals: literals(&base.failure_text),
            kinds,
        }
    }

    fn distance(&self, m: &mutate::Mutation) -> Option<usize> {
        self.lines
            .iter()
            .map(|&l| {
                let (a, b) = (m.start_line as usize, m.end_line as usize);
                if l < a { a - l } else { l.saturating_sub(b) }
            })
            .min()
    }

    fn scope_named(&self, scope: &str) -> bool {
        scope
            .rsplit('.')
            .next()
            .is_some_and(|last| !last.is_empty() && self.names.contains(last))
    }

    fn in_traceback_scope(&self, scope: &str) -> bool {
        !scope.is_empty() && self.scopes.contains(scope)
    }

    /// How strongly the evidence points at a mutation's site (for truncation and order only).
    fn closeness(&self, m: &mutate::Mutation) -> f64 {
        let mut c = 0.0;
        if let Some(d) = self.distance(m) {
            c += (-(d as f64) / 5.0).exp() * 2.0;
        }
        if self.in_traceback_scope(&m.scope) {
            c += 1.0;
        }
        if self.scope_named(&m.scope) {
            c += 1.0;
        }
        c
    }

    fn features(&self, m: &mutate::Mutation, lines: &[&str]) -> Sparse {
        let mut f: Sparse = Vec::new();
        let operator = m.operator.as_str();
        if let Some(i) = repair_operators().iter().position(|o| *o == operator) {
            f.push((i, 1.0));
        }
        let mut put = |name: &str, v: f64| {
            if v != 0.0 {
                f.push((feature_index(name), v));
            }
        };
        let distance = self.distance(m);
        put(
            "on_traceback_line",
            if distance == Some(0) { 1.0 } else { 0.0 },
        );
        put(
            "near_traceback",
            distance.map_or(0.0, |d| (-(d as f64) / 3.0).exp()),
        );
        put(
            "in_traceback_scope",
            if self.in_traceback_scope(&m.scope) {
                1.0
            } else {
                0.0
            },
        );
        put(
            "scope_named_in_failures",
            if self.scope_named(&m.scope) { 1.0 } else { 0.0 },
        );
        let first = (m.start_line as usize).saturating_sub(1);
        let site: String = lines
            .get(first..(m.end_line as usize).min(lines.len()).max(first))
            .map(|l| l.join("\n"))
            .unwrap_or_default();
        let site_names = identifiers(&site);
        if !site_names.is_empty() {
            let shared = site_names.intersection(&self.names).count();
            put(
                "line_identifiers_in_failures",
                shared as f64 / site_names.len() as f64,
            );
        }
        put(
            "line_literal_in_failures",
            if literals(&site)
                .intersection(&self.literals)
                .next()
                .is_some()
            {
                1.0
            } else {
                0.0
            },
        );
        let head = site.trim_start();
        put(
            "return_line",
            if head.starts_with("return") { 1.0 } else { 0.0 },
        );
        put(
            "condition_line",
            if head.starts_with("if ") || head.starts_with("elif ") || head.starts_with("while ") {
                1.0
            } else {
                0.0
            },
        );
        let changed: usize = m
            .edits
            .iter()
            .map(|e| (e.end - e.start).max(e.replacement.len()))
            .sum();
        put("small_change", 1.0 / (1.0 + changed as f64 / 4.0));
        let group = repair_group(operator);
        let offset = feature_index(&format!("{}x{}", ERROR_KINDS[0], REPAIR_GROUPS[0]));
        for (k, share) in self.kinds.iter().enumerate() {
            if *share > 0.0 {
                f.push((offset + k * REPAIR_GROUPS.len() + group, *share));
            }
        }
        f
    }
}

/// The dotted scope (`Class.method`) of the innermost def/class whose body holds line `line`,
/// by indentation.
fn scope_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let target = lines.get(line.checked_sub(1)?)?;
    let mut indent = target.len() - target.trim_start().len();
    let mut names = Vec::new();
    for l in lines[..line - 1].iter().rev() {
        let trimmed = l.trim_start();
        if trimmed.is_empty() {
            continue;
        }
        let depth = l.len() - trimmed.len();
        if depth < indent {
            let rest = trimmed
                .strip_prefix("def ")
                .or_else(|| trimmed.strip_prefix("async def "))
                .or_else(|| trimmed.strip_prefix("class "));
            if let Some(rest) = rest {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
            indent = depth;
            if depth == 0 {
                break;
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    names.reverse();
    Some(names.join("."))
}

/// Candidates that insert a `not` before the condition of an `if`/`elif`/`while`, a returned
/// value, or an operand of `and`/`or` (the inverse of a dropped `not`).
fn add_not_mutations(text: &str) -> Vec<mutate::Mutation> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\b(if|elif|while|return|and|or)\s+([A-Za-z_(])")
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let mut out = Vec::new();
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let code = line.split('#').next().unwrap_or(line);
        for c in re.captures_iter(code) {
            let Some(operand) = c.get(2) else { continue };
            if code[operand.start()..].starts_with("not ") {
                continue;
            }
            let at = offset + operand.start();
            let edit = mutate::Edit {
                start: at,
                end: at,
                replacement: "not ".into(),
            };
            let Ok(candidate) = mutate::apply(text, std::slice::from_ref(&edit)) else {
                continue;
            };
            if !mutate::parses(&candidate) {
                continue;
            }
            out.push(mutate::Mutation {
                operator: ADD_NOT.into(),
                edits: vec![edit],
                start_line: i as u32 + 1,
                end_line: i as u32 + 1,
                scope: scope_at(text, i + 1).unwrap_or_default(),
                in_function_body: true,
                description: "insert `not`".into(),
            });
        }
        offset += line.len();
    }
    out
}

/// One SEARCH/REPLACE edit turning `current` into `target`: the differing lines, grown with
/// context until the snippet occurs once in `current`.
fn single_edit(current: &str, target: &str) -> Option<(String, String)> {
    if current == target {
        return None;
    }
    let old: Vec<&str> = current.split_inclusive('\n').collect();
    let new: Vec<&str> = target.split_inclusive('\n').collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let max_suffix = old.len().min(new.len()) - prefix;
    let suffix = old
        .iter()
        .rev()
        .zip(new.iter().rev())
        .take(max_suffix)
        .take_while(|(a, b)| a == b)
        .count();
    let (mut lo, mut hi) = (prefix, old.len() - suffix);
    let new_mid = new[prefix..new.len() - suffix].concat();
    let unique = |lo: usize, hi: usize| {
        let search = old[lo..hi].concat();
        !search.trim().is_empty() && current.matches(search.as_str()).count() == 1
    };
    // Grow one line below, then one above, until the snippet occurs once.
    while !unique(lo, hi) {
        if hi == old.len() && lo == 0 {
            return None;
        }
        if hi < old.len() {
            hi += 1;
        }
        if !unique(lo, hi) && lo > 0 {
            lo -= 1;
        }
    }
    let search = old[lo..hi].concat();
    let replace = format!(
        "{}{}{}",
        old[lo..prefix].concat(),
        new_mid,
        old[old.len() - suffix..hi].concat()
    );
    Some((search, replace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::{Policy, StepSample, Trajectory, Turn};

    const SOURCE: &str = "def clamp(x, lo, hi):\n    if x > hi:\n        return hi\n    if x < lo:\n        return lo\n    return x\n";

    #[test]
    fn single_edit_is_unique_and_reproduces_the_target() {
        let target = SOURCE.replace("x > hi", "x >= hi");
        let (search, replace) = single_edit(SOURCE, &target).expect("edit");
        assert_eq!(SOURCE.matches(&search).count(), 1);
        assert_eq!(SOURCE.replacen(&search, &replace, 1), target);
        // A repeated line needs context to be unique.
        let repeated = "a = 1\nb = 2\na = 1\nc = 3\n";
        let changed = "a = 1\nb = 2\na = 2\nc = 3\n";
        let (search, replace) = single_edit(repeated, changed).expect("edit");
        assert_eq!(repeated.matches(&search).count(), 1);
        assert_eq!(repeated.replacen(&search, &replace, 1), changed);
        assert!(single_edit(repeated, repeated).is_none());
    }

    #[test]
    fn test_runs_parse_into_failures_and_locations() {
        let text = "Ran 5 tests in 0.20 s: 3 passed, 2 failed.\n\nFAILED tests/test_m.py::test_a\n    def test_a():\n    >       assert clamp(5, 0, 3) == 3\n    E       assert 4 == 3\n\n    tests/test_m.py:4: AssertionError\n\nERROR tests/test_m.py::test_b[x y]\n    pkg/m.py:12: KeyError";
        let run = parse_test_run(text);
        assert_eq!(run.failed, 2);
        assert!(!run.abnormal);
        assert!(run.failing.contains("tests/test_m.py::test_a"));
        assert!(run.failing.contains("tests/test_m.py::test_b[x y]"));
        assert_eq!(run.locations, vec![("pkg/m.py".to_string(), 12)]);
        let limit = parse_test_run(
            "Ran 0 tests in 3.00 s: 0 passed, 0 failed.\nThe run hit the time limit (3 s)",
        );
        assert!(limit.abnormal && !limit.passed());
        let better = TestRun {
            failed: 1,
            failing: ["tests/test_m.py::test_a".to_string()].into(),
            ..TestRun::default()
        };
        assert!(better.improves_on(&run));
        assert!(!run.improves_on(&better));
    }

    #[test]
    fn scopes_follow_indentation() {
        let text =
            "class A:\n    def f(self):\n        x = 1\n\n        return x\n\ndef g():\n    pass\n";
        assert_eq!(scope_at(text, 5).as_deref(), Some("A.f"));
        assert_eq!(scope_at(text, 8).as_deref(), Some("g"));
        assert_eq!(scope_at(text, 1), None);
    }

    fn tool(name: &str, arguments: serde_json::Value) -> Action {
        Action::Tool(frognano_core::ToolCall {
            name: name.into(),
            arguments,
        })
    }

    fn turn(action: Action, text: &str, is_error: bool) -> Turn {
        Turn {
            action,
            observation: Observation {
                text: text.into(),
                is_error,
            },
        }
    }

    fn numbered(text: &str) -> String {
        text.lines()
            .enumerate()
            .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
            .collect()
    }

    #[test]
    fn an_episode_reads_chooses_tests_and_undoes() {
        let buggy = SOURCE.replace("x > hi", "x >= hi");
        let mut policy = RepairPolicy::new(RepairConfig::default()).expect("policy");
        let mut context = PolicyContext {
            task_id: "t".into(),
            initial: Observation {
                text: "Something is wrong in module `pkg.m`.\n\nRepository:\npkg/m.py (6 lines): clamp\ntests/test_m.py (9 lines)\n".into(),
                is_error: false,
            },
            history: Vec::new(),
        };
        let mut act = |context: &PolicyContext| {
            policy
                .act(std::slice::from_ref(context))
                .expect("act")
                .remove(0)
        };
        let first = act(&context);
        assert!(
            matches!(&first.action, Action::Tool(c) if c.name == "run_tests"),
            "{first:?}"
        );
        let failing = "Ran 3 tests in 0.10 s: 2 passed, 1 failed.\n\nFAILED tests/test_m.py::test_clamp_high\n    E       assert clamp(3, 0, 3) == 3\n";
        context.history.push(turn(first.action, failing, false));
        let view = act(&context);
        let Action::Tool(call) = &view.action else {
            panic!("{view:?}")
        };
        assert_eq!(call.name, "view");
        assert_eq!(call.arguments["path"], "pkg/m.py");
        context
            .history
            .push(turn(view.action.clone(), &numbered(&buggy), false));
        let edit = act(&context);
        let Action::Tool(call) = &edit.action else {
            panic!("{edit:?}")
        };
        assert_eq!(call.name, "edit");
        assert_eq!(edit.logprobs.len(), 1);
        let decision = edit.decision.clone().expect("decision");
        let n = decision["features"].as_array().expect("features").len();
        assert!(n >= 3, "candidates: {n}");
        // Uniform at the start.
        assert!((edit.logprobs[0] as f64 + (n as f64).ln()).abs() < 1e-4);
        context
            .history
            .push(turn(edit.action.clone(), "Edited.", false));
        let rerun = act(&context);
        assert!(matches!(&rerun.action, Action::Tool(c) if c.name == "run_tests"));
        context.history.push(turn(rerun.action, failing, false));
        let undo = act(&context);
        assert!(
            matches!(&undo.action, Action::Tool(c) if c.name == "undo"),
            "{undo:?}"
        );
        context.history.push(turn(undo.action, "Undone.", false));
        let again = act(&context);
        let again_decision = again.decision.clone().expect("second choice");
        assert_eq!(
            again_decision["features"].as_array().map(Vec::len),
            Some(n - 1),
            "the tried edit is not offered again"
        );
        context.history.push(turn(again.action, "Edited.", false));
        context.history.push(turn(
            tool("run_tests", json!({})),
            "Ran 3 tests in 0.10 s: 3 passed, 0 failed.",
            false,
        ));
        let done = act(&context);
        assert!(
            matches!(&done.action, Action::Tool(c) if c.name == "submit"),
            "{done:?}"
        );
        let _ = tool;
    }

    #[test]
    fn learning_raises_the_probability_of_rewarded_choices() {
        let mut policy = RepairPolicy::new(RepairConfig::default()).expect("policy");
        let good: Sparse = vec![(0, 1.0), (feature_index("on_traceback_line"), 1.0)];
        let bad: Sparse = vec![(1, 1.0)];
        let decision = |chosen: usize| json!({"chosen": chosen, "features": [good.clone(), bad.clone()], "temperature": 1.0});
        let step = |chosen: usize| StepSample {
            action: Action::Text {
                text: "edit".into(),
            },
            observation: String::new(),
            logprobs: vec![(0.5f64).ln() as f32],
            token_ids: None,
            loss_mask: None,
            decision: Some(decision(chosen)),
        };
        let batch = TrainingBatch {
            iteration: 0,
            estimator: "grpo".into(),
            group_size: 2,
            trajectories: vec![
                Trajectory {
                    task_id: "t".into(),
                    group: 0,
                    reward: 1.0,
                    advantage: 1.0,
                    resolved: true,
                    truncated: false,
                    steps: vec![step(0)],
                },
                Trajectory {
                    task_id: "t".into(),
                    group: 0,
                    reward: 0.0,
                    advantage: -1.0,
                    resolved: false,
                    truncated: false,
                    steps: vec![step(1)],
                },
            ],
        };
        let before = softmax(policy.weights(), &[&good, &bad], 1.0)[0];
        for _ in 0..5 {
            let stats = policy.learn(&batch).expect("learn");
            assert_eq!(stats["decisions"], json!(2));
        }
        let after = softmax(policy.weights(), &[&good, &bad], 1.0)[0];
        assert!(after > before + 0.2, "{before} -> {after}");
        // Checkpoints restore the same distribution.
        let state = policy.state().expect("state");
        let mut restored = RepairPolicy::new(RepairConfig::default()).expect("policy");
        restored.load_state(&state).expect("load");
        assert_eq!(restored.weights(), policy.weights());
        assert!(restored.load_state(&json!({"weights": "x"})).is_err());
    }

    #[test]
    fn add_not_inserts_parseable_negations() {
        let muts = add_not_mutations(
            "def f(a, b):\n    if a and b:\n        return a\n    return not b\n",
        );
        let texts: Vec<String> = muts
            .iter()
            .filter_map(|m| {
                mutate::apply(
                    "def f(a, b):\n    if a and b:\n        return a\n    return not b\n",
                    &m.edits,
                )
                .ok()
            })
            .collect();
        assert!(texts.iter().any(|t| t.contains("if not a and b")));
        assert!(texts.iter().any(|t| t.contains("a and not b")));
        assert!(texts.iter().any(|t| t.contains("return not a")));
        assert!(!texts.iter().any(|t| t.contains("not not")));
    }
}
