//! Curriculum experiments: the same policy initialisation and rollout budget trained with each
//! curriculum over several seeds, every run measured on a held-out set before and after
//! training. Behind `frognano bench curriculum` (one held-out set for every run) and
//! `frognano bench learning` (a held-out set per seed, so the spread over seeds includes the
//! choice of held-out tasks).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use frognano_core::IterationMetrics;
use frognano_sandbox::Sandbox;
use serde::{Deserialize, Serialize};

use crate::pools::{RungResult, TaskPools, held_out_exclusions, synthesize_pool};
use crate::run::{CurriculumKind, MethodResult, RunObserver, TrainConfig, TrainReport, mean_std};
use crate::{Result, TrainError};

/// Which held-out tasks the runs of an experiment are measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldOutSets {
    /// One set (from the base configuration's seed) for every method and seed.
    Shared,
    /// A set per seed, shared by that seed's methods (paired comparisons within a seed).
    PerSeed,
}

/// What an experiment runs.
#[derive(Debug, Clone)]
pub struct ExperimentSpec {
    /// The configuration every run shares (its curriculum, seed and output are set per run).
    pub base: TrainConfig,
    /// Curricula compared.
    pub methods: Vec<CurriculumKind>,
    /// Seeds (one run per method and seed).
    pub seeds: Vec<u64>,
    /// Held-out sets.
    pub held_out: HeldOutSets,
    /// Output directory: one directory per run (`METHOD-seedN`).
    pub out: PathBuf,
}

/// What an experiment reports along the way.
pub trait ExperimentObserver {
    /// A stage outside the runs (synthesizing a held-out or training set).
    fn stage(&mut self, _name: &str) {}
    /// The observer of the run of `method` with `seed`.
    fn run_observer(&mut self, method: CurriculumKind, seed: u64) -> Box<dyn RunObserver>;
    /// A run finished (its report has the untrained evaluation filled in).
    fn run_finished(&mut self, _report: &TrainReport) {}
}

/// The figures of one run that a learning benchmark compares.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFigures {
    /// The curriculum.
    pub curriculum: CurriculumKind,
    /// The seed.
    pub seed: u64,
    /// Held-out tasks.
    pub held_out_tasks: usize,
    /// Held-out resolved rate of the untrained policy.
    pub resolved_before: Option<f64>,
    /// Held-out resolved rate after training.
    pub resolved_after: f64,
    /// Held-out actions that were valid commands, untrained.
    pub valid_commands_before: Option<f64>,
    /// Held-out actions that were valid commands, trained.
    pub valid_commands_after: f64,
    /// Held-out results per difficulty rung.
    pub by_hint_level: Vec<RungResult>,
    /// Training rollouts.
    pub rollouts: usize,
    /// Training resolved rate per iteration.
    pub training_curve: Vec<f64>,
    /// Mean share of groups whose rewards were all equal (no learning signal).
    pub zero_variance_fraction: f64,
    /// Generated tokens per second of rollout generation, over the run (a language model).
    pub rollout_tokens_per_s: Option<f64>,
    /// Tokens per second the learner processed (forward and backward), over the run.
    pub learner_tokens_per_s: Option<f64>,
    /// Seconds the run took.
    pub wall_s: f64,
}

impl RunFigures {
    /// The figures of `report`.
    pub fn of(report: &TrainReport) -> Self {
        let number = |m: &IterationMetrics, path: &[&str]| {
            let mut value = m.extra.get(path[0])?;
            for key in &path[1..] {
                value = value.get(key)?;
            }
            value.as_f64()
        };
        // Rates over the run: tokens over seconds, each iteration's seconds from its rate.
        let rate = |tokens: &[&str], per_s: &[&str]| {
            let (mut total, mut seconds) = (0.0, 0.0);
            for m in &report.history {
                if let (Some(t), Some(r)) = (number(m, tokens), number(m, per_s))
                    && t > 0.0
                    && r > 0.0
                {
                    total += t;
                    seconds += t / r;
                }
            }
            (seconds > 0.0).then(|| total / seconds)
        };
        let zero_variance: Vec<f64> = report
            .history
            .iter()
            .filter_map(|m| number(m, &["zero_variance_fraction"]))
            .collect();
        RunFigures {
            curriculum: report.curriculum,
            seed: report.seed,
            held_out_tasks: report.held_out_tasks,
            resolved_before: report.initial.as_ref().map(|i| i.resolved_rate),
            resolved_after: report.trained.resolved_rate,
            valid_commands_before: report.initial.as_ref().map(|i| i.valid_command_rate),
            valid_commands_after: report.trained.valid_command_rate,
            by_hint_level: report.by_hint_level.clone(),
            rollouts: report.rollouts,
            training_curve: report.history.iter().map(|m| m.resolved_rate).collect(),
            zero_variance_fraction: mean_std(&zero_variance).0,
            rollout_tokens_per_s: rate(
                &["learner", "rollout_tokens"],
                &["learner", "rollout_tokens_per_s"],
            ),
            learner_tokens_per_s: rate(
                &["learner", "processed_tokens"],
                &["learner", "learner_tokens_per_s"],
            ),
            wall_s: report.wall_s,
        }
    }

