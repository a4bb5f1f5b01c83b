//! [`RepoEnv`]: one agent episode at a time over a sandboxed repository.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use frognano_core::{
    Action, Environment, EpisodeOutcome, FailingTest, Observation, PolicyContext, PolicyOutput,
    RunOutcome, SourceLocation, StepResult, Task, TestOutcome, TestReport, TestRunObservation,
    Turn,
};
use frognano_sandbox::{Sandbox, TestRequest, grading_args, workspace};
use serde_json::json;

use crate::patch::{self, FileTree};
use crate::protocol::{self, ToolRequest};
use crate::repo::{self, CleanRepo, RepoCache};
use crate::tools::Workspace;
use crate::{EnvError, Result};

pub use crate::record::{
    EnvConfig, EpisodeRecord, FirstObservation, GradedTest, Grading, StepRecord, TestRunSummary,
};

#[derive(Debug)]
struct Episode {
    task: Task,
    repo: Arc<CleanRepo>,
    buggy: FileTree,
    /// Files the bug touches: never treated as protected test files.
    bug_files: BTreeSet<String>,
    workspace: Workspace,
    // Dropped after `workspace`, which holds a handle into it.
    dir: tempfile::TempDir,
    /// What was written into the workspace at reset, to reuse it at the next reset.
    manifest: repo::Manifest,
    initial: Observation,
    history: Vec<Turn>,
    steps: Vec<StepRecord>,
    chars_used: usize,
    tool_errors: usize,
    test_runs: usize,
    met_failure: bool,
    started: Instant,
    reset_ms: f64,
    ended: Option<(EpisodeOutcome, Grading, String, f64)>,
}

/// The agent environment: a buggy repository in a private workspace, the tool protocol, and a
/// binary reward from the task's tests run in a fresh sandbox.
#[derive(Debug)]
pub struct RepoEnv {
    repos: Arc<RepoCache>,
    config: EnvConfig,
    episode: Option<Episode>,
}

impl RepoEnv {
    /// An environment over `sandbox`, with its own repository cache.
    pub fn new(sandbox: Arc<Sandbox>, config: EnvConfig) -> Result<Self> {
        Self::with_cache(Arc::new(RepoCache::new(sandbox)), config)
    }

    /// An environment sharing a repository cache (as the environments of a pool do).
    pub fn with_cache(repos: Arc<RepoCache>, config: EnvConfig) -> Result<Self> {
        config.validate()?;
        Ok(RepoEnv {
            repos,
            config,
            episode: None,
        })
    }

    /// The budgets in force.
    pub fn config(&self) -> &EnvConfig {
        &self.config
    }

    /// The task of the current (or last) episode.
    pub fn task(&self) -> Option<&Task> {
        self.episode.as_ref().map(|e| &e.task)
    }

    /// The workspace directory of the current episode (for inspection; the agent's tools are
    /// the way to change it).
    pub fn workspace_path(&self) -> Option<&std::path::Path> {
        self.episode.as_ref().map(|e| e.workspace.root())
    }

    /// True while an episode runs.
    pub fn is_running(&self) -> bool {
        self.episode.as_ref().is_some_and(|e| e.ended.is_none())
    }

