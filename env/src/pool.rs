//! [`EnvPool`]: many environments stepped in parallel with one batched call, and rollouts of a
//! [`Policy`] over a task set. A pool holds [`RepoEnv`]s by default and any
//! [`Environment`] otherwise; rollouts need the [`RolloutEnv`] side of an environment
//! (what the policy sees, and the record of each episode).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use frognano_core::{
    Action, Environment, Observation, Policy, PolicyContext, PolicyOutput, StepResult, Task,
};
use frognano_sandbox::Sandbox;
use serde::{Deserialize, Serialize};

use crate::StepRecord;
use crate::env::{EnvConfig, EpisodeRecord, RepoEnv};
use crate::repo::RepoCache;
use crate::{EnvError, Result};

/// What a pool needs of an environment to roll a policy out in it, beyond [`Environment`]:
/// the context a policy decides from, and a record of each episode.
///
/// [`RepoEnv`] is one; an in-memory environment (a test double, a different kind of task)
/// implements these three methods and trains with the same pool and trainer.
pub trait RolloutEnv: Environment {
    /// What a policy needs to choose the next action of the current episode.
    fn context(&self) -> Option<PolicyContext>;
    /// Attaches a policy's log-probs, token ids and decision to the last step's record.
    fn annotate_last_step(&mut self, output: &PolicyOutput);
    /// The record of the current or last episode.
    fn record(&self) -> Option<EpisodeRecord>;
}

impl RolloutEnv for RepoEnv {
    fn context(&self) -> Option<PolicyContext> {
        RepoEnv::context(self)
    }

    fn annotate_last_step(&mut self, output: &PolicyOutput) {
        RepoEnv::annotate_last_step(self, output);
    }

    fn record(&self) -> Option<EpisodeRecord> {
        RepoEnv::record(self)
    }
}

/// N environments stepped on worker threads; by default [`RepoEnv`]s sharing one sandbox and
/// repository cache.
#[derive(Debug)]
pub struct EnvPool<E = RepoEnv> {
    envs: Vec<E>,
    workers: usize,
}

/// Each item with its index: input `i` goes to environment `i`.
fn numbered<T>(items: &[T]) -> Vec<(usize, &T)> {
    items.iter().enumerate().collect()
}

/// Runs `job` on each `(index, env, input)` on up to `workers` threads; results in input order.
fn parallel<E: Send, I: Sync, T: Send>(
    envs: &mut [E],
    inputs: &[(usize, I)],
    workers: usize,
    job: impl Fn(&mut E, &I) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    let mut slots: Vec<Option<&mut E>> = envs.iter_mut().map(Some).collect();
    let mut jobs = Vec::with_capacity(inputs.len());
    for (index, input) in inputs {
        match slots.get_mut(*index).and_then(Option::take) {
            Some(env) => jobs.push(Mutex::new((Some(env), input, None))),
            None => jobs.push(Mutex::new((
                None,
                input,
                Some(Err(EnvError::InvalidOption(format!(
                    "environment index {index} is out of range or given twice"
                )))),
            ))),
        }
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = jobs.get(i) else { break };
                    let Ok(mut slot) = slot.lock() else { continue };
                    let (env, input, result) = &mut *slot;
                    if let Some(env) = env.as_deref_mut() {
                        *result = Some(job(env, input));
                    }
                }
            });
        }
    });
    jobs.into_iter()
        .map(|slot| {
            slot.into_inner()
                .ok()
                .and_then(|(_, _, r)| r)
                .unwrap_or_else(|| Err(EnvError::InvalidOption("a worker thread panicked".into())))
        })
        .collect()
}

impl EnvPool<RepoEnv> {
    /// `n` environments over `sandbox`; `workers` threads step them (0: the sandbox's worker
    /// count).
    pub fn new(sandbox: Arc<Sandbox>, n: usize, workers: usize, config: EnvConfig) -> Result<Self> {
        if n == 0 {
            return Err(EnvError::InvalidOption(
                "a pool needs at least one environment".into(),
            ));
        }
        let workers = if workers == 0 {
            sandbox.workers()
        } else {
            workers
        };
        let repos = Arc::new(RepoCache::new(sandbox));
        let envs = (0..n)
            .map(|_| RepoEnv::with_cache(repos.clone(), config))
            .collect::<Result<Vec<_>>>()?;
        Ok(EnvPool { envs, workers })
    }

