//! The whole training job: task pools (a held-out evaluation set and, for the baselines, a fixed
//! training set), the curriculum, the trainer loop with checkpoints, and the held-out evaluation
//! before and after. Behind `frognano train` and `frognano bench curriculum`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use frognano_core::{
    IterationMetrics, Learner, LearningPolicy, Policy, Task, TaskSynthesizer, Trainer,
};
use frognano_env::{EpisodeRecord, EvalSummary, taskset};
use frognano_policy::{RepairConfig, RepairPolicy};
use frognano_sandbox::Sandbox;
use frognano_synth::{SynthConfig, Synthesizer};
use serde::{Deserialize, Deserializer, Serialize};

use crate::curriculum::{EasyToHard, StaticCurriculum};
use crate::frontier::{FrontierConfig, FrontierSynthesizer};
/// The served model a language-model job's rollouts can go through (`[policy.rollout_server]`).
use crate::language::{LanguageModelConfig, LanguageModelPolicy, WeightsHandle};
use crate::pools::{RungResult, TaskPools, held_out_exclusions, rung_results};
use crate::trainer::{GrpoTrainer, TrainProgress, TrainerConfig};
use crate::{Result, TrainError};

/// Where training tasks come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CurriculumKind {
    /// Online synthesis at the frontier of learnability.
    #[default]
    Frontier,
    /// A fixed pre-synthesized set, sampled uniformly.
    Static,
    /// The same kind of fixed set, opened from easy to hard.
    EasyToHard,
}

impl CurriculumKind {
    /// Parses `frontier`, `static` or `easy_to_hard` (`easy-to-hard`).
    pub fn parse(text: &str) -> Result<Self> {
        match text.replace('-', "_").as_str() {
            "frontier" => Ok(CurriculumKind::Frontier),
            "static" => Ok(CurriculumKind::Static),
            "easy_to_hard" => Ok(CurriculumKind::EasyToHard),
            other => Err(TrainError::Config(format!(
                "unknown curriculum {other:?}: use frontier, static or easy_to_hard"
            ))),
        }
    }

    /// The name used in configs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            CurriculumKind::Frontier => "frontier",
            CurriculumKind::Static => "static",
            CurriculumKind::EasyToHard => "easy_to_hard",
        }
    }
}

/// The policy a training job trains (`[policy]`, chosen by `kind`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PolicyConfig {
    /// `kind = "repair"` (the default): the feature-based repair policy.
    Repair(RepairConfig),
    /// `kind = "onnx"`: a language model rolled out in ONNX Runtime and updated by the
    /// PyTorch learner, with the new weights handed back after every update.
    Onnx(Box<LanguageModelConfig>),
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig::Repair(RepairConfig::default())
    }
}

impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = serde_json::Value::deserialize(deserializer)?;
        let Some(map) = value.as_object_mut() else {
            return Err(D::Error::custom("the policy must be a table of settings"));
        };
        let kind = match map.remove("kind") {
            None => "repair".to_string(),
            Some(serde_json::Value::String(kind)) => kind,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "the policy kind must be a string, not {other}"
                )));
            }
        };
        // Name the offending setting by its whole path, as the rest of the configuration does.
        fn inner<T: serde::de::DeserializeOwned, E: serde::de::Error>(
            value: serde_json::Value,
        ) -> std::result::Result<T, E> {
            serde_path_to_error::deserialize(value).map_err(|err| {
                let path = err.path().to_string();
                E::custom(format!("{} (at `policy.{path}`)", err.into_inner()))
            })
        }
        match kind.as_str() {
            "repair" => inner(value).map(PolicyConfig::Repair),
            "onnx" => inner(value).map(|c| PolicyConfig::Onnx(Box::new(c))),
            other => Err(D::Error::custom(format!(
                "unknown policy kind `{other}` (expected `repair` or `onnx`)"
            ))),
        }
    }
}

