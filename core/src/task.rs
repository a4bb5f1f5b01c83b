use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{Error, ErrorKind, Result};

/// Where a task's clean repository comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RepoSource {
    /// A directory on the host, with the sha256 of its tracked contents when known.
    Path {
        /// The clean repository.
        path: PathBuf,
        /// Content hash of the clean tree, used to detect a repository that changed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_hash: Option<String>,
    },
    /// A `.zip` or `.tar.gz` archive of the repository (unpacked once into the cache).
    Bundle {
        /// The archive.
        path: PathBuf,
        /// Content hash of the unpacked tree.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content_hash: Option<String>,
    },
}

impl RepoSource {
    /// The directory or archive this source names.
    pub fn path(&self) -> &std::path::Path {
        match self {
            RepoSource::Path { path, .. } | RepoSource::Bundle { path, .. } => path,
        }
    }

    /// The recorded content hash, when there is one.
    pub fn content_hash(&self) -> Option<&str> {
        match self {
            RepoSource::Path { content_hash, .. } | RepoSource::Bundle { content_hash, .. } => {
                content_hash.as_deref()
            }
        }
    }

    /// The same kind of source at another path, keeping its content hash.
    pub fn with_path(&self, path: std::path::PathBuf) -> RepoSource {
        match self {
            RepoSource::Path { content_hash, .. } => RepoSource::Path {
                path,
                content_hash: content_hash.clone(),
            },
            RepoSource::Bundle { content_hash, .. } => RepoSource::Bundle {
                path,
                content_hash: content_hash.clone(),
            },
        }
    }

    /// The same source with its path resolved against `base` when it is relative (task files
    /// name repositories relative to themselves).
    pub fn resolved_against(&self, base: &std::path::Path) -> RepoSource {
        let resolve = |path: &PathBuf| {
            if path.is_absolute() {
                path.clone()
            } else {
                base.join(path)
            }
        };
        match self {
            RepoSource::Path { path, content_hash } => RepoSource::Path {
                path: resolve(path),
                content_hash: content_hash.clone(),
            },
            RepoSource::Bundle { path, content_hash } => RepoSource::Bundle {
                path: resolve(path),
                content_hash: content_hash.clone(),
            },
        }
    }
}

/// Resource limits for sandboxed runs of a task or command.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Seconds of the guest's own time per run: its CPU time plus the time it waits of its own
    /// accord (a sleep), not the time the machine's load makes it wait for a core, so that a
    /// verdict does not depend on what else runs beside it. Where the kernel does not say how
    /// long a thread waited for a core, CPU time alone counts and a guest that sleeps is
    /// stopped after four times this in wall-clock seconds.
    pub timeout_s: f64,
    /// Linear-memory cap of the guest, in MiB.
    pub memory_mb: u64,
    /// Cap on captured stdout plus stderr, in bytes.
    pub output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout_s: 120.0,
            memory_mb: 1024,
            output_bytes: 4 << 20,
        }
    }
}

impl Limits {
    /// Checks that every limit is positive and finite.
    pub fn validate(&self) -> Result<()> {
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            return Err(Error::invalid(
                "limits",
                format!(
                    "timeout_s must be a positive number of seconds, got {}",
                    self.timeout_s
                ),
            ));
        }
        if self.memory_mb == 0 || self.memory_mb > 4096 {
            return Err(Error::invalid(
                "limits",
                format!(
                    "memory_mb must be between 1 and 4096 (wasm32 address space), got {}",
                    self.memory_mb
                ),
            ));
        }
        if self.output_bytes == 0 {
            return Err(Error::invalid("limits", "output_bytes must be positive"));
        }
        Ok(())
    }
}

