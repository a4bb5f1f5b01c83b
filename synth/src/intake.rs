//! Repository intake: the clean suite, run twice in the sandbox, decides which tests can
//! validate a bug (those that pass every time) and records which lines each test executes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use frognano_core::{Coverage, RunOutcome, TestOutcome, TestReport};
use frognano_repo::CleanRepo;
use frognano_sandbox::{TestRequest, assets};
use serde::{Deserialize, Serialize};

use crate::{Result, SynthError};

/// Bump when the cached record's meaning changes.
const INTAKE_FORMAT: u32 = 4;

/// What the clean suite of a repository says, once per repository content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intake {
    /// Content hash of the clean tree the suite ran on.
    pub content_hash: String,
    /// Tests that passed in every clean run: the only ones a bug is judged by.
    pub passing: BTreeSet<String>,
    /// Tests whose outcome differed between the clean runs (excluded).
    pub flaky: BTreeSet<String>,
    /// Tests that failed or errored in a clean run (excluded).
    pub failing: BTreeSet<String>,
    /// Tests skipped or xfailed in a clean run (excluded).
    pub skipped: BTreeSet<String>,
    /// Tests that pass in the suite's own order but not when the passing tests run by id in
    /// grading order (they depend on state other tests leave behind; excluded).
    #[serde(default)]
    pub order_dependent: BTreeSet<String>,
    /// Tests of `failing` that fail because the sandbox's platform (WebAssembly, WASI) lacks a
    /// feature they need, with that feature (`test id -> cause`, e.g. `"sockets"`,
    /// `"os.umask"`; see [`frognano_core::TestRecord::platform`]).
    #[serde(default)]
    pub platform: BTreeMap<String, String>,
    /// Wall-clock seconds of a clean run of the whole suite (without coverage).
    pub suite_seconds: f64,
    /// Which lines each test executed, when the interpreter could record it.
    pub coverage: Option<Coverage>,
}

impl Intake {
    /// Number of tests the clean runs reported.
    pub fn total(&self) -> usize {
        self.passing.len()
            + self.flaky.len()
            + self.failing.len()
            + self.skipped.len()
            + self.order_dependent.len()
    }
}

/// Options of [`run_intake`].
#[derive(Debug, Clone)]
pub struct IntakeOptions {
    /// Clean runs of the whole suite (at least 2: a test whose outcome differs is flaky).
    pub runs: usize,
    /// Reuse a cached intake of the same repository contents and sandbox image.
    pub use_cache: bool,
    /// Set it to stop the intake's runs early (they then fail as cancelled).
    pub cancel: Option<frognano_sandbox::CancelFlag>,
}

impl Default for IntakeOptions {
    fn default() -> Self {
        IntakeOptions {
            runs: 2,
            use_cache: true,
            cancel: None,
        }
    }
}

fn cache_path(repo: &CleanRepo, image: &str) -> std::path::PathBuf {
    let key = format!(
        "{INTAKE_FORMAT}\n{}\n{image}\n{}",
        repo.content_hash,
        assets::sha256_bytes(
            format!(
                "{}{}",
                frognano_sandbox::layers::PLUGIN_SOURCE,
                frognano_sandbox::layers::PYTEST_COMPAT_SOURCE
            )
            .as_bytes()
        )
    );
    let digest = assets::sha256_bytes(key.as_bytes());
    assets::cache_dir()
        .join("synth")
        .join(format!("intake-{}.json", &digest[..20]))
}

