//! The agent environment of FrogNano: bug-fix episodes over real repositories.
//!
//! `frognano-env` turns a [`frognano_core::Task`] (a clean repository, a bug as a diff, the tests
//! that grade a fix) into an episode an RL agent acts in. [`RepoEnv`] materialises the buggy
//! workspace from an in-memory copy of the repository, executes one tool call per step through a
//! compact text grammar or JSON tool calls ([`protocol`]), keeps observations bounded, and on
//! submit grades the final state by running the FAIL_TO_PASS and PASS_TO_PASS tests in a fresh
//! WebAssembly sandbox, after restoring any test file the agent touched. [`EnvPool`] steps many
//! environments in parallel and rolls out a [`frognano_core::Policy`] over a task set; every
//! episode yields an [`EpisodeRecord`] usable as a training trajectory. [`taskset`] reads and
//! writes JSONL task sets, also in SWE-bench's field names.
//!
//! ```no_run
//! use std::sync::Arc;
//! use frognano_core::Action;
//! use frognano_env::{EnvConfig, RepoEnv, taskset};
//! use frognano_sandbox::{Sandbox, SandboxOptions};
//!
//! let sandbox = Arc::new(Sandbox::new(SandboxOptions::default(), &|_| {})?);
//! let tasks = taskset::load_tasks("examples/tasks/sample.jsonl".as_ref())?;
//! let mut env = RepoEnv::new(sandbox, EnvConfig::default())?;
//! let first = env.reset_task(&tasks[0])?;
//! println!("{}", first.text);
//! let step = env.step_action(&Action::Text { text: "test".into() })?;
//! println!("{}", step.observation.text);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod env;
mod error;
mod eval;
mod line_fix;
mod pool;
pub mod protocol;
mod record;
pub mod soak;
pub mod taskset;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tools;

pub use env::{
    EnvConfig, EpisodeRecord, FirstObservation, GradedTest, Grading, RepoEnv, StepRecord,
    TestRunSummary, is_protected, repo_map, truncate_middle,
};
pub use error::{EnvError, Result};
pub use eval::{EvalReport, FailedTask, evaluate};
pub use frognano_repo::RepoError;
/// Unified diffs over in-memory trees (from `frognano-repo`).
pub use frognano_repo::patch;
/// Clean repositories held in memory (from `frognano-repo`).
pub use frognano_repo::snapshot as repo;
/// The pytest arguments of a grading run (from `frognano-sandbox`).
pub use frognano_sandbox::grading_args;
pub use pool::{EnvPool, EvalSummary, RolloutEnv, RolloutStats};
pub use protocol::{ProtocolError, ToolRequest, parse_action};
pub use soak::{SoakReport, soak};
