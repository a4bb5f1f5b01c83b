use std::collections::HashMap;

use frognano_core::{Action, Error, ErrorKind, PolicyContext, PolicyOutput, Result, Task};
use frognano_env::patch::{self, FileChange, FileTree};
use frognano_env::{ToolRequest, parse_action, repo};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Submits at once: a lower bound (reward 0 on every valid task).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopPolicy;

impl frognano_core::Policy for NoopPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        Ok(contexts
            .iter()
            .map(|_| PolicyOutput {
                action: Action::Text {
                    text: "submit".into(),
                },
                logprobs: vec![0.0],
                ..PolicyOutput::action(Action::Text {
                    text: String::new(),
                })
            })
            .collect())
    }
}

/// Edits that turn `current` into `target` through the `edit` tool: each replaces a snippet
/// that occurs exactly once at the time it is applied (grown with surrounding lines until it
/// does). Applying them in order, as the tool does, yields `target` exactly.
pub fn edits_between(path: &str, current: &str, target: &str) -> Vec<ToolRequest> {
    let mut edits = Vec::new();
    let mut now = current.to_string();
    let mut options = diffy::DiffOptions::new();
    options.set_context_len(0);
    // Each round fixes the first differing region; bounded for safety.
    for _ in 0..10_000 {
        if now == target {
            break;
        }
        let diff = options.create_patch(&now, target);
        let Some(hunk) = diff.hunks().first() else {
            break;
        };
        let lines: Vec<&str> = now.split_inclusive('\n').collect();
        let old = hunk.old_range();
        // For a pure insertion diffy's range names the line after which to insert.
        let (start, end) = if old.is_empty() {
            (old.start(), old.start())
        } else {
            (old.start() - 1, old.start() - 1 + old.len())
        };
        let new_lines: String = hunk
            .lines()
            .iter()
            .filter_map(|l| match l {
                diffy::Line::Insert(t) => Some(*t),
                _ => None,
            })
            .collect();
        // Grow the region until its text is unique and non-empty, preferring a trailing
        // context line so the edit reads naturally.
        let (mut lo, mut hi) = (start, end);
        let text_of = |lo: usize, hi: usize| lines[lo..hi].concat();
        loop {
            let search = text_of(lo, hi);
            let unique = !search.trim().is_empty() && now.matches(search.as_str()).count() == 1;
            if unique && (hi > end || lo < start || (lo == 0 && hi == lines.len())) {
                break;
            }
            if hi < lines.len() {
                hi += 1;
            } else if lo > 0 {
                lo -= 1;
            } else {
                break;
            }
            let search = text_of(lo, hi);
            if !search.trim().is_empty() && now.matches(search.as_str()).count() == 1 {
                break;
            }
            lo = lo.saturating_sub(1);
        }
        let search = text_of(lo, hi);
        let replace = format!("{}{}{}", text_of(lo, start), new_lines, text_of(end, hi));
        if search.is_empty() {
            // An empty file: only a whole-file rewrite can express the change.
            break;
        }
        let next = now.replacen(&search, &replace, 1);
        edits.push(ToolRequest::Edit {
            path: path.to_string(),
            search,
            replace,
        });
        now = next;
    }
    edits
}

/// The action that carries `request`: the text grammar when it expresses the request exactly,
/// else a JSON tool call.
fn as_action(request: &ToolRequest, file_now: Option<&str>) -> Action {
    // The grammar cannot carry a trailing newline; trim one from both sides when that gives
    // the same result.
    let simplified = match (request, file_now) {
        (
            ToolRequest::Edit {
                path,
                search,
                replace,
            },
            Some(now),
        ) => {
            let s = search.strip_suffix('\n');
            let r = replace.strip_suffix('\n');
            match (s, r) {
                (Some(s), Some(r))
                    if !s.trim().is_empty()
                        && now.matches(s).count() == 1
                        && now.replacen(s, r, 1) == now.replacen(search, replace, 1) =>
                {
                    Some(ToolRequest::Edit {
                        path: path.clone(),
                        search: s.to_string(),
                        replace: r.to_string(),
                    })
                }
                _ => None,
            }
        }
        _ => Some(request.clone()),
    };
    if let Some(simple) = simplified {
        let text = simple.to_text();
        if parse_action(&Action::Text { text: text.clone() }).as_ref() == Ok(&simple) {
            return Action::Text { text };
        }
    }
    Action::Tool(request.to_tool_call())
}