/// A training job (`frognano train --config FILE`, TOML). Every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Repositories (directories or bundles) to synthesize tasks from; relative paths resolve
    /// against the config file's directory. A corpus directory (`frognano corpus build`)
    /// stands for its ready entries.
    pub repos: Vec<PathBuf>,
    /// Where training tasks come from.
    pub curriculum: CurriculumKind,
    /// Training iterations.
    pub iterations: usize,
    /// Seed of synthesis, sampling and the policy.
    pub seed: u64,
    /// Size of the held-out evaluation set (never trained on).
    pub held_out: usize,
    /// Size of the fixed training set of the static and easy-to-hard curricula.
    pub static_tasks: usize,
    /// Tasks carry 1 to `max_bugs` bugs (the frontier's bug-count families).
    pub max_bugs: usize,
    /// Hint levels of the statements (the frontier's hint families).
    pub hint_levels: Vec<u8>,
    /// Mutation operators (empty: all).
    pub operators: Vec<String>,
    /// First fraction of the easy-to-hard schedule.
    pub easy_start_fraction: f64,
    /// Evaluate the untrained policy on the held-out set too.
    pub evaluate_initial: bool,
    /// Output directory (metrics, checkpoint, tasks, plot).
    pub out: Option<PathBuf>,
    /// Validation workers of the background synthesis (it shares the cores with rollouts).
    pub synth_workers: usize,
    /// The trainer.
    pub trainer: TrainerConfig,
    /// The policy trained: the repair policy (default) or a language model.
    pub policy: PolicyConfig,
    /// The frontier (its operators, bug counts and hint levels come from the fields above).
    pub frontier: FrontierConfig,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            repos: Vec::new(),
            curriculum: CurriculumKind::Frontier,
            iterations: 5,
            seed: 0,
            held_out: 16,
            static_tasks: 48,
            max_bugs: 2,
            hint_levels: vec![frognano_core::Difficulty::DEFAULT_HINT_LEVEL],
            operators: Vec::new(),
            easy_start_fraction: 0.3,
            evaluate_initial: true,
            out: None,
            synth_workers: 1,
            trainer: TrainerConfig::default(),
            policy: PolicyConfig::default(),
            frontier: FrontierConfig::default(),
        }
    }
}

