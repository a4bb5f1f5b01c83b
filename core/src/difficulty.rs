//! [`Difficulty`]: the knobs a synthesized task was made with, as recorded in its
//! `metadata.difficulty`.

use serde::{Deserialize, Serialize};

use crate::Task;

/// The difficulty knobs of a synthesized task: which mutation operators made its bugs, how many
/// there are and how much they change, how much the problem statement gives away, and how many
/// tests grade it.
///
/// Task synthesis writes it into `metadata.difficulty` ([`Task::set_difficulty`]); curricula
/// and the frontier read it back ([`Task::difficulty`]). The fields serialise in the order
/// task files have always held them, so re-written task files stay byte-identical.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Difficulty {
    /// The mutation operator of each bug, in edit order (repeated when one operator made
    /// several bugs).
    pub operators: Vec<String>,
    /// Bugs in the task.
    pub bug_count: usize,
    /// Hint level of the problem statement (0 module only, 1 + failing test names,
    /// 2 + assertion messages, 3 + function and tracebacks, 4 + the file and the buggy code).
    #[serde(default = "default_hint_level")]
    pub hint_level: u8,
    /// Files the bug patch changes.
    #[serde(default)]
    pub files_changed: usize,
    /// Lines changed: the larger of lines added and lines removed.
    #[serde(default)]
    pub lines_changed: usize,
    /// Lines the bug patch adds.
    #[serde(default)]
    pub lines_added: usize,
    /// Lines the bug patch removes.
    #[serde(default)]
    pub lines_removed: usize,
    /// Number of FAIL_TO_PASS tests.
    #[serde(default)]
    pub fail_to_pass: usize,
    /// Number of PASS_TO_PASS tests.
    #[serde(default)]
    pub pass_to_pass: usize,
    /// Where each bug lies (`function`, `class`, `module`, ...), in edit order.
    #[serde(default)]
    pub scopes: Vec<String>,
}

fn default_hint_level() -> u8 {
    Difficulty::DEFAULT_HINT_LEVEL
}

impl Difficulty {
    /// The hint level problem statements get unless one is chosen (assertion messages, no
    /// tracebacks), and the one assumed for a task that records none.
    pub const DEFAULT_HINT_LEVEL: u8 = 2;

    /// The highest hint level (6: the statement shows the fix; see `frognano_synth::statement`).
    pub const MAX_HINT_LEVEL: u8 = 6;

    /// The family of operators: the distinct operators, sorted and `+`-joined.
    pub fn operator_family(&self) -> String {
        let mut unique: Vec<&str> = self.operators.iter().map(String::as_str).collect();
        unique.sort_unstable();
        unique.dedup();
        unique.join("+")
    }
}

impl Task {
    /// The difficulty knobs in `metadata.difficulty`; `None` when the task records none (a
    /// hand-made task) or they lack the operators or the bug count.
    pub fn difficulty(&self) -> Option<Difficulty> {
        Difficulty::deserialize(self.metadata.get("difficulty")?).ok()
    }

    /// Records the difficulty knobs in `metadata.difficulty`.
    pub fn set_difficulty(&mut self, difficulty: &Difficulty) {
        // A struct of strings and integers always serialises.
        if let Ok(value) = serde_json::to_value(difficulty) {
            self.metadata.insert("difficulty".into(), value);
        }
    }

    /// The functions its bug lies in, as `REPO::FILE::SCOPE` keys (the repository's path, each
    /// file the bug patch changes, each scope the difficulty records; `SCOPE` is empty for
    /// module-level code): what a held-out set keeps out of training, so that held-out tasks
    /// come from functions never trained on. Empty for a task without a bug patch.
    pub fn bug_functions(&self) -> std::collections::BTreeSet<String> {
        let files: Vec<&str> = self
            .bug_patch
            .lines()
            .filter_map(|l| {
                l.strip_prefix("+++ b/")
                    .or_else(|| l.strip_prefix("--- a/"))
            })
            .map(str::trim)
            .filter(|f| !f.is_empty() && *f != "/dev/null")
            .collect();
        let scopes = self
            .difficulty()
            .map(|d| d.scopes)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| vec![String::new()]);
        let repo = self.repo.path().display().to_string();
        let mut keys = std::collections::BTreeSet::new();
        for file in &files {
            for scope in &scopes {
                keys.insert(format!("{repo}::{file}::{scope}"));
            }
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task::new("t", "/nonexistent", "x", vec!["t::a".into()])
    }

    #[test]
    fn bug_functions_name_the_repository_file_and_scope() {
        let mut t = task();
        assert!(t.bug_functions().is_empty());
        t.bug_patch = "--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1 +1 @@\n-a\n+b\n".into();
        let mut d =
            Difficulty::deserialize(serde_json::json!({"operators": ["op_swap"], "bug_count": 1}))
                .expect("difficulty");
        d.scopes = vec!["Box.clamp".into()];
        t.set_difficulty(&d);
        let keys: Vec<String> = t.bug_functions().into_iter().collect();
        assert_eq!(keys, vec!["/nonexistent::pkg/m.py::Box.clamp".to_string()]);
    }

    #[test]
    fn written_as_task_files_hold_it() {
        let difficulty = Difficulty {
            operators: vec!["flip_comparison".into(), "off_by_one".into()],
            bug_count: 2,
            hint_level: 1,
            files_changed: 1,
            lines_changed: 2,
            lines_added: 2,
            lines_removed: 2,
            fail_to_pass: 3,
            pass_to_pass: 7,
            scopes: vec!["function".into(), "function".into()],
        };
        let mut t = task();
        t.set_difficulty(&difficulty);
        // The literal synthesis wrote before the type existed, key for key and in this order.
        let legacy = serde_json::json!({
            "operators": ["flip_comparison", "off_by_one"],
            "bug_count": 2,
            "hint_level": 1,
            "files_changed": 1,
            "lines_changed": 2,
            "lines_added": 2,
            "lines_removed": 2,
            "fail_to_pass": 3,
            "pass_to_pass": 7,
            "scopes": ["function", "function"],
        });
        let written = serde_json::to_string(&t.metadata["difficulty"]).expect("json");
        assert_eq!(written, serde_json::to_string(&legacy).expect("json"));
        assert_eq!(t.difficulty(), Some(difficulty.clone()));
        assert_eq!(difficulty.operator_family(), "flip_comparison+off_by_one");
    }

    #[test]
    fn partial_records_take_defaults_and_hand_made_tasks_have_none() {
        let mut t = task();
        assert_eq!(t.difficulty(), None);
        t.metadata.insert(
            "difficulty".into(),
            serde_json::json!({"operators": ["op_swap"], "bug_count": 1, "extra": true}),
        );
        let d = t.difficulty().expect("difficulty");
        assert_eq!(d.hint_level, Difficulty::DEFAULT_HINT_LEVEL);
        assert_eq!(d.lines_changed, 0);
        t.metadata
            .insert("difficulty".into(), serde_json::json!({"hint_level": 1}));
        assert_eq!(t.difficulty(), None);
    }
}