/// Knows every task's fix (the gold patch, else the reverse of the bug) and applies it through
/// the tool protocol: optionally runs the tests first, edits each changed file, re-runs the
/// failing tests and submits. It must reach reward 1 on every valid task; a task whose fix
/// deletes a file (no tool deletes files) is out of its reach.
#[derive(Debug)]
pub struct OraclePolicy {
    tasks: HashMap<String, Task>,
    plans: HashMap<String, Vec<Action>>,
    run_tests: bool,
}

impl OraclePolicy {
    /// An oracle for `tasks` (it can act only on episodes of these tasks).
    pub fn new(tasks: &[Task]) -> Self {
        OraclePolicy {
            tasks: tasks.iter().map(|t| (t.id.clone(), t.clone())).collect(),
            plans: HashMap::new(),
            run_tests: true,
        }
    }

    /// Whether to run the tests before and after fixing (default true; off is faster).
    pub fn with_test_runs(mut self, run_tests: bool) -> Self {
        self.run_tests = run_tests;
        self
    }

    /// The oracle's full action sequence for a task.
    pub fn plan(&mut self, task_id: &str) -> Result<&[Action]> {
        if !self.plans.contains_key(task_id) {
            let task = self.tasks.get(task_id).ok_or_else(|| {
                Error::invalid_as(
                    ErrorKind::Task,
                    "oracle policy task",
                    format!("task {task_id} is not one of the oracle's tasks"),
                )
            })?;
            let plan = plan_for(task, self.run_tests).map_err(|e| {
                Error::invalid_as(
                    ErrorKind::Task,
                    "oracle policy task",
                    format!("task {task_id}: {e}"),
                )
            })?;
            self.plans.insert(task_id.to_string(), plan);
        }
        Ok(self
            .plans
            .get(task_id)
            .map(Vec::as_slice)
            .unwrap_or_default())
    }
}

fn plan_for(task: &Task, run_tests: bool) -> std::result::Result<Vec<Action>, String> {
    let root = repo::source_root(&task.repo).map_err(|e| e.to_string())?;
    let mut buggy: FileTree = repo::read_tree(&root).map_err(|e| e.to_string())?;
    patch::apply(&mut buggy, &task.bug_patch).map_err(|e| format!("bug patch: {e}"))?;
    let fix = match &task.gold_patch {
        Some(p) => p.clone(),
        None => patch::reverse(&task.bug_patch).map_err(|e| e.to_string())?,
    };
    let mut fixed = buggy.clone();
    patch::apply(&mut fixed, &fix).map_err(|e| format!("fix: {e}"))?;
    let mut plan = Vec::new();
    if run_tests {
        plan.push(Action::Text {
            text: "test".into(),
        });
    }
    let text = |tree: &FileTree, path: &str| {
        tree.get(path)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    for change in patch::changed_files(&fix).map_err(|e| e.to_string())? {
        match change {
            FileChange::Modify { from, to } if from == to => {
                let mut now = text(&buggy, &from);
                let target = text(&fixed, &to);
                for edit in edits_between(&from, &now, &target) {
                    plan.push(as_action(&edit, Some(&now)));
                    if let ToolRequest::Edit {
                        search, replace, ..
                    } = &edit
                    {
                        now = now.replacen(search.as_str(), replace, 1);
                    }
                }
                if now != target {
                    return Err(format!("{from}: cannot express the fix as edits"));
                }
            }
            FileChange::Create(path) => {
                let content = text(&fixed, &path);
                plan.push(as_action(&ToolRequest::Create { path, content }, None));
            }
            other => {
                return Err(format!(
                    "the fix {} a file, which no tool can do",
                    match other {
                        FileChange::Delete(_) => "deletes",
                        _ => "renames",
                    }
                ));
            }
        }
    }
    if run_tests {
        plan.push(Action::Tool(
            ToolRequest::RunTests {
                tests: task.fail_to_pass.clone(),
            }
            .to_tool_call(),
        ));
    }
    plan.push(Action::Text {
        text: "submit".into(),
    });
    Ok(plan)
}

impl frognano_core::Policy for OraclePolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        let mut out = Vec::with_capacity(contexts.len());
        for context in contexts {
            let plan = self.plan(&context.task_id)?;
            let action = plan
                .get(context.history.len())
                .or(plan.last())
                .cloned()
                .unwrap_or(Action::Text {
                    text: "submit".into(),
                });
            out.push(PolicyOutput {
                action,
                logprobs: vec![0.0],
                ..PolicyOutput::action(Action::Text {
                    text: String::new(),
                })
            });
        }
        Ok(out)
    }
}