    /// Starts an episode: materialises the buggy workspace and returns the first observation.
    ///
    /// This is [`Environment::reset`] with the typed [`EnvError`] (which callers match to tell
    /// a missing repository from a bad task); the trait method returns the same error carried
    /// in a [`frognano_core::Error`], from which `EnvError::from` recovers it.
    pub fn reset_task(&mut self, task: &Task) -> Result<Observation> {
        let started = Instant::now();
        crate::taskset::check_task(task).map_err(|message| EnvError::Task {
            task: task.id.clone(),
            message,
        })?;
        let repo = self.repos.get(&task.repo)?;
        let mut buggy = repo.files.clone();
        let bug_files = patch::apply(&mut buggy, &task.bug_patch)
            .map_err(|e| EnvError::Task {
                task: task.id.clone(),
                message: format!("the bug patch does not apply to the repository: {e}"),
            })?
            .into_iter()
            .collect();
        // The previous episode's workspace is reused: only what differs is rewritten.
        let reused = self.episode.take().and_then(|prev| {
            let Episode {
                workspace,
                dir,
                manifest,
                buggy: previous,
                ..
            } = prev;
            let dirty = workspace.written().clone();
            drop(workspace);
            repo::sync(dir.path(), &manifest, &previous, &buggy, &dirty)
                .ok()
                .map(|manifest| (dir, manifest))
        });
        let (dir, manifest) = match reused {
            Some(ready) => ready,
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("frognano-env-")
                    .tempdir()
                    .map_err(EnvError::io("create workspace"))?;
                let manifest = repo::materialise_tracked(&buggy, dir.path())?;
                (dir, manifest)
            }
        };
        let workspace = Workspace::open(dir.path(), self.config.tool_limits())?;
        let initial = Observation {
            text: self.initial_text(task, &buggy),
            is_error: false,
            test_run: None,
        };
        let reset_ms = started.elapsed().as_secs_f64() * 1e3;
        self.episode = Some(Episode {
            task: task.clone(),
            repo,
            buggy,
            bug_files,
            workspace,
            dir,
            manifest,
            initial: initial.clone(),
            history: Vec::new(),
            steps: Vec::new(),
            chars_used: initial.text.chars().count(),
            tool_errors: 0,
            test_runs: 0,
            met_failure: false,
            started,
            reset_ms,
            ended: None,
        });
        Ok(initial)
    }

    fn initial_text(&self, task: &Task, files: &FileTree) -> String {
        let statement =
            truncate_middle(task.problem_statement.trim(), self.config.observation_chars);
        if self.config.first_observation == FirstObservation::Brief {
            // The statement's first paragraph: what the bug is (at hint levels 5 and 6, the
            // line and its fix); the failing tests are a `test` away.
            let first = statement
                .split("\n\n")
                .next()
                .unwrap_or(&statement)
                .trim_end();
            return format!(
                "{first}\n\nReply with the fixed lines in a ```python block, or one command \
                 (`test`, `view PATH`, `edit PATH` with a SEARCH/REPLACE block, `submit`).\n"
            );
        }
        format!(
            "Fix the bug described below in the repository (a Python project; its tests run \
             with pytest).\n\n## Problem\n{statement}\n\n## Repository\n{}\n## Tools\n{}\n",
            repo_map(files, self.config.repo_map_chars),
            protocol::INSTRUCTIONS
        )
    }

    /// Executes one action: [`Environment::step`] with the typed [`EnvError`].
    pub fn step_action(&mut self, action: &Action) -> Result<StepResult> {
        let config = self.config;
        let repos = self.repos.clone();
        let Some(ep) = self.episode.as_mut().filter(|e| e.ended.is_none()) else {
            return Err(EnvError::NoEpisode);
        };
        let started = Instant::now();
        let parsed = protocol::parse_action(action);
        let mut tests = None;
        let mut test_run = None;
        let mut submitted = false;
        let (mut text, is_error) = match &parsed {
            Err(e) => (e.message.clone(), true),
            Ok(ToolRequest::Submit) => {
                submitted = true;
                ("Submitted. Your changes were graded.".to_string(), false)
            }
            Ok(ToolRequest::RunTests { tests: selection }) => {
                match run_agent_tests(repos.sandbox(), ep, selection, &config) {
                    Ok((text, summary, observed)) => {
                        ep.test_runs += 1;
                        if summary.has_failures() {
                            ep.met_failure = true;
                        }
                        tests = Some(summary);
                        test_run = Some(observed);
                        (text, false)
                    }
                    Err(AgentTestError::Refused(msg)) => (msg, true),
                    Err(AgentTestError::Host(e)) => return Err(e),
                }
            }
            Ok(request) => {
                let out = ep.workspace.execute(request);
                (out.text, out.is_error)
            }
        };
        if is_error {
            ep.tool_errors += 1;
            ep.met_failure = true;
        }
        text = truncate_middle(&text, config.observation_chars);
        ep.chars_used += text.chars().count();
        let step = ep.steps.len() + 1;
        let out_of_steps = step >= config.max_steps;
        let out_of_chars = ep.chars_used >= config.max_observation_chars;
        let truncated = !submitted && (out_of_steps || out_of_chars);
        if truncated {
            let why = if out_of_steps {
                format!("the step budget ({}) is used up", config.max_steps)
            } else {
                format!(
                    "the observation budget ({} characters) is used up",
                    config.max_observation_chars
                )
            };
            text.push_str(&format!(
                "\n[Episode over: {why}. Your changes were graded.]"
            ));
        }
        let mut info = json!({
            "step": step,
            "tool": parsed.as_ref().ok().map(|r| r.name()),
            "error": is_error,
        });
        if let Some(summary) = &tests {
            info["tests"] = json!(summary);
        }
        let mut reward = 0.0;
        if submitted || truncated {
            let current = repo::read_tree(ep.workspace.root())?;
            let grading = grade(repos.sandbox(), ep, &current)?;
            reward = if grading.resolved { 1.0 } else { 0.0 };
            let agent_patch = patch::diff_trees(&ep.buggy, &current, 3);
            let outcome = EpisodeOutcome {
                task_id: ep.task.id.clone(),
                resolved: grading.resolved,
                reward,
                steps: step,
                tool_errors: ep.tool_errors,
                test_runs: ep.test_runs,
                met_failure: ep.met_failure,
                recovered: ep.met_failure && grading.resolved,
                submitted,
                truncated,
            };
            info["grading"] = json!(grading);
            info["outcome"] = json!(outcome);
            let total = ep.started.elapsed().as_secs_f64();
            ep.ended = Some((outcome, grading, agent_patch, total));
        }
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        info["elapsed_ms"] = json!(elapsed_ms);
        let observation = Observation {
            text,
            is_error,
            test_run,
        };
        ep.steps.push(StepRecord {
            tool: parsed.as_ref().ok().map(ToolRequest::to_tool_call),
            is_error,
            elapsed_ms,
            tests,
            ..StepRecord::new(step, action.clone(), observation.text.clone(), reward)
        });
        ep.history.push(Turn {
            action: action.clone(),
            observation: observation.clone(),
        });
        Ok(StepResult {
            observation,
            reward,
            terminated: submitted,
            truncated,
            info,
        })
    }

    /// Attaches a policy's log-probs and token ids to the last step's record.
    pub fn annotate_last_step(&mut self, output: &PolicyOutput) {
        if let Some(step) = self.episode.as_mut().and_then(|e| e.steps.last_mut()) {
            step.logprobs = output.logprobs.clone();
            step.prompt_ids = output.prompt_ids.clone();
            step.token_ids = output.token_ids.clone();
            step.loss_mask = output.loss_mask.clone();
            step.decision = output.decision.clone();
        }
    }

    /// What a policy needs to choose the next action of the current episode.
    pub fn context(&self) -> Option<PolicyContext> {
        self.episode.as_ref().map(|e| PolicyContext {
            task_id: e.task.id.clone(),
            initial: e.initial.clone(),
            history: e.history.clone(),
        })
    }

    /// The record of the current or last episode.
    pub fn record(&self) -> Option<EpisodeRecord> {
        let ep = self.episode.as_ref()?;
        let (outcome, grading, agent_patch, duration_s) = match &ep.ended {
            Some((o, g, p, d)) => (o.clone(), Some(g.clone()), p.clone(), *d),
            None => (
                EpisodeOutcome {
                    task_id: ep.task.id.clone(),
                    resolved: false,
                    reward: 0.0,
                    steps: ep.steps.len(),
                    tool_errors: ep.tool_errors,
                    test_runs: ep.test_runs,
                    met_failure: ep.met_failure,
                    recovered: false,
                    submitted: false,
                    truncated: false,
                },
                None,
                String::new(),
                ep.started.elapsed().as_secs_f64(),
            ),
        };
        Some(EpisodeRecord {
            task_id: ep.task.id.clone(),
            outcome,
            initial_observation: ep.initial.text.clone(),
            steps: ep.steps.clone(),
            grading,
            patch: agent_patch,
            reset_ms: ep.reset_ms,
            duration_s,
            policy_error: None,
        })
    }
}

