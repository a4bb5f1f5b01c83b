//! What a synthesizer is asked for and what it reports: [`SynthConfig`], [`CombineScope`],
//! [`SynthRequest`], and the statistics ([`SynthStats`], [`OperatorStats`], [`Rejection`],
//! [`SynthProgress`]).

use std::collections::BTreeMap;

use frognano_mutate as mutate;
use serde::{Deserialize, Serialize};

use frognano_core::Difficulty;

use crate::statement::MAX_HINT_LEVEL;
use crate::{Result, SynthError};

/// Where the bugs of a multi-bug task may lie relative to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CombineScope {
    /// All in one function or method.
    Function,
    /// All in one file (module).
    #[default]
    File,
    /// In different files.
    Repo,
}

impl CombineScope {
    /// Parses `function`, `file` (or `module`) or `repo` (or `files`).
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "function" | "func" => Ok(CombineScope::Function),
            "file" | "module" => Ok(CombineScope::File),
            "repo" | "files" | "across-files" => Ok(CombineScope::Repo),
            other => Err(SynthError::InvalidOption(format!(
                "unknown combine scope `{other}` (expected function, file or repo)"
            ))),
        }
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            CombineScope::Function => "function",
            CombineScope::File => "file",
            CombineScope::Repo => "repo",
        }
    }
}

/// How a synthesizer makes tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SynthConfig {
    /// Seed of every random choice (same seed, same repository: same tasks).
    pub seed: u64,
    /// Operators to use (empty: all of [`mutate::operators`]).
    pub operators: Vec<String>,
    /// Tasks carry 1 to `max_bugs` bugs, spread evenly over the counts.
    pub max_bugs: usize,
    /// Where the bugs of a multi-bug task lie.
    pub scope: CombineScope,
    /// Hint levels of the problem statements, drawn per task (see [`crate::statement`]).
    pub hint_levels: Vec<u8>,
    /// Parallel validations (default: the sandbox's workers).
    pub workers: usize,
    /// Confirm every candidate that looks valid with a second, grading-equivalent run (every
    /// passing test, by id, in grading order) and keep it only if both runs agree.
    pub reproduce: bool,
    /// Validate with only the tests that can observe the bug (coverage and import graph);
    /// `false` runs the whole suite for every candidate.
    pub select_tests: bool,
    /// Skip sites that no test executes (no test could fail); `false` runs them anyway.
    pub skip_unreached: bool,
    /// A validation run may take this many times the clean suite's time (plus a second).
    pub timeout_factor: f64,
    /// Stop after this many candidates have been run (0: no limit).
    pub max_candidates: usize,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            seed: 0,
            operators: Vec::new(),
            max_bugs: 1,
            scope: CombineScope::File,
            hint_levels: vec![Difficulty::DEFAULT_HINT_LEVEL],
            workers: 0,
            reproduce: true,
            select_tests: true,
            skip_unreached: true,
            timeout_factor: 3.0,
            max_candidates: 0,
        }
    }
}

impl SynthConfig {
    /// Checks the options.
    pub fn validate(&self) -> Result<()> {
        if self.max_bugs == 0 || self.max_bugs > 8 {
            return Err(SynthError::InvalidOption(format!(
                "max_bugs must be between 1 and 8, not {}",
                self.max_bugs
            )));
        }
        if self.hint_levels.is_empty() {
            return Err(SynthError::InvalidOption(
                "hint_levels must name at least one level".into(),
            ));
        }
        if let Some(bad) = self.hint_levels.iter().find(|l| **l > MAX_HINT_LEVEL) {
            return Err(SynthError::InvalidOption(format!(
                "hint level {bad} is out of range 0..={MAX_HINT_LEVEL}"
            )));
        }
        if !(self.timeout_factor.is_finite() && self.timeout_factor >= 1.0) {
            return Err(SynthError::InvalidOption(format!(
                "timeout_factor must be at least 1, not {}",
                self.timeout_factor
            )));
        }
        for name in &self.operators {
            if !mutate::operators().iter().any(|o| o.name == name) {
                return Err(mutate::MutateError::UnknownOperator(name.clone()).into());
            }
        }
        Ok(())
    }
}