/// Emits random actions, many malformed or hostile (escaping paths, option injection, infinite
/// loops, floods), for fuzzing the protocol, the tools and the sandbox. Deterministic for a seed.
#[derive(Debug)]
pub struct RandomPolicy {
    rng: StdRng,
    submit_probability: f64,
}

const HOSTILE_PATHS: &[&str] = &[
    "../escape.txt",
    "../../../../etc/passwd",
    "/etc/passwd",
    "/tmp/frognano-escape",
    "~/.bashrc",
    "a/../../x.py",
    "./././",
    "",
    "conftest.py",
    "tests/conftest.py",
    "pyproject.toml",
    "sitecustomize.py",
    "\u{0}nul",
    "dir/with space/x.py",
];

const HOSTILE_CODE: &[&str] = &[
    "while True:\n    pass\n",
    "x = 'a' * (1 << 34)\n",
    "print('A' * 10_000_000)\n",
    "import os\nos.system('touch /tmp/frognano-escape')\n",
    "open('/etc/passwd', 'w').write('x')\n",
    "import sys\nsys.setrecursionlimit(10**9)\ndef f(): f()\nf()\n",
    "import os\nos._exit(3)\n",
    "def test_ok():\n    assert True\n",
    "import pytest\n@pytest.hookimpl\ndef pytest_runtest_makereport(item, call):\n    pass\n",
];