/// A bug-fix task: a repository, a bug applied to it, and the tests that grade a fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Unique id of the task.
    pub id: String,
    /// The clean repository.
    pub repo: RepoSource,
    /// The bug, as a unified diff against the clean repository (empty when the repository is
    /// already in its buggy state, as with imported SWE-bench records).
    #[serde(default)]
    pub bug_patch: String,
    /// A known fix, as a unified diff against the buggy state (SWE-bench's `patch`). When absent
    /// the reverse of `bug_patch` is the fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold_patch: Option<String>,
    /// Tests added or changed by the fix (SWE-bench's `test_patch`): applied only when grading,
    /// never shown to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_patch: Option<String>,
    /// What the agent is told.
    pub problem_statement: String,
    /// Tests that fail with the bug and must pass after the fix.
    #[serde(default)]
    pub fail_to_pass: Vec<String>,
    /// Tests that pass with the bug and must keep passing.
    #[serde(default)]
    pub pass_to_pass: Vec<String>,
    /// pytest arguments that select "all tests" for the agent's test runs (empty: the
    /// repository's configured suite).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub test_args: Vec<String>,
    /// Limits for the task's test runs.
    #[serde(default)]
    pub limits: Limits,
    /// How the task was made, difficulty features, seed.
    #[serde(default)]
    pub metadata: serde_json::Map<String, serde_json::Value>,
}

impl Task {
    /// A task on the repository at `repo` with the given statement and FAIL_TO_PASS tests, no
    /// bug patch and defaults for everything else (no PASS_TO_PASS tests, default limits, no
    /// metadata).
    pub fn new(
        id: impl Into<String>,
        repo: impl Into<PathBuf>,
        problem_statement: impl Into<String>,
        fail_to_pass: Vec<String>,
    ) -> Self {
        Task {
            id: id.into(),
            repo: RepoSource::Path {
                path: repo.into(),
                content_hash: None,
            },
            bug_patch: String::new(),
            gold_patch: None,
            test_patch: None,
            problem_statement: problem_statement.into(),
            fail_to_pass,
            pass_to_pass: Vec::new(),
            test_args: Vec::new(),
            limits: Limits::default(),
            metadata: serde_json::Map::new(),
        }
    }

    /// Checks what can be checked without the repository: a usable id, at least one
    /// FAIL_TO_PASS test, no test both FAIL_TO_PASS and PASS_TO_PASS, sane limits, and a bug or
    /// a fix to work from.
    pub fn validate(&self) -> Result<()> {
        if self.id.trim().is_empty() {
            return Err(Error::invalid_as(
                ErrorKind::Task,
                "task",
                "field `id` must not be empty",
            ));
        }
        if self.fail_to_pass.is_empty() {
            return Err(Error::invalid_as(
                ErrorKind::Task,
                "task",
                format!(
                    "task {}: field `fail_to_pass` must name at least one test",
                    self.id
                ),
            ));
        }
        for (field, ids) in [
            ("fail_to_pass", &self.fail_to_pass),
            ("pass_to_pass", &self.pass_to_pass),
        ] {
            if let Some(bad) = ids
                .iter()
                .find(|t| t.trim().is_empty() || t.starts_with('-'))
            {
                return Err(Error::invalid_as(
                    ErrorKind::Task,
                    "task",
                    format!(
                        "task {}: field `{field}` holds {bad:?}, which is not a pytest test id",
                        self.id
                    ),
                ));
            }
        }
        if let Some(both) = self
            .fail_to_pass
            .iter()
            .find(|t| self.pass_to_pass.contains(t))
        {
            return Err(Error::invalid_as(
                ErrorKind::Task,
                "task",
                format!(
                    "task {}: test {both} is in both fail_to_pass and pass_to_pass",
                    self.id
                ),
            ));
        }
        if self.bug_patch.trim().is_empty() && self.gold_patch.is_none() {
            return Err(Error::invalid_as(
                ErrorKind::Task,
                "task",
                format!(
                    "task {}: needs a `bug_patch` (or, for a repository already in its buggy \
                     state, a `gold_patch`)",
                    self.id
                ),
            ));
        }
        self.limits.validate().map_err(|e| {
            Error::invalid_as(ErrorKind::Task, "task", format!("task {}: {e}", self.id))
        })
    }
}

/// A structured tool call, in the shape of OpenAI function calling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Tool name, e.g. `view` or `run_tests`.
    pub name: String,
    /// Tool arguments.
    #[serde(default)]
    pub arguments: serde_json::Value,
}

/// What an agent emits in one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Raw model text, to be parsed by the environment's tool grammar.
    Text {
        /// The text.
        text: String,
    },
    /// An already structured tool call.
    Tool(ToolCall),
}

/// What an agent sees after a reset or a step.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Observation {
    /// The text shown to the policy.
    pub text: String,
    /// True when the observation reports a malformed action or a failed tool call.
    #[serde(default)]
    pub is_error: bool,
    /// The typed form of a test run's text, when the step ran tests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_run: Option<crate::TestRunObservation>,
}

