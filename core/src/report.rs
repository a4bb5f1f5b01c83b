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
    /// The time limit ended the run (the guest's own time, or the wall-clock backstop).
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
    /// When it failed or errored because the sandbox's platform (WebAssembly, WASI) lacks a
    /// feature the test needs, that feature, as a short stable label: `threads`,
    /// `subprocesses`, `multiprocessing`, `sockets`, `signals`, `ssl`, `fd duplication`
    /// (`os.dup`/`os.dup2`, fd-level capture), `ctypes`, `locale`, `mmap`, `symlinks`,
    /// `os.<name>`/`time.<name>`/`select.<name>` for a missing function (e.g. `os.umask`,
    /// `os.getuid`, `os.pipe`, `time.tzset`), the name of another missing standard-library
    /// module (e.g. `termios`, `fcntl`, `resource`, `pwd`), or `unsupported operation`. Absent for every other outcome and failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
}

impl TestRecord {
    /// A record of `id` with `outcome`, no duration, no message and no platform label.
    pub fn new(id: impl Into<String>, outcome: TestOutcome) -> Self {
        TestRecord {
            id: id.into(),
            outcome,
            duration_s: 0.0,
            message: None,
            platform: None,
        }
    }
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
    /// The test that was running when the run stopped early (a crash, or a limit reached in
    /// the middle of a test): the one to deselect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
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
    /// Where the run's wall-clock time went, phase by phase (sandboxed runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<RunProfile>,
}

/// Where one sandboxed run's wall-clock time went. Host phases are measured by the host, guest
/// phases by the guest's clock around pytest's own hooks; for a run split over several
/// instances, the phases are those of the instance that finished last and `shards` says how
/// many ran.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct RunProfile {
    /// Host: copying the repository into the run's workspace and overlaying its bytecode.
    pub workspace_s: f64,
    /// Host: making the interpreter instance (from its snapshot, where the image has one) and
    /// handing it the run's program.
    pub instantiate_s: f64,
    /// Guest: from the run's prelude to the start of pytest's session (argument parsing,
    /// plugins, initial conftests).
    pub startup_s: f64,
    /// Guest: collecting the tests (importing the test modules and their imports).
    pub collection_s: f64,
    /// Guest: inside the tests, as pytest times them (setup, call and teardown of each).
    pub tests_s: f64,
    /// Guest: pytest's run loop outside any test (reporting, capture, hooks, FrogNano's
    /// results plugin): the per-test overhead.
    pub per_test_overhead_s: f64,
    /// Guest: the end of the session (summary, results written).
    pub finish_s: f64,
    /// Host: everything else (reading results, interpreter teardown, cleanup; for a sharded
    /// run, waiting for the other instances and merging).
    pub host_other_s: f64,
    /// Tests that ran.
    pub tests: usize,
    /// Sandbox instances the run was split over (1 when it was not).
    pub shards: usize,
}

impl RunProfile {
    /// Seconds of the per-test overhead per test (0 when no test ran).
    pub fn overhead_per_test_s(&self) -> f64 {
        if self.tests == 0 {
            0.0
        } else {
            self.per_test_overhead_s / self.tests as f64
        }
    }

    /// Sets `host_other_s` to what `total_s` leaves after every other phase (never negative).
    pub fn attribute_rest_to_host(&mut self, total_s: f64) {
        self.host_other_s = 0.0;
        let accounted: f64 = self.phases().iter().map(|(_, s)| s).sum();
        self.host_other_s = (total_s - accounted).max(0.0);
    }

    /// The phases as `(name, seconds)`, in the order they happen.
    pub fn phases(&self) -> [(&'static str, f64); 8] {
        [
            ("workspace", self.workspace_s),
            ("instantiate", self.instantiate_s),
            ("startup", self.startup_s),
            ("collection", self.collection_s),
            ("tests", self.tests_s),
            ("per-test overhead", self.per_test_overhead_s),
            ("finish", self.finish_s),
            ("host other", self.host_other_s),
        ]
    }
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
            interrupted: None,
            stdout: String::new(),
            coverage: None,
            stderr: String::new(),
            profile: None,
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

    /// The node ids of the tests that passed, in run order.
    pub fn passed_ids(&self) -> impl Iterator<Item = &str> {
        self.tests
            .iter()
            .filter(|t| t.outcome == TestOutcome::Passed)
            .map(|t| t.id.as_str())
    }

    /// True when every test that ran is OK and the run was not cut short by a limit.
    pub fn all_passed(&self) -> bool {
        self.outcome == RunOutcome::Passed
    }

    /// The failed and errored tests that need a feature the sandbox's platform lacks, counted
    /// by that feature ([`TestRecord::platform`]): `cause -> number of tests`.
    pub fn platform_failures(&self) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for test in &self.tests {
            if let (false, Some(cause)) = (test.outcome.is_ok(), &test.platform) {
                *counts.entry(cause.clone()).or_insert(0) += 1;
            }
        }
        counts
    }
}

/// A place in the repository's source that a failure's traceback names.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourceLocation {
    /// Path relative to the repository root, e.g. `pkg/mod.py`.
    pub path: String,
    /// 1-based line number.
    pub line: usize,
}

/// One failing test as a test-run observation shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailingTest {
    /// pytest node id, e.g. `tests/test_x.py::test_y`.
    pub id: String,
    /// How it failed ([`TestOutcome::Failed`] or [`TestOutcome::Error`]).
    pub outcome: TestOutcome,
    /// The failure text the observation shows (its last lines); absent for the tests the
    /// observation names by id only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Locations in the repository's files (relative paths) that `message` names as
    /// `path.py:LINE:`, in order of appearance, each once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<SourceLocation>,
}

