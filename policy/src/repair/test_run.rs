//! One test run as the agent saw it, read from the typed observation the environment attaches
//! to a test run.

use std::collections::BTreeSet;

use frognano_core::TestRunObservation;

use super::source::is_test_file;

/// One test run as the agent saw it.
#[derive(Debug, Clone, Default)]
pub(super) struct TestRun {
    /// Tests that failed or errored.
    pub(super) failed: usize,
    /// The run ended abnormally (limit, crash, nothing collected).
    pub(super) abnormal: bool,
    /// Ids of the failing tests the run named.
    pub(super) failing: BTreeSet<String>,
    /// Traceback locations outside test files: (path, line).
    pub(super) locations: Vec<(String, usize)>,
    /// Text of the failure sections.
    pub(super) failure_text: String,
}

impl TestRun {
    /// The run as its typed observation describes it. A run without one (a refused selection,
    /// or a context built from text alone) is abnormal and names nothing.
    pub(super) fn from_observation(observed: Option<&TestRunObservation>) -> Self {
        let Some(observed) = observed else {
            return TestRun {
                abnormal: true,
                ..TestRun::default()
            };
        };
        let mut run = TestRun {
            failed: observed.failed,
            abnormal: observed.ended_abnormally(),
            ..TestRun::default()
        };
        for test in &observed.failing {
            run.failing.insert(test.id.clone());
            for line in test.message.iter().flat_map(|m| m.lines()) {
                run.failure_text.push_str("    ");
                run.failure_text.push_str(line);
                run.failure_text.push('\n');
            }
        }
        for location in observed.locations() {
            let place = (location.path.clone(), location.line);
            if location.line > 0
                && !location.path.starts_with('/')
                && !is_test_file(&location.path)
                && !run.locations.contains(&place)
            {
                run.locations.push(place);
            }
        }
        run
    }

    /// Every test passed and the run ended normally.
    pub(super) fn passed(&self) -> bool {
        self.failed == 0 && !self.abnormal
    }

    /// The run is strictly better than `base`: fewer failures, none new, no abnormal end.
    pub(super) fn improves_on(&self, base: &TestRun) -> bool {
        !self.abnormal
            && self.failed < base.failed
            && (base.abnormal || self.failing.is_subset(&base.failing))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use frognano_core::{FailingTest, RunOutcome, SourceLocation, TestOutcome};

    /// A failing test whose locations are the `path:LINE:` lines of its message.
    pub(in crate::repair) fn failing(id: &str, outcome: TestOutcome, message: &str) -> FailingTest {
        let locations = message
            .lines()
            .filter_map(|l| {
                let (path, rest) = l.trim_start().split_once(':')?;
                let line = rest.split(':').next()?.parse().ok()?;
                Some(SourceLocation {
                    path: path.into(),
                    line,
                })
            })
            .collect();
        FailingTest {
            id: id.into(),
            outcome,
            message: Some(message.into()),
            locations,
        }
    }

    #[test]
    fn test_runs_read_failures_and_locations_from_the_typed_observation() {
        let observed = TestRunObservation {
            outcome: RunOutcome::Failed,
            total: 5,
            passed: 3,
            failed: 2,
            skipped: 0,
            duration_s: 0.2,
            failing: vec![
                failing(
                    "tests/test_m.py::test_a",
                    TestOutcome::Failed,
                    "def test_a():\n>       assert clamp(5, 0, 3) == 3\nE       assert 4 == 3\n\ntests/test_m.py:4: AssertionError",
                ),
                failing(
                    "tests/test_m.py::test_b[x y]",
                    TestOutcome::Error,
                    "pkg/m.py:12: KeyError",
                ),
            ],
        };
        let run = TestRun::from_observation(Some(&observed));
        assert_eq!(run.failed, 2);
        assert!(!run.abnormal);
        assert!(run.failing.contains("tests/test_m.py::test_a"));
        assert!(run.failing.contains("tests/test_m.py::test_b[x y]"));
        assert_eq!(run.locations, vec![("pkg/m.py".to_string(), 12)]);
        assert!(run.failure_text.contains("    E       assert 4 == 3\n"));
        let limit = TestRun::from_observation(Some(&TestRunObservation {
            outcome: RunOutcome::Timeout,
            total: 0,
            passed: 0,
            failed: 0,
            failing: Vec::new(),
            ..observed.clone()
        }));
        assert!(limit.abnormal && !limit.passed());
        let unreadable = TestRun::from_observation(None);
        assert!(unreadable.abnormal && !unreadable.passed());
        let better = TestRun {
            failed: 1,
            failing: ["tests/test_m.py::test_a".to_string()].into(),
            ..TestRun::default()
        };
        assert!(better.improves_on(&run));
        assert!(!run.improves_on(&better));
    }
}
