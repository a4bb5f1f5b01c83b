//! The trainer on scripted, in-memory environments: no sandbox, no repositories, milliseconds
//! per test. Each task names the one action that resolves it; the policy's script decides how
//! often each task's rollouts emit it, so group rewards, advantages and metrics are known
//! exactly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use frognano_core::{
    Action, Difficulty, Environment, EpisodeOutcome, Learner, Observation, Policy, PolicyContext,
    PolicyOutput, StepResult, Task, TaskSynthesizer, Trainer, TrainingBatch, Turn,
};
use frognano_env::{EnvPool, EpisodeRecord, RolloutEnv, StepRecord};
use frognano_train::{Estimator, GrpoTrainer, TrainerConfig, group_advantages};
use serde_json::json;

/// The action that resolves `task`.
fn answer(task: &Task) -> String {
    format!("fix {}", task.id)
}

fn text(action: &Action) -> String {
    match action {
        Action::Text { text } => text.clone(),
        Action::Tool(call) => call.name.clone(),
    }
}

/// One-step episodes: the first action ends the episode, resolved iff it is the task's answer.
#[derive(Debug, Default)]
struct ScriptedEnv {
    task: Option<Task>,
    initial: Observation,
    history: Vec<Turn>,
    steps: Vec<StepRecord>,
    outcome: Option<EpisodeOutcome>,
}

impl Environment for ScriptedEnv {
    fn reset(&mut self, task: &Task) -> frognano_core::Result<Observation> {
        if task.id.starts_with("broken") {
            return Err(frognano_core::Error::invalid("task", "cannot be reset"));
        }
        self.task = Some(task.clone());
        self.initial = Observation {
            text: format!("task {}", task.id),
            ..Observation::default()
        };
        self.history.clear();
        self.steps.clear();
        self.outcome = None;
        Ok(self.initial.clone())
    }

    fn step(&mut self, action: &Action) -> frognano_core::Result<StepResult> {
        let task = self
            .task
            .as_ref()
            .filter(|_| self.outcome.is_none())
            .ok_or_else(|| frognano_core::Error::invalid("episode", "none is running"))?;
        let resolved = text(action) == answer(task);
        let reward = if resolved { 1.0 } else { 0.0 };
        let observation = Observation {
            text: if resolved { "fixed" } else { "still broken" }.into(),
            ..Observation::default()
        };
        self.outcome = Some(EpisodeOutcome {
            task_id: task.id.clone(),
            resolved,
            reward,
            steps: 1,
            tool_errors: 0,
            test_runs: 0,
            met_failure: !resolved,
            recovered: false,
            submitted: true,
            truncated: false,
        });
        self.history.push(Turn {
            action: action.clone(),
            observation: observation.clone(),
        });
        self.steps.push(StepRecord::new(
            1,
            action.clone(),
            observation.text.clone(),
            reward,
        ));
        Ok(StepResult {
            observation,
            reward,
            terminated: true,
            truncated: false,
            info: json!({}),
        })
    }

    fn outcome(&self) -> Option<EpisodeOutcome> {
        self.outcome.clone()
    }
}

impl RolloutEnv for ScriptedEnv {
    fn context(&self) -> Option<PolicyContext> {
        Some(PolicyContext {
            task_id: self.task.as_ref()?.id.clone(),
            initial: self.initial.clone(),
            history: self.history.clone(),
        })
    }

    fn annotate_last_step(&mut self, output: &PolicyOutput) {
        if let Some(step) = self.steps.last_mut() {
            step.logprobs = output.logprobs.clone();
            step.decision = output.decision.clone();
        }
    }

    fn record(&self) -> Option<EpisodeRecord> {
        let task = self.task.as_ref()?;
        Some(EpisodeRecord::ungraded(
            task.id.clone(),
            self.outcome.clone()?,
            self.initial.text.clone(),
            self.steps.clone(),
        ))
    }
}

/// Emits, for the n-th rollout of a task, its answer iff `script(task, n)`; keeps every batch
/// it learns from.
struct ScriptedPolicy {
    script: fn(&str, usize) -> bool,
    calls: HashMap<String, usize>,
    batches: Arc<Mutex<Vec<TrainingBatch>>>,
}

impl ScriptedPolicy {
    fn new(script: fn(&str, usize) -> bool) -> (Self, Arc<Mutex<Vec<TrainingBatch>>>) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let policy = ScriptedPolicy {
            script,
            calls: HashMap::new(),
            batches: batches.clone(),
        };
        (policy, batches)
    }
}