impl TrainConfig {
    /// Reads a TOML file; relative repository paths resolve against its directory.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(TrainError::io(format!("read {}", path.display())))?;
        let mut config: TrainConfig = toml::from_str(&text)
            .map_err(|e| TrainError::Config(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        for repo in &mut config.repos {
            if repo.is_relative() {
                *repo = base.join(&*repo);
            }
        }
        config.repos = expand_corpora(&config.repos)?;
        config.validate()?;
        Ok(config)
    }

    /// Reads a configuration from a JSON object of its fields (the C API's `config_json`,
    /// Python's dict): missing fields take their defaults, unknown keys at any depth and type
    /// errors are [`TrainError::Config`] errors naming the field. Relative repository and
    /// output paths resolve against the current directory. Not validated: set what the caller
    /// overrides, then call [`TrainConfig::validate`].
    pub fn from_json(value: serde_json::Value) -> Result<Self> {
        let mut config: TrainConfig = frognano_core::config::from_json_strict(
            value,
            "training configuration",
            frognano_core::ErrorKind::Config,
        )
        .map_err(|err| match err {
            frognano_core::Error::Invalid { message, .. } => TrainError::Config(message),
            other => TrainError::Core(other),
        })?;
        let absolute = |path: &Path| {
            std::path::absolute(path).map_err(TrainError::io(format!("resolve {}", path.display())))
        };
        for repo in &mut config.repos {
            *repo = absolute(repo)?;
        }
        config.repos = expand_corpora(&config.repos)?;
        if let Some(out) = &mut config.out {
            *out = absolute(out)?;
        }
        Ok(config)
    }

    /// With no repositories named, trains on the bundled sample repositories
    /// ([`bundled_repos`]); a configuration that names some is left as it is.
    pub fn or_bundled_repos(mut self) -> Result<Self> {
        if self.repos.is_empty() {
            self.repos = bundled_repos()?;
        }
        Ok(self)
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        if self.iterations == 0 {
            return Err(TrainError::Config("iterations must be positive".into()));
        }
        if self.max_bugs == 0 || self.max_bugs > 8 {
            return Err(TrainError::Config("max_bugs must lie within 1..=8".into()));
        }
        if self.curriculum != CurriculumKind::Frontier && self.static_tasks == 0 {
            return Err(TrainError::Config(
                "static_tasks must be positive for the static and easy-to-hard curricula".into(),
            ));
        }
        self.trainer.validate()?;
        // Inside a training configuration, a bad policy setting is a configuration error.
        match &self.policy {
            PolicyConfig::Repair(policy) => policy
                .validate()
                .map_err(|e| TrainError::Config(e.to_string()))?,
            PolicyConfig::Onnx(policy) => policy.validate()?,
        }
        self.frontier().validate()?;
        Ok(())
    }

    /// The frontier's settings with the task space of this job.
    pub fn frontier(&self) -> FrontierConfig {
        FrontierConfig {
            operators: self.operators.clone(),
            bug_counts: (1..=self.max_bugs).collect(),
            hint_levels: self.hint_levels.clone(),
            seed: self.seed,
            ..self.frontier.clone()
        }
    }

    pub(crate) fn synth_config(&self, seed: u64, workers: usize) -> SynthConfig {
        SynthConfig {
            seed,
            operators: self.operators.clone(),
            max_bugs: self.max_bugs,
            hint_levels: self.hint_levels.clone(),
            workers,
            ..SynthConfig::default()
        }
    }
}

/// Repository paths with each corpus directory replaced by its ready entries.
fn expand_corpora(repos: &[PathBuf]) -> Result<Vec<PathBuf>> {
    frognano_corpus::expand_repos(repos).map_err(|e| TrainError::Config(format!("repos: {e}")))
}

/// The sample repositories bundled with FrogNano (under `examples/repos`), which a training
/// configuration that names no repositories trains on.
pub const BUNDLED_REPOS: [&str; 3] = ["textkit", "tinyparse", "ordstructs"];

/// The bundled file or folder at `relative` (a path under the root of a FrogNano checkout):
/// under the current directory, else under the source tree this library was built from; the
/// first root that holds every one of `relatives` wins.
fn bundled(relatives: &[PathBuf]) -> Option<Vec<PathBuf>> {
    let source_tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    [PathBuf::from("."), source_tree].iter().find_map(|root| {
        let paths: Vec<PathBuf> = relatives.iter().map(|r| root.join(r)).collect();
        paths.iter().all(|p| p.exists()).then(|| {
            paths
                .iter()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
                .collect()
        })
    })
}

/// The bundled sample repositories ([`BUNDLED_REPOS`]): under `examples/repos` of the current
/// directory, else of the source tree this library was built from. A
/// [`TrainError::Config`] naming what to do when neither holds them all.
pub fn bundled_repos() -> Result<Vec<PathBuf>> {
    let relatives: Vec<PathBuf> = BUNDLED_REPOS
        .iter()
        .map(|name| Path::new("examples").join("repos").join(name))
        .collect();
    bundled(&relatives).ok_or_else(|| {
        TrainError::Config(format!(
            "no repositories given and the bundled examples/repos/{{{}}} were not found: name \
             `repos` in the configuration (Python repositories whose test suites pass), or run \
             from the root of a FrogNano checkout",
            BUNDLED_REPOS.join(",")
        ))
    })
}

/// The main job's configuration file, `examples/train/main.toml` (a language model trained with
/// RL on tasks from the bundled repositories; read by [`main_job_config`], what every surface
/// runs without a configuration, and what `frognano bench learning` compares curricula with),
/// found as [`bundled_repos`] finds the repositories.
pub fn bundled_main_config() -> Result<PathBuf> {
    let relative = Path::new("examples").join("train").join("main.toml");
    bundled(std::slice::from_ref(&relative))
        .and_then(|mut found| found.pop())
        .ok_or_else(|| {
            TrainError::Config(
                "no configuration given and the bundled examples/train/main.toml was not found: \
                 name one (`--config` on the command line), or run from the root of a FrogNano \
                 checkout"
                    .into(),
            )
        })
}

/// The main job's configuration: [`bundled_main_config`] read as [`TrainConfig::from_file`]
/// reads a file (its repositories relative to it), on the bundled repositories if it named
/// none. What `frognano train`, Python's `train` and C's `frognano_train` run when given no
/// configuration.
pub fn main_job_config() -> Result<TrainConfig> {
    TrainConfig::from_file(&bundled_main_config()?)?.or_bundled_repos()
}

/// What the job reports along the way.
pub trait RunObserver {
    /// A stage starts (`"synthesize held-out tasks"`, `"train"`, ...).
    fn stage(&mut self, _name: &str) {}
    /// An episode of the current iteration finished.
    fn episode(&mut self, _progress: TrainProgress) {}
    /// An iteration finished.
    fn iteration(&mut self, _metrics: &IterationMetrics) {}
    /// An evaluation episode finished (`done` of `total`).
    fn eval_episode(&mut self, _done: usize, _total: usize) {}
}

/// An observer that reports nothing.
#[derive(Debug, Default)]
pub struct Quiet;

impl RunObserver for Quiet {}

/// The outcome of one training job.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainReport {
    /// The curriculum trained with.
    pub curriculum: CurriculumKind,
    /// Seed of the job.
    pub seed: u64,
    /// Metrics of every iteration.
    pub history: Vec<IterationMetrics>,
    /// The untrained policy on the held-out set (when evaluated).
    pub initial: Option<EvalSummary>,
    /// The trained policy on the held-out set.
    pub trained: EvalSummary,
    /// Held-out tasks.
    pub held_out_tasks: usize,
    /// Rollouts spent on training.
    pub rollouts: usize,
    /// Seconds proposals waited for synthesis, in all.
    pub synthesis_wait_s: f64,
    /// The trained policy's state.
    pub policy: serde_json::Value,
    /// Why training stopped before its iterations were done (the curriculum ran out of
    /// tasks), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_early: Option<String>,
    /// Held-out results per difficulty rung (hint level), untrained and trained.
    #[serde(default)]
    pub by_hint_level: Vec<RungResult>,
    /// The trained language model's folder (a language-model job), which `OnnxPolicy` runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<PathBuf>,
    /// Seconds the job took.
    pub wall_s: f64,
}

