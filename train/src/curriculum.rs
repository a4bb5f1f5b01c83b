//! The baselines the frontier is measured against: a static curriculum (a fixed, pre-synthesized
//! task set sampled uniformly, as most synthetic-task pipelines train) and an easy-to-hard
//! schedule over the same kind of set.

use std::collections::BTreeMap;

use frognano_core::{Difficulty, EpisodeOutcome, IterationMetrics, Task, TaskSynthesizer};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::{Result, TrainError};

/// What a task's difficulty knobs were (read from the synthesizer's `metadata.difficulty`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FamilyKey {
    /// Mutation operator(s), `+`-joined when a task combines several.
    pub operator: String,
    /// Bugs in the task.
    pub bugs: usize,
    /// Hint level of the statement.
    pub hint: u8,
}

impl FamilyKey {
    /// The family of a synthesized task (`None` for tasks without synthesis metadata).
    pub fn of(task: &Task) -> Option<FamilyKey> {
        task.difficulty().map(|d| FamilyKey::of_difficulty(&d))
    }

    /// The family of a task with these difficulty knobs.
    pub fn of_difficulty(difficulty: &Difficulty) -> FamilyKey {
        FamilyKey {
            operator: difficulty.operator_family(),
            bugs: difficulty.bug_count,
            hint: difficulty.hint_level,
        }
    }

    /// `operator/bugs/hint`.
    pub fn label(&self) -> String {
        format!("{}/{}/{}", self.operator, self.bugs, self.hint)
    }
}

/// A difficulty score for ordering tasks from easy to hard: more bugs, more files and lines
/// changed, and less help in the statement make a task harder.
pub fn difficulty_score(task: &Task) -> f64 {
    let d = task.difficulty();
    let bugs = d.as_ref().map_or(0, |d| d.bug_count).max(1) as f64;
    let files = d.as_ref().map_or(0, |d| d.files_changed) as f64;
    let lines = d.as_ref().map_or(0, |d| d.lines_changed) as f64;
    let hint = f64::from(
        d.as_ref()
            .map_or(Difficulty::DEFAULT_HINT_LEVEL, |d| d.hint_level),
    );
    10.0 * bugs + 3.0 * files + lines + (3.0 - hint)
}

/// What an iteration proposed: the trainer's `difficulty` metric.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DifficultyMix {
    /// Mean bugs per task, over the tasks that record their difficulty.
    pub mean_bugs: f64,
    /// Mean hint level, over the same tasks.
    pub mean_hint_level: f64,
    /// Mean [`difficulty_score`] over all tasks.
    pub mean_difficulty: f64,
    /// Tasks per operator family.
    pub operators: BTreeMap<String, usize>,
}

impl DifficultyMix {
    /// The mix of `tasks`.
    pub fn of(tasks: &[Task]) -> Self {
        let mut operators: BTreeMap<String, usize> = BTreeMap::new();
        let (mut bugs, mut hints, mut known) = (0.0, 0.0, 0usize);
        for task in tasks {
            if let Some(f) = FamilyKey::of(task) {
                *operators.entry(f.operator.clone()).or_default() += 1;
                bugs += f.bugs as f64;
                hints += f64::from(f.hint);
                known += 1;
            }
        }
        let mean = |x: f64| if known == 0 { 0.0 } else { x / known as f64 };
        DifficultyMix {
            mean_bugs: mean(bugs),
            mean_hint_level: mean(hints),
            mean_difficulty: if tasks.is_empty() {
                0.0
            } else {
                tasks.iter().map(difficulty_score).sum::<f64>() / tasks.len() as f64
            },
            operators,
        }
    }

    /// The mix an iteration's metrics record (`None` when they hold none).
    pub fn of_metrics(metrics: &IterationMetrics) -> Option<Self> {
        DifficultyMix::deserialize(metrics.extra.get("difficulty")?).ok()
    }
}

