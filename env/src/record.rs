//! The records of episodes and their budgets: [`EnvConfig`], [`EpisodeRecord`] (a training
//! trajectory and an evaluation record in one), [`StepRecord`], the per-test [`Grading`] and the
//! [`TestRunSummary`] of a test run.

use frognano_core::{Action, EpisodeOutcome, TestReport};
use serde::{Deserialize, Serialize};

use crate::tools::ToolLimits;
use crate::{EnvError, Result};

/// Budgets and output sizes of an episode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvConfig {
    /// Steps per episode; the episode is truncated (and graded) when they run out.
    pub max_steps: usize,
    /// Characters of observations per episode (the context budget); truncated past it.
    pub max_observation_chars: usize,
    /// Characters of one observation; longer ones are cut in the middle with a marker.
    pub observation_chars: usize,
    /// Lines `view` shows without a range.
    pub view_lines: usize,
    /// Matches `search` shows.
    pub search_results: usize,
    /// Failing tests detailed in a test-run summary.
    pub failures_shown: usize,
    /// Characters of the repository map in the first observation.
    pub repo_map_chars: usize,
    /// What the first observation holds besides the problem statement.
    pub first_observation: FirstObservation,
}

/// What the first observation of an episode holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FirstObservation {
    /// The statement, a map of the repository and the tool instructions.
    #[default]
    Full,
    /// The statement's first paragraph (what the bug is; at hint levels 5 and 6 the line and
    /// its fix) and one line on how to answer: for small models, which lose the thread in a
    /// long prompt and for which every prompt token costs time. The failing tests are a `test`
    /// away.
    Brief,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            max_steps: 30,
            max_observation_chars: 120_000,
            observation_chars: 6_000,
            view_lines: 200,
            search_results: 50,
            failures_shown: 5,
            repo_map_chars: 2_500,
            first_observation: FirstObservation::Full,
        }
    }
}

impl EnvConfig {
    /// Checks that every budget is usable.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("max_steps", self.max_steps),
            ("max_observation_chars", self.max_observation_chars),
            ("observation_chars", self.observation_chars),
            ("view_lines", self.view_lines),
            ("search_results", self.search_results),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(EnvError::InvalidOption(format!("{name} must be positive")));
        }
        if self.observation_chars < 200 {
            return Err(EnvError::InvalidOption(
                "observation_chars must be at least 200 (error messages must fit)".into(),
            ));
        }
        Ok(())
    }

    pub(crate) fn tool_limits(&self) -> ToolLimits {
        ToolLimits {
            view_lines: self.view_lines,
            search_results: self.search_results,
            ..ToolLimits::default()
        }
    }
}

/// A test run's summary, as recorded in episodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRunSummary {
    /// How the run ended (`passed`, `failed`, `timeout`, ...).
    pub outcome: String,
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed or errored.
    pub failed: usize,
    /// Wall-clock seconds.
    pub duration_s: f64,
    /// Ids of the failing tests.
    pub failing: Vec<String>,
}

impl TestRunSummary {
    pub(crate) fn of(report: &TestReport) -> Self {
        TestRunSummary {
            outcome: report.outcome.as_str().to_string(),
            passed: report.passed,
            failed: report.failed + report.errors,
            duration_s: report.duration_s,
            failing: report
                .tests
                .iter()
                .filter(|t| !t.outcome.is_ok())
                .map(|t| t.id.clone())
                .collect(),
        }
    }

    pub(crate) fn has_failures(&self) -> bool {
        self.failed > 0 || !matches!(self.outcome.as_str(), "passed")
    }
}

/// One graded test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradedTest {
    /// pytest node id.
    pub id: String,
    /// `fail_to_pass` or `pass_to_pass`.
    pub expected: String,
    /// What happened (`missing` when the test did not run).
    pub outcome: String,
    /// The test counts as passing.
    pub passed: bool,
}

/// The grading of an episode's final state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grading {
    /// Every FAIL_TO_PASS and PASS_TO_PASS test passed.
    pub resolved: bool,
    /// Per-test results.
    pub tests: Vec<GradedTest>,
    /// How the grading run ended.
    pub run_outcome: String,
    /// Detail of an abnormal run (limit, crash, patch failure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Test and configuration files the agent changed, restored before grading.
    pub restored_files: Vec<String>,
    /// Seconds the grading took.
    pub duration_s: f64,
}

frognano_core::learner_step_record! {
    /// One step of an episode record.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct StepRecord {
        /// 1-based step number.
        pub step: usize,
        /// The action as given.
        pub action: Action,
        /// The parsed tool call (absent when the action did not parse).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tool: Option<frognano_core::ToolCall>,
        /// The observation returned.
        pub observation: String,
        /// The action was malformed or the tool failed.
        pub is_error: bool,
        /// Reward of the step.
        pub reward: f64,
        /// Milliseconds the step took.
        pub elapsed_ms: f64,
        /// The test run of a `run_tests` step.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tests: Option<TestRunSummary>,
        /// The policy's log-probabilities for this action (filled in by rollouts).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub logprobs: Vec<f32>,
    }
}

impl StepRecord {
    /// Tokens of the prompt the policy's model read for this step: the recorded prompt ids,
    /// else the `prompt_tokens` a policy put in its decision (absent for policies without a
    /// language model).
    pub fn prompt_tokens(&self) -> Option<usize> {
        if let Some(ids) = &self.prompt_ids {
            return Some(ids.len());
        }
        let counted = self.decision.as_ref()?.get("prompt_tokens")?.as_u64()?;
        usize::try_from(counted).ok()
    }

    /// Step `step`: `action` answered by `observation` with `reward`, no parsed tool call, no
    /// error, no test run, no time taken and nothing recorded for a learner.
    pub fn new(step: usize, action: Action, observation: String, reward: f64) -> Self {
        StepRecord {
            step,
            action,
            tool: None,
            observation,
            is_error: false,
            reward,
            elapsed_ms: 0.0,
            tests: None,
            logprobs: Vec::new(),
            prompt_ids: None,
            token_ids: None,
            loss_mask: None,
            decision: None,
        }
    }
}

/// Everything about one episode: a training trajectory and an evaluation record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// The task attempted.
    pub task_id: String,
    /// The summary metrics.
    pub outcome: EpisodeOutcome,
    /// The first observation.
    pub initial_observation: String,
    /// Every step.
    pub steps: Vec<StepRecord>,
    /// The grading of the final state (absent if the episode has not ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grading: Option<Grading>,
    /// The agent's changes as a diff against the buggy repository.
    pub patch: String,
    /// Milliseconds `reset` took.
    pub reset_ms: f64,
    /// Seconds from reset to the end.
    pub duration_s: f64,
    /// Why the episode failed before it ended on its own: the policy could not choose an
    /// action (see [`frognano_core::PolicyOutput::error`]). Such an episode is unresolved and
    /// carries no learning signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_error: Option<String>,
}

impl EpisodeRecord {
    /// The record of an episode that was not graded and kept no workspace (no patch, no
    /// timings): what environments without a repository, and unfinished episodes, record.
    pub fn ungraded(
        task_id: String,
        outcome: EpisodeOutcome,
        initial_observation: String,
        steps: Vec<StepRecord>,
    ) -> Self {
        EpisodeRecord {
            task_id,
            outcome,
            initial_observation,
            steps,
            grading: None,
            patch: String::new(),
            reset_ms: 0.0,
            duration_s: 0.0,
            policy_error: None,
        }
    }
}