    /// A pool for a task set: one environment per worker (0: the sandbox's worker count), never
    /// more environments than tasks.
    pub fn for_tasks(
        sandbox: Arc<Sandbox>,
        tasks: usize,
        workers: usize,
        config: EnvConfig,
    ) -> Result<Self> {
        let workers = if workers == 0 {
            sandbox.workers()
        } else {
            workers
        };
        Self::new(sandbox, workers.clamp(1, tasks.max(1)), workers, config)
    }
}

impl<E: Environment> EnvPool<E> {
    /// A pool of the given environments (at least one), stepped on `workers` threads (at
    /// least one).
    pub fn from_envs(envs: Vec<E>, workers: usize) -> Result<Self> {
        if envs.is_empty() {
            return Err(EnvError::InvalidOption(
                "a pool needs at least one environment".into(),
            ));
        }
        Ok(EnvPool {
            envs,
            workers: workers.max(1),
        })
    }

    /// Number of environments.
    pub fn len(&self) -> usize {
        self.envs.len()
    }

    /// Always false: a pool has at least one environment.
    pub fn is_empty(&self) -> bool {
        self.envs.is_empty()
    }

    /// The environments.
    pub fn envs(&self) -> &[E] {
        &self.envs
    }

    /// One environment, mutably.
    pub fn env_mut(&mut self, index: usize) -> Option<&mut E> {
        self.envs.get_mut(index)
    }

    /// Resets environment `i` to `tasks[i]` for every task given (at most [`EnvPool::len`]).
    pub fn reset(&mut self, tasks: &[Task]) -> Vec<Result<Observation>> {
        self.reset_some(&numbered(tasks))
    }

    /// Resets the named environments.
    pub fn reset_some(&mut self, tasks: &[(usize, &Task)]) -> Vec<Result<Observation>> {
        parallel(&mut self.envs, tasks, self.workers, |env, task| {
            env.reset(task).map_err(EnvError::from)
        })
    }

    /// Steps environment `i` with `actions[i]` for every action given.
    pub fn step(&mut self, actions: &[Action]) -> Vec<Result<StepResult>> {
        self.step_some(&numbered(actions))
    }

    /// Steps the named environments.
    pub fn step_some(&mut self, actions: &[(usize, &Action)]) -> Vec<Result<StepResult>> {
        parallel(&mut self.envs, actions, self.workers, |env, action| {
            env.step(action).map_err(EnvError::from)
        })
    }
}