impl Environment for RepoEnv {
    fn reset(&mut self, task: &Task) -> frognano_core::Result<Observation> {
        Ok(self.reset_task(task)?)
    }

    fn step(&mut self, action: &Action) -> frognano_core::Result<StepResult> {
        Ok(self.step_action(action)?)
    }

    fn outcome(&self) -> Option<EpisodeOutcome> {
        self.episode
            .as_ref()
            .and_then(|e| e.ended.as_ref().map(|(o, ..)| o.clone()))
    }
}

/// Cuts `text` to at most `max` characters, keeping its head and tail around a marker.
pub fn truncate_middle(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let marker_room = 60;
    let keep = max.saturating_sub(marker_room);
    let head = keep * 2 / 3;
    let tail = keep - head;
    let head_text: String = text.chars().take(head).collect();
    let tail_text: String = text.chars().skip(total - tail).collect();
    format!(
        "{head_text}\n[... {} characters truncated ...]\n{tail_text}",
        total - head - tail
    )
}

/// True for files whose changes by the agent are discarded before grading: tests, test
/// configuration and interpreter hooks (so the agent cannot change what is graded).
pub fn is_protected(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let dirs: Vec<&str> = path.split('/').collect();
    let in_test_dir = dirs[..dirs.len() - 1]
        .iter()
        .any(|d| matches!(*d, "test" | "tests" | "testing"));
    in_test_dir
        || (name.starts_with("test_") && name.ends_with(".py"))
        || name.ends_with("_test.py")
        || matches!(
            name,
            "conftest.py"
                | "pytest.ini"
                | ".pytest.ini"
                | "tox.ini"
                | "setup.cfg"
                | "pyproject.toml"
                | "frognano.toml"
                | "sitecustomize.py"
                | "usercustomize.py"
        )
        || name.ends_with(".pth")
}