/// The typed form of a test-run observation: what its text says, for policies to read without
/// parsing the text.
///
/// An environment attaches one to the [`Observation`](crate::Observation) of every test run it
/// performs. It carries the same information as the text: the counts, how the run ended, and
/// the failing tests the text names (the first few with their failure text, then more by id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestRunObservation {
    /// How the run ended as a whole.
    pub outcome: RunOutcome,
    /// Tests that ran (0 when nothing was collected or a limit ended the run first).
    pub total: usize,
    /// Tests that passed.
    pub passed: usize,
    /// Tests that failed or errored (all of them, also those `failing` leaves out).
    pub failed: usize,
    /// Tests that were skipped.
    #[serde(default)]
    pub skipped: usize,
    /// Wall-clock seconds of the run.
    pub duration_s: f64,
    /// The failing tests the observation names, in its order.
    #[serde(default)]
    pub failing: Vec<FailingTest>,
}

impl TestRunObservation {
    /// True when the run did not end normally: a limit hit, a crash, or no test ran.
    pub fn ended_abnormally(&self) -> bool {
        self.total == 0 || !matches!(self.outcome, RunOutcome::Passed | RunOutcome::Failed)
    }

    /// Every location of every failing test, in order (repeats across tests included).
    pub fn locations(&self) -> impl Iterator<Item = &SourceLocation> {
        self.failing.iter().flat_map(|t| t.locations.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_without_a_test_run_serialise_as_before() {
        let plain = crate::Observation {
            text: "Edited.".into(),
            ..Default::default()
        };
        let json = serde_json::to_value(&plain).expect("serialise");
        assert_eq!(
            json,
            serde_json::json!({"text": "Edited.", "is_error": false})
        );
        let old: crate::Observation =
            serde_json::from_str(r#"{"text": "Ran 1 tests"}"#).expect("an old record loads");
        assert_eq!(old.test_run, None);
        let run = TestRunObservation {
            outcome: RunOutcome::Failed,
            total: 2,
            passed: 1,
            failed: 1,
            skipped: 0,
            duration_s: 0.1,
            failing: vec![FailingTest {
                id: "tests/t.py::test_a".into(),
                outcome: TestOutcome::Failed,
                message: Some("pkg/m.py:3: AssertionError".into()),
                locations: vec![SourceLocation {
                    path: "pkg/m.py".into(),
                    line: 3,
                }],
            }],
        };
        assert!(!run.ended_abnormally());
        let with_run = crate::Observation {
            test_run: Some(run.clone()),
            ..plain
        };
        let back: crate::Observation =
            serde_json::from_value(serde_json::to_value(&with_run).expect("serialise"))
                .expect("round trip");
        assert_eq!(back, with_run);
        let limit = TestRunObservation {
            outcome: RunOutcome::Timeout,
            ..run
        };
        assert!(limit.ended_abnormally());
    }

    #[test]
    fn counts_and_outcome_follow_records() {
        let report = TestReport::from_records(
            vec![
                TestRecord::new("a", TestOutcome::Passed),
                TestRecord::new("b", TestOutcome::Skipped),
                TestRecord::new("c", TestOutcome::Xfailed),
            ],
            0.5,
        );
        assert_eq!(report.outcome, RunOutcome::Passed);
        assert_eq!((report.passed, report.skipped, report.xfailed), (1, 1, 1));

        let report = TestReport::from_records(
            vec![
                TestRecord::new("a", TestOutcome::Passed),
                TestRecord::new("b", TestOutcome::Error),
            ],
            0.5,
        );
        assert_eq!(report.outcome, RunOutcome::Failed);
        assert_eq!(report.errors, 1);
        assert!(TestReport::from_records(vec![], 0.0).outcome == RunOutcome::NoTests);
    }

    #[test]
    fn platform_failures_count_labelled_failures_and_errors_only() {
        let labelled = |id: &str, outcome: TestOutcome, cause: &str| TestRecord {
            platform: Some(cause.to_string()),
            ..TestRecord::new(id, outcome)
        };
        let report = TestReport::from_records(
            vec![
                labelled("a", TestOutcome::Failed, "sockets"),
                labelled("b", TestOutcome::Error, "sockets"),
                labelled("c", TestOutcome::Failed, "os.umask"),
                TestRecord::new("d", TestOutcome::Failed),
                // A label on a passing record (not written by the plugin) is not a failure.
                labelled("e", TestOutcome::Passed, "threads"),
            ],
            0.1,
        );
        let counts = report.platform_failures();
        assert_eq!(
            counts.into_iter().collect::<Vec<_>>(),
            vec![("os.umask".to_string(), 1), ("sockets".to_string(), 2)]
        );
        assert!(
            TestReport::from_records(vec![], 0.0)
                .platform_failures()
                .is_empty()
        );
    }

    #[test]
    fn records_without_a_platform_label_load_and_serialise_as_before() {
        let old: TestRecord =
            serde_json::from_str(r#"{"id": "t::a", "outcome": "failed", "duration_s": 0.5}"#)
                .expect("an old record loads");
        assert_eq!(old.platform, None);
        let json = serde_json::to_value(&old).expect("serialise");
        assert!(json.get("platform").is_none(), "{json}");
        let new: TestRecord = serde_json::from_str(
            r#"{"id": "t::b", "outcome": "error", "duration_s": 0.0, "platform": "threads"}"#,
        )
        .expect("a labelled record loads");
        assert_eq!(new.platform.as_deref(), Some("threads"));
        assert_eq!(
            serde_json::to_value(&new).expect("serialise")["platform"],
            "threads"
        );
    }

    #[test]
    fn json_uses_documented_names() {
        let report =
            TestReport::from_records(vec![TestRecord::new("t::x", TestOutcome::Xpassed)], 1.0);
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
