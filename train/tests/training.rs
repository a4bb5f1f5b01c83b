//! The trainer, the frontier and the baselines on real synthesized tasks in the real sandbox.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use frognano_core::{
    EpisodeOutcome, LearnStats, Learner, Policy, PolicyContext, PolicyOutput, Task,
    TaskSynthesizer, Trainer, TrainingBatch,
};
use frognano_env::EnvConfig;
use frognano_policy::{RepairConfig, RepairPolicy};
use frognano_sandbox::testing::shared_sandbox as sandbox;
use frognano_synth::{SynthConfig, Synthesizer};
use frognano_train::{
    Estimator, FamilyKey, FrontierConfig, FrontierSynthesizer, GrpoTrainer, StaticCurriculum,
    TrainerConfig,
};

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/repos")
        .join(name)
}

fn tasks(count: usize, seed: u64) -> Vec<Task> {
    let config = SynthConfig {
        seed,
        operators: vec![
            "flip_operators".into(),
            "boundary_condition".into(),
            "op_swap".into(),
            "remove_assign".into(),
        ],
        ..SynthConfig::default()
    };
    let mut synth = Synthesizer::new(sandbox(), &sample("textkit"), config).expect("synthesizer");
    let tasks = synth.generate(count, &|_| {}).expect("generate");
    assert_eq!(tasks.len(), count);
    tasks
}

fn small_config() -> TrainerConfig {
    TrainerConfig {
        tasks_per_iteration: 2,
        group_size: 2,
        estimator: Estimator::Grpo,
        drop_zero_variance: true,
        workers: 2,
        envs: 0,
        env: EnvConfig {
            max_steps: 12,
            ..EnvConfig::default()
        },
        format_reward: 0.0,
    }
}

/// Records every batch it is given; acts by delegating to a repair policy.
struct Recording {
    inner: RepairPolicy,
    batches: Arc<std::sync::Mutex<Vec<TrainingBatch>>>,
}

impl Policy for Recording {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        self.inner.act(contexts)
    }
}

impl Learner for Recording {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<LearnStats> {
        self.batches.lock().expect("lock").push(batch.clone());
        self.inner.learn(batch)
    }
    fn state(&self) -> frognano_core::Result<serde_json::Value> {
        self.inner.state()
    }
    fn load_state(&mut self, state: &serde_json::Value) -> frognano_core::Result<()> {
        self.inner.load_state(state)
    }
}

#[test]
fn an_iteration_rolls_out_groups_scores_them_and_checkpoints() {
    let set = tasks(4, 21);
    let batches = Arc::new(std::sync::Mutex::new(Vec::new()));
    let policy = Recording {
        inner: RepairPolicy::new(RepairConfig::default()).expect("policy"),
        batches: batches.clone(),
    };
    let curriculum = StaticCurriculum::new(set.clone(), 3).expect("curriculum");
    let mut trainer = GrpoTrainer::new(
        sandbox(),
        Box::new(policy),
        Box::new(curriculum),
        small_config(),
    )
    .expect("trainer");
    let dir = tempfile::tempdir().expect("tempdir");
    trainer.set_metrics_file(dir.path().join("metrics.jsonl"));
    let metrics = trainer.iterate().expect("iterate");
    assert_eq!(metrics.iteration, 0);
    assert_eq!(metrics.rollouts, 4, "2 tasks x 2 rollouts");
    for key in [
        "recovery_rate",
        "zero_variance_fraction",
        "mean_learnability",
        "difficulty",
        "rollouts_per_s",
        "synthesis_wait_s",
        "learner",
    ] {
        assert!(
            metrics.extra.contains_key(key),
            "{key} missing: {metrics:?}"
        );
    }
    let groups = metrics.extra["groups"].as_u64().expect("groups");
    let flat = metrics.extra["zero_variance_groups"]
        .as_u64()
        .expect("flat");
    assert_eq!(groups, 2);
    // The batch holds exactly the groups with signal, and each group's advantages sum to 0.
    let batch = trainer.last_batch().expect("batch").clone();
    assert_eq!(batch.trajectories.len() as u64, 2 * (groups - flat));
    for g in 0..(groups - flat) as usize {
        let sum: f64 = batch
            .trajectories
            .iter()
            .filter(|t| t.group == g)
            .map(|t| t.advantage)
            .sum();
        assert!(sum.abs() < 1e-6, "group {g}: {sum}");
    }
    // Every episode's edit choices carry a decision and a log-prob.
    for t in &batch.trajectories {
        for s in t.steps.iter().filter(|s| s.decision.is_some()) {
            assert_eq!(s.logprobs.len(), 1);
            assert!(s.logprobs[0] <= 0.0);
        }
    }
    let learned = batches.lock().expect("lock").len();
    assert_eq!(learned, usize::from(!batch.trajectories.is_empty()));
    let text = std::fs::read_to_string(dir.path().join("metrics.jsonl")).expect("metrics");
    assert_eq!(text.lines().count(), 1);

    // Checkpoint and resume into a fresh trainer.
    let checkpoint = dir.path().join("checkpoint.json");
    trainer.save_checkpoint(&checkpoint).expect("save");
    let saved_state = trainer.policy().state().expect("state");
    let mut resumed = GrpoTrainer::new(
        sandbox(),
        Box::new(RepairPolicy::new(RepairConfig::default()).expect("policy")),
        Box::new(StaticCurriculum::new(set, 3).expect("curriculum")),
        small_config(),
    )
    .expect("trainer");
    resumed.resume(&checkpoint).expect("resume");
    assert_eq!(resumed.iteration(), 1);
    assert_eq!(resumed.history().len(), 1);
    assert_eq!(
        resumed.policy().state().expect("state")["weights"],
        saved_state["weights"]
    );
    let next = resumed.iterate().expect("iterate");
    assert_eq!(next.iteration, 1);

    // A file that is not a checkpoint is refused with its path.
    std::fs::write(dir.path().join("bad.json"), "{\"x\": 1}").expect("write");
    let err = resumed
        .resume(&dir.path().join("bad.json"))
        .expect_err("not a checkpoint");
    assert!(err.to_string().contains("bad.json"), "{err}");
}

