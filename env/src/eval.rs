//! [`evaluate`]: a policy over a task set, summarised in the one [`EvalReport`] that the CLI,
//! Python and C all return.

use frognano_core::{Policy, Task};
use serde::{Deserialize, Serialize};

use crate::env::EpisodeRecord;
use crate::pool::{EnvPool, EvalSummary, RolloutEnv};
use crate::{EnvError, Result};

/// A task that could not be run (its reset failed, e.g. a missing repository): skipped, not
/// counted as an episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedTask {
    /// The task's id.
    pub task_id: String,
    /// Why it could not be reset.
    pub error: String,
}

/// The result of an evaluation: the episode metrics and how the run went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvalReport {
    /// Metrics over the episodes that ran.
    #[serde(flatten)]
    pub summary: EvalSummary,
    /// Environment steps per second of wall-clock time.
    pub steps_per_s: f64,
    /// Wall-clock seconds of the whole evaluation.
    pub wall_s: f64,
    /// Mean time of a reset, in milliseconds.
    pub mean_reset_ms: f64,
    /// Environments stepped in parallel.
    pub workers: usize,
    /// Tasks whose reset failed, in the order they failed.
    pub failed_tasks: Vec<FailedTask>,
}

impl EvalReport {
    /// True when every task ran (none failed to reset).
    pub fn all_ran(&self) -> bool {
        self.failed_tasks.is_empty()
    }

    /// The report of episodes that ran elsewhere (on a cluster's workers) or were gathered
    /// from several runs: `steps` environment steps in `wall_s` seconds over `workers`
    /// environments. [`evaluate`] builds its own report here too, so both read the same.
    pub fn from_records(
        records: &[EpisodeRecord],
        failed_tasks: Vec<FailedTask>,
        steps: usize,
        wall_s: f64,
        workers: usize,
    ) -> EvalReport {
        let mean_reset_ms = if records.is_empty() {
            0.0
        } else {
            records.iter().map(|r| r.reset_ms).sum::<f64>() / records.len() as f64
        };
        EvalReport {
            summary: EvalSummary::of(records),
            steps_per_s: if wall_s > 0.0 {
                steps as f64 / wall_s
            } else {
                0.0
            },
            wall_s,
            mean_reset_ms,
            workers,
            failed_tasks,
        }
    }
}

/// Runs `policy` on every task through `pool` (one episode per task) and summarises the
/// episodes. `on_record` sees each episode record as it ends (to stream it to a file or a
/// progress bar); `on_failure` each task that could not be reset. Returns the report and the
/// records in the order the episodes ended.
///
/// An empty task set is an error ([`EnvError::InvalidOption`]); so is a policy failure.
pub fn evaluate<E: RolloutEnv>(
    pool: &mut EnvPool<E>,
    policy: &mut dyn Policy,
    tasks: &[Task],
    mut on_record: impl FnMut(&EpisodeRecord),
    mut on_failure: impl FnMut(&FailedTask),
) -> Result<(EvalReport, Vec<EpisodeRecord>)> {
    if tasks.is_empty() {
        return Err(EnvError::InvalidOption("no tasks to evaluate".into()));
    }
    let mut records: Vec<EpisodeRecord> = Vec::new();
    let mut failed_tasks = Vec::new();
    let stats = pool.rollout(
        policy,
        tasks,
        |record| {
            on_record(&record);
            records.push(record);
        },
        |task, err| {
            let failed = FailedTask {
                task_id: task.id.clone(),
                error: err.to_string(),
            };
            on_failure(&failed);
            failed_tasks.push(failed);
        },
    )?;
    let report = EvalReport::from_records(
        &records,
        failed_tasks,
        stats.steps,
        stats.wall_s,
        pool.len(),
    );
    Ok((report, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(task: &str, resolved: bool, steps: usize, reset_ms: f64) -> EpisodeRecord {
        let step = serde_json::json!({"step": 0, "action": {"type": "text", "text": "submit"},
                                      "observation": "", "is_error": false, "reward": 0.0,
                                      "elapsed_ms": 1.0});
        serde_json::from_value(serde_json::json!({
            "task_id": task,
            "outcome": {"task_id": task, "resolved": resolved, "reward": f64::from(u8::from(resolved)),
                        "steps": steps, "tool_errors": 0, "test_runs": 1, "met_failure": false,
                        "recovered": false, "submitted": true, "truncated": false},
            "initial_observation": "",
            "steps": vec![step; steps],
            "patch": "",
            "reset_ms": reset_ms,
            "duration_s": 1.0,
        }))
        .expect("a record")
    }

    #[test]
    fn a_report_from_gathered_records_reads_like_evaluate() {
        let records = [record("a", true, 3, 2.0), record("b", false, 1, 4.0)];
        let failed = vec![FailedTask {
            task_id: "c".into(),
            error: "worker died".into(),
        }];
        let report = EvalReport::from_records(&records, failed, 4, 2.0, 3);
        assert_eq!(report.summary, EvalSummary::of(&records));
        assert_eq!(report.summary.episodes, 2);
        assert_eq!(report.summary.resolved, 1);
        assert_eq!(report.steps_per_s, 2.0);
        assert_eq!(report.mean_reset_ms, 3.0);
        assert_eq!(report.workers, 3);
        assert!(!report.all_ran());
        let empty = EvalReport::from_records(&[], Vec::new(), 0, 0.0, 1);
        assert_eq!((empty.steps_per_s, empty.mean_reset_ms), (0.0, 0.0));
    }

    #[test]
    fn the_report_serialises_flat() {
        let report = EvalReport {
            workers: 2,
            failed_tasks: vec![FailedTask {
                task_id: "t1".into(),
                error: "missing repository".into(),
            }],
            ..EvalReport::default()
        };
        let value = serde_json::to_value(&report).unwrap_or_default();
        assert_eq!(value["episodes"], 0);
        assert_eq!(value["resolved_rate"], 0.0);
        assert_eq!(value["failed_tasks"][0]["task_id"], "t1");
        assert_eq!(value["workers"], 2);
        let back: EvalReport = serde_json::from_value(value).unwrap_or_default();
        assert_eq!(back, report);
        assert!(!back.all_ran());
    }
}
