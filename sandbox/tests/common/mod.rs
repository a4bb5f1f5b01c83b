//! Helpers shared by the sandbox's integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use frognano_core::TestOutcome;
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
    let work = tempfile::tempdir().expect("tempdir");
    frognano_sandbox::workspace::copy_repo(repo, work.path()).expect("copy");
    let plugin_dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        plugin_dir
            .path()
            .join(format!("{}.py", frognano_sandbox::layers::PLUGIN_MODULE)),
        frognano_sandbox::layers::PLUGIN_SOURCE,
    )
    .expect("write plugin");
    let results = plugin_dir.path().join("results.jsonl");
    let mut python_path: Vec<PathBuf> = vec![plugin_dir.path().to_path_buf()];
    python_path.extend(extra_paths.iter().map(|p| {
        if p.is_absolute() {
            p.clone()
        } else {
            work.path().join(p)
        }
    }));
    let joined = std::env::join_paths(python_path).expect("join paths");
    let output = Command::new("python3")
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            frognano_sandbox::layers::PLUGIN_MODULE,
        ])
        .args(args)
        .current_dir(work.path())
        .env("PYTHONPATH", joined)
        .env("FROGNANO_RESULTS", &results)
        // A fixed seed keeps the reference run's set ordering (and parametrize ids) stable.
        .env("PYTHONHASHSEED", "0")
        .output()
        .expect("run native pytest");
    let text = std::fs::read_to_string(&results).unwrap_or_else(|_| {
        panic!(
            "native pytest wrote no results: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let mut outcomes = BTreeMap::new();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).expect("json line");
        if let (Some(id), Some(outcome)) = (value.get("id"), value.get("outcome")) {
            let outcome: TestOutcome = serde_json::from_value(outcome.clone()).expect("outcome");
            outcomes.insert(id.as_str().expect("id").to_string(), outcome);
        }
    }
    outcomes
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
