//! Helpers shared by the sandbox's integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use frognano_core::{RunOutcome, TestOutcome, TestReport};
use frognano_sandbox::{Sandbox, SandboxOptions, TestRequest};

/// One sandbox per test binary: setup is cached on disk, but building it twice at once
/// would only waste time.
pub fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        Sandbox::new(SandboxOptions::default(), &|msg| eprintln!("setup: {msg}"))
            .expect("sandbox setup")
    })
}

/// Runs `repo`'s clean suite with the default request in the shared sandbox.
pub fn run_clean(repo: &Path) -> TestReport {
    sandbox()
        .run_tests(repo, &TestRequest::default())
        .expect("sandbox run")
}

/// Asserts that `report` passed with `passed` tests; otherwise shows what the run said.
pub fn assert_passed(report: &TestReport, passed: usize) {
    assert_eq!(
        (report.outcome, report.passed),
        (RunOutcome::Passed, passed),
        "{:?}\n{:?}\n{}\n{}",
        report.detail,
        report.tests,
        report.stdout,
        report.stderr
    );
}

#[allow(unused_imports)]
pub use frognano_sandbox::testing::{workspace_root as root, write_repo as make_repo};

/// The bundled sample repositories.
pub fn sample_repos() -> Vec<PathBuf> {
    let mut repos: Vec<PathBuf> = std::fs::read_dir(root().join("examples/repos"))
        .expect("examples/repos exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    repos.sort();
    repos
}

/// Runs pytest natively on a copy of `repo` with FrogNano's plugin and returns node id ->
/// outcome. `extra_paths` are prepended to PYTHONPATH (import roots, requirement layers).
pub fn native_outcomes(
    repo: &Path,
    extra_paths: &[PathBuf],
    args: &[String],
) -> BTreeMap<String, TestOutcome> {
    frognano_sandbox::native::native_outcomes(repo, extra_paths, args, "python3", 600.0)
        .unwrap_or_else(|err| panic!("native pytest: {err}"))
}

/// Runs `repo` in the sandbox and returns node id -> outcome together with the report.
pub fn sandbox_outcomes(
    repo: &Path,
    request: &TestRequest,
) -> (BTreeMap<String, TestOutcome>, frognano_core::TestReport) {
    let report = sandbox().run_tests(repo, request).expect("sandbox run");
    let outcomes = report
        .tests
        .iter()
        .map(|t| (t.id.clone(), t.outcome))
        .collect();
    (outcomes, report)
}

/// A map of relative path -> contents of every file under `dir` (to check nothing changed).
pub fn tree_snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.expect("walk"))
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            let rel = e.path().strip_prefix(dir).expect("prefix").to_path_buf();
            (rel, std::fs::read(e.path()).expect("read"))
        })
        .collect()
}

/// A request with these limits and no pytest arguments.
pub fn limited(timeout_s: f64, memory_mb: u64, output_bytes: usize) -> TestRequest {
    TestRequest {
        pytest_args: vec![],
        limits: Some(frognano_core::Limits {
            timeout_s,
            memory_mb,
            output_bytes,
        }),
        ..TestRequest::default()
    }
}

/// Runs a repository of one test file under `request`.
pub fn run_one(file: &str, source: &str, request: &TestRequest) -> frognano_core::TestReport {
    let repo = make_repo(&[(file, source)]);
    sandbox().run_tests(repo.path(), request).expect("run")
}