impl<E: RolloutEnv> EnvPool<E> {
    /// Runs `policy` on every task until each episode ends, keeping every environment busy, and
    /// hands each finished episode's record to `on_episode` (in completion order). A task that
    /// cannot be reset (bad patch, missing repository) is reported through `on_error` and
    /// skipped.
    pub fn rollout(
        &mut self,
        policy: &mut dyn Policy,
        tasks: &[Task],
        mut on_episode: impl FnMut(EpisodeRecord),
        mut on_error: impl FnMut(&Task, EnvError),
    ) -> Result<RolloutStats> {
        let started = Instant::now();
        let mut queue: VecDeque<usize> = (0..tasks.len()).collect();
        let mut running: Vec<Option<usize>> = vec![None; self.envs.len()];
        let mut stats = RolloutStats::default();
        loop {
            // Fill idle environments.
            let mut starts = Vec::new();
            for (env, slot) in running.iter_mut().enumerate() {
                if slot.is_none()
                    && let Some(t) = queue.pop_front()
                {
                    *slot = Some(t);
                    starts.push((env, &tasks[t]));
                }
            }
            if !starts.is_empty() {
                let reset_started = Instant::now();
                let results = self.reset_some(&starts);
                stats.reset_s += reset_started.elapsed().as_secs_f64();
                for ((env, task), result) in starts.iter().zip(results) {
                    match result {
                        Ok(_) => stats.resets += 1,
                        Err(e) => {
                            running[*env] = None;
                            stats.failed_resets += 1;
                            on_error(task, e);
                        }
                    }
                }
                if running.iter().all(Option::is_none) && !queue.is_empty() {
                    continue;
                }
            }
            let active: Vec<usize> = (0..running.len())
                .filter(|&i| running[i].is_some())
                .collect();
            if active.is_empty() {
                break;
            }
            let contexts: Vec<_> = active
                .iter()
                .filter_map(|&i| self.envs[i].context())
                .collect();
            let outputs = policy.act(&contexts)?;
            if outputs.len() != active.len() {
                return Err(EnvError::InvalidOption(format!(
                    "the policy returned {} actions for {} contexts",
                    outputs.len(),
                    active.len()
                )));
            }
            // An episode the policy could not act for ends here, failed; the others step.
            let mut stepped = Vec::with_capacity(active.len());
            for (&env, output) in active.iter().zip(&outputs) {
                let Some(reason) = &output.error else {
                    stepped.push((env, output));
                    continue;
                };
                let task = running[env].map(|t| &tasks[t]);
                let mut record = self.envs[env]
                    .record()
                    .or_else(|| task.map(unfinished_record))
                    .ok_or_else(|| {
                        EnvError::InvalidOption(format!("environment {env} has no episode"))
                    })?;
                record.policy_error = Some(reason.clone());
                stats.episodes += 1;
                stats.failed_episodes += 1;
                on_episode(record);
                running[env] = None;
            }
            let inputs: Vec<(usize, &Action)> =
                stepped.iter().map(|(i, o)| (*i, &o.action)).collect();
            let results = self.step_some(&inputs);
            for ((env, output), result) in stepped.into_iter().zip(results) {
                stats.steps += 1;
                let result = result?;
                self.envs[env].annotate_last_step(output);
                if result.terminated || result.truncated {
                    if let Some(record) = self.envs[env].record() {
                        stats.episodes += 1;
                        if record.outcome.resolved {
                            stats.resolved += 1;
                        }
                        on_episode(record);
                    }
                    running[env] = None;
                }
            }
        }
        stats.wall_s = started.elapsed().as_secs_f64();
        Ok(stats)
    }
}

/// The record of an episode of `task` that ended before the environment could say how (its
/// policy failed), for environments that keep no record of unfinished episodes.
fn unfinished_record(task: &Task) -> EpisodeRecord {
    let outcome = frognano_core::EpisodeOutcome {
        task_id: task.id.clone(),
        resolved: false,
        reward: 0.0,
        steps: 0,
        tool_errors: 0,
        test_runs: 0,
        met_failure: false,
        recovered: false,
        submitted: false,
        truncated: false,
    };
    EpisodeRecord::ungraded(task.id.clone(), outcome, String::new(), Vec::new())
}

/// Counters of one rollout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RolloutStats {
    /// Episodes that ended.
    pub episodes: usize,
    /// Episodes that resolved their task.
    pub resolved: usize,
    /// Environment steps taken.
    pub steps: usize,
    /// Successful resets.
    pub resets: usize,
    /// Tasks that could not be reset.
    pub failed_resets: usize,
    /// Episodes that failed because the policy could not choose an action (counted in
    /// `episodes` too).
    #[serde(default)]
    pub failed_episodes: usize,
    /// Seconds spent in reset calls.
    pub reset_s: f64,
    /// Wall-clock seconds.
    pub wall_s: f64,
}

impl RolloutStats {
    /// Environment steps per second of wall-clock time.
    pub fn steps_per_s(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.steps as f64 / self.wall_s
        } else {
            0.0
        }
    }
}

/// Aggregate metrics over episode records.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    /// Episodes.
    pub episodes: usize,
    /// Episodes that resolved their task.
    pub resolved: usize,
    /// resolved / episodes.
    pub resolved_rate: f64,
    /// Episodes that met a failing test run or a tool error.
    pub met_failure: usize,
    /// Of those, the ones that still ended resolved.
    pub recovered: usize,
    /// recovered / met_failure (0 when no episode met a failure).
    pub recovery_rate: f64,
    /// Mean steps per episode.
    pub mean_steps: f64,
    /// Tool errors (malformed actions, failed tool calls) in all.
    pub tool_errors: usize,
    /// Test runs by the agents in all.
    pub test_runs: usize,
    /// Episodes cut short by a budget.
    pub truncated: usize,
    /// Actions taken in all (one per step).
    #[serde(default)]
    pub actions: usize,
    /// Actions that parsed as a tool command (not a protocol error), whether or not the tool
    /// then succeeded.
    #[serde(default)]
    pub valid_actions: usize,
    /// valid_actions / actions (0 when no action was taken).
    #[serde(default)]
    pub valid_command_rate: f64,
    /// Episodes that failed because the policy could not act (a served model's request
    /// failed); they count as unresolved.
    #[serde(default)]
    pub failed_episodes: usize,
    /// The first such failure's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_policy_error: Option<String>,
    /// Prompt tokens the policy's model read, over the steps that say how many
    /// ([`StepRecord::prompt_tokens`]; 0 for policies without a language model).
    #[serde(default)]
    pub prompt_tokens: usize,
    /// Mean prompt tokens per such step: what one turn of the harness costs the model.
    #[serde(default)]
    pub mean_prompt_tokens_per_step: f64,
    /// Mean prompt tokens per episode with such steps: what a whole episode costs it.
    #[serde(default)]
    pub mean_prompt_tokens_per_episode: f64,
    /// Mean generated tokens per step with recorded token ids.
    #[serde(default)]
    pub mean_generated_tokens_per_step: f64,
}