/// The task source a job's curriculum names.
pub fn make_curriculum(
    sandbox: &Arc<Sandbox>,
    config: &TrainConfig,
    pools: &TaskPools,
) -> Result<Box<dyn TaskSynthesizer>> {
    Ok(match config.curriculum {
        CurriculumKind::Static => {
            Box::new(StaticCurriculum::new(pools.training.clone(), config.seed)?)
        }
        CurriculumKind::EasyToHard => Box::new(EasyToHard::new(
            pools.training.clone(),
            config.iterations,
            config.easy_start_fraction,
            config.seed,
        )?),
        CurriculumKind::Frontier => {
            let synthesizers = config
                .repos
                .iter()
                .map(|repo| {
                    Synthesizer::new(
                        sandbox.clone(),
                        repo,
                        config
                            .synth_config(config.seed.wrapping_add(104_729), config.synth_workers),
                    )
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let exclude = held_out_exclusions(&pools.held_out);
            Box::new(FrontierSynthesizer::new(
                synthesizers,
                config.frontier(),
                exclude,
            )?)
        }
    })
}

/// The repair policy with `state`, greedy (as evaluated).
pub fn greedy_policy(
    config: &RepairConfig,
    state: Option<&serde_json::Value>,
) -> Result<RepairPolicy> {
    let mut policy = RepairPolicy::new(RepairConfig {
        greedy: true,
        ..config.clone()
    })?;
    if let Some(state) = state {
        policy.load_state(state)?;
    }
    Ok(policy)
}

/// Trains the repair policy with the job's curriculum on `pools` and evaluates it on the
/// held-out set. With `config.out`, writes `metrics.jsonl`, `checkpoint.json` (every
/// iteration; an existing one is resumed), `held_out.jsonl` and `eval.jsonl` there.
pub fn run(
    sandbox: &Arc<Sandbox>,
    config: &TrainConfig,
    pools: &TaskPools,
    observer: &mut dyn RunObserver,
    cancel: Option<Arc<AtomicBool>>,
) -> Result<TrainReport> {
    run_with(sandbox, config, pools, observer, cancel, None)
}

/// [`run`] with the training rollouts sent through `runner` (a cluster's workers) instead of
/// the local pool; synthesis, learning and the held-out evaluation stay here.
pub fn run_with(
    sandbox: &Arc<Sandbox>,
    config: &TrainConfig,
    pools: &TaskPools,
    observer: &mut dyn RunObserver,
    cancel: Option<Arc<AtomicBool>>,
    runner: Option<Box<dyn crate::EpisodeRunner>>,
) -> Result<TrainReport> {
    config.validate()?;
    let started = std::time::Instant::now();
    if pools.held_out.is_empty() {
        return Err(TrainError::NoTasks("the held-out set is empty".into()));
    }
    if let Some(out) = &config.out {
        std::fs::create_dir_all(out)
            .map_err(TrainError::io(format!("create {}", out.display())))?;
        write_tasks(&out.join("held_out.jsonl"), &pools.held_out)?;
        if !pools.training.is_empty() {
            write_tasks(&out.join("training_tasks.jsonl"), &pools.training)?;
        }
    }
    observer.stage("start the curriculum");
    let curriculum = make_curriculum(sandbox, config, pools)?;
    let (policy, evaluated) = PolicyEvaluator::start(config, observer)?;
    let mut trainer =
        GrpoTrainer::new(sandbox.clone(), policy, curriculum, config.trainer.clone())?;
    if let Some(flag) = &cancel {
        trainer.set_cancel_flag(flag.clone());
    }
    if let Some(runner) = runner {
        trainer.set_episode_runner(runner);
    }
    let checkpoint = config.out.as_ref().map(|o| o.join("checkpoint.json"));
    if let Some(out) = &config.out {
        trainer.set_metrics_file(out.join("metrics.jsonl"));
        if let Some(cp) = &checkpoint
            && cp.exists()
        {
            observer.stage("resume from the checkpoint");
            trainer.resume(cp)?;
        }
    }
    let (initial, initial_records) = if config.evaluate_initial {
        observer.stage("evaluate the untrained policy on the held-out tasks");
        let mut untrained = evaluated.policy(None)?;
        let (summary, records) = evaluate(
            &mut trainer,
            untrained.as_mut(),
            &pools.held_out,
            observer,
            None,
        )?;
        (Some(summary), Some(records))
    } else {
        (None, None)
    };
    observer.stage("train");
    // The progress hook must be 'static: episodes are forwarded through a channel.
    let (sender, receiver) = std::sync::mpsc::channel::<TrainProgress>();
    trainer.set_progress(move |p| {
        let _ = sender.send(p);
    });
    let mut ended_early = None;
    while trainer.iteration() < config.iterations {
        let outcome = std::thread::scope(|scope| {
            let handle = scope.spawn(|| trainer.iterate());
            while !handle.is_finished() {
                if let Ok(p) = receiver.recv_timeout(std::time::Duration::from_millis(100)) {
                    observer.episode(p);
                }
            }
            while let Ok(p) = receiver.try_recv() {
                observer.episode(p);
            }
            handle.join()
        })
        .map_err(|_| TrainError::Config("the training thread panicked".into()))?;
        let metrics = match outcome {
            // A curriculum that runs out of tasks after some training ends the training, not
            // the job: the policy as trained is still evaluated and reported.
            Err(frognano_core::Error::Component { source, .. })
                if trainer.iteration() > 0
                    && matches!(
                        source.downcast_ref::<TrainError>(),
                        Some(TrainError::NoTasks(_))
                    ) =>
            {
                let why = source.to_string();
                let note = format!(
                    "the curriculum ran out of tasks after {} of {} iterations ({why}); \
                     training ends here",
                    trainer.iteration(),
                    config.iterations
                );
                observer.stage(&note);
                ended_early = Some(note);
                break;
            }
            other => other?,
        };
        if let Some(cp) = &checkpoint {
            trainer.save_checkpoint(cp)?;
        }
        observer.iteration(&metrics);
    }
    observer.stage("evaluate the trained policy on the held-out tasks");
    let state = trainer.policy().state()?;
    let mut trained_policy = evaluated.policy(Some(&state))?;
    let eval_file = config.out.as_ref().map(|o| o.join("eval.jsonl"));
    let (trained, trained_records) = evaluate(
        &mut trainer,
        trained_policy.as_mut(),
        &pools.held_out,
        observer,
        eval_file.as_deref(),
    )?;
    let by_hint_level = rung_results(
        &pools.held_out,
        initial_records.as_deref(),
        &trained_records,
    );
    let history = trainer.history().to_vec();
    let synthesis_wait_s = history
        .iter()
        .filter_map(|m| m.extra.get("synthesis_wait_s").and_then(|v| v.as_f64()))
        .sum();
    let rollouts = history.iter().map(|m| m.rollouts).sum();
    Ok(TrainReport {
        curriculum: config.curriculum,
        seed: config.seed,
        history,
        initial,
        trained,
        held_out_tasks: pools.held_out.len(),
        rollouts,
        synthesis_wait_s,
        policy: state,
        by_hint_level,
        ended_early,
        weights: evaluated.weights(),
        wall_s: started.elapsed().as_secs_f64(),
    })
}

/// The policy a job's configuration trains (`[policy]`): the repair policy, or a language model
/// with its learner process (started here; the learner environment is installed on first
/// use). What `frognano train` trains, for callers that drive a [`GrpoTrainer`] themselves.
/// With it comes what evaluates that policy as trained ([`PolicyEvaluator::policy`]).
pub fn make_policy(config: &TrainConfig) -> Result<(Box<dyn LearningPolicy>, PolicyEvaluator)> {
    PolicyEvaluator::start(config, &mut Quiet)
}

/// What a job evaluates on the held-out set: the policy as trained, deterministic.
#[derive(Debug)]
pub enum PolicyEvaluator {
    /// The repair policy, greedy, with a state.
    Repair(RepairConfig),
    /// The language model with greedy (or the configured evaluation) decoding, on the
    /// weights the rollouts run now (untrained: on the starting weights).
    Language {
        /// The job's language-model settings.
        config: Box<LanguageModelConfig>,
        /// The folder training started from.
        start: PathBuf,
        /// The folder the rollouts run now.
        weights: WeightsHandle,
    },
}

impl PolicyEvaluator {
    /// The policy the job trains, and what evaluates it.
    fn start(
        config: &TrainConfig,
        observer: &mut dyn RunObserver,
    ) -> Result<(Box<dyn LearningPolicy>, PolicyEvaluator)> {
        match &config.policy {
            PolicyConfig::Repair(repair) => {
                let policy = RepairPolicy::new(RepairConfig {
                    seed: config.seed,
                    greedy: false,
                    ..repair.clone()
                })?;
                Ok((Box::new(policy), PolicyEvaluator::Repair(repair.clone())))
            }
            PolicyConfig::Onnx(language) => {
                observer.stage(
                    "start the language model and its learner (the first use installs the \
                     learner environment, about 3 GB)",
                );
                let quiet = |_: &str| {};
                let start = language.start_folder(&quiet)?;
                let work = match &config.out {
                    Some(out) => out.join("model"),
                    None => std::env::temp_dir().join(format!(
                        "frognano-train-{}-{}",
                        std::process::id(),
                        config.seed
                    )),
                };
                let mut learner_settings = language.learner.clone();
                learner_settings
                    .entry("seed")
                    .or_insert(serde_json::json!(config.seed));
                learner_settings
                    .entry("max_completion_tokens")
                    .or_insert(serde_json::json!(language.generation.max_new_tokens));
                let language = LanguageModelConfig {
                    learner: learner_settings,
                    generation: frognano_llm::GenerationOptions {
                        seed: config.seed,
                        ..language.generation.clone()
                    },
                    ..(**language).clone()
                };
                let policy = LanguageModelPolicy::new(&language, &start, &work, &quiet)?;
                let weights = policy.weights();
                Ok((
                    Box::new(policy),
                    PolicyEvaluator::Language {
                        config: Box::new(language),
                        start,
                        weights,
                    },
                ))
            }
        }
    }

    /// The language model's current folder.
    pub fn weights(&self) -> Option<PathBuf> {
        match self {
            PolicyEvaluator::Repair(_) => None,
            PolicyEvaluator::Language { weights, .. } => {
                Some(weights.lock().unwrap_or_else(|p| p.into_inner()).clone())
            }
        }
    }

    /// The policy to evaluate: untrained (`state` None) or as trained (`state`: the trained
    /// policy's [`Learner::state`]).
    pub fn policy(&self, state: Option<&serde_json::Value>) -> Result<Box<dyn Policy>> {
        match self {
            PolicyEvaluator::Repair(config) => Ok(Box::new(greedy_policy(config, state)?)),
            PolicyEvaluator::Language {
                config,
                start,
                weights,
            } => {
                let folder = match state {
                    None => start.clone(),
                    Some(_) => weights.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                };
                let policy = frognano_llm::OnnxPolicy::load(
                    &folder,
                    config.policy_config(config.evaluation_generation()),
                )
                .map_err(frognano_core::Error::from)?;
                Ok(Box::new(policy))
            }
        }
    }
}

fn evaluate(
    trainer: &mut GrpoTrainer,
    policy: &mut dyn Policy,
    tasks: &[Task],
    observer: &mut dyn RunObserver,
    records_file: Option<&Path>,
) -> Result<(EvalSummary, Vec<EpisodeRecord>)> {
    let total = tasks.len();
    let mut done = 0;
    let (summary, records) = trainer.evaluate(policy, tasks, |_| {
        done += 1;
        observer.eval_episode(done, total);
    })?;
    if let Some(path) = records_file {
        write_records(path, &records)?;
    }
    Ok((summary, records))
}

/// Writes a task set; repository paths become absolute, because a task file's relative paths
/// resolve against the file's own directory.
fn write_tasks(path: &Path, tasks: &[Task]) -> Result<()> {
    let tasks: Vec<Task> = tasks
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if let Ok(absolute) = std::path::absolute(t.repo.path()) {
                t.repo = t.repo.with_path(absolute);
            }
            t
        })
        .collect();
    Ok(taskset::save_tasks(path, &tasks)?)
}