enum AgentTestError {
    Refused(String),
    Host(EnvError),
}

/// pytest arguments for an agent's test selection, refusing options (which could load plugins
/// or change the root) and paths outside the workspace; `-k EXPR` is allowed.
fn selection_args(selection: &[String]) -> std::result::Result<Vec<String>, String> {
    let mut args = Vec::new();
    let mut iter = selection.iter();
    while let Some(item) = iter.next() {
        if item == "-k" {
            let Some(expr) = iter.next() else {
                return Err("`-k` needs an expression: `test -k parse`.".into());
            };
            args.push("-k".into());
            args.push(expr.clone());
            continue;
        }
        if item.starts_with('-') {
            return Err(format!(
                "`{item}`: test takes test ids, files or `-k EXPR`, not other pytest options."
            ));
        }
        let (file, rest) = match item.split_once("::") {
            Some((f, r)) => (f, Some(r)),
            None => (item.as_str(), None),
        };
        let file = Workspace::resolve(file)?;
        args.push(match rest {
            Some(r) => format!("{file}::{r}"),
            None => file,
        });
    }
    Ok(args)
}

fn run_agent_tests(
    sandbox: &Sandbox,
    ep: &Episode,
    selection: &[String],
    config: &EnvConfig,
) -> std::result::Result<(String, TestRunSummary, TestRunObservation), AgentTestError> {
    let mut args = selection_args(selection).map_err(AgentTestError::Refused)?;
    if selection.is_empty() {
        args = ep.task.test_args.clone();
    }
    // The run gets its own copy: whatever the tests write never reaches the workspace.
    let copy = tempfile::Builder::new()
        .prefix("frognano-run-")
        .tempdir()
        .map_err(|e| AgentTestError::Host(EnvError::io("create test workspace")(e)))?;
    workspace::copy_repo(ep.workspace.root(), copy.path())
        .map_err(|e| AgentTestError::Host(e.into()))?;
    let request = TestRequest {
        pytest_args: args,
        limits: Some(ep.task.limits),
        ..TestRequest::default()
    };
    let report = sandbox
        .run_tests_in_workspace(&ep.repo.prepared, copy.path(), &request)
        .map_err(|e| AgentTestError::Host(e.into()))?;
    let summary = TestRunSummary::of(&report);
    Ok((
        describe_run(&report, &ep.task, config),
        summary,
        observe_run(&report, config),
    ))
}

