//! Report assembly: the pytest plugin's JSONL results and the run's limits and exit status
//! turned into a [`TestReport`].

use std::path::Path;

use frognano_core::{Coverage, FileLines, RunOutcome, TestOutcome, TestRecord, TestReport};

use super::guest::GuestRun;
use super::{GUEST_WORK, RESULTS_FILE};
use crate::error::{Result, SandboxError};
use crate::profile::GuestMarks;

/// The plugin's results.
#[derive(Debug, Default)]
pub(super) struct RunResults {
    /// Per-test records, in the order they were written.
    pub(super) records: Vec<TestRecord>,
    /// Each record's position in the whole collection (written by shards of a split suite).
    pub(super) positions: Vec<Option<usize>>,
    /// pytest's exit status, when the session finished.
    pub(super) exit_code: Option<i32>,
    /// Per-test coverage, if recorded.
    pub(super) coverage: Option<Coverage>,
    /// The guest's clock at the session's milestones, if the session finished.
    pub(super) marks: Option<GuestMarks>,
    /// The last test that started and wrote no record: where the run stopped, if it stopped
    /// inside a test.
    pub(super) interrupted: Option<String>,
    /// pytest's run loop ended: every selected test has its record.
    pub(super) tests_finished: bool,
}

/// Reads the plugin's JSONL results; a partial last line (a run cut short) is ignored.
pub(super) fn read_results(tmp: &Path) -> Result<RunResults> {
    // Read through a capability handle: a guest that replaced the file with a symlink
    // pointing out of its directory cannot make the host read another file.
    let dir = cap_std::fs::Dir::open_ambient_dir(tmp, cap_std::ambient_authority())
        .map_err(SandboxError::io("open run directory"))?;
    let text = match dir.read_to_string(RESULTS_FILE) {
        Ok(text) => text,
        Err(_) => return Ok(RunResults::default()),
    };
    let mut results = RunResults::default();
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if value.get("tests_finished").is_some() {
            results.tests_finished = true;
        } else if let Some(id) = value.get("started").and_then(|s| s.as_str()) {
            results.interrupted = Some(id.to_string());
        } else if let Some(code) = value.get("exit_code").and_then(|c| c.as_i64()) {
            results.exit_code = i32::try_from(code).ok();
        } else if let Some(marks) = value.get("profile") {
            results.marks = serde_json::from_value(marks.clone()).ok();
        } else if let Some(why) = value.get("coverage_unavailable").and_then(|w| w.as_str()) {
            results
                .coverage
                .get_or_insert_with(Coverage::default)
                .unavailable = Some(why.to_string());
        } else if let Some(test) = value.get("coverage") {
            let files: FileLines = value
                .get("files")
                .and_then(|f| serde_json::from_value(f.clone()).ok())
                .unwrap_or_default();
            let coverage = results.coverage.get_or_insert_with(Coverage::default);
            match test.as_str() {
                Some(id) => {
                    coverage.tests.insert(id.to_string(), files);
                }
                None => coverage.shared = files,
            }
        } else {
            let position = value
                .get("position")
                .and_then(|p| p.as_u64())
                .and_then(|p| usize::try_from(p).ok());
            if let Ok(record) = serde_json::from_value::<TestRecord>(value) {
                if results.interrupted.as_deref() == Some(record.id.as_str()) {
                    results.interrupted = None;
                }
                results.records.push(record);
                results.positions.push(position);
            }
        }
    }
    Ok(results)
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
    report.detail = run.detail;
    if let Some(limit) = run.limit {
        report.outcome = limit;
    } else if pytest_exit.is_none() {
        // The guest ended without pytest finishing (e.g. a test called os._exit).
        report.outcome = RunOutcome::Crashed;
        report.detail = Some(match run.exit_code {
            Some(code) => format!(
                "the interpreter exited with status {code} before pytest finished: a test, \
                 fixture or plugin ended the process (os._exit, or sys.exit outside a test); \
                 the results stop at the last test that finished"
            ),
            None => {
                "the interpreter stopped before pytest finished, without an exit status".to_string()
            }
        });
    } else if pytest_exit == Some(5) && report.tests.is_empty() {
        report.outcome = RunOutcome::NoTests;
    } else if let Some(status @ 2..=4) = pytest_exit {
        let collection_errors = report
            .tests
            .iter()
            .filter(|t| t.outcome == TestOutcome::Error && !t.id.contains("::"))
            .count();
        if report.failed == 0 && report.errors == 0 {
            // Interrupted, internal or usage error with nothing else to show for it.
            report.outcome = RunOutcome::Failed;
        }
        if report.detail.is_none() {
            report.detail = Some(explain_pytest_exit(
                status,
                &run.stdout,
                &run.stderr,
                collection_errors,
            ));
        }
    }
    report.stdout = run.stdout;
    report.stderr = run.stderr;
    report
}

