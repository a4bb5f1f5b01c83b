//! [`GrpoTrainer`]: the RL loop. Propose tasks, roll out groups, score, learn, feed back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use frognano_core::{
    EpisodeOutcome, IterationMetrics, LearningPolicy, StepSample, Task, TaskSynthesizer, Trainer,
    TrainingBatch, Trajectory,
};
use frognano_env::{EnvConfig, EnvPool, EpisodeRecord, EvalSummary, RepoEnv, RolloutEnv};
use frognano_sandbox::Sandbox;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::advantage::{Estimator, group_advantages, has_zero_variance};
use crate::curriculum::difficulty_mix;
use crate::{Result, TrainError};

/// Settings of a [`GrpoTrainer`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainerConfig {
    /// Tasks proposed per iteration.
    pub tasks_per_iteration: usize,
    /// Rollouts per task (G).
    pub group_size: usize,
    /// How group rewards become advantages.
    pub estimator: Estimator,
    /// Leave groups whose rewards are all equal out of the batch (their advantages are 0).
    pub drop_zero_variance: bool,
    /// Rollout worker threads (0: the sandbox's). Used by [`GrpoTrainer::new`], which builds
    /// the pool; a pool given to [`GrpoTrainer::with_pool`] keeps its own.
    pub workers: usize,
    /// Environments stepped together (0: four per worker). Episodes alternate cheap steps with
    /// sandboxed test runs, and a pool steps its environments in lockstep rounds, so more
    /// environments than workers keep every worker running tests.
    pub envs: usize,
    /// Environment budgets (of the pool [`GrpoTrainer::new`] builds).
    pub env: EnvConfig,
    /// A format reward: this much times the fraction of an episode's actions that parsed as
    /// commands is added to its outcome reward before advantages are computed (0, the default:
    /// outcome reward only). A way in for small models that do not yet write valid commands,
    /// whose groups would otherwise all score 0. Learnability and the curriculum's feedback
    /// keep using the outcome alone.
    pub format_reward: f64,
}

impl Default for TrainerConfig {
    fn default() -> Self {
        TrainerConfig {
            tasks_per_iteration: 4,
            group_size: 4,
            estimator: Estimator::Grpo,
            drop_zero_variance: true,
            workers: 0,
            envs: 0,
            env: EnvConfig {
                max_steps: 40,
                ..EnvConfig::default()
            },
            format_reward: 0.0,
        }
    }
}

impl TrainerConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.tasks_per_iteration == 0 {
            return Err(TrainError::Config(
                "tasks_per_iteration must be positive".into(),
            ));
        }
        if self.group_size < 2 {
            return Err(TrainError::Config(
                "group_size must be at least 2 (advantages compare rollouts of one task)".into(),
            ));
        }
        if !(self.format_reward.is_finite() && self.format_reward >= 0.0) {
            return Err(TrainError::Config(
                "format_reward must be a non-negative number".into(),
            ));
        }
        self.env.validate()?;
        Ok(())
    }
}

/// Progress of the current iteration, for progress bars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainProgress {
    /// Iteration number.
    pub iteration: usize,
    /// Episodes finished in this iteration.
    pub episodes_done: usize,
    /// Episodes this iteration runs.
    pub episodes_total: usize,
    /// Of the finished ones, resolved.
    pub resolved: usize,
}

type ProgressHook = Box<dyn FnMut(TrainProgress) + Send>;

/// Runs a trainer's episodes outside its own pool, e.g. on a cluster's workers (the Python
/// package's `frognano.distributed` implements it over Ray).
pub trait EpisodeRunner: Send {
    /// One episode per task, acted by the policy whose [`LearningPolicy::state`] is
    /// `policy_state` (rebuilt wherever the episode runs) in environments with the budgets of
    /// `env`, in task order: the episode's record, or why the task could not run. `on_done` is
    /// called as episodes finish.
    fn run(
        &mut self,
        policy_state: &serde_json::Value,
        tasks: &[Task],
        env: &EnvConfig,
        on_done: &mut dyn FnMut(&EpisodeRecord),
    ) -> Result<Vec<std::result::Result<EpisodeRecord, String>>>;
}

