//! Task synthesis for FrogNano: validated bug-fix tasks from any Python repository.
//!
//! `frognano-synth` turns a repository whose test suite passes into bug-fix tasks, the way
//! SWE-smith does but in-process and fast. [`intake`] runs the clean suite twice in the WASI
//! sandbox (flaky tests are excluded) and records which lines each test executes. [`mutate`]
//! (the `frognano-mutate` crate, re-exported) injects bugs with procedural operators that edit
//! byte spans found by tree-sitter-python (formatting and comments survive; every candidate
//! parses). [`impact`] picks the tests that
//! can observe a change (per-test coverage inside function bodies, the import graph for code
//! that runs at import), so each candidate runs a handful of tests instead of the suite. A
//! candidate becomes a task when at least one passing test fails, at least one keeps passing,
//! nothing times out and a second run agrees; [`statement`] writes the problem statement from
//! what the failing tests show, at a chosen hint level. [`Synthesizer`] ties it together,
//! deterministically for a seed, with difficulty knobs (operators, bugs per task and where they
//! lie, hint level) recorded in each task's metadata.
//!
//! ```no_run
//! use std::sync::Arc;
//! use frognano_sandbox::{Sandbox, SandboxOptions};
//! use frognano_synth::{SynthConfig, Synthesizer};
//!
//! let sandbox = Arc::new(Sandbox::new(SandboxOptions::default(), &|_| {})?);
//! let config = SynthConfig { seed: 7, max_bugs: 2, ..SynthConfig::default() };
//! let mut synth = Synthesizer::new(sandbox, "examples/repos/textkit".as_ref(), config)?;
//! let tasks = synth.generate(20, &|_| {})?;
//! frognano_env::taskset::save_tasks("tasks.jsonl".as_ref(), &tasks)?;
//! println!("{:.0} tasks/minute", synth.stats().tasks_per_minute());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
pub mod impact;
pub mod intake;
mod options;
mod outcomes;
pub mod statement;
mod synth;

/// The mutation operators (the `frognano-mutate` crate).
pub use frognano_mutate as mutate;

pub use error::{Result, SynthError};
pub use intake::{Intake, IntakeOptions, run_intake};
pub use mutate::{Edit, MutateError, Mutation, OperatorInfo, operators};
pub use options::{
    CombineScope, OperatorStats, ProgressFn, Rejection, SynthConfig, SynthProgress, SynthRequest,
    SynthStats,
};
pub use outcomes::module_name;
pub use synth::Synthesizer;
