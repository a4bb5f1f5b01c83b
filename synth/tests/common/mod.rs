//! Helpers shared by the synthesis integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

use frognano_core::Task;
use frognano_env::EpisodeRecord;
use frognano_env::testing::{assert_all_resolved, rollout};
use frognano_policy::{NoopPolicy, OraclePolicy};
#[allow(unused_imports)]
pub use frognano_sandbox::testing::{
    shared_sandbox as sandbox, workspace_root as root, write_repo,
};

/// A bundled sample repository.
pub fn sample(name: &str) -> PathBuf {
    root().join("examples/repos").join(name)
}

/// Every task is resolved by the oracle (the reverse of the bug) and by nothing else: the
/// no-op policy resolves none. Returns the oracle's records.
pub fn assert_oracle_only(tasks: &[Task]) -> Vec<EpisodeRecord> {
    let records = rollout(&mut OraclePolicy::new(tasks), tasks, 2);
    assert_eq!(records.len(), tasks.len());
    assert_all_resolved(&records);
    for record in rollout(&mut NoopPolicy, tasks, 2) {
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
