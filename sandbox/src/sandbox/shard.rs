//! Sharded runs: one suite split over several sandbox instances that run at once, each from
//! the snapshot, and their results merged as one run's.
//!
//! Every shard collects the whole suite and keeps every `count`-th test (the pytest plugin
//! deselects the rest and writes each kept test's position in the collection), so no separate
//! collection pass is needed and slow modules spread over the shards. Merging puts the records
//! back in collection order, takes collection errors from the first shard only, and lets a
//! limit any shard hit decide the outcome, as it would have decided the unsharded run's.

use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use frognano_core::{Coverage, RunOutcome, TestRecord, TestReport};

use super::options::MAX_SHARDS;
use super::{PreparedRepo, Sandbox, TestRequest};
use crate::error::{Result, SandboxError};
use crate::workspace;

/// Which part of a split suite one instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shard {
    pub(super) index: usize,
    pub(super) count: usize,
}

/// One instance's report, with each record's position in the whole collection (shards only).
#[derive(Debug)]
pub(super) struct ShardRun {
    pub(super) report: TestReport,
    pub(super) positions: Vec<Option<usize>>,
}

impl Sandbox {
    /// Runs `request.shards` shards at once, each on its own thread and workspace: copies of
    /// the prepared repository, or `workspace` itself for the first shard and copies of it for
    /// the others.
    pub(super) fn run_sharded(
        &self,
        prepared: &PreparedRepo,
        workspace: Option<&Path>,
        request: &TestRequest,
    ) -> Result<TestReport> {
        let count = request.shards;
        if count > MAX_SHARDS {
            return Err(SandboxError::InvalidOption(format!(
                "shards must be at most {MAX_SHARDS}, got {count}"
            )));
        }
        let started = Instant::now();
        let slots: Vec<Mutex<Option<Result<ShardRun>>>> =
            (0..count).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for (index, slot) in slots.iter().enumerate() {
                let shard = Some(Shard { index, count });
                scope.spawn(move || {
                    let run = self.runtime.block_on(async {
                        match workspace {
                            None => self.run_prepared(prepared, request, shard).await,
                            Some(work) if index == 0 => {
                                self.run_in_workspace(
                                    prepared,
                                    work,
                                    request,
                                    shard,
                                    Instant::now(),
                                )
                                .await
                            }
                            Some(work) => {
                                let copy_started = Instant::now();
                                let copy = tempfile::Builder::new()
                                    .prefix("frognano-shard-")
                                    .tempdir()
                                    .map_err(SandboxError::io("create shard workspace"))?;
                                workspace::copy_repo(work, copy.path())?;
                                self.run_in_workspace(
                                    prepared,
                                    copy.path(),
                                    request,
                                    shard,
                                    copy_started,
                                )
                                .await
                            }
                        }
                    });
                    if let Ok(mut slot) = slot.lock() {
                        *slot = Some(run);
                    }
                });
            }
        });
        let mut runs = Vec::with_capacity(count);
        for slot in slots {
            let run = slot.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(SandboxError::Runtime("a shard's thread panicked".into()))
            })?;
            runs.push(run);
        }
        let mut report = merge(runs);
        report.duration_s = started.elapsed().as_secs_f64();
        if let Some(profile) = &mut report.profile {
            profile.attribute_rest_to_host(report.duration_s);
        }
        Ok(report)
    }
}

/// Whether an outcome is a limit (or crash) that ended a run early.
fn is_limit(outcome: RunOutcome) -> bool {
    matches!(
        outcome,
        RunOutcome::Timeout
            | RunOutcome::MemoryExceeded
            | RunOutcome::OutputExceeded
            | RunOutcome::Crashed
    )
}

/// pytest's exit status of the whole suite from its shards': a usage, internal or interrupt
/// status of any shard first, then failures, then success; "no tests" (5) only when every shard
/// had none (a shard can be empty when there are fewer tests than shards).
fn merged_exit_code(codes: &[Option<i32>]) -> Option<i32> {
    let present: Vec<i32> = codes.iter().flatten().copied().collect();
    if present.len() < codes.len() {
        // A shard that never finished its session: no status for the whole run either.
        return None;
    }
    if let Some(code) = present.iter().find(|c| (2..=4).contains(*c)) {
        return Some(*code);
    }
    [1, 0, 5]
        .into_iter()
        .find(|code| present.contains(code))
        .or_else(|| present.first().copied())
}