/// Counts of what was proposed, for the trainer's "difficulty mix" metric: [`DifficultyMix`]
/// as JSON.
pub fn difficulty_mix(tasks: &[Task]) -> serde_json::Value {
    serde_json::to_value(DifficultyMix::of(tasks)).unwrap_or_default()
}

fn call_rng(seed: u64, call: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ call.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// Samples `n` distinct tasks uniformly from a fixed set (with replacement across calls).
#[derive(Debug, Clone)]
pub struct StaticCurriculum {
    tasks: Vec<Task>,
    seed: u64,
    calls: u64,
}

impl StaticCurriculum {
    /// A curriculum over `tasks` (at least one).
    pub fn new(tasks: Vec<Task>, seed: u64) -> Result<Self> {
        if tasks.is_empty() {
            return Err(TrainError::NoTasks(
                "the static curriculum's task set is empty".into(),
            ));
        }
        Ok(StaticCurriculum {
            tasks,
            seed,
            calls: 0,
        })
    }

    /// The task set.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }
}

impl TaskSynthesizer for StaticCurriculum {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        let mut rng = call_rng(self.seed, self.calls);
        self.calls += 1;
        let mut picked: Vec<Task> = self
            .tasks
            .choose_multiple(&mut rng, n.min(self.tasks.len()))
            .cloned()
            .collect();
        // More asked than the set holds: repeat, still uniformly.
        while picked.len() < n {
            if let Some(t) = self.tasks.choose(&mut rng) {
                picked.push(t.clone());
            }
        }
        Ok(picked)
    }

    fn feedback(&mut self, _outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        Ok(())
    }

    fn state(&self) -> frognano_core::Result<serde_json::Value> {
        Ok(json!({"kind": "static", "calls": self.calls}))
    }

    fn load_state(&mut self, state: &serde_json::Value) -> frognano_core::Result<()> {
        self.calls = state["calls"].as_u64().unwrap_or(0);
        Ok(())
    }
}

/// A fixed set ordered by [`difficulty_score`], sampled uniformly from an easiest fraction that
/// grows linearly from `start_fraction` to the whole set over `iterations` calls.
#[derive(Debug, Clone)]
pub struct EasyToHard {
    tasks: Vec<Task>,
    iterations: usize,
    start_fraction: f64,
    seed: u64,
    calls: u64,
}