/// Runs the clean suite of `repo` `options.runs` times (the first with line coverage) and
/// classifies its tests. The result is cached by repository contents and image.
pub fn run_intake(
    sandbox: &frognano_sandbox::Sandbox,
    repo: &Arc<CleanRepo>,
    options: &IntakeOptions,
) -> Result<Intake> {
    if options.runs < 2 {
        return Err(SynthError::InvalidOption(
            "intake needs at least 2 clean runs to detect flaky tests".into(),
        ));
    }
    let cache = cache_path(repo, sandbox.image().name());
    if options.use_cache
        && let Ok(text) = std::fs::read_to_string(&cache)
        && let Ok(intake) = serde_json::from_str::<Intake>(&text)
        && intake.content_hash == repo.content_hash
    {
        return Ok(intake);
    }
    let limits = repo.prepared.config.limits();
    let mut reports = Vec::with_capacity(options.runs);
    for run in 0..options.runs {
        // As the corpus build and grading run a suite: a module that cannot import here fails
        // alone, and the other modules' tests can still carry tasks.
        let request = TestRequest {
            pytest_args: frognano_sandbox::clean_suite_args(),
            limits: Some(limits),
            coverage: run == 0,
            cancel: options.cancel.clone(),
            ..TestRequest::default()
        };
        let report = sandbox.run_tests_prepared(&repo.prepared, &request)?;
        check_usable(&repo.root, &report)?;
        reports.push(report);
    }
    let mut intake = classify(&repo.content_hash, &reports);
    // Graders run the FAIL_TO_PASS and PASS_TO_PASS ids in a canonical order, not the suite's
    // own: a test that passes only after some other test ran cannot grade anything. A few
    // rounds, since dropping tests can expose more such dependencies.
    for _ in 0..3 {
        if intake.passing.is_empty() {
            break;
        }
        let ids: Vec<String> = intake.passing.iter().cloned().collect();
        let request = TestRequest {
            pytest_args: frognano_sandbox::grading_args(&[], &ids),
            limits: Some(limits),
            cancel: options.cancel.clone(),
            ..TestRequest::default()
        };
        let report = sandbox.run_tests_prepared(&repo.prepared, &request)?;
        check_usable(&repo.root, &report)?;
        let passed: BTreeSet<&str> = report.passed_ids().collect();
        let dependent: Vec<String> = intake
            .passing
            .iter()
            .filter(|id| !passed.contains(id.as_str()))
            .cloned()
            .collect();
        if dependent.is_empty() {
            break;
        }
        for id in dependent {
            intake.passing.remove(&id);
            intake.order_dependent.insert(id);
        }
    }
    if intake.passing.is_empty() {
        return Err(SynthError::Intake {
            repo: repo.root.clone(),
            reason: format!(
                "no test passes reliably in the clean repository ({} failing, {} flaky, {} \
                 skipped, {} order-dependent): a bug can only be validated against passing tests",
                intake.failing.len(),
                intake.flaky.len(),
                intake.skipped.len(),
                intake.order_dependent.len()
            ),
        });
    }
    if let Some(parent) = cache.parent()
        && std::fs::create_dir_all(parent).is_ok()
        && let Ok(text) = serde_json::to_vec(&intake)
    {
        // Best effort: a cache that cannot be written only costs a re-run next time.
        let _ = frognano_repo::write_atomically(&cache, &text);
    }
    Ok(intake)
}

/// Explains why a clean run cannot serve as the reference, if it cannot.
fn check_usable(root: &Path, report: &TestReport) -> Result<()> {
    let tail = |text: &str| {
        let lines: Vec<&str> = text.trim().lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    };
    let reason = match report.outcome {
        RunOutcome::Passed | RunOutcome::Failed => return Ok(()),
        RunOutcome::NoTests => {
            "pytest collected no tests (is there a tests/ directory or a [tool.pytest.ini_options] \
             testpaths? frognano.toml's [test] section can name them)"
                .to_string()
        }
        RunOutcome::Timeout => format!(
            "the clean suite did not finish: {} (raise [test] timeout in frognano.toml or \
             deselect slow tests)",
            report.detail.clone().unwrap_or_default()
        ),
        RunOutcome::MemoryExceeded | RunOutcome::OutputExceeded | RunOutcome::Crashed => {
            let stderr = tail(&report.stderr);
            format!(
                "the clean suite ended abnormally ({}): {}{}{stderr}",
                report.outcome.as_str(),
                report.detail.clone().unwrap_or_default(),
                if stderr.is_empty() { "" } else { "\n" },
            )
        }
    };
    Err(SynthError::Intake {
        repo: root.to_path_buf(),
        reason,
    })
}

