use serde::{Deserialize, Serialize};

/// The outcome of one test, as pytest reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestOutcome {
    /// The test ran and passed.
    Passed,
    /// The test ran and an assertion or exception failed it.
    Failed,
    /// Setup or teardown of the test failed, or the test could not be collected.
    Error,
    /// The test was skipped.
    Skipped,
    /// The test failed and was expected to (`xfail`).
    Xfailed,
    /// The test passed but was expected to fail (non-strict `xfail`).
    Xpassed,
}

impl TestOutcome {
    /// True for outcomes that count as success when grading (passed, skipped, xfailed, xpassed).
    pub fn is_ok(self) -> bool {
        !matches!(self, TestOutcome::Failed | TestOutcome::Error)
    }

    /// The lowercase name used in JSON and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            TestOutcome::Passed => "passed",
            TestOutcome::Failed => "failed",
            TestOutcome::Error => "error",
            TestOutcome::Skipped => "skipped",
            TestOutcome::Xfailed => "xfailed",
            TestOutcome::Xpassed => "xpassed",
        }
    }
}

/// How a whole sandboxed run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Every selected test passed (or was skipped/xfailed).
    Passed,
    /// At least one test failed or errored.
    Failed,
    /// The wall-clock limit ended the run.
    Timeout,
    /// The guest asked for more memory than its cap.
    MemoryExceeded,
    /// The guest wrote more output than its cap.
    OutputExceeded,
    /// The guest trapped (e.g. stack exhaustion in C code) or the runner itself failed.
    Crashed,
    /// No test was collected.
    NoTests,
}

impl RunOutcome {
    /// The snake_case name used in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Passed => "passed",
            RunOutcome::Failed => "failed",
            RunOutcome::Timeout => "timeout",
            RunOutcome::MemoryExceeded => "memory_exceeded",
            RunOutcome::OutputExceeded => "output_exceeded",
            RunOutcome::Crashed => "crashed",
            RunOutcome::NoTests => "no_tests",
        }
    }
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRecord {
    /// pytest node id, e.g. `tests/test_x.py::TestY::test_z[1]`.
    pub id: String,
    /// What happened.
    pub outcome: TestOutcome,
    /// Seconds spent in setup, call and teardown.
    pub duration_s: f64,
    /// A short failure text (last lines of the failure), when it failed or errored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The structured result of one sandboxed test run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestReport {
    /// How the run ended as a whole.
    pub outcome: RunOutcome,
    /// Number of passed tests (xpassed not included).
    pub passed: usize,
    /// Number of failed tests.
    pub failed: usize,
    /// Number of tests with setup/teardown or collection errors.
    pub errors: usize,
    /// Number of skipped tests.
    pub skipped: usize,
    /// Number of expected failures.
    pub xfailed: usize,
    /// Number of unexpected passes.
    pub xpassed: usize,
    /// Wall-clock seconds of the run, from instantiation to the end of the guest.
    pub duration_s: f64,
    /// Per-test records, in the order the tests finished.
    pub tests: Vec<TestRecord>,
    /// pytest's exit code, when the guest finished normally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A human-readable explanation for limit and crash outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The guest's standard output (capped).
    #[serde(default)]
    pub stdout: String,
    /// The guest's standard error (capped).
    #[serde(default)]
    pub stderr: String,
    /// Lines of the workspace's Python files each test executed, when the run asked for
    /// coverage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<Coverage>,
}

/// Executed lines of a workspace's files, by relative path: `path -> sorted 1-based lines`.
pub type FileLines = std::collections::BTreeMap<String, Vec<u32>>;

/// Line coverage of a test run, split by test so that a change can be mapped to the tests that
/// can see it (test impact analysis).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Coverage {
    /// Lines each test executed in its call phase, by test id.
    pub tests: std::collections::BTreeMap<String, FileLines>,
    /// Lines executed outside any test's call phase: imports, collection, and fixture setup
    /// and teardown (whose results may be shared between tests).
    pub shared: FileLines,
    /// Why coverage could not be recorded (the interpreter has no `sys.monitoring`), if so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl TestReport {
    /// Builds a report from per-test records, counting outcomes. The caller decides
    /// the run outcome for limit cases; `outcome` here is only used when it is a limit or crash.
    pub fn from_records(tests: Vec<TestRecord>, duration_s: f64) -> Self {
        let mut report = TestReport {
            outcome: RunOutcome::NoTests,
            passed: 0,
            failed: 0,
            errors: 0,
            skipped: 0,
            xfailed: 0,
            xpassed: 0,
            duration_s,
            tests,
            exit_code: None,
            detail: None,
            stdout: String::new(),
            coverage: None,
            stderr: String::new(),
        };
        for test in &report.tests {
            match test.outcome {
                TestOutcome::Passed => report.passed += 1,
                TestOutcome::Failed => report.failed += 1,
                TestOutcome::Error => report.errors += 1,
                TestOutcome::Skipped => report.skipped += 1,
                TestOutcome::Xfailed => report.xfailed += 1,
                TestOutcome::Xpassed => report.xpassed += 1,
            }
        }
        report.outcome = report.outcome_from_counts();
        report
    }

    /// The outcome implied by the counts alone: failed if anything failed or errored,
    /// no_tests if nothing ran, passed otherwise.
    pub fn outcome_from_counts(&self) -> RunOutcome {
        if self.failed > 0 || self.errors > 0 {
            RunOutcome::Failed
        } else if self.tests.is_empty() {
            RunOutcome::NoTests
        } else {
            RunOutcome::Passed
        }
    }

    /// The record of the test with the given node id, if it ran.
    pub fn test(&self, id: &str) -> Option<&TestRecord> {
        self.tests.iter().find(|t| t.id == id)
    }

    /// True when every test that ran is OK and the run was not cut short by a limit.
    pub fn all_passed(&self) -> bool {
        self.outcome == RunOutcome::Passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, outcome: TestOutcome) -> TestRecord {
        TestRecord {
            id: id.into(),
            outcome,
            duration_s: 0.0,
            message: None,
        }
    }

    #[test]
    fn counts_and_outcome_follow_records() {
        let report = TestReport::from_records(
            vec![
                record("a", TestOutcome::Passed),
                record("b", TestOutcome::Skipped),
                record("c", TestOutcome::Xfailed),
            ],
            0.5,
        );
        assert_eq!(report.outcome, RunOutcome::Passed);
        assert_eq!((report.passed, report.skipped, report.xfailed), (1, 1, 1));

        let report = TestReport::from_records(
            vec![
                record("a", TestOutcome::Passed),
                record("b", TestOutcome::Error),
            ],
            0.5,
        );
        assert_eq!(report.outcome, RunOutcome::Failed);
        assert_eq!(report.errors, 1);
        assert!(TestReport::from_records(vec![], 0.0).outcome == RunOutcome::NoTests);
    }

    #[test]
    fn json_uses_documented_names() {
        let report = TestReport::from_records(vec![record("t::x", TestOutcome::Xpassed)], 1.0);
        let json = serde_json::to_value(&report).expect("serialise");
        assert_eq!(json["outcome"], "passed");
        assert_eq!(json["tests"][0]["outcome"], "xpassed");
        let back: TestReport = serde_json::from_value(json).expect("round trip");
        assert_eq!(back, report);
        assert_eq!(
            serde_json::to_value(RunOutcome::MemoryExceeded).expect("serialise"),
            "memory_exceeded"
        );
    }
}