impl Policy for ScriptedPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        Ok(contexts
            .iter()
            .map(|c| {
                let n = self.calls.entry(c.task_id.clone()).or_default();
                let right = (self.script)(&c.task_id, *n);
                *n += 1;
                let text = if right {
                    format!("fix {}", c.task_id)
                } else {
                    "shrug".to_string()
                };
                PolicyOutput {
                    logprobs: vec![-0.5],
                    decision: Some(json!({"right": right})),
                    ..PolicyOutput::action(Action::Text { text })
                }
            })
            .collect())
    }
}

impl Learner for ScriptedPolicy {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<frognano_core::LearnStats> {
        if let Ok(mut batches) = self.batches.lock() {
            batches.push(batch.clone());
        }
        let mut stats = serde_json::Map::new();
        stats.insert("trajectories".into(), json!(batch.trajectories.len()));
        Ok(stats)
    }

    fn state(&self) -> frognano_core::Result<serde_json::Value> {
        Ok(json!({"calls": self.calls}))
    }

    fn load_state(&mut self, state: &serde_json::Value) -> frognano_core::Result<()> {
        self.calls = serde_json::from_value(state["calls"].clone())?;
        Ok(())
    }
}

/// Proposes the same tasks every time and keeps every outcome it is told of.
struct ScriptedSource {
    tasks: Vec<Task>,
    feedback: Arc<Mutex<Vec<EpisodeOutcome>>>,
}

impl TaskSynthesizer for ScriptedSource {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        Ok(self.tasks.iter().take(n).cloned().collect())
    }

    fn feedback(&mut self, outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        if let Ok(mut seen) = self.feedback.lock() {
            seen.extend_from_slice(outcomes);
        }
        Ok(())
    }

    fn metrics(&mut self) -> serde_json::Map<String, serde_json::Value> {
        let mut metrics = serde_json::Map::new();
        metrics.insert("synthesis_wait_s".into(), json!(0.25));
        metrics
    }
}

fn task(id: &str, bugs: usize) -> Task {
    let mut task = Task::new(id, "/nonexistent", "x", vec!["t::a".into()]);
    task.set_difficulty(&Difficulty {
        operators: vec!["op_swap".into(); bugs],
        bug_count: bugs,
        hint_level: 1,
        files_changed: 1,
        lines_changed: bugs,
        lines_added: bugs,
        lines_removed: bugs,
        fail_to_pass: 1,
        pass_to_pass: 0,
        scopes: vec!["function".into(); bugs],
    });
    task
}

/// `always` is always fixed, `never` never, `half` by every other rollout.
fn by_name(task: &str, n: usize) -> bool {
    match task {
        "always" => true,
        "half" => n.is_multiple_of(2),
        _ => false,
    }
}

struct Setup {
    trainer: GrpoTrainer<ScriptedEnv>,
    batches: Arc<Mutex<Vec<TrainingBatch>>>,
    feedback: Arc<Mutex<Vec<EpisodeOutcome>>>,
}

fn setup(tasks: Vec<Task>, config: TrainerConfig) -> Setup {
    let envs = (0..3).map(|_| ScriptedEnv::default()).collect();
    let pool = EnvPool::from_envs(envs, 2).expect("pool");
    let (policy, batches) = ScriptedPolicy::new(by_name);
    let feedback = Arc::new(Mutex::new(Vec::new()));
    let source = ScriptedSource {
        tasks,
        feedback: feedback.clone(),
    };
    let trainer =
        GrpoTrainer::with_pool(pool, Box::new(policy), Box::new(source), config).expect("trainer");
    Setup {
        trainer,
        batches,
        feedback,
    }
}

fn config(tasks: usize, estimator: Estimator, drop_zero_variance: bool) -> TrainerConfig {
    TrainerConfig {
        tasks_per_iteration: tasks,
        group_size: 4,
        estimator,
        drop_zero_variance,
        ..TrainerConfig::default()
    }
}

fn three_tasks() -> Vec<Task> {
    vec![task("always", 1), task("never", 2), task("half", 3)]
}