impl RandomPolicy {
    /// A random policy seeded with `seed`; it submits with probability `submit_probability` per
    /// step (the rest of the time the budget ends the episode).
    pub fn new(seed: u64, submit_probability: f64) -> Self {
        RandomPolicy {
            rng: StdRng::seed_from_u64(seed),
            submit_probability: submit_probability.clamp(0.0, 1.0),
        }
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.rng.random_range(0..items.len())]
    }

    fn junk(&mut self, max: usize) -> String {
        let n = self.rng.random_range(0..max.max(1));
        let bytes: Vec<u8> = (0..n).map(|_| self.rng.random()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn path(&mut self, known: &[String]) -> String {
        if !known.is_empty() && self.rng.random_bool(0.6) {
            known[self.rng.random_range(0..known.len())].clone()
        } else {
            self.pick(HOSTILE_PATHS).to_string()
        }
    }

    fn action(&mut self, context: &PolicyContext) -> Action {
        // Paths from the repository map of the first observation: "path (N lines)...".
        let known: Vec<String> = context
            .initial
            .text
            .lines()
            .filter_map(|l| l.split_once(" (").map(|(p, _)| p.to_string()))
            .filter(|p| !p.contains(' ') && p.contains('.'))
            .collect();
        // A line seen in some observation, for edits that may match.
        let seen: Vec<&str> = context
            .history
            .iter()
            .flat_map(|t| t.observation.text.lines())
            .filter_map(|l| l.split_once('\t').map(|(_, code)| code))
            .collect();
        if self.rng.random_bool(self.submit_probability) {
            return Action::Text {
                text: "submit".into(),
            };
        }
        let request = match self.rng.random_range(0..14) {
            0 => {
                return Action::Text {
                    text: self.junk(300),
                };
            }
            1 => {
                let cut = self.rng.random_range(0..40);
                let text: String = r#"{"name": "edit", "arguments": {"path": "x", "search"#
                    .chars()
                    .take(cut)
                    .collect();
                return Action::Text { text };
            }
            2 => ToolRequest::View {
                path: self.path(&known),
                start: self
                    .rng
                    .random_bool(0.5)
                    .then(|| self.rng.random_range(0..300)),
                end: self
                    .rng
                    .random_bool(0.5)
                    .then(|| self.rng.random_range(0..400)),
            },
            3 => ToolRequest::List {
                path: self.rng.random_bool(0.5).then(|| self.path(&known)),
            },
            4 => ToolRequest::Search {
                pattern: self
                    .pick(&[
                        "def ",
                        "(",
                        "[a-z]+\\(",
                        "(a+)+$",
                        "return",
                        "\\",
                        ".*",
                        "x{1000}{1000}",
                    ])
                    .to_string(),
                path: self.rng.random_bool(0.3).then(|| self.path(&known)),
            },
            5 | 6 => {
                let search = if !seen.is_empty() && self.rng.random_bool(0.7) {
                    seen[self.rng.random_range(0..seen.len())].to_string()
                } else {
                    self.junk(20)
                };
                let replace = if self.rng.random_bool(0.5) {
                    self.pick(HOSTILE_CODE).to_string()
                } else {
                    self.junk(40)
                };
                ToolRequest::Edit {
                    path: self.path(&known),
                    search,
                    replace,
                }
            }
            7 => ToolRequest::Create {
                path: self.path(&known),
                content: self.pick(HOSTILE_CODE).to_string(),
            },
            8 => ToolRequest::Insert {
                path: self.path(&known),
                line: self.rng.random_range(0..50),
                text: self.pick(HOSTILE_CODE).to_string(),
            },
            9 => ToolRequest::Undo,
            10 => ToolRequest::RunTests {
                tests: match self.rng.random_range(0..4) {
                    0 => Vec::new(),
                    1 => vec!["-p".into(), "evil".into()],
                    2 => vec![self.path(&known)],
                    _ => vec!["--rootdir=/".into(), "../..".into()],
                },
            },
            11 => {
                // A well-formed command with junk arguments.
                let word = self.pick(&["view", "ls", "search", "edit", "create", "insert", "test"]);
                return Action::Text {
                    text: format!("{word} {}", self.junk(60)),
                };
            }
            12 => {
                let args = serde_json::json!({"path": self.junk(10), "line": -3, "tests": 5});
                return Action::Tool(frognano_core::ToolCall {
                    name: self
                        .pick(&["view", "insert", "run_tests", "rm", ""])
                        .to_string(),
                    arguments: args,
                });
            }
            _ => ToolRequest::View {
                path: self.path(&known),
                start: None,
                end: None,
            },
        };
        if self.rng.random_bool(0.5) {
            Action::Text {
                text: request.to_text(),
            }
        } else {
            Action::Tool(request.to_tool_call())
        }
    }
}

impl frognano_core::Policy for RandomPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        Ok(contexts
            .iter()
            .map(|c| PolicyOutput {
                logprobs: vec![-(14f32.ln())],
                ..PolicyOutput::action(self.action(c))
            })
            .collect())
    }
}

/// [`RandomPolicy`] whose every choice depends only on a seed, the task id and the turn: an
/// episode gets the same actions however episodes interleave across environments and however
/// loaded the machine is, so two runs over the same tasks can be compared verdict by verdict
/// (what a soak does).
#[derive(Debug, Clone)]
pub struct EpisodeSeededRandom {
    seed: u64,
    submit_probability: f64,
}

impl EpisodeSeededRandom {
    /// Seeded with `seed`; submits with probability `submit_probability` per step.
    pub fn new(seed: u64, submit_probability: f64) -> Self {
        EpisodeSeededRandom {
            seed,
            submit_probability,
        }
    }

    /// The seed of one turn: FNV-1a over the task id, mixed with the seed and the turn (fixed
    /// across processes and Rust versions, unlike the standard library's hasher).
    fn turn_seed(&self, task_id: &str, turn: usize) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in task_id.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash ^ self.seed.rotate_left(17) ^ (turn as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    }
}