/// One report from the shards' reports (in shard order).
pub(super) fn merge(runs: Vec<ShardRun>) -> TestReport {
    let mut unpositioned: Vec<TestRecord> = Vec::new();
    let mut positioned: Vec<(usize, TestRecord)> = Vec::new();
    let mut coverage: Option<Coverage> = None;
    let mut stdout = String::new();
    let mut stderr = String::new();
    let count = runs.len();
    let codes: Vec<Option<i32>> = runs.iter().map(|r| r.report.exit_code).collect();
    let limited = runs
        .iter()
        .find(|r| is_limit(r.report.outcome))
        .map(|r| (r.report.outcome, r.report.detail.clone()));
    let failed_without_tests = runs
        .iter()
        .find(|r| {
            r.report.outcome == RunOutcome::Failed
                && r.report.outcome_from_counts() != RunOutcome::Failed
        })
        .map(|r| r.report.detail.clone());
    let detail = runs.iter().find_map(|r| r.report.detail.clone());
    let interrupted = runs.iter().find_map(|r| r.report.interrupted.clone());
    // The profile of the shard that took longest (the one the run waited for).
    let profile = runs
        .iter()
        .max_by(|a, b| a.report.duration_s.total_cmp(&b.report.duration_s))
        .and_then(|r| r.report.profile);
    for (index, run) in runs.into_iter().enumerate() {
        let ShardRun { report, positions } = run;
        for (name, text, all) in [
            ("stdout", &report.stdout, &mut stdout),
            ("stderr", &report.stderr, &mut stderr),
        ] {
            if !text.is_empty() {
                all.push_str(&format!(
                    "--- shard {} of {count} ({name}) ---\n",
                    index + 1
                ));
                all.push_str(text);
                if !text.ends_with('\n') {
                    all.push('\n');
                }
            }
        }
        for (record, position) in report
            .tests
            .into_iter()
            .zip(positions.into_iter().chain(std::iter::repeat(None)))
        {
            match position {
                Some(position) => positioned.push((position, record)),
                None => unpositioned.push(record),
            }
        }
        if let Some(part) = report.coverage {
            let merged = coverage.get_or_insert_with(Coverage::default);
            merged.tests.extend(part.tests);
            for (file, lines) in part.shared {
                let all = merged.shared.entry(file).or_default();
                all.extend(lines);
                all.sort_unstable();
                all.dedup();
            }
            if merged.unavailable.is_none() {
                merged.unavailable = part.unavailable;
            }
        }
    }
    positioned.sort_by_key(|(position, _)| *position);
    unpositioned.extend(positioned.into_iter().map(|(_, record)| record));
    let mut report = TestReport::from_records(unpositioned, 0.0);
    report.exit_code = merged_exit_code(&codes);
    report.coverage = coverage;
    report.stdout = stdout;
    report.stderr = stderr;
    report.profile = profile.map(|mut p| {
        p.tests = report.tests.len();
        p.shards = count;
        p
    });
    if let Some((outcome, limit_detail)) = limited {
        report.outcome = outcome;
        report.detail = limit_detail;
        report.interrupted = interrupted;
    } else if let Some(why) = failed_without_tests {
        report.outcome = RunOutcome::Failed;
        report.detail = why;
    } else {
        report.detail = detail;
    }
    report
}

#[cfg(test)]
mod tests {
    use frognano_core::TestOutcome;

    use super::*;

    fn shard(records: &[(&str, TestOutcome, Option<usize>)], exit: Option<i32>) -> ShardRun {
        let tests: Vec<TestRecord> = records
            .iter()
            .map(|(id, outcome, _)| TestRecord::new(*id, *outcome))
            .collect();
        let mut report = TestReport::from_records(tests, 1.0);
        report.exit_code = exit;
        if exit == Some(5) && report.tests.is_empty() {
            report.outcome = RunOutcome::NoTests;
        }
        ShardRun {
            report,
            positions: records.iter().map(|(_, _, p)| *p).collect(),
        }
    }

    #[test]
    fn records_come_back_in_collection_order_with_collection_errors_first() {
        use TestOutcome::*;
        let first = shard(
            &[
                ("broken.py", Error, None),
                ("t.py::a", Passed, Some(0)),
                ("t.py::c", Failed, Some(2)),
            ],
            Some(1),
        );
        let second = shard(
            &[("t.py::b", Passed, Some(1)), ("t.py::d", Skipped, Some(3))],
            Some(0),
        );
        let report = merge(vec![first, second]);
        let ids: Vec<&str> = report.tests.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            ["broken.py", "t.py::a", "t.py::b", "t.py::c", "t.py::d"]
        );
        assert_eq!(
            (report.passed, report.failed, report.errors, report.skipped),
            (2, 1, 1, 1)
        );
        assert_eq!(report.outcome, RunOutcome::Failed);
        assert_eq!(report.exit_code, Some(1));
    }

    #[test]
    fn an_empty_shard_does_not_make_the_run_empty() {
        let full = shard(&[("t.py::a", TestOutcome::Passed, Some(0))], Some(0));
        let empty = shard(&[], Some(5));
        let report = merge(vec![full, empty]);
        assert_eq!(report.outcome, RunOutcome::Passed);
        assert_eq!(report.exit_code, Some(0));
        let report = merge(vec![shard(&[], Some(5)), shard(&[], Some(5))]);
        assert_eq!(report.outcome, RunOutcome::NoTests);
        assert_eq!(report.exit_code, Some(5));
    }

    #[test]
    fn a_limit_in_any_shard_is_the_outcome() {
        let passed = shard(&[("t.py::a", TestOutcome::Passed, Some(0))], Some(0));
        let mut stuck = shard(&[("t.py::b", TestOutcome::Passed, Some(1))], None);
        stuck.report.outcome = RunOutcome::Timeout;
        stuck.report.detail = Some("wall-clock limit".into());
        let report = merge(vec![passed, stuck]);
        assert_eq!(report.outcome, RunOutcome::Timeout);
        assert_eq!(report.detail.as_deref(), Some("wall-clock limit"));
        assert_eq!(report.exit_code, None);
        assert_eq!(report.tests.len(), 2);
    }

    #[test]
    fn usage_errors_win_over_failures() {
        assert_eq!(merged_exit_code(&[Some(1), Some(4)]), Some(4));
        assert_eq!(merged_exit_code(&[Some(0), Some(1)]), Some(1));
        assert_eq!(merged_exit_code(&[Some(5), Some(0)]), Some(0));
        assert_eq!(merged_exit_code(&[Some(0), None]), None);
    }
}
