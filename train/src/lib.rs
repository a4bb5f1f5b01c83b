//! Reinforcement learning for FrogNano agents.
//!
//! This crate closes the loop between the environments, task synthesis and a policy:
//! [`GrpoTrainer`] proposes tasks, runs a group of rollouts per task through an
//! [`frognano_env::EnvPool`], turns rewards into group advantages (GRPO, Dr. GRPO or RLOO),
//! drops groups without signal, hands the batch to the policy's learner and feeds outcomes back
//! to the task source. The task source is any [`frognano_core::TaskSynthesizer`]: the
//! [`FrontierSynthesizer`] synthesizes tasks online for the families the current policy can just
//! barely solve, and [`StaticCurriculum`] and [`EasyToHard`] are the baselines it is measured
//! against. [`run`] is the whole job behind `frognano train`:
//! task pools, training, and evaluation on a held-out set; [`run_experiment`] compares
//! curricula over seeds (`frognano bench curriculum` and `frognano bench learning`).

mod advantage;
mod curriculum;
mod error;
mod experiment;
mod frontier;
mod language;
mod language_bench;
mod pools;
mod run;
mod trainer;

pub use advantage::{Estimator, group_advantages, has_zero_variance};
pub use curriculum::{
    DifficultyMix, EasyToHard, FamilyKey, StaticCurriculum, difficulty_mix, difficulty_score,
};
pub use error::{Result, TrainError};
pub use experiment::{
    ExperimentObserver, ExperimentResult, ExperimentSpec, HeldOutSets, RunFigures, run_experiment,
};
pub use frontier::{
    FamilyState, FrontierConfig, FrontierSynthesizer, checked_learnability, learnability,
};
pub use language::{
    LanguageModelConfig, LanguageModelPolicy, LearnerProcess, RolloutServer, WeightsHandle,
};
pub use language_bench::{
    LearnerBench, LearnerBenchOptions, RatioSummary, bench_learner, max_abs_diff, onnx_logprobs,
};
pub use pools::{
    RungResult, TaskPools, held_out_exclusions, is_excluded, prepare_pools, synthesize_pool,
};
pub use run::*;
pub use trainer::{EpisodeRunner, GrpoTrainer, TrainProgress, TrainerConfig};
