//! Report assembly: the pytest plugin's JSONL results and the run's limits and exit status
//! turned into a [`TestReport`].

use std::path::Path;

use frognano_core::{Coverage, FileLines, RunOutcome, TestRecord, TestReport};

use super::RESULTS_FILE;
use super::guest::GuestRun;
use crate::error::{Result, SandboxError};

/// The plugin's results: per-test records, pytest's exit status and coverage, if recorded.
pub(super) type RunResults = (Vec<TestRecord>, Option<i32>, Option<Coverage>);

/// Reads the plugin's JSONL results; a partial last line (a run cut short) is ignored.
pub(super) fn read_results(tmp: &Path) -> Result<RunResults> {
    // Read through a capability handle: a guest that replaced the file with a symlink
    // pointing out of its directory cannot make the host read another file.
    let dir = cap_std::fs::Dir::open_ambient_dir(tmp, cap_std::ambient_authority())
        .map_err(SandboxError::io("open run directory"))?;
    let text = match dir.read_to_string(RESULTS_FILE) {
        Ok(text) => text,
        Err(_) => return Ok((Vec::new(), None, None)),
    };
    let mut records = Vec::new();
    let mut exit_code = None;
    let mut coverage: Option<Coverage> = None;
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(code) = value.get("exit_code").and_then(|c| c.as_i64()) {
            exit_code = i32::try_from(code).ok();
        } else if let Some(why) = value.get("coverage_unavailable").and_then(|w| w.as_str()) {
            coverage.get_or_insert_with(Coverage::default).unavailable = Some(why.to_string());
        } else if let Some(test) = value.get("coverage") {
            let files: FileLines = value
                .get("files")
                .and_then(|f| serde_json::from_value(f.clone()).ok())
                .unwrap_or_default();
            let coverage = coverage.get_or_insert_with(Coverage::default);
            match test.as_str() {
                Some(id) => {
                    coverage.tests.insert(id.to_string(), files);
                }
                None => coverage.shared = files,
            }
        } else if let Ok(record) = serde_json::from_value::<TestRecord>(value) {
            records.push(record);
        }
    }
    Ok((records, exit_code, coverage))
}

/// The report of a finished run: a limit the run hit decides its outcome, else pytest's exit
/// status and the per-test records do.
pub(super) fn build_report(
    records: Vec<TestRecord>,
    pytest_exit: Option<i32>,
    run: GuestRun,
) -> TestReport {
    let mut report = TestReport::from_records(records, run.duration.as_secs_f64());
    report.exit_code = pytest_exit;
    report.stdout = run.stdout;
    report.stderr = run.stderr;
    report.detail = run.detail;
    if let Some(limit) = run.limit {
        report.outcome = limit;
    } else if pytest_exit.is_none() {
        // The guest ended without pytest finishing (e.g. a test called os._exit).
        report.outcome = RunOutcome::Crashed;
        report.detail = Some(format!(
            "the interpreter exited (status {:?}) before pytest finished",
            run.exit_code
        ));
    } else if pytest_exit == Some(5) && report.tests.is_empty() {
        report.outcome = RunOutcome::NoTests;
    } else if matches!(pytest_exit, Some(2..=4)) && report.failed == 0 && report.errors == 0 {
        // Interrupted, internal or usage error with nothing else to show for it.
        report.outcome = RunOutcome::Failed;
        report.detail = Some(format!("pytest exited with status {pytest_exit:?}"));
    }
    report
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn run(exit_code: Option<i32>, limit: Option<RunOutcome>) -> GuestRun {
        GuestRun {
            exit_code,
            limit,
            detail: limit.map(|_| "a limit".to_string()),
            stdout: "out".into(),
            stderr: "err".into(),
            duration: Duration::from_millis(250),
        }
    }

    fn record(id: &str, outcome: &str) -> TestRecord {
        serde_json::from_value(serde_json::json!({"id": id, "outcome": outcome, "duration_s": 0.1}))
            .expect("record")
    }

    #[test]
    fn results_are_read_and_a_cut_off_last_line_is_ignored() {
        let dir = tempfile::tempdir().expect("tempdir");
        let lines = [
            r#"{"id": "t.py::a", "outcome": "passed", "duration_s": 0.1}"#,
            r#"{"coverage": null, "files": {"m.py": [1, 2]}}"#,
            r#"{"coverage": "t.py::a", "files": {"m.py": [3]}}"#,
            r#"{"exit_code": 1}"#,
            r#"{"id": "t.py::b", "outc"#,
        ];
        std::fs::write(dir.path().join(RESULTS_FILE), lines.join("\n")).expect("write");
        let (records, exit, coverage) = read_results(dir.path()).expect("read");
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].id, "t.py::a");
        assert_eq!(exit, Some(1));
        let coverage = coverage.expect("coverage");
        assert_eq!(coverage.shared["m.py"], vec![1, 2]);
        assert_eq!(coverage.tests["t.py::a"]["m.py"], vec![3]);
    }

    #[test]
    fn no_results_file_is_an_empty_result() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (records, exit, coverage) = read_results(dir.path()).expect("read");
        assert!(records.is_empty() && exit.is_none() && coverage.is_none());
    }

    #[test]
    fn a_limit_decides_the_outcome() {
        let records = vec![record("t.py::a", "passed")];
        let report = build_report(records, Some(0), run(None, Some(RunOutcome::Timeout)));
        assert_eq!(report.outcome, RunOutcome::Timeout);
        assert_eq!(report.detail.as_deref(), Some("a limit"));
        assert_eq!(
            (report.stdout.as_str(), report.stderr.as_str()),
            ("out", "err")
        );
    }

    #[test]
    fn an_interpreter_exit_before_pytest_finished_is_a_crash() {
        let report = build_report(vec![record("t.py::a", "passed")], None, run(Some(3), None));
        assert_eq!(report.outcome, RunOutcome::Crashed);
        assert!(report.detail.is_some_and(|d| d.contains("Some(3)")));
    }

    #[test]
    fn pytest_exit_statuses_without_tests() {
        let report = build_report(Vec::new(), Some(5), run(Some(0), None));
        assert_eq!(report.outcome, RunOutcome::NoTests);
        let report = build_report(Vec::new(), Some(4), run(Some(0), None));
        assert_eq!(report.outcome, RunOutcome::Failed);
        assert_eq!(report.exit_code, Some(4));
    }
}
