//! The episode as the agent knows it, replayed from the history: the files read, the edits
//! applied, the test runs and what they showed ([`TestRun`]), and from that the next move.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use frognano_core::{Action, Observation, PolicyContext};
use frognano_env::{ToolRequest, parse_action};
use regex::Regex;

use super::RepairConfig;
use super::candidates::{Candidate, candidates};
use super::source::{identifiers, is_test_file, statement_modules};
use super::test_run::TestRun;

/// A numbered line of a `view` observation (`  12\tcode`).
fn numbered_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^\s*(\d+)\t(.*)$").unwrap_or_else(|e| panic!("{e}")))
}

/// A file of the repository map in the first observation (`pkg/m.py (120 lines)`).
fn repo_map_line() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^(\S+\.py) \((\d+) lines\)").unwrap_or_else(|e| panic!("{e}")))
}

/// What the agent knows of one file.
#[derive(Debug, Clone, Default)]
struct FileView {
    lines: BTreeMap<usize, String>,
    /// Number of lines, once known (repository map or a view past the end).
    total: Option<usize>,
}

impl FileView {
    /// The first line not yet seen.
    fn first_missing(&self) -> Option<usize> {
        let total = self.total?;
        (1..=total).find(|l| !self.lines.contains_key(l))
    }

    /// The whole text, once every line has been seen.
    fn text(&self) -> Option<String> {
        let total = self.total?;
        if self.first_missing().is_some() {
            return None;
        }
        let mut text = String::new();
        for l in 1..=total {
            text.push_str(self.lines.get(&l)?);
            text.push('\n');
        }
        Some(text)
    }
}

/// An edit the tool applied (kept to undo it in the agent's copy).
#[derive(Debug, Clone)]
struct AppliedEdit {
    path: String,
    before: String,
}

/// What the last step leaves to do before the next choice.
#[derive(Debug, Clone, Copy, PartialEq)]
enum PendingStep {
    Nothing,
    /// An edit was applied: run the tests that failed before it.
    TestFailing,
    /// Fewer of those fail: run the whole suite.
    TestAll,
    /// The tests after an edit did not improve: undo it.
    Undo,
}

/// Failing tests re-run by id after an edit (more: the whole suite at once).
const SUBSET_LIMIT: usize = 25;

/// The episode replayed from its history.
#[derive(Debug, Default)]
pub(super) struct EpisodeState {
    statement: String,
    repo_files: BTreeMap<String, usize>,
    views: BTreeMap<String, FileView>,
    /// Current text of each fully read file (views plus the agent's own edits).
    texts: BTreeMap<String, String>,
    applied: Vec<AppliedEdit>,
    /// Edits tried (path, search, replace), kept or not.
    tried: BTreeSet<(String, String, String)>,
    attempts: usize,
    baseline: Option<TestRun>,
    /// Failures of the first run: the statement of what is broken.
    first_failures: Option<TestRun>,
    runs: usize,
    pending: Option<PendingStep>,
    submitted: bool,
}

/// The policy's next move.
pub(super) enum Move {
    /// A scripted tool call (run the tests, read, undo, submit).
    Tool(ToolRequest),
    /// A choice among candidate repairs.
    Choose(Vec<Candidate>),
}

impl EpisodeState {
    /// The state after the turns of `context`.
    pub(super) fn replay(context: &PolicyContext) -> Self {
        let mut state = EpisodeState {
            statement: context.initial.text.clone(),
            ..EpisodeState::default()
        };
        for line in context.initial.text.lines() {
            if let Some(c) = repo_map_line().captures(line) {
                state
                    .repo_files
                    .insert(c[1].to_string(), c[2].parse().unwrap_or(0));
            }
        }
        for turn in &context.history {
            state.apply_turn(&turn.action, &turn.observation);
        }
        state
    }