#[test]
fn the_frontier_synthesizes_in_the_background_adapts_and_retires() {
    let held_out = tasks(1, 77);
    // Held-out ids and the functions their bugs lie in: no proposal may come from them.
    let exclude = frognano_train::held_out_exclusions(&held_out);
    let held_out_functions: BTreeSet<String> =
        held_out.iter().flat_map(|t| t.bug_functions()).collect();
    assert!(!held_out_functions.is_empty());
    let synth = Synthesizer::new(
        sandbox(),
        &sample("textkit"),
        SynthConfig {
            seed: 5,
            workers: 1,
            ..SynthConfig::default()
        },
    )
    .expect("synthesizer");
    let config = FrontierConfig {
        operators: vec!["flip_operators".into(), "boundary_condition".into()],
        bug_counts: vec![1],
        seed: 9,
        ..FrontierConfig::default()
    };
    let mut frontier =
        FrontierSynthesizer::new(vec![synth], config, exclude.clone()).expect("frontier");
    assert_eq!(frontier.families().len(), 2);
    let proposed = frontier.propose(3).expect("propose");
    assert_eq!(proposed.len(), 3);
    let ids: BTreeSet<&String> = proposed.iter().map(|t| &t.id).collect();
    assert_eq!(ids.len(), 3, "distinct tasks in one proposal");
    for t in &proposed {
        assert!(!exclude.contains(&t.id), "held-out task proposed");
        assert!(
            t.bug_functions().is_disjoint(&held_out_functions),
            "{} lies in a held-out function",
            t.id
        );
        let family = FamilyKey::of(t).expect("family");
        assert!(
            ["flip_operators", "boundary_condition"].contains(&family.operator.as_str()),
            "{family:?}"
        );
        assert_eq!(family.bugs, 1);
    }
    // All-failed groups: the posterior of their families drops and the tasks retire.
    let outcomes: Vec<EpisodeOutcome> = proposed
        .iter()
        .flat_map(|t| {
            (0..4).map(|_| EpisodeOutcome {
                task_id: t.id.clone(),
                resolved: false,
                reward: 0.0,
                steps: 5,
                tool_errors: 0,
                test_runs: 2,
                met_failure: true,
                recovered: false,
                submitted: true,
                truncated: false,
            })
        })
        .collect();
    frontier.feedback(&outcomes).expect("feedback");
    let metrics = frontier.metrics();
    assert_eq!(metrics["retired"], serde_json::json!(3));
    assert!(metrics.contains_key("synthesis_wait_s"));
    for fam in frontier.families().iter().filter(|f| f.groups > 0) {
        assert!(fam.mean() < 0.5, "{fam:?}");
    }
    // Retired tasks are not proposed again; the state round-trips.
    let next = frontier.propose(2).expect("propose");
    assert!(next.iter().all(|t| !ids.contains(&t.id)));
    let state = frontier.state().expect("state");
    frontier.load_state(&state).expect("load");
    assert_eq!(
        frontier.state().expect("state")["families"],
        state["families"]
    );
}

fn outcomes_of(tasks: &[Task], resolved: impl Fn(&Task, usize) -> bool) -> Vec<EpisodeOutcome> {
    tasks
        .iter()
        .flat_map(|t| {
            (0..4).map(|i| EpisodeOutcome {
                task_id: t.id.clone(),
                resolved: resolved(t, i),
                reward: f64::from(u8::from(resolved(t, i))),
                steps: 1,
                tool_errors: 0,
                test_runs: 1,
                met_failure: true,
                recovered: false,
                submitted: true,
                truncated: false,
            })
        })
        .collect()
}