/// The group-advantage trainer. See [`Trainer`].
///
/// It rolls out in an [`EnvPool`] of [`RepoEnv`]s over a sandbox ([`GrpoTrainer::new`]) or in
/// a pool of any [`RolloutEnv`] ([`GrpoTrainer::with_pool`]).
pub struct GrpoTrainer<E = RepoEnv> {
    config: TrainerConfig,
    pool: EnvPool<E>,
    policy: Box<dyn LearningPolicy>,
    synthesizer: Box<dyn TaskSynthesizer>,
    iteration: usize,
    history: Vec<IterationMetrics>,
    metrics_file: Option<PathBuf>,
    progress: Option<ProgressHook>,
    cancel: Option<Arc<AtomicBool>>,
    last_batch: Option<TrainingBatch>,
    runner: Option<Box<dyn EpisodeRunner>>,
}

impl<E> std::fmt::Debug for GrpoTrainer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpoTrainer")
            .field("config", &self.config)
            .field("iteration", &self.iteration)
            .finish()
    }
}

impl GrpoTrainer<RepoEnv> {
    /// A trainer of `policy` on tasks from `synthesizer`, rolling out in a pool over `sandbox`.
    pub fn new(
        sandbox: Arc<Sandbox>,
        policy: Box<dyn LearningPolicy>,
        synthesizer: Box<dyn TaskSynthesizer>,
        config: TrainerConfig,
    ) -> Result<Self> {
        config.validate()?;
        // 0 means "as many workers as the sandbox has", and four environments a worker.
        let workers = Some(config.workers)
            .filter(|&w| w > 0)
            .unwrap_or_else(|| sandbox.workers())
            .max(1);
        let envs = Some(config.envs).filter(|&e| e > 0).unwrap_or(4 * workers);
        let pool = EnvPool::new(sandbox, envs, config.workers, config.env)?;
        Self::with_pool(pool, policy, synthesizer, config)
    }
}

impl<E: RolloutEnv> GrpoTrainer<E> {
    /// A trainer of `policy` on tasks from `synthesizer`, rolling out in `pool` (its
    /// environments' own budgets apply: `config.env`, `workers` and `envs` are not used).
    pub fn with_pool(
        pool: EnvPool<E>,
        policy: Box<dyn LearningPolicy>,
        synthesizer: Box<dyn TaskSynthesizer>,
        config: TrainerConfig,
    ) -> Result<Self> {
        config.validate()?;
        Ok(GrpoTrainer {
            config,
            pool,
            policy,
            synthesizer,
            iteration: 0,
            history: Vec::new(),
            metrics_file: None,
            progress: None,
            cancel: None,
            last_batch: None,
            runner: None,
        })
    }

    /// The pool the rollouts run in.
    pub fn pool(&self) -> &EnvPool<E> {
        &self.pool
    }

    /// Writes every iteration's metrics to `path` (JSON Lines; the whole history, rewritten
    /// atomically after each iteration).
    pub fn set_metrics_file(&mut self, path: impl Into<PathBuf>) {
        self.metrics_file = Some(path.into());
    }

    /// Called after every finished episode.
    pub fn set_progress(&mut self, hook: impl FnMut(TrainProgress) + Send + 'static) {
        self.progress = Some(Box::new(hook));
    }

    /// Runs the iterations' rollouts through `runner` instead of the trainer's pool (the policy
    /// travels by its state; learning stays here).
    pub fn set_episode_runner(&mut self, runner: Box<dyn EpisodeRunner>) {
        self.runner = Some(runner);
    }