    fn apply_turn(&mut self, action: &Action, observation: &Observation) {
        let Ok(request) = parse_action(action) else {
            return;
        };
        match request {
            ToolRequest::View { path, start, end } if !observation.is_error => {
                self.read_view(&path, start, end, &observation.text)
            }
            ToolRequest::View { path, .. } => {
                // "PATH has N lines; line X is past the end."
                if let Some(n) = observation
                    .text
                    .split_once(" has ")
                    .and_then(|(_, rest)| rest.split_once(" lines"))
                    .and_then(|(n, _)| n.trim().parse::<usize>().ok())
                {
                    let view = self.views.entry(path.clone()).or_default();
                    view.total = Some(n);
                    self.complete(&path);
                }
            }
            ToolRequest::Edit {
                path,
                search,
                replace,
            } => {
                self.attempts += 1;
                self.tried
                    .insert((path.clone(), search.clone(), replace.clone()));
                if !observation.is_error
                    && let Some(text) = self.texts.get_mut(&path)
                {
                    let before = text.clone();
                    *text = text.replacen(&search, &replace, 1);
                    self.applied.push(AppliedEdit { path, before });
                    self.pending = Some(PendingStep::TestFailing);
                } else {
                    self.pending = Some(PendingStep::Nothing);
                }
            }
            ToolRequest::RunTests { tests } => {
                let run = TestRun::from_observation(observation.test_run.as_ref());
                self.runs += 1;
                if self.first_failures.is_none() {
                    self.first_failures = Some(run.clone());
                }
                match (self.pending, &self.baseline) {
                    (Some(PendingStep::TestFailing), Some(_)) if !tests.is_empty() => {
                        // Only the previously failing tests ran: go on if fewer fail.
                        self.pending = Some(if !run.abnormal && run.failed < tests.len() {
                            PendingStep::TestAll
                        } else {
                            PendingStep::Undo
                        });
                    }
                    (Some(PendingStep::TestFailing | PendingStep::TestAll), Some(base)) => {
                        if run.improves_on(base) {
                            self.baseline = Some(run);
                            self.pending = Some(PendingStep::Nothing);
                        } else {
                            self.pending = Some(PendingStep::Undo);
                        }
                    }
                    _ => {
                        self.baseline = Some(run);
                        self.pending = Some(PendingStep::Nothing);
                    }
                }
            }
            ToolRequest::Undo => {
                // A failed undo (nothing to undo) must not be retried forever.
                if let Some(applied) = self.applied.pop()
                    && !observation.is_error
                {
                    self.texts.insert(applied.path, applied.before);
                }
                self.pending = Some(PendingStep::Nothing);
            }
            ToolRequest::Submit => self.submitted = true,
            _ => {}
        }
    }

    fn read_view(&mut self, path: &str, start: Option<usize>, end: Option<usize>, text: &str) {
        let view = self.views.entry(path.to_string()).or_default();
        if view.total.is_none() {
            view.total = self.repo_files.get(path).copied();
        }
        let mut last_seen = 0;
        for line in text.lines() {
            if let Some(c) = numbered_line().captures(line)
                && let Ok(n) = c[1].parse::<usize>()
            {
                view.lines.insert(n, c[2].to_string());
                last_seen = last_seen.max(n);
            }
        }
        // A ranged view that stopped short of its end reached the end of the file.
        if let (Some(s), Some(e)) = (start, end)
            && last_seen >= s
            && last_seen < e
            && !text.contains("characters omitted")
            && !text.contains("truncated")
            && view.total.is_none()
        {
            view.total = Some(last_seen);
        }
        self.complete(path);
    }

    fn complete(&mut self, path: &str) {
        if self.texts.contains_key(path) {
            return;
        }
        if let Some(text) = self.views.get(path).and_then(FileView::text) {
            self.texts.insert(path.to_string(), text);
        }
    }