#[test]
fn the_frontier_starts_cold_on_its_easiest_rung_spread_over_operators_until_a_success() {
    let synth = Synthesizer::new(
        sandbox(),
        &sample("textkit"),
        SynthConfig {
            seed: 11,
            workers: 1,
            ..SynthConfig::default()
        },
    )
    .expect("synthesizer");
    let operators = ["flip_operators", "boundary_condition"];
    let config = FrontierConfig {
        operators: operators.iter().map(|o| o.to_string()).collect(),
        bug_counts: vec![1, 2],
        hint_levels: vec![2, 4],
        // Without the cold start, exploration alone would sometimes pick a harder family.
        exploration: 0.5,
        seed: 3,
        ..FrontierConfig::default()
    };
    let mut frontier =
        FrontierSynthesizer::new(vec![synth], config, BTreeSet::new()).expect("frontier");
    assert_eq!(frontier.families().len(), 8);
    assert!(frontier.in_cold_start());
    let easiest = |tasks: &[Task]| {
        let families: Vec<FamilyKey> = tasks
            .iter()
            .map(|t| FamilyKey::of(t).expect("family"))
            .collect();
        for f in &families {
            assert_eq!(
                (f.bugs, f.hint),
                (1, 4),
                "a harder rung in the cold start: {f:?}"
            );
        }
        families
            .iter()
            .map(|f| f.operator.clone())
            .collect::<BTreeSet<_>>()
    };
    let first = frontier.propose(3).expect("propose");
    assert_eq!(first.len(), 3);
    let mut operators_tried = easiest(&first);
    frontier
        .feedback(&outcomes_of(&first, |_, _| false))
        .expect("feedback");
    assert!(frontier.in_cold_start(), "no success yet");
    let second = frontier.propose(2).expect("propose");
    operators_tried.extend(easiest(&second));
    // Spread: every family of the rung that synthesis could serve has been tried.
    for family in frontier.families() {
        if (family.key.bugs, family.key.hint) == (1, 4) && !family.barren {
            assert!(
                operators_tried.contains(&family.key.operator),
                "{family:?} passed over"
            );
        }
    }
    // One rollout of one group succeeds: the cold start ends and stays ended after a restore.
    let solved = second[0].id.clone();
    frontier
        .feedback(&outcomes_of(&second, |t, i| t.id == solved && i == 0))
        .expect("feedback");
    assert!(!frontier.in_cold_start());
    assert_eq!(frontier.metrics()["cold_start"], serde_json::json!(false));
    let state = frontier.state().expect("state");
    assert_eq!(state["signal_seen"], serde_json::json!(true));
    frontier.load_state(&state).expect("load");
    assert!(!frontier.in_cold_start());
}

#[test]
fn an_experiment_measures_every_method_of_a_seed_on_that_seeds_held_out_set() {
    let out = tempfile::tempdir().expect("tempdir");
    let base = frognano_train::TrainConfig {
        repos: vec![sample("textkit")],
        iterations: 1,
        held_out: 2,
        static_tasks: 2,
        max_bugs: 1,
        operators: vec!["flip_operators".into(), "boundary_condition".into()],
        trainer: small_config(),
        ..frognano_train::TrainConfig::default()
    };
    struct Counting(usize);
    impl frognano_train::ExperimentObserver for Counting {
        fn run_observer(
            &mut self,
            _method: frognano_train::CurriculumKind,
            _seed: u64,
        ) -> Box<dyn frognano_train::RunObserver> {
            self.0 += 1;
            Box::new(frognano_train::Quiet)
        }
    }
    let spec = frognano_train::ExperimentSpec {
        base,
        methods: vec![
            frognano_train::CurriculumKind::Static,
            frognano_train::CurriculumKind::Frontier,
        ],
        seeds: vec![1, 2],
        held_out: frognano_train::HeldOutSets::PerSeed,
        out: out.path().to_path_buf(),
    };
    let mut observer = Counting(0);
    let result =
        frognano_train::run_experiment(&sandbox(), &spec, &mut observer).expect("experiment");
    assert_eq!(observer.0, 4);
    assert_eq!(result.runs.len(), 4);
    let held_out = |dir: &str| {
        std::fs::read_to_string(out.path().join(dir).join("held_out.jsonl")).expect("held-out")
    };
    assert_eq!(held_out("static-seed1"), held_out("frontier-seed1"));
    assert_eq!(held_out("static-seed2"), held_out("frontier-seed2"));
    assert_ne!(held_out("static-seed1"), held_out("static-seed2"));
    for pair in result.runs.chunks(2) {
        // Evaluated once per held-out set, shared by the seed's other method.
        assert!(pair[0].resolved_before.is_some());
        assert_eq!(pair[0].resolved_before, pair[1].resolved_before);
        assert_eq!(pair[0].seed, pair[1].seed);
        assert!(pair.iter().all(|r| r.gain().is_some()), "{pair:?}");
        // The static run has its whole budget (one iteration of 2 tasks x 2 rollouts); the
        // frontier's may end early when synthesis cannot keep up with so small a task space.
        assert_eq!(pair[0].rollouts, 4, "{pair:?}");
        assert!(pair[1].rollouts <= 4, "{pair:?}");
    }
    let frontier = result
        .method(frognano_train::CurriculumKind::Frontier)
        .expect("frontier");
    assert_eq!(frontier.reports.len(), 2);
    assert!(frontier.reports.iter().all(|r| r.initial.is_some()));
}