    /// Setting the flag stops training between episodes ([`TrainError::Cancelled`]).
    pub fn set_cancel_flag(&mut self, flag: Arc<AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// The settings.
    pub fn config(&self) -> &TrainerConfig {
        &self.config
    }

    /// Iterations run (including those restored from a checkpoint).
    pub fn iteration(&self) -> usize {
        self.iteration
    }

    /// Metrics of every iteration so far.
    pub fn history(&self) -> &[IterationMetrics] {
        &self.history
    }

    /// The policy being trained.
    pub fn policy(&self) -> &dyn LearningPolicy {
        self.policy.as_ref()
    }

    /// The policy being trained, mutably.
    pub fn policy_mut(&mut self) -> &mut dyn LearningPolicy {
        self.policy.as_mut()
    }

    /// The batch the learner got in the last iteration.
    pub fn last_batch(&self) -> Option<&TrainingBatch> {
        self.last_batch.as_ref()
    }

    /// Rolls `policy` out once on each task (no learning) and summarises.
    pub fn evaluate(
        &mut self,
        policy: &mut dyn frognano_core::Policy,
        tasks: &[Task],
        mut on_episode: impl FnMut(&EpisodeRecord),
    ) -> Result<(EvalSummary, Vec<EpisodeRecord>)> {
        if tasks.is_empty() {
            return Ok((EvalSummary::default(), Vec::new()));
        }
        let (report, records) =
            frognano_env::evaluate(&mut self.pool, policy, tasks, |r| on_episode(r), |_| {})?;
        if records.is_empty() && !report.failed_tasks.is_empty() {
            let failed: Vec<String> = report
                .failed_tasks
                .iter()
                .map(|f| format!("{}: {}", f.task_id, f.error))
                .collect();
            return Err(TrainError::NoTasks(failed.join("; ")));
        }
        Ok((report.summary, records))
    }

    /// Writes the policy's and the synthesizer's state and the metrics so far to `path`.
    pub fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let err = |reason: String| TrainError::Checkpoint {
            path: path.display().to_string(),
            reason,
        };
        let state = json!({
            "format": "frognano-trainer-checkpoint",
            "version": 1,
            "iteration": self.iteration,
            "config": self.config,
            "policy": self.policy.state()?,
            "synthesizer": self.synthesizer.state()?,
            "history": self.history,
        });
        let text = serde_json::to_vec(&state).map_err(|e| err(e.to_string()))?;
        // Written aside and renamed, so a crash never leaves a half-written checkpoint.
        frognano_repo::write_atomically(path, &text).map_err(|e| err(e.to_string()))
    }

