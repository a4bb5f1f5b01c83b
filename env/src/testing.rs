//! Support for integration tests that roll policies out over real tasks (the `testing`
//! feature).

use frognano_core::{Policy, Task};
use frognano_sandbox::testing::shared_sandbox;

use crate::{EnvConfig, EnvPool, EpisodeRecord, RolloutEnv, RolloutStats};

/// Rolls `policy` out over `tasks` in a pool of `envs` environments on the shared sandbox,
/// panicking on any episode error; the records come sorted by task id.
pub fn rollout(policy: &mut dyn Policy, tasks: &[Task], envs: usize) -> Vec<EpisodeRecord> {
    let mut pool = EnvPool::new(shared_sandbox(), envs, 0, EnvConfig::default()).expect("pool");
    let (mut records, _) = rollout_in(&mut pool, policy, tasks);
    records.sort_by(|a, b| a.task_id.cmp(&b.task_id));
    records
}

/// Rolls `policy` out over `tasks` in `pool`, panicking on any episode error: the records in
/// the order their episodes ended, and the rollout's statistics.
pub fn rollout_in<E: RolloutEnv>(
    pool: &mut EnvPool<E>,
    policy: &mut dyn Policy,
    tasks: &[Task],
) -> (Vec<EpisodeRecord>, RolloutStats) {
    let mut records = Vec::new();
    let stats = pool
        .rollout(
            policy,
            tasks,
            |r| records.push(r),
            |t, e| panic!("{}: {e}", t.id),
        )
        .expect("rollout");
    (records, stats)
}

/// Asserts that every record resolved its task, showing the grading and the failing tests of
/// one that did not.
pub fn assert_all_resolved(records: &[EpisodeRecord]) {
    for record in records {
        let grading = record.grading.as_ref().expect("graded");
        assert!(
            record.outcome.resolved,
            "{} unresolved: {:?}\n{:#?}",
            record.task_id,
            grading.detail,
            grading
                .tests
                .iter()
                .filter(|t| !t.passed)
                .collect::<Vec<_>>()
        );
    }
}