impl EvalSummary {
    /// Summarises episode records.
    pub fn of(records: &[EpisodeRecord]) -> Self {
        let n = records.len();
        let count = |f: &dyn Fn(&EpisodeRecord) -> bool| records.iter().filter(|r| f(r)).count();
        let resolved = count(&|r| r.outcome.resolved);
        let met_failure = count(&|r| r.outcome.met_failure);
        let recovered = count(&|r| r.outcome.recovered);
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let actions: usize = records.iter().map(|r| r.steps.len()).sum();
        // A step records its parsed tool call exactly when the action parsed.
        let valid_actions: usize = records
            .iter()
            .map(|r| r.steps.iter().filter(|s| s.tool.is_some()).count())
            .sum();
        let counted: Vec<usize> = records
            .iter()
            .flat_map(|r| r.steps.iter().filter_map(StepRecord::prompt_tokens))
            .collect();
        let prompt_tokens: usize = counted.iter().sum();
        let prompted_episodes = count(&|r| r.steps.iter().any(|s| s.prompt_tokens().is_some()));
        let generated: Vec<usize> = records
            .iter()
            .flat_map(|r| {
                r.steps
                    .iter()
                    .filter_map(|s| s.token_ids.as_ref().map(Vec::len))
            })
            .collect();
        EvalSummary {
            episodes: n,
            resolved,
            resolved_rate: ratio(resolved, n),
            met_failure,
            recovered,
            recovery_rate: ratio(recovered, met_failure),
            mean_steps: ratio(records.iter().map(|r| r.outcome.steps).sum(), n),
            tool_errors: records.iter().map(|r| r.outcome.tool_errors).sum(),
            test_runs: records.iter().map(|r| r.outcome.test_runs).sum(),
            truncated: count(&|r| r.outcome.truncated),
            actions,
            valid_actions,
            valid_command_rate: ratio(valid_actions, actions),
            failed_episodes: count(&|r| r.policy_error.is_some()),
            first_policy_error: records.iter().find_map(|r| r.policy_error.clone()),
            prompt_tokens,
            mean_prompt_tokens_per_step: ratio(prompt_tokens, counted.len()),
            mean_prompt_tokens_per_episode: ratio(prompt_tokens, prompted_episodes),
            mean_generated_tokens_per_step: ratio(generated.iter().sum(), generated.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use frognano_core::{EpisodeOutcome, Policy};

    use super::*;

    /// Counts down from the task's `steps` metadata; the last step resolves the task.
    #[derive(Debug, Default)]
    struct Countdown {
        task: Option<String>,
        left: usize,
        steps: Vec<StepRecord>,
        history: Vec<frognano_core::Turn>,
    }

    impl Environment for Countdown {
        fn reset(&mut self, task: &Task) -> frognano_core::Result<Observation> {
            self.left = task.metadata["steps"].as_u64().unwrap_or(0) as usize;
            if self.left == 0 {
                return Err(EnvError::Task {
                    task: task.id.clone(),
                    message: "no steps".into(),
                }
                .into());
            }
            self.task = Some(task.id.clone());
            self.steps.clear();
            self.history.clear();
            Ok(Observation::default())
        }

        fn step(&mut self, action: &Action) -> frognano_core::Result<StepResult> {
            self.left = self.left.checked_sub(1).ok_or(EnvError::NoEpisode)?;
            let done = self.left == 0;
            let observation = Observation::default();
            self.steps.push(StepRecord::new(
                self.steps.len() + 1,
                action.clone(),
                String::new(),
                f64::from(u8::from(done)),
            ));
            self.history.push(frognano_core::Turn {
                action: action.clone(),
                observation: observation.clone(),
            });
            Ok(StepResult {
                observation,
                reward: f64::from(u8::from(done)),
                terminated: done,
                truncated: false,
                info: serde_json::Value::Null,
            })
        }

        fn outcome(&self) -> Option<EpisodeOutcome> {
            (self.left == 0).then(|| EpisodeOutcome {
                task_id: self.task.clone().unwrap_or_default(),
                resolved: true,
                reward: 1.0,
                steps: self.steps.len(),
                tool_errors: 0,
                test_runs: 0,
                met_failure: false,
                recovered: false,
                submitted: true,
                truncated: false,
            })
        }
    }

    impl RolloutEnv for Countdown {
        fn context(&self) -> Option<PolicyContext> {
            Some(PolicyContext {
                task_id: self.task.clone()?,
                initial: Observation::default(),
                history: self.history.clone(),
            })
        }

        fn annotate_last_step(&mut self, _output: &PolicyOutput) {}

        fn record(&self) -> Option<EpisodeRecord> {
            Some(EpisodeRecord::ungraded(
                self.task.clone()?,
                self.outcome()?,
                String::new(),
                self.steps.clone(),
            ))
        }
    }

    struct Wait;

    impl Policy for Wait {
        fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
            Ok(contexts
                .iter()
                .map(|_| {
                    PolicyOutput::action(Action::Text {
                        text: "wait".into(),
                    })
                })
                .collect())
        }
    }

    fn task(id: &str, steps: u64) -> Task {
        let mut task = Task::new(id, "/nonexistent", "x", vec!["t::a".into()]);
        task.metadata.insert("steps".into(), steps.into());
        task
    }

    #[test]
    fn a_pool_of_any_environment_rolls_out_and_keeps_typed_errors() {
        assert!(EnvPool::<Countdown>::from_envs(Vec::new(), 1).is_err());
        let envs = (0..2).map(|_| Countdown::default()).collect();
        let mut pool = EnvPool::from_envs(envs, 2).expect("pool");
        let resets = pool.reset(&[task("a", 1), task("bad", 0)]);
        assert!(resets[0].is_ok());
        // The environment's own error comes back as itself, not wrapped.
        assert!(matches!(&resets[1], Err(EnvError::Task { task, .. }) if task == "bad"));
        let steps = pool.step(&[Action::Text { text: "x".into() }]);
        assert!(steps[0].as_ref().is_ok_and(|s| s.terminated));

        let tasks = [
            task("one", 1),
            task("three", 3),
            task("bad", 0),
            task("two", 2),
        ];
        let (mut records, mut failed) = (Vec::new(), Vec::new());
        let stats = pool
            .rollout(
                &mut Wait,
                &tasks,
                |r| records.push(r),
                |t, _| failed.push(t.id.clone()),
            )
            .expect("rollout");
        assert_eq!((stats.episodes, stats.resolved, stats.steps), (3, 3, 6));
        assert_eq!((stats.resets, stats.failed_resets), (3, 1));
        assert_eq!(failed, ["bad"]);
        let mut lengths: Vec<(String, usize)> = records
            .iter()
            .map(|r| (r.task_id.clone(), r.steps.len()))
            .collect();
        lengths.sort();
        assert_eq!(
            lengths,
            [("one".into(), 1), ("three".into(), 3), ("two".into(), 2)]
        );
    }
    /// Fails every episode of task `fail` at its second step; waits elsewhere.
    struct FailsOne;

    impl Policy for FailsOne {
        fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
            Ok(contexts
                .iter()
                .map(|c| {
                    if c.task_id == "fail" && !c.history.is_empty() {
                        PolicyOutput::failed("the server went away")
                    } else {
                        PolicyOutput::action(Action::Text {
                            text: "wait".into(),
                        })
                    }
                })
                .collect())
        }
    }

    #[test]
    fn an_episode_the_policy_cannot_act_for_fails_alone() {
        let envs = (0..3).map(|_| Countdown::default()).collect();
        let mut pool = EnvPool::from_envs(envs, 2).expect("pool");
        let tasks = [
            task("one", 1),
            task("fail", 3),
            task("two", 2),
            task("four", 4),
        ];
        let mut records = Vec::new();
        let stats = pool
            .rollout(&mut FailsOne, &tasks, |r| records.push(r), |_, _| {})
            .expect("rollout");
        assert_eq!(
            (stats.episodes, stats.resolved, stats.failed_episodes),
            (4, 3, 1)
        );
        let failed: Vec<_> = records
            .iter()
            .filter(|r| r.policy_error.is_some())
            .collect();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].task_id, "fail");
        assert!(!failed[0].outcome.resolved);
        assert_eq!(
            failed[0].policy_error.as_deref(),
            Some("the server went away")
        );
        // This environment keeps no record of an unfinished episode: the pool makes one.
        assert!(failed[0].steps.is_empty());
        let summary = EvalSummary::of(&records);
        assert_eq!((summary.failed_episodes, summary.resolved), (1, 3));
        assert_eq!(
            summary.first_policy_error.as_deref(),
            Some("the server went away")
        );
    }

    #[test]
    fn the_summary_counts_valid_commands_and_reads_old_json() {
        let step = |n: usize, parsed: bool| {
            let mut s = StepRecord::new(n, Action::Text { text: "x".into() }, String::new(), 0.0);
            if parsed {
                s.tool = Some(frognano_core::ToolCall {
                    name: "submit".into(),
                    arguments: serde_json::json!({}),
                });
            } else {
                s.is_error = true;
            }
            s
        };
        let record = |steps: Vec<StepRecord>, resolved: bool| {
            let outcome = EpisodeOutcome {
                task_id: "t".into(),
                resolved,
                reward: f64::from(u8::from(resolved)),
                steps: steps.len(),
                tool_errors: steps.iter().filter(|s| s.is_error).count(),
                test_runs: 0,
                met_failure: false,
                recovered: false,
                submitted: true,
                truncated: false,
            };
            EpisodeRecord::ungraded("t".into(), outcome, String::new(), steps)
        };
        let records = [
            record(vec![step(1, false), step(2, false), step(3, true)], true),
            record(vec![step(1, false)], false),
        ];
        let summary = EvalSummary::of(&records);
        assert_eq!((summary.actions, summary.valid_actions), (4, 1));
        assert!((summary.valid_command_rate - 0.25).abs() < 1e-12);
        assert_eq!(summary.tool_errors, 3);
        assert_eq!(EvalSummary::of(&[]).valid_command_rate, 0.0);
        // No step says how long its prompt was: nothing counted.
        assert_eq!(summary.prompt_tokens, 0);
        assert_eq!(summary.mean_prompt_tokens_per_step, 0.0);

        // Prompt tokens: recorded prompt ids, or the count a policy's decision gives; episodes
        // without either count for neither mean.
        let mut with_ids = step(1, true);
        with_ids.prompt_ids = Some(vec![7; 10]);
        with_ids.token_ids = Some(vec![1, 2, 3]);
        let mut later = step(2, true);
        later.prompt_ids = Some(vec![7; 20]);
        later.token_ids = Some(vec![1]);
        let mut counted = step(1, true);
        counted.decision = Some(serde_json::json!({"prompt_tokens": 30}));
        let records = [
            record(vec![with_ids, later], true),
            record(vec![counted], false),
            record(vec![step(1, true)], false),
        ];
        let summary = EvalSummary::of(&records);
        assert_eq!(summary.prompt_tokens, 60);
        assert!((summary.mean_prompt_tokens_per_step - 20.0).abs() < 1e-12);
        assert!((summary.mean_prompt_tokens_per_episode - 30.0).abs() < 1e-12);
        assert!((summary.mean_generated_tokens_per_step - 2.0).abs() < 1e-12);
        // A summary written before these fields existed still reads.
        let old = serde_json::json!({
            "episodes": 1, "resolved": 0, "resolved_rate": 0.0, "met_failure": 0,
            "recovered": 0, "recovery_rate": 0.0, "mean_steps": 1.0, "tool_errors": 0,
            "test_runs": 0, "truncated": 0
        });
        let back: EvalSummary = serde_json::from_value(old).expect("old summary");
        assert_eq!((back.actions, back.valid_actions), (0, 0));
    }
}