impl frognano_core::Policy for EpisodeSeededRandom {
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        let mut outputs = Vec::with_capacity(contexts.len());
        for context in contexts {
            let seed = self.turn_seed(&context.task_id, context.history.len());
            let mut turn = RandomPolicy::new(seed, self.submit_probability);
            outputs.extend(turn.act(std::slice::from_ref(context))?);
        }
        Ok(outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply_all(mut now: String, edits: &[ToolRequest]) -> String {
        for edit in edits {
            let ToolRequest::Edit {
                search, replace, ..
            } = edit
            else {
                panic!("not an edit");
            };
            assert_eq!(
                now.matches(search.as_str()).count(),
                1,
                "{search:?} must be unique"
            );
            now = now.replacen(search.as_str(), replace, 1);
        }
        now
    }

    #[test]
    fn episode_seeded_actions_do_not_depend_on_the_batch_or_call_order() {
        use frognano_core::{Observation, Policy};
        let context = |task: &str| PolicyContext {
            task_id: task.to_string(),
            initial: Observation {
                text: "Repository map:\n  a.py (3 lines)\n".into(),
                ..Default::default()
            },
            history: Vec::new(),
        };
        let (a, b) = (context("task-a"), context("task-b"));
        let mut policy = EpisodeSeededRandom::new(5, 0.1);
        let together = policy.act(&[a.clone(), b.clone()]).expect("act");
        let b_alone = policy.act(std::slice::from_ref(&b)).expect("act");
        let a_alone = EpisodeSeededRandom::new(5, 0.1)
            .act(std::slice::from_ref(&a))
            .expect("act");
        assert_eq!(together[0].action, a_alone[0].action);
        assert_eq!(together[1].action, b_alone[0].action);
        // Another seed or another task: other actions (over a few turns, surely).
        let differs = (0..8).any(|turn| {
            let mut at = a.clone();
            let step = frognano_core::Turn {
                action: Action::Text { text: "ls".into() },
                observation: Observation::default(),
            };
            at.history = vec![step; turn];
            let mut bt = b.clone();
            bt.history = at.history.clone();
            let x = EpisodeSeededRandom::new(5, 0.1)
                .act(&[at.clone(), bt])
                .expect("act");
            let y = EpisodeSeededRandom::new(6, 0.1).act(&[at]).expect("act");
            x[0].action != x[1].action && x[0].action != y[0].action
        });
        assert!(differs);
    }

    #[test]
    fn edits_reach_the_target_with_unique_snippets() {
        let cases = [
            ("a\nb\nc\n", "a\nB\nc\n"),
            ("x\nx\nx\ny\n", "x\nx\nz\ny\n"),
            ("a\nb\n", "a\n"),
            ("a\nb\n", "a\nb\nc\n"),
            ("a\nb\n", "z\na\nb\n"),
            ("same\nsame\n", "same\n"),
            (
                "    return x\n\n    return x\n",
                "    return x\n\n    return -x\n",
            ),
            ("no newline", "no newline at all"),
        ];
        for (from, to) in cases {
            let edits = edits_between("m.py", from, to);
            assert_eq!(
                apply_all(from.to_string(), &edits),
                to,
                "{from:?} -> {to:?}"
            );
        }
    }

    #[test]
    fn grammar_is_used_when_exact() {
        let now = "a\nb\nc\n";
        let edit = ToolRequest::Edit {
            path: "m.py".into(),
            search: "b\nc\n".into(),
            replace: "B\nc\n".into(),
        };
        assert!(matches!(as_action(&edit, Some(now)), Action::Text { .. }));
        let marker = ToolRequest::Edit {
            path: "m.py".into(),
            search: "b\n".into(),
            replace: ">>>>>>> REPLACE\n".into(),
        };
        assert!(matches!(as_action(&marker, Some(now)), Action::Tool(_)));
    }

    #[test]
    fn random_policy_is_deterministic() {
        let context = PolicyContext {
            task_id: "t".into(),
            initial: frognano_core::Observation {
                text: "pkg/a.py (3 lines)\n".into(),
                is_error: false,
                test_run: None,
            },
            history: vec![],
        };
        let mut a = RandomPolicy::new(7, 0.05);
        let mut b = RandomPolicy::new(7, 0.05);
        use frognano_core::Policy;
        for _ in 0..50 {
            let x = a.act(std::slice::from_ref(&context)).expect("act");
            let y = b.act(std::slice::from_ref(&context)).expect("act");
            assert_eq!(x, y);
        }
    }
}
