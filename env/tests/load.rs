//! Rewards do not depend on the machine's load: with every core saturated by other work, the
//! oracle still resolves every sample task under time limits a loaded wall clock would miss.
//! (A test binary of its own: its load would slow the timing checks of others.)

use frognano_core::Task;
use frognano_env::taskset;
use frognano_env::testing::{assert_all_resolved, rollout};
use frognano_policy::OraclePolicy;
use frognano_sandbox::testing::{Saturation, workspace_root as root};

#[test]
fn the_oracle_resolves_every_task_on_a_saturated_machine() {
    let mut tasks: Vec<Task> =
        taskset::load_tasks(&root().join("examples/tasks/sample.jsonl")).expect("sample tasks");
    // Idle, with the tasks' own limits: how long each grading run takes.
    let idle = rollout(&mut OraclePolicy::new(&tasks), &tasks, 1);
    assert_all_resolved(&idle);
    let longest = idle
        .iter()
        .filter_map(|r| r.grading.as_ref().map(|g| g.duration_s))
        .fold(0.0, f64::max);
    // Limits at twice the slowest idle grading run (at least half a second of CPU).
    let limit = (longest * 2.0).max(0.5);
    for task in &mut tasks {
        task.limits.timeout_s = limit;
    }
    let load = Saturation::start(3);
    let loaded = rollout(&mut OraclePolicy::new(&tasks), &tasks, 2);
    drop(load);
    let slowest = loaded
        .iter()
        .filter_map(|r| r.grading.as_ref().map(|g| g.duration_s))
        .fold(0.0, f64::max);
    println!(
        "slowest grading run: idle {longest:.2} s; saturated {slowest:.2} s of wall-clock time \
         under a limit of {limit:.2} s of CPU"
    );
    assert_all_resolved(&loaded);
}