/// Why pytest ended with exit status `status` (2 interrupted, 3 internal error, 4 usage error)
/// and what to change, from what it printed.
fn explain_pytest_exit(
    status: i32,
    stdout: &str,
    stderr: &str,
    collection_errors: usize,
) -> String {
    let lines: Vec<&str> = stderr.lines().chain(stdout.lines()).collect();
    if let Some(why) = import_failure(&lines) {
        return why;
    }
    match status {
        4 => usage_error(&lines),
        2 if collection_errors > 0 => format!(
            "pytest stopped before running the tests: {collection_errors} error(s) during \
             collection (test modules that failed to import, listed above); fix what they \
             import, or list the modules in [test] ignore in frognano.toml"
        ),
        2 => {
            // pytest's summary banner: "!!!!! Interrupted: ... !!!!!".
            let banner = lines
                .iter()
                .rev()
                .map(|l| l.trim())
                .filter(|l| l.starts_with("!!") && l.ends_with("!!"))
                .map(|l| l.trim_matches('!').trim())
                .find(|l| !l.is_empty());
            match banner {
                // "Interrupted: 2 errors during collection": the errors were not recorded as
                // results (an error outside any test module), but they are what stopped it.
                Some(text) if text.contains("during collection") => format!(
                    "pytest stopped before running the tests ({text}): test modules or \
                     packages failed to import (their tracebacks are above); fix what they \
                     import, or list them in [test] ignore in frognano.toml"
                ),
                Some(text) => format!(
                    "pytest was interrupted ({text}): a test, fixture or conftest called \
                     pytest.exit() or raised KeyboardInterrupt"
                ),
                None => "pytest was interrupted (exit status 2): a test, fixture or conftest \
                         called pytest.exit() or raised KeyboardInterrupt"
                    .to_string(),
            }
        }
        _ => {
            let internal = lines
                .iter()
                .rev()
                .filter_map(|l| l.strip_prefix("INTERNALERROR>"))
                .map(str::trim)
                .find(|l| !l.is_empty())
                .or_else(|| {
                    lines
                        .iter()
                        .rev()
                        .find_map(|l| l.strip_prefix("frognano: pytest raised "))
                        .map(str::trim)
                });
            match internal {
                Some(line) => format!(
                    "pytest hit an internal error (a plugin or conftest hook raised): {line}; \
                     fix or remove that plugin or hook (a plugin comes from [test] requirements \
                     in frognano.toml)"
                ),
                None => "pytest hit an internal error (exit status 3) without printing its \
                         cause: a plugin or conftest hook raised"
                    .to_string(),
            }
        }
    }
}