/// Buckets tests by their outcomes across clean runs.
pub fn classify(content_hash: &str, reports: &[TestReport]) -> Intake {
    let mut seen: BTreeMap<&str, Vec<TestOutcome>> = BTreeMap::new();
    let mut causes: BTreeMap<&str, &str> = BTreeMap::new();
    for report in reports {
        for test in &report.tests {
            seen.entry(test.id.as_str()).or_default().push(test.outcome);
            if let (false, Some(cause)) = (test.outcome.is_ok(), &test.platform) {
                causes.entry(test.id.as_str()).or_insert(cause.as_str());
            }
        }
    }
    let mut intake = Intake {
        content_hash: content_hash.to_string(),
        passing: BTreeSet::new(),
        flaky: BTreeSet::new(),
        failing: BTreeSet::new(),
        skipped: BTreeSet::new(),
        order_dependent: BTreeSet::new(),
        platform: BTreeMap::new(),
        suite_seconds: reports
            .iter()
            .skip(1)
            .map(|r| r.duration_s)
            .fold(0.0, f64::max),
        coverage: reports.first().and_then(|r| r.coverage.clone()),
    };
    for (id, outcomes) in seen {
        let id = id.to_string();
        let first = outcomes[0];
        if outcomes.len() != reports.len() || outcomes.iter().any(|o| *o != first) {
            intake.flaky.insert(id);
        } else if first == TestOutcome::Passed {
            intake.passing.insert(id);
        } else if first.is_ok() {
            intake.skipped.insert(id);
        } else {
            if let Some(cause) = causes.get(id.as_str()) {
                intake.platform.insert(id.clone(), cause.to_string());
            }
            intake.failing.insert(id);
        }
    }
    intake
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::TestRecord;

    fn report(tests: &[(&str, TestOutcome)]) -> TestReport {
        let records = tests
            .iter()
            .map(|(id, outcome)| TestRecord {
                id: id.to_string(),
                outcome: *outcome,
                duration_s: 0.01,
                message: None,
                platform: None,
            })
            .collect();
        TestReport::from_records(records, 0.5)
    }

    #[test]
    fn tests_whose_outcome_differs_between_runs_are_flaky() {
        use TestOutcome::*;
        let first = report(&[
            ("t::a", Passed),
            ("t::b", Passed),
            ("t::c", Failed),
            ("t::d", Skipped),
            ("t::e", Passed),
        ]);
        let second = report(&[
            ("t::a", Passed),
            ("t::b", Failed),
            ("t::c", Failed),
            ("t::d", Skipped),
        ]);
        let intake = classify("h", &[first, second]);
        assert_eq!(intake.passing, BTreeSet::from(["t::a".to_string()]));
        assert_eq!(
            intake.flaky,
            BTreeSet::from(["t::b".to_string(), "t::e".to_string()])
        );
        assert_eq!(intake.failing, BTreeSet::from(["t::c".to_string()]));
        assert_eq!(intake.skipped, BTreeSet::from(["t::d".to_string()]));
        assert_eq!(intake.total(), 5);
        assert!(intake.platform.is_empty());
    }

    #[test]
    fn platform_failures_are_failing_and_listed_with_their_cause() {
        use TestOutcome::*;
        let labelled = |id: &str, outcome: TestOutcome, cause: &str| TestRecord {
            platform: Some(cause.to_string()),
            ..TestRecord::new(id, outcome)
        };
        let run = || {
            TestReport::from_records(
                vec![
                    TestRecord::new("t::ok", Passed),
                    labelled("t::net", Failed, "sockets"),
                    labelled("t::umask", Error, "os.umask"),
                    TestRecord::new("t::bug", Failed),
                ],
                0.5,
            )
        };
        let mut flaky = run();
        // Failing for a platform reason once and passing once is flaky, not a platform gap.
        flaky
            .tests
            .push(labelled("t::sometimes", Failed, "threads"));
        let mut other = run();
        other.tests.push(TestRecord::new("t::sometimes", Passed));
        let intake = classify("h", &[flaky, other]);
        assert_eq!(
            intake.failing,
            BTreeSet::from(["t::bug".to_string(), "t::net".into(), "t::umask".into()])
        );
        assert_eq!(intake.flaky, BTreeSet::from(["t::sometimes".to_string()]));
        assert_eq!(
            intake.platform,
            BTreeMap::from([
                ("t::net".to_string(), "sockets".to_string()),
                ("t::umask".to_string(), "os.umask".to_string()),
            ])
        );
        // Intakes cached before the field existed still load.
        let mut json = serde_json::to_value(&intake).expect("serialise");
        json.as_object_mut().expect("object").remove("platform");
        let old: Intake = serde_json::from_value(json).expect("an old intake loads");
        assert!(old.platform.is_empty());
    }
}