#[test]
fn groups_without_signal_are_dropped_and_counted() {
    let mut s = setup(three_tasks(), config(3, Estimator::Grpo, true));
    let metrics = s.trainer.iterate().expect("iterate");
    assert_eq!(metrics.iteration, 0);
    assert_eq!(metrics.rollouts, 12);
    assert!((metrics.resolved_rate - 6.0 / 12.0).abs() < 1e-12);
    assert_eq!(metrics.extra["groups"], json!(3));
    assert_eq!(metrics.extra["zero_variance_groups"], json!(2));
    let fraction = metrics.extra["zero_variance_fraction"].as_f64();
    assert!(fraction.is_some_and(|f| (f - 2.0 / 3.0).abs() < 1e-12));
    // p(1 - p) is 0 for the flat groups and 1/4 for `half`.
    let learnability = metrics.extra["mean_learnability"].as_f64();
    assert!(learnability.is_some_and(|l| (l - 0.25 / 3.0).abs() < 1e-12));
    assert_eq!(metrics.extra["failed_resets"], json!(0));
    assert_eq!(metrics.extra["trainable_steps"], json!(4));
    assert_eq!(metrics.extra["learner"]["trajectories"], json!(4));
    assert_eq!(metrics.extra["synthesis_wait_s"], json!(0.25));

    // Only the `half` group reached the learner, with GRPO advantages of its rewards.
    let batches = s.batches.lock().expect("batches").clone();
    assert_eq!(batches.len(), 1);
    let batch = &batches[0];
    assert_eq!((batch.estimator.as_str(), batch.group_size), ("grpo", 4));
    assert_eq!(batch.trajectories.len(), 4);
    assert!(batch.trajectories.iter().all(|t| t.task_id == "half"));
    assert!(batch.trajectories.iter().all(|t| t.group == 0));
    let rewards: Vec<f64> = batch.trajectories.iter().map(|t| t.reward).collect();
    assert_eq!(rewards.iter().filter(|r| **r > 0.0).count(), 2);
    let expected = group_advantages(&rewards, Estimator::Grpo);
    for (t, a) in batch.trajectories.iter().zip(expected) {
        assert!((t.advantage - a).abs() < 1e-12);
        assert_eq!(t.advantage > 0.0, t.resolved, "{t:?}");
        assert_eq!(t.steps.len(), 1);
        assert_eq!(t.steps[0].logprobs, vec![-0.5]);
        assert_eq!(t.steps[0].decision, Some(json!({"right": t.resolved})));
    }
    assert_eq!(s.trainer.last_batch(), Some(batch));

    // Every outcome was fed back to the source.
    let feedback = s.feedback.lock().expect("feedback").clone();
    assert_eq!(feedback.len(), 12);
    let resolved = |id: &str| {
        feedback
            .iter()
            .filter(|o| o.task_id == id && o.resolved)
            .count()
    };
    assert_eq!(
        (resolved("always"), resolved("never"), resolved("half")),
        (4, 0, 2)
    );
}

#[test]
fn kept_flat_groups_get_zero_advantages_and_the_difficulty_mix_is_typed() {
    let mut s = setup(three_tasks(), config(3, Estimator::Rloo, false));
    let metrics = s.trainer.iterate().expect("iterate");
    assert_eq!(metrics.extra["zero_variance_groups"], json!(2));
    let batch = s.trainer.last_batch().expect("batch").clone();
    assert_eq!(batch.trajectories.len(), 12);
    let groups: Vec<usize> = batch.trajectories.iter().map(|t| t.group).collect();
    assert_eq!(groups, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    for t in &batch.trajectories {
        match t.task_id.as_str() {
            "half" => assert!((t.advantage.abs() - 2.0 / 3.0).abs() < 1e-12, "{t:?}"),
            _ => assert_eq!(t.advantage, 0.0),
        }
    }
    let mix = frognano_train::DifficultyMix::of_metrics(&metrics).expect("mix");
    assert!((mix.mean_bugs - 2.0).abs() < 1e-12);
    assert!((mix.mean_hint_level - 1.0).abs() < 1e-12);
    assert_eq!(mix.operators["op_swap"], 3);
}

#[test]
fn tasks_that_cannot_be_reset_are_counted_and_an_empty_iteration_is_an_error() {
    let tasks = vec![task("broken", 1), task("half", 1)];
    let mut s = setup(tasks, config(2, Estimator::DrGrpo, true));
    let metrics = s.trainer.iterate().expect("iterate");
    assert_eq!(metrics.rollouts, 4);
    assert_eq!(metrics.extra["failed_resets"], json!(4));
    assert_eq!(metrics.extra["groups"], json!(1));
    assert_eq!(s.trainer.iteration(), 1);
    assert_eq!(s.trainer.history().len(), 1);

    let mut s = setup(vec![task("broken", 1)], config(1, Estimator::Grpo, true));
    let err = s.trainer.iterate().expect_err("nothing ran");
    assert_eq!(err.kind(), frognano_core::ErrorKind::Training);
    assert!(err.to_string().contains("cannot be reset"), "{err}");
}

#[test]
fn checkpoints_restore_the_iteration_and_the_policy() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("ckpt.json");
    let mut s = setup(three_tasks(), config(3, Estimator::Grpo, true));
    s.trainer.iterate().expect("iterate");
    s.trainer.save_checkpoint(&path).expect("save");
    let mut fresh = setup(three_tasks(), config(3, Estimator::Grpo, true));
    fresh.trainer.resume(&path).expect("resume");
    assert_eq!(fresh.trainer.iteration(), 1);
    assert_eq!(fresh.trainer.history(), s.trainer.history());
    let state = fresh.trainer.policy().state().expect("state");
    assert_eq!(state["calls"]["half"], json!(4));
    let metrics = fresh.trainer.iterate().expect("iterate");
    assert_eq!(metrics.iteration, 1);
}