/// A conftest or plugin that failed to import: which module it lacks and where to add it.
fn import_failure(lines: &[&str]) -> Option<String> {
    let (start, what) = lines.iter().enumerate().find_map(|(i, line)| {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("ImportError while loading conftest '") {
            let path = rest.trim_end_matches("'.").trim_end_matches('\'');
            let path = path
                .strip_prefix(GUEST_WORK)
                .map(|p| p.trim_start_matches('/'))
                .unwrap_or(path);
            Some((i, path.to_string()))
        } else {
            line.strip_prefix("Error while loading plugin \"")
                .map(|rest| {
                    (
                        i,
                        format!("the pytest plugin {}", rest.trim_end_matches("\".")),
                    )
                })
        }
    })?;
    let error = lines[start + 1..]
        .iter()
        .take_while(|l| {
            !l.trim_start()
                .starts_with("ImportError while loading conftest")
        })
        .filter_map(|l| l.trim_start().strip_prefix("E "))
        .map(str::trim)
        .last()
        .unwrap_or("");
    if let Some(module) = quoted_after(error, "Unsupported platform for standard library module ")
        .or_else(|| quoted_after(error, "Standard library module "))
    {
        return Some(format!(
            "{what} imports {module}, a standard-library module WebAssembly (WASI) does not \
             provide: import it only where it is available, or list the tests that need it in \
             [test] ignore in frognano.toml"
        ));
    }
    if let Some(module) = quoted_after(error, "No module named ") {
        let top = module.split('.').next().unwrap_or(&module).to_string();
        return Some(format!(
            "{what} imports {top}, which is not installed: add its distribution to [test] \
             requirements in frognano.toml"
        ));
    }
    Some(if error.is_empty() {
        format!("{what} failed to import: fix it or what it imports (the traceback is above)")
    } else {
        format!("{what} failed to import ({error}): fix it or what it imports")
    })
}

/// The text between the single quotes that follow `prefix` in `line`.
fn quoted_after(line: &str, prefix: &str) -> Option<String> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    let rest = rest.strip_prefix('\'')?;
    Some(rest[..rest.find('\'')?].to_string())
}

/// A traceback's last line: `SomeError: message` (a dotted name ending like an exception's).
fn is_exception_line(line: &str) -> bool {
    line.split_once(':').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.contains(char::is_whitespace)
            && ["Error", "Exception", "Warning", "Exit", "Interrupt"]
                .iter()
                .any(|end| name.ends_with(end))
    })
}

