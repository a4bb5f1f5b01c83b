//! Helpers shared by the synthesis integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use frognano_core::{Policy, Task};
use frognano_env::{EnvConfig, EnvPool, EpisodeRecord};
use frognano_policy::{NoopPolicy, OraclePolicy};
use frognano_sandbox::{Sandbox, SandboxOptions};

/// One sandbox per test binary.
pub fn sandbox() -> Arc<Sandbox> {
    static SANDBOX: OnceLock<Arc<Sandbox>> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            Arc::new(
                Sandbox::new(SandboxOptions::default(), &|msg| eprintln!("setup: {msg}"))
                    .expect("sandbox setup"),
            )
        })
        .clone()
}

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A bundled sample repository.
pub fn sample(name: &str) -> PathBuf {
    root().join("examples/repos").join(name)
}

/// Writes a repository from (path, contents) pairs into a fresh directory.
pub fn write_repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, contents) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, contents).expect("write");
    }
    dir
}

fn rollout(policy: &mut dyn Policy, tasks: &[Task]) -> Vec<EpisodeRecord> {
    let mut pool = EnvPool::new(sandbox(), 2, 0, EnvConfig::default()).expect("pool");
    let mut records = Vec::new();
    pool.rollout(
        policy,
        tasks,
        |r| records.push(r),
        |t, e| panic!("{}: {e}", t.id),
    )
    .expect("rollout");
    records
}

/// Every task is resolved by the oracle (the reverse of the bug) and by nothing else: the
/// no-op policy resolves none. Returns the oracle's records.
pub fn assert_oracle_only(tasks: &[Task]) -> Vec<EpisodeRecord> {
    let records = rollout(&mut OraclePolicy::new(tasks), tasks);
    assert_eq!(records.len(), tasks.len());
    for record in &records {
        let grading = record.grading.as_ref().expect("graded");
        assert!(
            record.outcome.resolved,
            "oracle failed {}: {:?} {:#?}",
            record.task_id,
            grading.detail,
            grading
                .tests
                .iter()
                .filter(|t| !t.passed)
                .collect::<Vec<_>>()
        );
    }
    for record in rollout(&mut NoopPolicy, tasks) {
        assert!(
            !record.outcome.resolved,
            "no-op resolved {}",
            record.task_id
        );
        let grading = record.grading.as_ref().expect("graded");
        let task = tasks.iter().find(|t| t.id == record.task_id).expect("task");
        // With the bug in place exactly the FAIL_TO_PASS tests fail.
        for test in &grading.tests {
            assert_eq!(
                test.passed,
                task.pass_to_pass.contains(&test.id),
                "{}: {} {}",
                task.id,
                test.id,
                test.outcome
            );
        }
    }
    records
}