impl EasyToHard {
    /// A schedule over `tasks`, reaching the hardest after `iterations` proposals.
    pub fn new(
        mut tasks: Vec<Task>,
        iterations: usize,
        start_fraction: f64,
        seed: u64,
    ) -> Result<Self> {
        if tasks.is_empty() {
            return Err(TrainError::NoTasks(
                "the easy-to-hard task set is empty".into(),
            ));
        }
        if !(start_fraction > 0.0 && start_fraction <= 1.0) {
            return Err(TrainError::Config(
                "start_fraction must lie in (0, 1]".into(),
            ));
        }
        tasks.sort_by(|a, b| {
            difficulty_score(a)
                .total_cmp(&difficulty_score(b))
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(EasyToHard {
            tasks,
            iterations: iterations.max(1),
            start_fraction,
            seed,
            calls: 0,
        })
    }

    /// The fraction of the (sorted) set open at proposal number `call`.
    pub fn open_fraction(&self, call: u64) -> f64 {
        let progress = if self.iterations <= 1 {
            1.0
        } else {
            (call as f64 / (self.iterations - 1) as f64).min(1.0)
        };
        self.start_fraction + (1.0 - self.start_fraction) * progress
    }
}

impl TaskSynthesizer for EasyToHard {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        let open = ((self.tasks.len() as f64 * self.open_fraction(self.calls)).ceil() as usize)
            .clamp(1, self.tasks.len());
        let mut rng = call_rng(self.seed, self.calls);
        self.calls += 1;
        let window = &self.tasks[..open];
        let mut picked: Vec<Task> = window
            .choose_multiple(&mut rng, n.min(window.len()))
            .cloned()
            .collect();
        while picked.len() < n {
            if let Some(t) = window.choose(&mut rng) {
                picked.push(t.clone());
            }
        }
        Ok(picked)
    }

    fn feedback(&mut self, _outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        Ok(())
    }

    fn metrics(&mut self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert(
            "open_fraction".into(),
            json!(self.open_fraction(self.calls.saturating_sub(1))),
        );
        m
    }

    fn state(&self) -> frognano_core::Result<serde_json::Value> {
        Ok(json!({"kind": "easy_to_hard", "calls": self.calls}))
    }

    fn load_state(&mut self, state: &serde_json::Value) -> frognano_core::Result<()> {
        self.calls = state["calls"].as_u64().unwrap_or(0);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn task(id: &str, operator: &str, bugs: usize, lines: usize) -> Task {
        let mut t = Task::new(id, "/nonexistent", "x", vec!["t::a".into()]);
        t.metadata.insert(
            "difficulty".into(),
            json!({"operators": vec![operator; bugs], "bug_count": bugs, "hint_level": 2,
                   "lines_changed": lines, "files_changed": 1}),
        );
        t
    }

    #[test]
    fn families_and_difficulty_come_from_metadata() {
        let t = task("a", "flip_operators", 2, 3);
        let f = FamilyKey::of(&t).expect("family");
        assert_eq!(f.label(), "flip_operators/2/2");
        assert!(difficulty_score(&t) > difficulty_score(&task("b", "op_swap", 1, 1)));
        let mix = difficulty_mix(&[t, task("b", "op_swap", 1, 1)]);
        assert_eq!(mix["mean_bugs"], json!(1.5));
        assert_eq!(mix["operators"]["op_swap"], json!(1));
        let metrics = IterationMetrics {
            extra: [("difficulty".to_string(), mix)].into_iter().collect(),
            ..IterationMetrics::default()
        };
        let typed = DifficultyMix::of_metrics(&metrics).expect("mix");
        assert_eq!(typed.mean_bugs, 1.5);
        assert_eq!(typed.operators.len(), 2);
        assert!(DifficultyMix::of_metrics(&IterationMetrics::default()).is_none());
    }

    #[test]
    fn static_sampling_is_uniform_and_reproducible() {
        let tasks: Vec<Task> = (0..10)
            .map(|i| task(&format!("t{i}"), "op_swap", 1, 1))
            .collect();
        let mut a = StaticCurriculum::new(tasks.clone(), 7).expect("curriculum");
        let mut b = StaticCurriculum::new(tasks, 7).expect("curriculum");
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..200 {
            let pa = a.propose(4).expect("propose");
            let pb = b.propose(4).expect("propose");
            assert_eq!(
                pa.iter().map(|t| &t.id).collect::<Vec<_>>(),
                pb.iter().map(|t| &t.id).collect::<Vec<_>>()
            );
            let mut ids: Vec<&String> = pa.iter().map(|t| &t.id).collect();
            ids.dedup();
            assert_eq!(ids.len(), 4, "distinct within a call");
            for t in pa {
                *counts.entry(t.id).or_default() += 1;
            }
        }
        assert_eq!(counts.len(), 10);
        assert!(
            counts.values().all(|c| (50..=110).contains(c)),
            "{counts:?}"
        );
        assert!(StaticCurriculum::new(Vec::new(), 0).is_err());
    }

    #[test]
    fn easy_to_hard_opens_up_over_time() {
        let tasks: Vec<Task> = (0..20)
            .map(|i| task(&format!("t{i:02}"), "op_swap", 1 + i / 10, i))
            .collect();
        let mut s = EasyToHard::new(tasks, 5, 0.25, 1).expect("schedule");
        let first = s.propose(5).expect("propose");
        assert!(
            first.iter().all(|t| t.id.as_str() < "t05"),
            "{:?}",
            first.iter().map(|t| &t.id).collect::<Vec<_>>()
        );
        for _ in 0..3 {
            s.propose(5).expect("propose");
        }
        assert!((s.open_fraction(4) - 1.0).abs() < 1e-12);
        assert!(EasyToHard::new(Vec::new(), 5, 0.25, 1).is_err());
    }
}