/// Runs the trainer's episodes in a pool of its own, with a policy rebuilt from the state it
/// is handed (as a cluster's worker does), and counts the calls.
struct SeparateRunner {
    pool: EnvPool<ScriptedEnv>,
    calls: Arc<Mutex<Vec<(serde_json::Value, usize, usize)>>>,
}

impl frognano_train::EpisodeRunner for SeparateRunner {
    fn run(
        &mut self,
        policy_state: &serde_json::Value,
        tasks: &[Task],
        env: &frognano_env::EnvConfig,
        on_done: &mut dyn FnMut(&EpisodeRecord),
    ) -> frognano_train::Result<Vec<Result<EpisodeRecord, String>>> {
        if let Ok(mut calls) = self.calls.lock() {
            calls.push((policy_state.clone(), tasks.len(), env.max_steps));
        }
        let (mut policy, _) = ScriptedPolicy::new(by_name);
        policy.load_state(policy_state)?;
        // Records by task index: the pool hands them over in completion order.
        let mut by_task: HashMap<String, Vec<EpisodeRecord>> = HashMap::new();
        let mut failed: HashMap<String, String> = HashMap::new();
        self.pool.rollout(
            &mut policy,
            tasks,
            |record| {
                on_done(&record);
                by_task
                    .entry(record.task_id.clone())
                    .or_default()
                    .push(record);
            },
            |task, e| {
                failed.insert(task.id.clone(), e.to_string());
            },
        )?;
        Ok(tasks
            .iter()
            .map(|t| match by_task.get_mut(&t.id).and_then(|r| r.pop()) {
                Some(record) => Ok(record),
                None => Err(failed.get(&t.id).cloned().unwrap_or_default()),
            })
            .collect())
    }
}

#[test]
fn an_episode_runner_takes_the_rollouts_and_learning_stays_with_the_trainer() {
    let mut tasks = three_tasks();
    tasks.push(task("broken-repo", 1));
    let config = config(4, Estimator::Grpo, true);
    let mut local = setup(tasks.clone(), config.clone());
    let mut remote = setup(tasks, config);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let envs = (0..2).map(|_| ScriptedEnv::default()).collect();
    remote.trainer.set_episode_runner(Box::new(SeparateRunner {
        pool: EnvPool::from_envs(envs, 1).expect("pool"),
        calls: calls.clone(),
    }));
    let expected = local.trainer.iterate().expect("local iteration");
    let got = remote
        .trainer
        .iterate()
        .expect("iteration through the runner");
    let calls = calls.lock().map(|c| c.clone()).unwrap_or_default();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].1, calls[0].2), (16, 40));
    assert_eq!(
        calls[0].0,
        json!({"calls": {}}),
        "the policy's state before learning"
    );
    assert_eq!(got.rollouts, expected.rollouts);
    assert_eq!(got.resolved_rate, expected.resolved_rate);
    for key in [
        "groups",
        "zero_variance_groups",
        "failed_resets",
        "mean_learnability",
    ] {
        assert_eq!(got.extra[key], expected.extra[key], "{key}");
    }
    assert_eq!(got.extra["failed_resets"], json!(4));
    // The learner here got the same batch as the local trainer's.
    let batch =
        |b: &Arc<Mutex<Vec<TrainingBatch>>>| b.lock().map(|b| b.clone()).unwrap_or_default();
    let (ours, theirs) = (batch(&remote.batches), batch(&local.batches));
    assert_eq!(ours.len(), 1);
    let rewards = |b: &[TrainingBatch]| -> Vec<(String, f64, f64)> {
        b[0].trajectories
            .iter()
            .map(|t| (t.task_id.clone(), t.reward, t.advantage))
            .collect()
    };
    let (mut ours, mut theirs) = (rewards(&ours), rewards(&theirs));
    ours.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    theirs.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    assert_eq!(ours, theirs);
}
