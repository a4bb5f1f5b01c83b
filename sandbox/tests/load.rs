//! Verdicts do not depend on the machine's load: a run's time limit counts the guest's own
//! time (never its waits for a core), so a suite that passes idle passes with every core
//! saturated, and an endless loop still ends. (A test binary of its own: its load would slow the timing checks of others.)

mod common;

use std::time::{Duration, Instant};

use frognano_core::RunOutcome;
use frognano_sandbox::TestRequest;
use frognano_sandbox::testing::Saturation;

/// A request with `timeout_s` of CPU, 512 MiB and 1 MiB of output.
fn request(timeout_s: f64) -> TestRequest {
    common::limited(timeout_s, 512, 1 << 20)
}

#[test]
fn time_limits_count_the_guests_work_not_the_machines_load() {
    // A suite of CPU work, timed idle; its limit is then 1.5 times its CPU time.
    let source = "def test_work():\n    total = 0\n    for i in range(8_000_000):\n        \
                  total += i % 7\n    assert total > 0\n";
    let idle = common::run_one("test_work.py", source, &request(60.0));
    assert_eq!(idle.outcome, RunOutcome::Passed, "{idle:?}");
    let limit = (idle.duration_s * 1.5).max(1.0);
    // Three busy threads per core: the suite gets about a quarter of a core, so its wall time
    // is several times its CPU time, and a wall-clock limit of `limit` would end it.
    let load = Saturation::start(3);
    let loaded = common::run_one("test_work.py", source, &request(limit));
    drop(load);
    println!(
        "idle {:.2} s; saturated {:.2} s of wall-clock time under a limit of {limit:.2} s of CPU",
        idle.duration_s, loaded.duration_s
    );
    assert_eq!(
        loaded.outcome,
        RunOutcome::Passed,
        "idle {:.2} s, loaded {:.2} s, limit {limit:.2} s of CPU: {:?}",
        idle.duration_s,
        loaded.duration_s,
        loaded.detail
    );
    assert!(
        loaded.duration_s > limit,
        "the load slowed the run past a wall-clock limit: {:.2} s vs {limit:.2} s",
        loaded.duration_s
    );
    // An endless loop under the same load still ends, at its time limit (or the backstop).
    let started = Instant::now();
    let load = Saturation::start(3);
    let spin = common::run_one(
        "test_spin.py",
        "def test_spin():\n    while True:\n        pass\n",
        &request(1.0),
    );
    drop(load);
    assert_eq!(spin.outcome, RunOutcome::Timeout);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(12), "took {took:?}");
}