/// pytest's own "ERROR: ..." explanation of a usage error, and what to change.
fn usage_error(lines: &[&str]) -> String {
    let error = lines
        .iter()
        .filter_map(|l| l.trim().split_once(": error: "))
        .find(|(program, _)| program.starts_with("pytest"))
        .map(|(_, error)| error.trim());
    if let Some(error) = error {
        if let Some(options) = error.strip_prefix("unrecognized arguments:") {
            let options = options.trim();
            return format!(
                "pytest does not recognise the option(s) {options} (from the repository's \
                 addopts or [test] args): add the pytest plugin that provides them to [test] \
                 requirements in frognano.toml, or remove them (set [test] args = [\"-o\", \
                 \"addopts=\"] in frognano.toml to drop the repository's addopts)"
            );
        }
        return format!(
            "pytest rejected its arguments ({error}): fix [test] args in frognano.toml or the \
             repository's addopts"
        );
    }
    let error_line = lines.iter().position(|l| l.trim().starts_with("ERROR: "));
    match error_line.and_then(|at| Some((at, lines[at].trim().strip_prefix("ERROR: ")?.trim()))) {
        // pytest spreads this one over several lines: the filter, then the exception.
        Some((at, message)) if message.starts_with("while parsing the following warning") => {
            let mut rest = lines[at + 1..]
                .iter()
                .map(|l| l.trim())
                .filter(|l| !l.is_empty());
            let filter = rest.next().unwrap_or("?");
            let cause = rest
                .clone()
                .rfind(|line| is_exception_line(line))
                .or_else(|| rest.next_back())
                .unwrap_or("no reason given");
            format!(
                "pytest rejected the warning filter {filter:?} of the repository's pytest \
                 configuration ({cause}): fix or remove that filterwarnings entry"
            )
        }
        Some((_, message)) => format!(
            "pytest usage error: {message} (check [test] args and the test paths in \
             frognano.toml, and the repository's pytest configuration)"
        ),
        None => "pytest reported a usage error (exit status 4) without a message: check [test] \
                 args in frognano.toml and the repository's pytest configuration"
            .to_string(),
    }
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
            cpu: Duration::from_millis(200),
            instantiate: Duration::ZERO,
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
            r#"{"started": "t.py::a"}"#,
            r#"{"id": "t.py::a", "outcome": "passed", "duration_s": 0.1}"#,
            r#"{"coverage": null, "files": {"m.py": [1, 2]}}"#,
            r#"{"coverage": "t.py::a", "files": {"m.py": [3]}}"#,
            r#"{"exit_code": 1}"#,
            r#"{"tests_finished": true}"#,
            r#"{"started": "t.py::b"}"#,
            r#"{"id": "t.py::b", "outc"#,
        ];
        std::fs::write(dir.path().join(RESULTS_FILE), lines.join("\n")).expect("write");
        let results = read_results(dir.path()).expect("read");
        assert_eq!(results.records.len(), 1);
        assert_eq!(results.records[0].id, "t.py::a");
        assert_eq!(results.exit_code, Some(1));
        // b started and never finished: the run stopped inside it.
        assert_eq!(results.interrupted.as_deref(), Some("t.py::b"));
        assert!(results.tests_finished);
        let coverage = results.coverage.expect("coverage");
        assert_eq!(coverage.shared["m.py"], vec![1, 2]);
        assert_eq!(coverage.tests["t.py::a"]["m.py"], vec![3]);
    }

    #[test]
    fn no_results_file_is_an_empty_result() {
        let dir = tempfile::tempdir().expect("tempdir");
        let results = read_results(dir.path()).expect("read");
        assert!(results.records.is_empty() && results.exit_code.is_none());
        assert!(results.coverage.is_none() && results.marks.is_none());
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
        let detail = report.detail.expect("detail");
        assert!(
            detail.contains("exited with status 3 before pytest finished"),
            "{detail}"
        );
        assert!(
            detail.contains("os._exit") && !detail.contains("Some("),
            "{detail}"
        );
        let report = build_report(Vec::new(), None, run(None, None));
        let detail = report.detail.expect("detail");
        assert!(detail.contains("without an exit status"), "{detail}");
    }

    /// The report of a run pytest ended with `status`, having printed `stdout` and `stderr`.
    fn ended(status: i32, records: Vec<TestRecord>, stdout: &str, stderr: &str) -> TestReport {
        let guest = GuestRun {
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..run(Some(0), None)
        };
        build_report(records, Some(status), guest)
    }

    #[test]
    fn an_unrecognised_option_is_named_with_the_fix() {
        let stderr = &format!(
            "ERROR: usage: pytest.main() [options] [file_or_dir] [file_or_dir] [...]\n\
             pytest.main(): error: unrecognized arguments: --reruns 3\n  inifile: \
             {GUEST_WORK}/pyproject.toml\n  rootdir: {GUEST_WORK}\n"
        );
        let report = ended(4, Vec::new(), "", stderr);
        assert_eq!(report.outcome, RunOutcome::Failed);
        let detail = report.detail.expect("detail");
        assert!(detail.contains("option(s) --reruns 3"), "{detail}");
        assert!(
            detail.contains("[test] args") && detail.contains("frognano.toml"),
            "{detail}"
        );
        assert!(!detail.contains("Some("), "{detail}");
    }

    #[test]
    fn other_usage_errors_quote_pytest() {
        let stderr = "ERROR: file or directory not found: tests/missing.py\n\n";
        let detail = ended(4, Vec::new(), "", stderr).detail.expect("detail");
        assert!(
            detail.starts_with("pytest usage error: file or directory not found: tests/missing.py"),
            "{detail}"
        );
        let detail = ended(4, Vec::new(), "", "").detail.expect("detail");
        assert!(detail.contains("usage error (exit status 4)"), "{detail}");
    }

    #[test]
    fn a_warning_filter_pytest_rejects_is_named_with_its_cause() {
        let stderr = "ERROR: while parsing the following warning configuration:\n\n  \
                      ignore::pkg.NoSuchWarning\n\nThis error occurred:\n\nTraceback (most \
                      recent call last):\n  File \"x.py\", line 1, in <module>\n\
                      AttributeError: module 'pkg' has no attribute 'NoSuchWarning'\n\n\
                      (exit status 4)\n";
        let detail = ended(4, Vec::new(), "", stderr).detail.expect("detail");
        assert!(
            detail.contains("\"ignore::pkg.NoSuchWarning\"")
                && detail.contains("AttributeError: module 'pkg' has no attribute")
                && detail.contains("filterwarnings"),
            "{detail}"
        );
    }

    #[test]
    fn a_conftest_importing_a_missing_module_names_it_and_the_fix() {
        let stderr = &format!(
            "ImportError while loading conftest '{GUEST_WORK}/tests/conftest.py'.\n\
                      tests/conftest.py:1: in <module>\n    import frozendict.core\n\
                      E   ModuleNotFoundError: No module named 'frozendict'\n"
        );
        let report = ended(4, Vec::new(), "", stderr);
        assert_eq!(report.outcome, RunOutcome::Failed);
        assert_eq!(
            report.detail.as_deref(),
            Some(
                "tests/conftest.py imports frozendict, which is not installed: add its \
                 distribution to [test] requirements in frognano.toml"
            )
        );
    }

    #[test]
    fn a_conftest_importing_what_the_platform_lacks_says_so() {
        let stderr = &format!(
            "ImportError while loading conftest '{GUEST_WORK}/conftest.py'.\n\
                      conftest.py:2: in <module>\n    import termios\n\
                      E   ModuleNotFoundError: Unsupported platform for standard library \
                      module 'termios'\n"
        );
        let detail = ended(4, Vec::new(), "", stderr).detail.expect("detail");
        assert!(
            detail.starts_with("conftest.py imports termios, a standard-library module"),
            "{detail}"
        );
        assert!(detail.contains("WASI"), "{detail}");
        let stderr = &format!(
            "ImportError while loading conftest '{GUEST_WORK}/conftest.py'.\n\
                      conftest.py:2: in <module>\n    raise ValueError('bad')\n\
                      E   ValueError: bad\n"
        );
        let detail = ended(4, Vec::new(), "", stderr).detail.expect("detail");
        assert_eq!(
            detail,
            "conftest.py failed to import (ValueError: bad): fix it or what it imports"
        );
    }

    #[test]
    fn interruptions_and_internal_errors_are_explained() {
        let collection = serde_json::from_value::<TestRecord>(serde_json::json!(
            {"id": "tests/test_a.py", "outcome": "error", "duration_s": 0.0}
        ))
        .expect("record");
        let stdout =
            "!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!\n";
        let report = ended(2, vec![collection], stdout, "");
        assert_eq!(report.outcome, RunOutcome::Failed);
        let detail = report.detail.expect("detail");
        assert!(detail.contains("1 error(s) during collection"), "{detail}");
        assert!(detail.contains("[test] ignore"), "{detail}");

        // Collection errors that no test record shows are still named as such.
        let stdout =
            "!!!!!!!!!!!!!!!!!!! Interrupted: 2 errors during collection !!!!!!!!!!!!!!!!!!!\n";
        let detail = ended(2, Vec::new(), stdout, "").detail.expect("detail");
        assert!(
            detail.starts_with("pytest stopped before running the tests (Interrupted: 2 errors"),
            "{detail}"
        );
        assert!(!detail.contains("KeyboardInterrupt"), "{detail}");

        let stdout =
            "!!!!!!!!!!!!!!!!!!!!! _pytest.outcomes.Exit: stop here !!!!!!!!!!!!!!!!!!!!!\n";
        let detail = ended(2, Vec::new(), stdout, "").detail.expect("detail");
        assert!(
            detail.starts_with("pytest was interrupted (_pytest.outcomes.Exit: stop here)"),
            "{detail}"
        );

        let stdout = "INTERNALERROR> Traceback (most recent call last):\n\
                      INTERNALERROR>   File \"conftest.py\", line 3\n\
                      INTERNALERROR> RuntimeError: hook broke\n";
        let detail = ended(3, Vec::new(), stdout, "").detail.expect("detail");
        assert!(detail.contains("internal error") && detail.contains("RuntimeError: hook broke"));
        let detail = ended(3, Vec::new(), "", "").detail.expect("detail");
        assert!(detail.contains("exit status 3"), "{detail}");
    }

    #[test]
    fn ordinary_failures_get_no_detail() {
        let report = ended(1, vec![record("t.py::a", "failed")], "", "");
        assert_eq!(report.outcome, RunOutcome::Failed);
        assert_eq!(report.detail, None);
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