/// Lines of a failing test's message a test-run observation shows (its tail).
const MESSAGE_LINES_SHOWN: usize = 12;

/// Failing tests a test-run observation names by id after the detailed ones.
const FAILING_IDS_LISTED: usize = 20;

/// The last [`MESSAGE_LINES_SHOWN`] lines of a failure message, as the observation shows them.
fn shown_message_lines(message: &str) -> Vec<&str> {
    let lines: Vec<&str> = message.lines().collect();
    lines[lines.len().saturating_sub(MESSAGE_LINES_SHOWN)..].to_vec()
}

/// The typed form of [`describe_run`]'s text: the same counts, outcome and failing tests (the
/// first `failures_shown` with the failure text shown and its traceback locations, then up to
/// [`FAILING_IDS_LISTED`] more by id).
fn observe_run(report: &TestReport, config: &EnvConfig) -> TestRunObservation {
    let failing = report
        .tests
        .iter()
        .filter(|t| !t.outcome.is_ok())
        .take(config.failures_shown + FAILING_IDS_LISTED)
        .enumerate()
        .map(|(i, test)| {
            let message = test
                .message
                .as_deref()
                .filter(|_| i < config.failures_shown)
                .map(|m| shown_message_lines(m).join("\n"));
            let locations = message
                .as_deref()
                .map(traceback_locations)
                .unwrap_or_default();
            FailingTest {
                id: test.id.clone(),
                outcome: test.outcome,
                message,
                locations,
            }
        })
        .collect();
    TestRunObservation {
        outcome: report.outcome,
        total: report.tests.len(),
        passed: report.passed,
        failed: report.failed + report.errors,
        skipped: report.skipped,
        duration_s: report.duration_s,
        failing,
    }
}

/// The repository locations a failure text names: lines that start (after indentation) with
/// `path.py:LINE:`, as pytest writes traceback entries. Absolute paths (the interpreter's own
/// modules) are left out, `./` prefixes dropped, and each location is listed once.
fn traceback_locations(message: &str) -> Vec<SourceLocation> {
    let mut out: Vec<SourceLocation> = Vec::new();
    for line in message.lines() {
        let line = line.trim_start();
        let end = line
            .find(|c: char| c.is_whitespace() || c == ':')
            .unwrap_or(line.len());
        let (path, rest) = line.split_at(end);
        if path.len() <= ".py".len() || !path.ends_with(".py") {
            continue;
        }
        let Some(rest) = rest.strip_prefix(':') else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || !rest[digits..].starts_with(':') {
            continue;
        }
        let path = path.trim_start_matches("./");
        let Ok(number) = rest[..digits].parse::<usize>() else {
            continue;
        };
        if path.is_empty() || path.starts_with('/') || number == 0 {
            continue;
        }
        let location = SourceLocation {
            path: path.to_string(),
            line: number,
        };
        if !out.contains(&location) {
            out.push(location);
        }
    }
    out
}