fn write_records(path: &Path, records: &[EpisodeRecord]) -> Result<()> {
    let mut out = Vec::new();
    for r in records {
        serde_json::to_writer(&mut out, r).map_err(frognano_core::Error::from)?;
        out.push(b'\n');
    }
    Ok(taskset::write_atomically(path, &out)?)
}

/// One method's results over seeds in a curriculum experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MethodResult {
    /// The curriculum.
    pub curriculum: CurriculumKind,
    /// Held-out resolved rate per seed, in seed order.
    pub held_out_resolved: Vec<f64>,
    /// Mean over seeds.
    pub mean: f64,
    /// Sample standard deviation over seeds.
    pub std: f64,
    /// Training resolved rate per iteration, averaged over seeds.
    pub mean_curve: Vec<f64>,
    /// Mean zero-variance group fraction over training.
    pub zero_variance_fraction: f64,
    /// Seconds proposals waited for synthesis, per seed.
    pub synthesis_wait_s: Vec<f64>,
    /// Every job's report.
    pub reports: Vec<TrainReport>,
}

/// Mean and sample standard deviation.
pub fn mean_std(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let std = if values.len() < 2 {
        0.0
    } else {
        (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    (mean, std)
}

impl MethodResult {
    /// Summarises the reports of one method.
    pub fn of(curriculum: CurriculumKind, reports: Vec<TrainReport>) -> Self {
        let held: Vec<f64> = reports.iter().map(|r| r.trained.resolved_rate).collect();
        let (mean, std) = mean_std(&held);
        let iterations = reports.iter().map(|r| r.history.len()).max().unwrap_or(0);
        let mean_curve = (0..iterations)
            .map(|i| {
                let v: Vec<f64> = reports
                    .iter()
                    .filter_map(|r| r.history.get(i).map(|m| m.resolved_rate))
                    .collect();
                mean_std(&v).0
            })
            .collect();
        let zv: Vec<f64> = reports
            .iter()
            .flat_map(|r| &r.history)
            .filter_map(|m| {
                m.extra
                    .get("zero_variance_fraction")
                    .and_then(|v| v.as_f64())
            })
            .collect();
        MethodResult {
            curriculum,
            held_out_resolved: held,
            mean,
            std,
            mean_curve,
            zero_variance_fraction: mean_std(&zv).0,
            synthesis_wait_s: reports.iter().map(|r| r.synthesis_wait_s).collect(),
            reports,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_files_parse_resolve_and_reject_mistakes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("train.toml");
        std::fs::write(
            &path,
            "repos = [\"repos/a\", \"/abs/b\"]\ncurriculum = \"easy_to_hard\"\niterations = 3\n\
             [trainer]\ngroup_size = 8\nestimator = \"rloo\"\n[frontier]\ndecay = 0.5\n",
        )
        .expect("write");
        let config = TrainConfig::from_file(&path).expect("parse");
        assert_eq!(config.repos[0], dir.path().join("repos/a"));
        assert_eq!(config.repos[1], PathBuf::from("/abs/b"));
        assert_eq!(config.curriculum, CurriculumKind::EasyToHard);
        assert_eq!(config.trainer.group_size, 8);
        assert_eq!(config.trainer.estimator, crate::Estimator::Rloo);
        assert_eq!(
            config.trainer.tasks_per_iteration,
            TrainerConfig::default().tasks_per_iteration,
            "defaults fill the rest"
        );
        assert_eq!(config.frontier().bug_counts, vec![1, 2]);
        assert!((config.frontier().decay - 0.5).abs() < 1e-12);
        for (text, needle) in [
            ("iteration = 3\n", "unknown field"),
            ("iterations = 0\n", "iterations"),
            ("[trainer]\ngroup_size = 1\n", "group_size"),
            ("curriculum = \"best\"\n", "curriculum"),
            ("[frontier]\ntarget_success = 1.5\n", "target_success"),
        ] {
            std::fs::write(&path, text).expect("write");
            let err = TrainConfig::from_file(&path).expect_err(text).to_string();
            assert!(err.contains(needle), "{text:?}: {err}");
        }
        assert!(CurriculumKind::parse("easy-to-hard").is_ok());
        let (mean, std) = mean_std(&[0.2, 0.4]);
        assert!((mean - 0.3).abs() < 1e-12 && (std - 0.141_421_356).abs() < 1e-6);
    }

    #[test]
    fn json_configs_are_strict_and_name_the_field() {
        let config = TrainConfig::from_json(serde_json::json!({
            "repos": ["repos/a"],
            "trainer": {"group_size": 8},
        }))
        .expect("parse");
        assert!(config.repos[0].is_absolute() && config.repos[0].ends_with("repos/a"));
        assert_eq!(config.trainer.group_size, 8);
        for (value, needle) in [
            (serde_json::json!({"curiculum": "static"}), "`curiculum`"),
            (
                serde_json::json!({"policy": {"learning_rat": 1}}),
                "learning_rat",
            ),
            (
                serde_json::json!({"trainer": {"env": {"max_step": 3}}}),
                "max_step",
            ),
            (serde_json::json!({"seed": "three"}), "`seed`"),
            (serde_json::json!([1, 2]), "must be a JSON object"),
        ] {
            let err = TrainConfig::from_json(value.clone()).expect_err("a mistake");
            assert_eq!(err.kind(), frognano_core::ErrorKind::Config, "{value}");
            let message = err.to_string();
            assert!(message.contains(needle), "{value}: {message}");
            assert!(
                message.starts_with("invalid training configuration"),
                "{message}"
            );
        }
    }

    #[test]
    fn an_empty_repository_list_means_the_bundled_repositories() {
        let config = TrainConfig::default()
            .or_bundled_repos()
            .expect("bundled repos");
        assert_eq!(config.repos.len(), BUNDLED_REPOS.len());
        assert!(config.repos.iter().all(|r| r.is_absolute() && r.is_dir()));
        let named = TrainConfig {
            repos: vec![PathBuf::from("/elsewhere")],
            ..TrainConfig::default()
        };
        let kept = named.or_bundled_repos().expect("kept");
        assert_eq!(kept.repos, vec![PathBuf::from("/elsewhere")]);
    }

    #[test]
    fn the_main_job_is_the_bundled_file_with_its_repositories_resolved() {
        let config = main_job_config().expect("the main job");
        assert!(matches!(config.policy, PolicyConfig::Onnx(_)));
        assert!(!config.repos.is_empty());
        assert!(
            config.repos.iter().all(|r| r.is_dir()),
            "{:?}",
            config.repos
        );
    }

    #[test]
    fn the_policy_table_chooses_the_policy_by_kind_and_names_bad_settings() {
        let parse = |text: &str| toml::from_str::<TrainConfig>(text).map(|c| c.policy);
        assert!(matches!(
            parse("").expect("default"),
            PolicyConfig::Repair(_)
        ));
        assert!(matches!(
            parse("[policy]\nmax_attempts = 3").expect("repair"),
            PolicyConfig::Repair(r) if r.max_attempts == 3
        ));
        let onnx = parse(
            "[policy]\nkind = \"onnx\"\nmodel = \"tiny\"\n[policy.generation]\n\
             max_new_tokens = 8\n[policy.learner]\nlearning_rate = 0.001",
        )
        .expect("onnx");
        let PolicyConfig::Onnx(language) = onnx else {
            panic!("not a language model: {onnx:?}");
        };
        assert_eq!(language.model, "tiny");
        assert_eq!(language.generation.max_new_tokens, 8);
        assert_eq!(language.learner["learning_rate"], 0.001);
        let unknown = parse("[policy]\nkind = \"gpt\"").expect_err("unknown kind");
        assert!(
            unknown.to_string().contains("unknown policy kind `gpt`"),
            "{unknown}"
        );
        let misspelt = parse("[policy]\nkind = \"onnx\"\n[policy.generation]\ntemprature = 1")
            .expect_err("misspelt");
        assert!(
            misspelt
                .to_string()
                .contains("`policy.generation.temprature`"),
            "{misspelt}"
        );
    }
}