    /// Restores a checkpoint written by [`GrpoTrainer::save_checkpoint`]: the next iteration
    /// continues where it stopped.
    pub fn resume(&mut self, path: &Path) -> Result<()> {
        let err = |reason: String| TrainError::Checkpoint {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let state: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| err(format!("not JSON: {e}")))?;
        if state["format"] != "frognano-trainer-checkpoint" {
            return Err(err("not a trainer checkpoint".into()));
        }
        let iteration = state["iteration"]
            .as_u64()
            .ok_or_else(|| err("no iteration number".into()))? as usize;
        let history: Vec<IterationMetrics> = serde_json::from_value(state["history"].clone())
            .map_err(|e| err(format!("history: {e}")))?;
        self.policy
            .load_state(&state["policy"])
            .map_err(|e| err(format!("policy: {e}")))?;
        if !state["synthesizer"].is_null() {
            self.synthesizer
                .load_state(&state["synthesizer"])
                .map_err(|e| err(format!("synthesizer: {e}")))?;
        }
        self.iteration = iteration;
        self.history = history;
        Ok(())
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    fn run_iteration(&mut self) -> Result<IterationMetrics> {
        let started = Instant::now();
        let iteration = self.iteration;
        // 1. Tasks.
        let proposing = Instant::now();
        let tasks = self.synthesizer.propose(self.config.tasks_per_iteration)?;
        let propose_s = proposing.elapsed().as_secs_f64();
        if tasks.is_empty() {
            return Err(TrainError::NoTasks("the synthesizer proposed none".into()));
        }
        // 2. Groups of G rollouts.
        let g = self.config.group_size;
        let expanded: Vec<Task> = tasks
            .iter()
            .flat_map(|t| std::iter::repeat_n(t.clone(), g))
            .collect();
        let total = expanded.len();
        let mut records: Vec<EpisodeRecord> = Vec::with_capacity(total);
        let mut reset_errors: Vec<String> = Vec::new();
        let rolling = Instant::now();
        let cancel = self.cancel.clone();
        let mut progress = self.progress.take();
        let mut resolved = 0usize;
        let mut done = 0usize;
        let mut on_record = |record: &EpisodeRecord| {
            resolved += usize::from(record.outcome.resolved);
            done += 1;
            if let Some(hook) = progress.as_mut() {
                hook(TrainProgress {
                    iteration,
                    episodes_done: done,
                    episodes_total: total,
                    resolved,
                });
            }
        };
        let rollout = match self.runner.as_mut() {
            None => self
                .pool
                .rollout(
                    self.policy.as_mut(),
                    &expanded,
                    |record| {
                        on_record(&record);
                        records.push(record);
                    },
                    |task, e| reset_errors.push(format!("{}: {e}", task.id)),
                )
                .map_err(TrainError::from),
            Some(runner) => {
                let state = self.policy.state()?;
                runner
                    .run(&state, &expanded, &self.config.env, &mut on_record)
                    .map(|results| {
                        for (task, result) in expanded.iter().zip(results) {
                            match result {
                                Ok(record) => records.push(record),
                                Err(e) => reset_errors.push(format!("{}: {e}", task.id)),
                            }
                        }
                        frognano_env::RolloutStats {
                            episodes: records.len(),
                            resolved: records.iter().filter(|r| r.outcome.resolved).count(),
                            steps: records.iter().map(|r| r.steps.len()).sum(),
                            resets: records.len(),
                            failed_resets: reset_errors.len(),
                            failed_episodes: records
                                .iter()
                                .filter(|r| r.policy_error.is_some())
                                .count(),
                            reset_s: 0.0,
                            wall_s: rolling.elapsed().as_secs_f64(),
                        }
                    })
            }
        };
        let stats = rollout?;
        let rollout_s = rolling.elapsed().as_secs_f64();
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(TrainError::Cancelled);
        }
        if records.is_empty() {
            return Err(TrainError::NoTasks(format!(
                "no episode ran: {}",
                reset_errors.join("; ")
            )));
        }
        // 3. Rewards and advantages per group (in proposal order).
        // An episode the policy could not act for (a served model's failed request) says
        // nothing about the policy: it is left out of the groups.
        let mut by_task: BTreeMap<&str, Vec<&EpisodeRecord>> = BTreeMap::new();
        for r in records.iter().filter(|r| r.policy_error.is_none()) {
            by_task.entry(r.task_id.as_str()).or_default().push(r);
        }
        let mut batch = TrainingBatch {
            iteration,
            estimator: self.config.estimator.as_str().into(),
            group_size: g,
            trajectories: Vec::new(),
        };
        let (mut groups, mut zero_variance, mut learnability_sum) = (0usize, 0usize, 0.0);
        let mut seen = std::collections::BTreeSet::new();
        for task in &tasks {
            if !seen.insert(task.id.as_str()) {
                continue;
            }
            let Some(group) = by_task.get(task.id.as_str()) else {
                continue;
            };
            groups += 1;
            let p =
                group.iter().filter(|r| r.outcome.reward > 0.0).count() as f64 / group.len() as f64;
            let rewards: Vec<f64> = group
                .iter()
                .map(|r| r.outcome.reward + self.config.format_reward * valid_fraction(&r.steps))
                .collect();
            learnability_sum += p * (1.0 - p);
            let flat = has_zero_variance(&rewards);
            if flat {
                zero_variance += 1;
                if self.config.drop_zero_variance {
                    continue;
                }
            }
            let advantages = group_advantages(&rewards, self.config.estimator);
            let index = batch
                .trajectories
                .last()
                .map_or(0, |t: &Trajectory| t.group + 1);
            for ((record, advantage), reward) in group.iter().zip(advantages).zip(&rewards) {
                batch
                    .trajectories
                    .push(trajectory(record, index, *reward, advantage));
            }
        }
        // 4. Learn.
        let learning = Instant::now();
        let learner_stats = if batch.trajectories.is_empty() {
            serde_json::Map::new()
        } else {
            self.policy.learn(&batch)?
        };
        let learn_s = learning.elapsed().as_secs_f64();
        // 5. Feedback.
        let outcomes: Vec<EpisodeOutcome> = records.iter().map(|r| r.outcome.clone()).collect();
        self.synthesizer.feedback(&outcomes)?;
        let synth_metrics = self.synthesizer.metrics();
        // 6. Metrics.
        let summary = EvalSummary::of(&records);
        let mut extra = serde_json::Map::new();
        extra.insert("recovery_rate".into(), json!(summary.recovery_rate));
        extra.insert(
            "valid_command_rate".into(),
            json!(summary.valid_command_rate),
        );
        extra.insert("met_failure".into(), json!(summary.met_failure));
        if summary.prompt_tokens > 0 {
            extra.insert(
                "prompt_tokens_per_step".into(),
                json!(summary.mean_prompt_tokens_per_step),
            );
            extra.insert(
                "prompt_tokens_per_episode".into(),
                json!(summary.mean_prompt_tokens_per_episode),
            );
            extra.insert(
                "generated_tokens_per_step".into(),
                json!(summary.mean_generated_tokens_per_step),
            );
        }
        extra.insert("groups".into(), json!(groups));
        extra.insert("zero_variance_groups".into(), json!(zero_variance));
        extra.insert(
            "zero_variance_fraction".into(),
            json!(if groups == 0 {
                0.0
            } else {
                zero_variance as f64 / groups as f64
            }),
        );
        extra.insert(
            "mean_learnability".into(),
            json!(if groups == 0 {
                0.0
            } else {
                learnability_sum / groups as f64
            }),
        );
        extra.insert("difficulty".into(), difficulty_mix(&tasks));
        extra.insert(
            "rollouts_per_s".into(),
            json!(records.len() as f64 / rollout_s.max(1e-9)),
        );
        extra.insert("env_steps_per_s".into(), json!(stats.steps_per_s()));
        extra.insert(
            "synthesis_wait_s".into(),
            synth_metrics
                .get("synthesis_wait_s")
                .cloned()
                .unwrap_or(json!(propose_s)),
        );
        extra.insert("propose_s".into(), json!(propose_s));
        extra.insert("rollout_s".into(), json!(rollout_s));
        extra.insert("learn_s".into(), json!(learn_s));
        extra.insert("wall_s".into(), json!(started.elapsed().as_secs_f64()));
        extra.insert("mean_steps".into(), json!(summary.mean_steps));
        extra.insert("tool_errors".into(), json!(summary.tool_errors));
        extra.insert("trainable_steps".into(), json!(batch.trainable_steps()));
        extra.insert("failed_resets".into(), json!(reset_errors.len()));
        extra.insert("learner".into(), serde_json::Value::Object(learner_stats));
        extra.insert(
            "synthesizer".into(),
            serde_json::Value::Object(synth_metrics),
        );
        let metrics = IterationMetrics {
            iteration,
            resolved_rate: summary.resolved_rate,
            rollouts: records.len(),
            extra,
        };
        self.last_batch = Some(batch);
        Ok(metrics)
    }
}