fn describe_run(report: &TestReport, task: &Task, config: &EnvConfig) -> String {
    let mut out = format!(
        "Ran {} tests in {:.2} s: {} passed, {} failed",
        report.tests.len(),
        report.duration_s,
        report.passed,
        report.failed + report.errors
    );
    if report.skipped > 0 {
        out.push_str(&format!(", {} skipped", report.skipped));
    }
    out.push('.');
    match report.outcome {
        RunOutcome::Timeout => out.push_str(&format!(
            "\nThe run hit the time limit ({} s): an infinite loop or a very slow test?",
            task.limits.timeout_s
        )),
        RunOutcome::MemoryExceeded => {
            out.push_str("\nThe run hit the memory limit: runaway allocation?")
        }
        RunOutcome::OutputExceeded => out.push_str("\nThe run hit the output or disk limit."),
        RunOutcome::Crashed => out.push_str("\nThe interpreter crashed."),
        RunOutcome::NoTests => out.push_str("\nNo tests were collected: check the test ids."),
        _ => {}
    }
    let failing: Vec<_> = report.tests.iter().filter(|t| !t.outcome.is_ok()).collect();
    for test in failing.iter().take(config.failures_shown) {
        out.push_str(&format!(
            "\n\n{} {}",
            test.outcome.as_str().to_uppercase(),
            test.id
        ));
        if let Some(message) = &test.message {
            for line in shown_message_lines(message) {
                out.push_str("\n    ");
                out.push_str(line);
            }
        }
    }
    if failing.len() > config.failures_shown {
        let rest: Vec<&str> = failing[config.failures_shown..]
            .iter()
            .take(FAILING_IDS_LISTED)
            .map(|t| t.id.as_str())
            .collect();
        out.push_str(&format!(
            "\n\n[{} more failing: {}{}]",
            failing.len() - config.failures_shown,
            rest.join(", "),
            if failing.len() - config.failures_shown > FAILING_IDS_LISTED {
                ", ..."
            } else {
                ""
            }
        ));
    }
    if report.tests.is_empty() && report.outcome != RunOutcome::Passed {
        let tail: Vec<&str> = report.stdout.lines().rev().take(15).collect();
        if !tail.is_empty() {
            out.push_str("\n\nLast output:\n");
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Grades the episode's final state (`current`, the workspace's files) in a fresh sandbox: the
/// buggy repository plus the agent's changes to non-protected files, plus the task's test patch.
fn grade(sandbox: &Sandbox, ep: &Episode, current: &FileTree) -> Result<Grading> {
    let started = Instant::now();
    let mut graded = ep.buggy.clone();
    let mut restored = Vec::new();
    let paths: BTreeSet<&String> = current.keys().chain(ep.buggy.keys()).collect();
    for path in paths {
        let protected = is_protected(path) && !ep.bug_files.contains(path.as_str());
        let now = current.get(path);
        if protected {
            if now != ep.buggy.get(path) {
                restored.push(path.clone());
            }
            continue;
        }
        match now {
            Some(data) => graded.insert(path.clone(), data.clone()),
            None => graded.remove(path),
        };
    }
    let ungraded = |detail: String| Grading {
        resolved: false,
        tests: Vec::new(),
        run_outcome: "not_run".into(),
        detail: Some(detail),
        restored_files: restored.clone(),
        duration_s: started.elapsed().as_secs_f64(),
    };
    if let Some(test_patch) = &ep.task.test_patch
        && let Err(e) = patch::apply(&mut graded, test_patch)
    {
        return Ok(ungraded(format!("the test patch does not apply: {e}")));
    }
    let dir = tempfile::Builder::new()
        .prefix("frognano-grade-")
        .tempdir()
        .map_err(EnvError::io("create grading workspace"))?;
    repo::materialise(&graded, dir.path())?;
    let request = TestRequest {
        pytest_args: grading_args(&ep.task.fail_to_pass, &ep.task.pass_to_pass),
        limits: Some(ep.task.limits),
        ..TestRequest::default()
    };
    let report = sandbox.run_tests_in_workspace(&ep.repo.prepared, dir.path(), &request)?;
    let mut tests = Vec::new();
    for (expected, ids) in [
        ("fail_to_pass", &ep.task.fail_to_pass),
        ("pass_to_pass", &ep.task.pass_to_pass),
    ] {
        for id in ids {
            let (outcome, passed) = match report.test(id) {
                Some(t) => (
                    t.outcome.as_str().to_string(),
                    matches!(t.outcome, TestOutcome::Passed | TestOutcome::Xfailed),
                ),
                None => ("missing".to_string(), false),
            };
            tests.push(GradedTest {
                id: id.clone(),
                expected: expected.into(),
                outcome,
                passed,
            });
        }
    }
    Ok(Grading {
        resolved: !tests.is_empty() && tests.iter().all(|t| t.passed),
        tests,
        run_outcome: report.outcome.as_str().to_string(),
        detail: report.detail.clone(),
        restored_files: restored,
        duration_s: started.elapsed().as_secs_f64(),
    })
}

/// A short map of the repository: its files with line counts, and the top-level classes and
/// functions of its non-test modules, within `budget` characters.
pub fn repo_map(files: &FileTree, budget: usize) -> String {
    let mut out = String::new();
    let mut omitted = 0;
    for (path, data) in files {
        let text = std::str::from_utf8(data).ok();
        let lines = text.map_or(0, |t| t.lines().count());
        let mut entry = format!("{path} ({lines} lines)");
        if path.ends_with(".py")
            && !is_protected(path)
            && let Some(text) = text
        {
            let defs: Vec<&str> = text
                .lines()
                .filter_map(|l| {
                    let rest = l
                        .strip_prefix("def ")
                        .or_else(|| l.strip_prefix("class "))?;
                    rest.split(['(', ':']).next()
                })
                .filter(|name| !name.starts_with('_'))
                .collect();
            if !defs.is_empty() {
                entry.push_str(": ");
                entry.push_str(&defs.join(", "));
            }
        }
        entry.push('\n');
        if out.len() + entry.len() > budget {
            omitted += 1;
            continue;
        }
        out.push_str(&entry);
    }
    if omitted > 0 {
        out.push_str(&format!("[... {omitted} more files; use `ls`]\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_both_ends_and_says_so() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let cut = truncate_middle(&text, 500);
        assert!(cut.chars().count() <= 500, "{}", cut.len());
        assert!(cut.starts_with("line 0\n"));
        assert!(cut.trim_end().ends_with("line 999"));
        assert!(cut.contains("characters truncated"));
        assert_eq!(truncate_middle("short", 500), "short");
    }

    #[test]
    fn protected_files_cover_tests_and_configuration() {
        for p in [
            "tests/test_a.py",
            "tests/helpers.py",
            "pkg/test_x.py",
            "x_test.py",
            "conftest.py",
            "pyproject.toml",
            "sub/setup.cfg",
            "sitecustomize.py",
        ] {
            assert!(is_protected(p), "{p}");
        }
        for p in [
            "pkg/mod.py",
            "src/pkg/testament.py",
            "README.md",
            "latest.py",
        ] {
            assert!(!is_protected(p), "{p}");
        }
    }

    #[test]
    fn selection_refuses_options_and_escapes() {
        assert_eq!(
            selection_args(&["./tests/t.py::test_a".into(), "-k".into(), "x or y".into()]),
            Ok(vec![
                "tests/t.py::test_a".into(),
                "-k".into(),
                "x or y".into()
            ])
        );
        assert!(selection_args(&["-p".into(), "evil".into()]).is_err());
        assert!(selection_args(&["--rootdir=/".into()]).is_err());
        assert!(selection_args(&["../../etc".into()]).is_err());
    }

    #[test]
    fn a_test_run_observation_types_what_its_text_shows() {
        let record =
            |id: String, outcome: TestOutcome, message: Option<String>| frognano_core::TestRecord {
                id,
                outcome,
                duration_s: 0.01,
                message,
                platform: None,
            };
        let long: String = (0..20).map(|i| format!("context line {i}\n")).collect();
        let mut tests = vec![
            record("tests/test_m.py::test_ok".into(), TestOutcome::Passed, None),
            record(
                "tests/test_m.py::test_a".into(),
                TestOutcome::Failed,
                Some(format!(
                    "{long}    def test_a():\n>       assert clamp(5, 0, 3) == 3\nE       assert 4 == 3\n\n\
                     tests/test_m.py:4: \n./pkg/m.py:12: in clamp\n/lib/python3.13/x.py:7: in f\n\
                     pkg/m.py:12: AssertionError"
                )),
            ),
            record(
                "tests/test_m.py::test_b[x y]".into(),
                TestOutcome::Error,
                Some("pkg/util.py:3: KeyError".into()),
            ),
        ];
        for i in 0..30 {
            tests.push(record(
                format!("tests/test_more.py::test_{i}"),
                TestOutcome::Failed,
                Some(format!("pkg/more.py:{}: ValueError", i + 1)),
            ));
        }
        let report = TestReport::from_records(tests, 0.25);
        let config = EnvConfig::default();
        let observed = observe_run(&report, &config);
        assert_eq!(observed.outcome, RunOutcome::Failed);
        assert_eq!(
            (observed.total, observed.passed, observed.failed),
            (33, 1, 32)
        );
        assert!(!observed.ended_abnormally());
        // The detailed failures, then ids up to the listed count, as the text names them.
        assert_eq!(
            observed.failing.len(),
            config.failures_shown + FAILING_IDS_LISTED
        );
        let first = &observed.failing[0];
        assert_eq!(first.id, "tests/test_m.py::test_a");
        assert_eq!(first.outcome, TestOutcome::Failed);
        let message = first.message.as_deref().expect("a detailed failure");
        assert_eq!(message.lines().count(), MESSAGE_LINES_SHOWN);
        assert!(!message.contains("context line 0"));
        let at = |path: &str, line: usize| SourceLocation {
            path: path.into(),
            line,
        };
        assert_eq!(
            first.locations,
            vec![at("tests/test_m.py", 4), at("pkg/m.py", 12)],
            "relative paths, ./ dropped, each once"
        );
        assert_eq!(observed.failing[1].outcome, TestOutcome::Error);
        assert_eq!(observed.failing[1].locations, vec![at("pkg/util.py", 3)]);
        let listed = &observed.failing[config.failures_shown];
        assert!(listed.message.is_none() && listed.locations.is_empty());
        // Everything typed is in the text too.
        let task: Task = serde_json::from_value(json!({
            "id": "t",
            "repo": {"kind": "path", "path": "repo"},
            "problem_statement": "p",
        }))
        .expect("task");
        let text = describe_run(&report, &task, &config);
        assert!(
            text.starts_with("Ran 33 tests in 0.25 s: 1 passed, 32 failed."),
            "{text}"
        );
        for test in &observed.failing {
            assert!(text.contains(&test.id), "{}", test.id);
            for line in test.message.iter().flat_map(|m| m.lines()) {
                assert!(text.contains(&format!("\n    {line}")), "{line}");
            }
        }
        assert!(!text.contains("tests/test_more.py::test_29"));
        // A run cut short by a limit.
        let mut limit = TestReport::from_records(Vec::new(), 3.0);
        limit.outcome = RunOutcome::Timeout;
        let observed = observe_run(&limit, &config);
        assert!(observed.ended_abnormally() && observed.failing.is_empty());
    }

    #[test]
    fn repo_map_lists_files_and_definitions() {
        let files: FileTree = [
            (
                "pkg/m.py".to_string(),
                Arc::new(b"def parse(x):\n    pass\n\nclass Node:\n    pass\n\ndef _hidden():\n    pass\n".to_vec()),
            ),
            ("tests/test_m.py".to_string(), Arc::new(b"def test_a():\n    pass\n".to_vec())),
        ]
        .into();
        let map = repo_map(&files, 1000);
        assert!(map.contains("pkg/m.py (8 lines): parse, Node"), "{map}");
        assert!(map.contains("tests/test_m.py (2 lines)\n"), "{map}");
        let small = repo_map(&files, 30);
        assert!(small.contains("1 more files"), "{small}");
    }
}