/// The result of one environment step (Gymnasium's five-tuple as a record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// What the agent sees next.
    pub observation: Observation,
    /// Reward for this step.
    pub reward: f64,
    /// The episode ended by the agent (submit) or by the task.
    pub terminated: bool,
    /// The episode was cut short by a budget.
    pub truncated: bool,
    /// Extra structured information (per-test results, timings).
    #[serde(default)]
    pub info: serde_json::Value,
}

/// Summary of a finished episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeOutcome {
    /// The task that was attempted.
    pub task_id: String,
    /// Every graded test passed.
    pub resolved: bool,
    /// Total reward.
    pub reward: f64,
    /// Steps taken.
    pub steps: usize,
    /// Malformed actions and failed tool calls.
    pub tool_errors: usize,
    /// Test runs the agent asked for.
    pub test_runs: usize,
    /// The episode met a failing test run or a tool error (malformed action, failed tool call).
    #[serde(default)]
    pub met_failure: bool,
    /// The episode met a failing test run or a tool error and still ended resolved.
    pub recovered: bool,
    /// The agent submitted (rather than running out of budget).
    #[serde(default)]
    pub submitted: bool,
    /// The episode ended because a budget (steps, observation characters) ran out.
    #[serde(default)]
    pub truncated: bool,
}

/// One turn of an episode's history, as a policy sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The action taken.
    pub action: Action,
    /// What came back.
    pub observation: Observation,
}

/// Everything a policy needs to choose the next action of one episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PolicyContext {
    /// The task being attempted.
    pub task_id: String,
    /// The first observation (problem statement, repository map, tool instructions).
    pub initial: Observation,
    /// Every turn so far.
    pub history: Vec<Turn>,
}

crate::learner_step_record! {
    /// A policy's choice for one episode, with what RL needs to learn from it.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct PolicyOutput {
        /// The action to take.
        pub action: Action,
        /// Log-probabilities of the sampled choice(s), one per generated token or decision.
        #[serde(default)]
        pub logprobs: Vec<f32>,
    }
    after {
        /// Why the policy could not choose an action for this episode (a served model's request
        /// failed after its retries, say). The rollout ends such an episode as failed,
        /// unresolved and marked with this reason, and goes on with the others; `action` is not
        /// taken.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub error: Option<String>,
    }
}

impl PolicyOutput {
    /// An output with an action and nothing for a learner (a scripted or fixed choice).
    pub fn action(action: Action) -> Self {
        PolicyOutput {
            action,
            logprobs: Vec::new(),
            prompt_ids: None,
            token_ids: None,
            loss_mask: None,
            decision: None,
            error: None,
        }
    }

    /// An output that reports that no action could be chosen for this episode (see
    /// [`PolicyOutput::error`]).
    pub fn failed(reason: impl Into<String>) -> Self {
        PolicyOutput {
            error: Some(reason.into()),
            ..PolicyOutput::action(Action::Text {
                text: String::new(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_reject_nonsense() {
        assert!(Limits::default().validate().is_ok());
        for bad in [
            Limits {
                timeout_s: 0.0,
                ..Limits::default()
            },
            Limits {
                timeout_s: f64::NAN,
                ..Limits::default()
            },
            Limits {
                memory_mb: 0,
                ..Limits::default()
            },
            Limits {
                memory_mb: 5000,
                ..Limits::default()
            },
            Limits {
                output_bytes: 0,
                ..Limits::default()
            },
        ] {
            let err = bad.validate().expect_err("must be rejected");
            assert!(err.to_string().starts_with("invalid limits"), "{err}");
        }
    }

    #[test]
    fn action_json_is_tagged() {
        let action = Action::Tool(ToolCall {
            name: "view".into(),
            arguments: serde_json::json!({"path": "a.py"}),
        });
        let json = serde_json::to_string(&action).expect("serialise");
        assert!(json.contains("\"type\":\"tool\""), "{json}");
        let back: Action = serde_json::from_str(&json).expect("parse");
        assert_eq!(back, action);
        assert!(serde_json::from_str::<Action>("{\"type\":\"dance\"}").is_err());
    }
}