    /// Files worth repairing, most likely first: traceback locations of the current failures
    /// (innermost last in pytest's output, so reversed), then modules the statement names.
    fn target_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        let push = |f: String, files: &mut Vec<String>| {
            if !files.contains(&f) {
                files.push(f);
            }
        };
        if let Some(base) = &self.baseline {
            for (path, _) in base.locations.iter().rev() {
                if self.repo_files.contains_key(path) {
                    push(path.clone(), &mut files);
                }
            }
        }
        for module in statement_modules(&self.statement) {
            let rel = module.replace('.', "/");
            for file in self.repo_files.keys() {
                if is_test_file(file) {
                    continue;
                }
                let hit = file == &format!("{rel}.py")
                    || file.ends_with(&format!("/{rel}.py"))
                    || file == &format!("{rel}/__init__.py")
                    || file.ends_with(&format!("/{rel}/__init__.py"));
                if hit {
                    push(file.clone(), &mut files);
                }
            }
        }
        if files.is_empty() {
            // Nothing named: the source files whose names the failing tests mention.
            let words = self
                .baseline
                .as_ref()
                .map(|b| identifiers(&b.failing.iter().cloned().collect::<Vec<_>>().join(" ")))
                .unwrap_or_default();
            for file in self.repo_files.keys() {
                let stem = file
                    .rsplit('/')
                    .next()
                    .unwrap_or(file)
                    .trim_end_matches(".py");
                if file.ends_with(".py")
                    && !is_test_file(file)
                    && words.iter().any(|w| w.contains(stem))
                {
                    push(file.clone(), &mut files);
                }
            }
        }
        files
    }

    /// What to do next: the pending test run or undo, reading the next target file, a choice
    /// among its repairs, or submitting.
    pub(super) fn next_move(&self, config: &RepairConfig) -> Move {
        let submit = Move::Tool(ToolRequest::Submit);
        if self.submitted {
            return submit;
        }
        let all = Move::Tool(ToolRequest::RunTests { tests: Vec::new() });
        match self.pending {
            None | Some(PendingStep::TestAll) => return all,
            Some(PendingStep::TestFailing) => {
                let failing = self
                    .baseline
                    .as_ref()
                    .filter(|b| !b.abnormal && b.failing.len() == b.failed)
                    .map(|b| b.failing.iter().cloned().collect::<Vec<_>>())
                    .unwrap_or_default();
                if failing.is_empty() || failing.len() > SUBSET_LIMIT {
                    return all;
                }
                return Move::Tool(ToolRequest::RunTests { tests: failing });
            }
            Some(PendingStep::Undo) => return Move::Tool(ToolRequest::Undo),
            Some(PendingStep::Nothing) => {}
        }
        let Some(base) = &self.baseline else {
            return Move::Tool(ToolRequest::RunTests { tests: Vec::new() });
        };
        if base.passed() || self.attempts >= config.max_attempts {
            return submit;
        }
        for path in self.target_files() {
            let total = self
                .views
                .get(&path)
                .and_then(|v| v.total)
                .or_else(|| self.repo_files.get(&path).copied())
                .unwrap_or(0);
            if total > config.max_file_lines {
                continue;
            }
            let Some(text) = self.texts.get(&path) else {
                let first = self
                    .views
                    .get(&path)
                    .and_then(|v| {
                        if v.total.is_some() {
                            v.first_missing()
                        } else {
                            v.lines.keys().last().map(|l| l + 1)
                        }
                    })
                    .unwrap_or(1);
                return Move::Tool(ToolRequest::View {
                    path: path.clone(),
                    start: Some(first),
                    end: Some(first + config.view_chunk - 1),
                });
            };
            let found = candidates(
                &path,
                text,
                base,
                self.first_failures.as_ref(),
                &self.tried,
                config,
            );
            if !found.is_empty() {
                return Move::Choose(found);
            }
        }
        submit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::test_run::tests::failing;
    use frognano_core::{RunOutcome, TestOutcome, TestRunObservation};

    #[test]
    fn an_episode_state_targets_the_file_of_the_traceback() {
        let observed = TestRunObservation {
            outcome: RunOutcome::Failed,
            total: 2,
            passed: 1,
            failed: 1,
            skipped: 0,
            duration_s: 0.1,
            failing: vec![failing(
                "tests/test_m.py::test_a",
                TestOutcome::Failed,
                "pkg/other.py:3: in helper\npkg/m.py:2: AssertionError",
            )],
        };
        let context = PolicyContext {
            task_id: "t".into(),
            initial: Observation {
                text: "Repository:\npkg/m.py (6 lines): clamp\npkg/other.py (9 lines)\n".into(),
                ..Default::default()
            },
            history: vec![frognano_core::Turn {
                action: Action::Text {
                    text: "test".into(),
                },
                observation: Observation {
                    text: "Ran 2 tests in 0.10 s: 1 passed, 1 failed.".into(),
                    is_error: false,
                    test_run: Some(observed),
                },
            }],
        };
        let state = EpisodeState::replay(&context);
        assert_eq!(state.runs, 1);
        // Innermost frame first.
        assert_eq!(state.target_files(), vec!["pkg/m.py", "pkg/other.py"]);
        let Move::Tool(ToolRequest::View { path, start, .. }) =
            state.next_move(&RepairConfig::default())
        else {
            panic!("reads the failing file first");
        };
        assert_eq!((path.as_str(), start), ("pkg/m.py", Some(1)));
    }
}
