//! The task pools of a training job: the held-out set and the baselines' fixed training set,
//! what training must keep out (the held-out tasks and the functions their bugs lie in), and
//! the held-out results per difficulty rung.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use frognano_core::Task;
use frognano_env::EpisodeRecord;
use frognano_sandbox::Sandbox;
use frognano_synth::Synthesizer;
use serde::{Deserialize, Serialize};

use crate::run::{CurriculumKind, RunObserver, TrainConfig};
use crate::{Result, TrainError};

/// What a training pool or the frontier must keep out given the held-out set: its task ids
/// and the functions its bugs lie in ([`Task::bug_functions`]), so that held-out tasks come
/// from functions never trained on.
pub fn held_out_exclusions(held_out: &[Task]) -> BTreeSet<String> {
    held_out
        .iter()
        .flat_map(|t| std::iter::once(t.id.clone()).chain(t.bug_functions()))
        .collect()
}

/// Whether `task` is kept out by `exclude` (task ids and bug-function keys, see
/// [`held_out_exclusions`]).
pub fn is_excluded(task: &Task, exclude: &BTreeSet<String>) -> bool {
    exclude.contains(&task.id) || task.bug_functions().iter().any(|f| exclude.contains(f))
}

/// Held-out results on the tasks of one hint level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RungResult {
    /// The hint level (see `frognano_synth::statement`).
    pub hint_level: u8,
    /// Held-out tasks at this level.
    pub tasks: usize,
    /// Resolved by the untrained policy (when evaluated).
    pub initial_resolved: Option<usize>,
    /// Resolved by the trained policy.
    pub trained_resolved: usize,
}

/// Per hint level: tasks, and resolved ones among `initial` and `trained` records.
pub(crate) fn rung_results(
    tasks: &[Task],
    initial: Option<&[EpisodeRecord]>,
    trained: &[EpisodeRecord],
) -> Vec<RungResult> {
    let level_of = |id: &str| {
        tasks
            .iter()
            .find(|t| t.id == id)
            .and_then(Task::difficulty)
            .map(|d| d.hint_level)
    };
    let mut rungs: BTreeMap<u8, RungResult> = BTreeMap::new();
    for task in tasks {
        let level = task.difficulty().map_or(0, |d| d.hint_level);
        let rung = rungs.entry(level).or_insert(RungResult {
            hint_level: level,
            tasks: 0,
            initial_resolved: initial.map(|_| 0),
            trained_resolved: 0,
        });
        rung.tasks += 1;
    }
    let count = |records: &[EpisodeRecord], rungs: &mut BTreeMap<u8, RungResult>, trained: bool| {
        for record in records.iter().filter(|r| r.outcome.resolved) {
            let level = level_of(&record.task_id).unwrap_or(0);
            if let Some(rung) = rungs.get_mut(&level) {
                if trained {
                    rung.trained_resolved += 1;
                } else if let Some(n) = rung.initial_resolved.as_mut() {
                    *n += 1;
                }
            }
        }
    };
    if let Some(records) = initial {
        count(records, &mut rungs, false);
    }
    count(trained, &mut rungs, true);
    rungs.into_values().collect()
}

/// The held-out set and (for the baselines) the fixed training set.
#[derive(Debug, Clone, Default)]
pub struct TaskPools {
    /// Evaluation tasks, never trained on.
    pub held_out: Vec<Task>,
    /// The fixed training set of the static and easy-to-hard curricula (empty for the frontier).
    pub training: Vec<Task>,
}

/// Synthesizes `count` tasks spread over the repositories with `seed`, none of `exclude` (task
/// ids and bug-function keys, see [`held_out_exclusions`]).
pub fn synthesize_pool(
    sandbox: &Arc<Sandbox>,
    config: &TrainConfig,
    count: usize,
    seed: u64,
    exclude: &BTreeSet<String>,
) -> Result<Vec<Task>> {
    if config.repos.is_empty() {
        return Err(TrainError::Config(
            "no repositories to synthesize tasks from".into(),
        ));
    }
    let mut tasks = Vec::new();
    let repos = config.repos.len();
    for (i, repo) in config.repos.iter().enumerate() {
        let share = count / repos + usize::from(i < count % repos);
        if share == 0 {
            continue;
        }
        let mut synth = Synthesizer::new(sandbox.clone(), repo, config.synth_config(seed, 0))?;
        // Twice the share: some candidates fall in held-out functions.
        let wanted = if exclude.is_empty() { share } else { share * 2 };
        let made = synth.generate(wanted, &|_| {})?;
        tasks.extend(
            made.into_iter()
                .filter(|t| !is_excluded(t, exclude))
                .take(share),
        );
    }
    Ok(tasks)
}

/// Held-out tasks (seed `seed + 7919`) and, unless the curriculum is the frontier, a training
/// set of `static_tasks` (seed `seed`), disjoint from them.
pub fn prepare_pools(
    sandbox: &Arc<Sandbox>,
    config: &TrainConfig,
    observer: &mut dyn RunObserver,
) -> Result<TaskPools> {
    observer.stage("synthesize the held-out tasks");
    let held_out = synthesize_pool(
        sandbox,
        config,
        config.held_out,
        config.seed.wrapping_add(7919),
        &BTreeSet::new(),
    )?;
    let training = if config.curriculum == CurriculumKind::Frontier {
        Vec::new()
    } else {
        observer.stage("synthesize the fixed training set");
        let exclude = held_out_exclusions(&held_out);
        synthesize_pool(sandbox, config, config.static_tasks, config.seed, &exclude)?
    };
    Ok(TaskPools { held_out, training })
}