    /// Held-out resolved rate gained by training (after minus before), when both were measured.
    pub fn gain(&self) -> Option<f64> {
        self.resolved_before.map(|b| self.resolved_after - b)
    }
}

/// The outcome of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResult {
    /// Seeds, in run order.
    pub seeds: Vec<u64>,
    /// Which held-out sets the runs were measured on.
    pub held_out_sets: HeldOutSets,
    /// Each method over the seeds (its reports carry the untrained evaluation too).
    pub methods: Vec<MethodResult>,
    /// Each run's figures, in run order.
    pub runs: Vec<RunFigures>,
    /// Seconds the whole experiment took.
    pub wall_s: f64,
}

impl ExperimentResult {
    /// The method named `curriculum`.
    pub fn method(&self, curriculum: CurriculumKind) -> Option<&MethodResult> {
        self.methods.iter().find(|m| m.curriculum == curriculum)
    }

    /// Mean and sample standard deviation of the held-out gain of `curriculum`'s runs.
    pub fn gain(&self, curriculum: CurriculumKind) -> (f64, f64) {
        let gains: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.curriculum == curriculum)
            .filter_map(RunFigures::gain)
            .collect();
        mean_std(&gains)
    }
}

/// Gives `report` the untrained evaluation of an earlier run on the same held-out set (the
/// untrained policy is the same for every run, so it is evaluated once per set).
fn share_initial(report: &mut TrainReport, first: &TrainReport) {
    if report.initial.is_some() {
        return;
    }
    report.initial = first.initial.clone();
    for rung in &mut report.by_hint_level {
        rung.initial_resolved = first
            .by_hint_level
            .iter()
            .find(|r| r.hint_level == rung.hint_level)
            .and_then(|r| r.initial_resolved);
    }
}