/// The fraction of an episode's actions that parsed as commands (a step records its parsed
/// tool call exactly when the action parsed).
fn valid_fraction(steps: &[frognano_env::StepRecord]) -> f64 {
    if steps.is_empty() {
        return 0.0;
    }
    steps.iter().filter(|s| s.tool.is_some()).count() as f64 / steps.len() as f64
}

/// A trajectory of the batch from an episode record, with the reward its advantage came from.
fn trajectory(record: &EpisodeRecord, group: usize, reward: f64, advantage: f64) -> Trajectory {
    Trajectory {
        task_id: record.task_id.clone(),
        group,
        reward,
        advantage,
        resolved: record.outcome.resolved,
        truncated: record.outcome.truncated,
        steps: record
            .steps
            .iter()
            .map(|s| StepSample {
                action: s.action.clone(),
                observation: s.observation.clone(),
                logprobs: s.logprobs.clone(),
                prompt_ids: s.prompt_ids.clone(),
                token_ids: s.token_ids.clone(),
                loss_mask: s.loss_mask.clone(),
                decision: s.decision.clone(),
            })
            .collect(),
    }
}

impl<E: RolloutEnv> Trainer for GrpoTrainer<E> {
    fn iterate(&mut self) -> frognano_core::Result<IterationMetrics> {
        if self.cancelled() {
            return Err(TrainError::Cancelled.into());
        }
        let metrics = self.run_iteration()?;
        self.iteration += 1;
        self.history.push(metrics.clone());
        if let Some(path) = &self.metrics_file {
            // The whole history, rewritten atomically: a kill or a full disk never leaves a
            // torn line, and the file matches the history a checkpoint holds.
            let mut text = Vec::new();
            for past in &self.history {
                serde_json::to_writer(&mut text, past).map_err(frognano_core::Error::from)?;
                text.push(b'\n');
            }
            frognano_repo::write_atomically(path, &text).map_err(|e| TrainError::Env(e.into()))?;
        }
        Ok(metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::{Action, ToolCall};
    use frognano_env::StepRecord;

    #[test]
    fn the_format_reward_counts_the_actions_that_parsed_and_must_be_usable() {
        let step = |n: usize, parsed: bool| {
            let mut s = StepRecord::new(n, Action::Text { text: "x".into() }, String::new(), 0.0);
            if parsed {
                s.tool = Some(ToolCall {
                    name: "run_tests".into(),
                    arguments: json!({}),
                });
            }
            s
        };
        assert_eq!(valid_fraction(&[]), 0.0);
        let steps = vec![step(0, true), step(1, false), step(2, true), step(3, false)];
        assert_eq!(valid_fraction(&steps), 0.5);
        for bad in [-0.1, f64::NAN] {
            let config = TrainerConfig {
                format_reward: bad,
                ..TrainerConfig::default()
            };
            assert!(config.validate().is_err(), "{bad}");
        }
    }
}