/// Why a candidate is not a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rejection {
    /// No passing test fails with the bug.
    NoFailingTest,
    /// No passing test is left passing.
    NoPassingTest,
    /// A validation run hit a limit (time, memory, output) or crashed.
    Limit,
    /// The second run disagreed with the first.
    NotReproducible,
    /// pytest itself could not run the suite (internal or usage error, e.g. a broken
    /// conftest.py): not a bug a test pins down.
    BrokenSuite,
    /// The sandbox failed to run it.
    Error,
}

/// Counters of one operator (or operator combination).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorStats {
    /// Sites found in the repository (reachable by some test).
    pub sites: usize,
    /// Sites no test executes (never run: no test could tell).
    pub unreached: usize,
    /// Candidates run in the sandbox.
    pub tried: usize,
    /// Candidates that validated (a batch may validate more than a call asked for: single
    /// bugs beyond it are kept and handed out by the next call).
    pub valid: usize,
    /// Rejections by reason.
    pub rejected: BTreeMap<String, usize>,
}

impl OperatorStats {
    /// valid / tried (0 when nothing was tried).
    pub fn yield_rate(&self) -> f64 {
        if self.tried == 0 {
            0.0
        } else {
            self.valid as f64 / self.tried as f64
        }
    }
}

/// What a synthesizer did so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SynthStats {
    /// Candidates run in the sandbox.
    pub candidates: usize,
    /// Candidates skipped before running because an identical bug was already made.
    pub duplicates: usize,
    /// Tasks handed out.
    pub valid: usize,
    /// Sandboxed validation runs (first runs and reproductions).
    pub validation_runs: usize,
    /// Per operator (single bugs) and per `k bugs` (combinations).
    pub by_operator: BTreeMap<String, OperatorStats>,
    /// Validation runs by test selection: coverage, imports, full.
    pub by_selection: BTreeMap<String, usize>,
    /// Tests executed in validation runs, in total.
    pub tests_run: usize,
    /// Valid candidates whose grading-equivalent run failed a test the impact analysis had
    /// not selected (should stay 0; a sign of dynamic behaviour the analysis cannot see).
    pub selection_misses: usize,
    /// Seconds spent generating (intake excluded).
    pub elapsed_s: f64,
    /// Seconds the intake took (0 when it came from the cache).
    pub intake_s: f64,
}

impl SynthStats {
    /// Validated tasks per minute of generation.
    pub fn tasks_per_minute(&self) -> f64 {
        if self.elapsed_s <= 0.0 {
            0.0
        } else {
            self.valid as f64 * 60.0 / self.elapsed_s
        }
    }
}

/// A progress report, after each validated candidate.
#[derive(Debug, Clone, Copy)]
pub struct SynthProgress {
    /// Tasks made for the current request.
    pub valid: usize,
    /// Tasks asked for.
    pub target: usize,
    /// Candidates run for the current request.
    pub tried: usize,
}

/// A progress callback.
pub type ProgressFn<'a> = &'a (dyn Fn(&SynthProgress) + Sync);

/// What to make in one call.
#[derive(Debug, Clone)]
pub struct SynthRequest {
    /// How many tasks.
    pub count: usize,
    /// Operators to draw from (empty: the configuration's).
    pub operators: Vec<String>,
    /// Fewest bugs per task.
    pub min_bugs: usize,
    /// Most bugs per task (the counts are spread evenly).
    pub max_bugs: usize,
    /// Hint levels to draw from (empty: the configuration's).
    pub hint_levels: Vec<u8>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_names_the_problem() {
        let bad = SynthConfig {
            operators: vec!["no_such_op".into()],
            ..SynthConfig::default()
        };
        let err = bad.validate().expect_err("unknown operator");
        assert!(err.to_string().contains("no_such_op"));
        let bad = SynthConfig {
            hint_levels: vec![9],
            ..SynthConfig::default()
        };
        assert!(bad.validate().is_err());
        let bad = SynthConfig {
            max_bugs: 0,
            ..SynthConfig::default()
        };
        assert!(bad.validate().is_err());
        assert!(SynthConfig::default().validate().is_ok());
        assert_eq!(CombineScope::parse("module").ok(), Some(CombineScope::File));
        assert!(CombineScope::parse("galaxy").is_err());
    }
}