/// Runs `spec`: per seed (and per held-out set), the held-out tasks, the fixed training set of
/// the baselines (disjoint from the held-out tasks' functions), then one training run per method.
pub fn run_experiment(
    sandbox: &Arc<Sandbox>,
    spec: &ExperimentSpec,
    observer: &mut dyn ExperimentObserver,
) -> Result<ExperimentResult> {
    if spec.methods.is_empty() || spec.seeds.is_empty() {
        return Err(TrainError::Config(
            "an experiment needs at least one method and one seed".into(),
        ));
    }
    spec.base.validate()?;
    let started = Instant::now();
    std::fs::create_dir_all(&spec.out)
        .map_err(TrainError::io(format!("create {}", spec.out.display())))?;
    let held_out_for = |seed: u64, observer: &mut dyn ExperimentObserver| {
        observer.stage(&format!("synthesize the held-out tasks (seed {seed})"));
        synthesize_pool(
            sandbox,
            &spec.base,
            spec.base.held_out,
            seed.wrapping_add(7919),
            &Default::default(),
        )
    };
    let mut shared = match spec.held_out {
        HeldOutSets::Shared => Some(held_out_for(spec.base.seed, observer)?),
        HeldOutSets::PerSeed => None,
    };
    let needs_training_set = spec.methods.iter().any(|m| *m != CurriculumKind::Frontier);
    let mut by_method: Vec<(CurriculumKind, Vec<TrainReport>)> =
        spec.methods.iter().map(|m| (*m, Vec::new())).collect();
    let mut runs = Vec::new();
    // The first run on the current held-out set, whose untrained evaluation the others share.
    let mut first_on_set: Option<TrainReport> = None;
    for &seed in &spec.seeds {
        let held_out = match &mut shared {
            Some(tasks) => tasks.clone(),
            None => {
                first_on_set = None;
                held_out_for(seed, observer)?
            }
        };
        let training = if needs_training_set {
            observer.stage(&format!("synthesize the fixed training set (seed {seed})"));
            let exclude = held_out_exclusions(&held_out);
            synthesize_pool(sandbox, &spec.base, spec.base.static_tasks, seed, &exclude)?
        } else {
            Vec::new()
        };
        for (method, reports) in &mut by_method {
            let out = spec.out.join(format!("{}-seed{seed}", method.as_str()));
            // Fresh runs: a checkpoint left by an earlier experiment is not resumed.
            for stale in ["checkpoint.json", "metrics.jsonl"] {
                let _ = std::fs::remove_file(out.join(stale));
            }
            let config = TrainConfig {
                curriculum: *method,
                seed,
                out: Some(out),
                evaluate_initial: first_on_set.is_none(),
                ..spec.base.clone()
            };
            let pools = TaskPools {
                held_out: held_out.clone(),
                training: training.clone(),
            };
            let mut run_observer = observer.run_observer(*method, seed);
            let mut report = crate::run::run(sandbox, &config, &pools, &mut *run_observer, None)?;
            drop(run_observer);
            match &first_on_set {
                Some(first) => share_initial(&mut report, first),
                None => first_on_set = Some(report.clone()),
            }
            observer.run_finished(&report);
            runs.push(RunFigures::of(&report));
            reports.push(report);
        }
    }
    Ok(ExperimentResult {
        seeds: spec.seeds.clone(),
        held_out_sets: spec.held_out,
        methods: by_method
            .into_iter()
            .map(|(m, r)| MethodResult::of(m, r))
            .collect(),
        runs,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_env::EvalSummary;
    use serde_json::json;

    fn iteration(i: usize, extra: serde_json::Value) -> IterationMetrics {
        IterationMetrics {
            iteration: i,
            resolved_rate: 0.25 * i as f64,
            rollouts: 8,
            extra: extra.as_object().cloned().unwrap_or_default(),
        }
    }

    fn summary(resolved: usize, episodes: usize, valid: f64) -> EvalSummary {
        EvalSummary {
            episodes,
            resolved,
            resolved_rate: resolved as f64 / episodes as f64,
            valid_command_rate: valid,
            ..Default::default()
        }
    }

    fn report(initial: Option<EvalSummary>, rung_initial: Option<usize>) -> TrainReport {
        TrainReport {
            curriculum: CurriculumKind::Static,
            seed: 3,
            history: vec![
                iteration(
                    0,
                    json!({"zero_variance_fraction": 1.0,
                           "learner": {"rollout_tokens": 100, "rollout_tokens_per_s": 50.0,
                                       "processed_tokens": 300, "learner_tokens_per_s": 100.0}}),
                ),
                iteration(
                    1,
                    json!({"zero_variance_fraction": 0.5,
                           "learner": {"rollout_tokens": 300, "rollout_tokens_per_s": 100.0,
                                       "processed_tokens": 0, "learner_tokens_per_s": 0.0}}),
                ),
            ],
            initial,
            trained: summary(3, 8, 0.9),
            held_out_tasks: 8,
            rollouts: 16,
            synthesis_wait_s: 0.0,
            policy: json!({}),
            ended_early: None,
            by_hint_level: vec![RungResult {
                hint_level: 6,
                tasks: 8,
                initial_resolved: rung_initial,
                trained_resolved: 3,
            }],
            weights: None,
            wall_s: 12.0,
        }
    }

    #[test]
    fn run_figures_weigh_rates_by_tokens_and_skip_iterations_without_any() {
        let figures = RunFigures::of(&report(Some(summary(1, 8, 0.5)), Some(1)));
        // 400 tokens in 2 s + 3 s of generation; the learner's one iteration with tokens.
        assert!((figures.rollout_tokens_per_s.expect("rollout rate") - 80.0).abs() < 1e-9);
        assert!((figures.learner_tokens_per_s.expect("learner rate") - 100.0).abs() < 1e-9);
        assert!((figures.zero_variance_fraction - 0.75).abs() < 1e-9);
        assert!((figures.gain().expect("gain") - 0.25).abs() < 1e-9);
        assert_eq!(figures.training_curve, vec![0.0, 0.25]);
        assert_eq!(figures.valid_commands_before, Some(0.5));
        let repair = RunFigures::of(&TrainReport {
            history: vec![iteration(0, json!({}))],
            ..report(None, None)
        });
        assert_eq!(
            repair.rollout_tokens_per_s, None,
            "no language model, no rate"
        );
        assert_eq!(repair.gain(), None, "no untrained evaluation, no gain");
    }

    #[test]
    fn later_runs_on_a_held_out_set_share_the_first_runs_untrained_evaluation() {
        let first = report(Some(summary(2, 8, 0.5)), Some(2));
        let mut later = report(None, None);
        share_initial(&mut later, &first);
        assert_eq!(later.initial.as_ref().map(|i| i.resolved), Some(2));
        assert_eq!(later.by_hint_level[0].initial_resolved, Some(2));
        // A run that evaluated its own keeps it.
        let mut own = report(Some(summary(5, 8, 0.5)), Some(5));
        share_initial(&mut own, &first);
        assert_eq!(own.initial.as_ref().map(|i| i.resolved), Some(5));
    }
}
