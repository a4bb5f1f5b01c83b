//! Domain types, errors and traits shared by every FrogNano crate.
//!
//! FrogNano trains and runs compact coding agents with reinforcement learning. This crate
//! holds the vocabulary the other crates speak: a [`Task`] (a repository with a bug to fix),
//! the [`Action`]s an agent emits and the [`Observation`]s it gets back, the [`TestReport`]
//! of a sandboxed test run, and the four traits the system is built from:
//! [`Environment`] (where an agent acts), [`TaskSynthesizer`] (where tasks come from),
//! [`Policy`] (what chooses actions) and [`Trainer`] (what improves the policy).
//! Every record is serde-serialisable so that tasks, trajectories and reports can be
//! written as JSONL and read back from Python or C.

pub mod config;
mod difficulty;
mod error;
pub mod lines;
mod report;
mod task;
mod tokens;
mod training;
mod traits;

pub use difficulty::Difficulty;
pub use error::{BoxError, Error, ErrorKind, KindedError, Result};
pub use report::{
    Coverage, FailingTest, FileLines, RunOutcome, RunProfile, SourceLocation, TestOutcome,
    TestRecord, TestReport, TestRunObservation,
};
pub use task::{
    Action, EpisodeOutcome, Limits, Observation, PolicyContext, PolicyOutput, RepoSource,
    StepResult, Task, ToolCall, Turn,
};
pub use tokens::{TOKEN_BATCH_FORMAT, TOKEN_BATCH_VERSION, TokenBatch};
pub use training::{LearnStats, Learner, LearningPolicy, StepSample, TrainingBatch, Trajectory};
pub use traits::{Environment, IterationMetrics, Policy, TaskSynthesizer, Trainer};
