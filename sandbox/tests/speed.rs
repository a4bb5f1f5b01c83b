//! The sandbox's speed features keep results as they were: one suite split over several
//! sandbox instances (`TestRequest::shards`) gives the same per-test results, in the same
//! order, and the same outcome as one instance, limits included; a snapshot with a
//! repository's requirements imported runs the same tests with them already imported; every
//! run carries a profile of where its time went.

mod common;

use frognano_core::{Limits, RunOutcome, TestOutcome, TestReport};
use frognano_sandbox::TestRequest;

fn sharded(shards: usize) -> TestRequest {
    TestRequest {
        shards,
        ..TestRequest::default()
    }
}

fn ids_and_outcomes(report: &TestReport) -> Vec<(String, TestOutcome)> {
    report
        .tests
        .iter()
        .map(|t| (t.id.clone(), t.outcome))
        .collect()
}

#[test]
fn sample_repositories_give_identical_results_sharded() {
    for repo in common::sample_repos() {
        let single = common::run_clean(&repo);
        assert_eq!(single.outcome, RunOutcome::Passed, "{}", repo.display());
        for shards in [2, 3] {
            let split = common::sandbox()
                .run_tests(&repo, &sharded(shards))
                .expect("sharded run");
            assert_eq!(
                ids_and_outcomes(&split),
                ids_and_outcomes(&single),
                "{} over {shards} shards",
                repo.display()
            );
            assert_eq!(split.outcome, single.outcome);
            assert_eq!(split.exit_code, single.exit_code);
            let profile = split.profile.expect("a sharded run has a profile");
            assert_eq!(profile.shards, shards);
            assert_eq!(profile.tests, single.tests.len());
        }
    }
}

const MIXED_SUITE: &[(&str, &str)] = &[
    (
        "test_a.py",
        "import pytest\n\n\n@pytest.mark.parametrize('n', range(7))\ndef test_even(n):\n    assert n % 2 == 0\n\n\n\
         @pytest.fixture\ndef broken():\n    raise RuntimeError('fixture')\n\n\ndef test_setup_error(broken):\n    pass\n",
    ),
    (
        "test_b.py",
        "import pytest\n\n\ndef test_skip():\n    pytest.skip('no')\n\n\n@pytest.mark.xfail\ndef test_xfail():\n    assert False\n\n\n\
         class TestGroup:\n    def test_one(self):\n        pass\n\n    def test_two(self):\n        assert 1 == 2\n",
    ),
    (
        "test_c_broken.py",
        "import not_a_module_anywhere\n\n\ndef test_never():\n    pass\n",
    ),
];

#[test]
fn failures_errors_and_collection_errors_merge_like_one_run() {
    let repo = common::make_repo(MIXED_SUITE);
    let request = |shards: usize| TestRequest {
        pytest_args: vec!["--continue-on-collection-errors".into()],
        shards,
        ..TestRequest::default()
    };
    let single = common::sandbox()
        .run_tests(repo.path(), &request(1))
        .expect("run");
    assert_eq!(single.outcome, RunOutcome::Failed);
    assert_eq!(single.exit_code, Some(1));
    assert_eq!(
        (
            single.passed,
            single.failed,
            single.errors,
            single.skipped,
            single.xfailed
        ),
        (5, 4, 2, 1, 1)
    );
    for shards in [2, 4] {
        let split = common::sandbox()
            .run_tests(repo.path(), &request(shards))
            .expect("sharded run");
        assert_eq!(ids_and_outcomes(&split), ids_and_outcomes(&single));
        assert_eq!(
            split
                .tests
                .iter()
                .filter(|t| t.id == "test_c_broken.py")
                .count(),
            1,
            "a collection error is reported once"
        );
        assert_eq!(
            (split.outcome, split.exit_code),
            (single.outcome, single.exit_code)
        );
    }
}

#[test]
fn a_collection_error_that_stops_pytest_stops_every_shard() {
    let repo = common::make_repo(MIXED_SUITE);
    let single = common::run_clean(repo.path());
    let split = common::sandbox()
        .run_tests(repo.path(), &sharded(2))
        .expect("run");
    assert_eq!(
        single.exit_code,
        Some(2),
        "collection errors interrupt pytest"
    );
    assert_eq!(ids_and_outcomes(&split), ids_and_outcomes(&single));
    assert_eq!(
        (split.outcome, split.exit_code),
        (single.outcome, single.exit_code)
    );
}

#[test]
fn suites_with_fewer_tests_than_shards_and_selections_still_run() {
    let repo = common::make_repo(&[(
        "test_small.py",
        "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
    )]);
    let split = common::sandbox()
        .run_tests(repo.path(), &sharded(5))
        .expect("run");
    assert_eq!(split.outcome, RunOutcome::Passed);
    assert_eq!(split.passed, 2);
    assert_eq!(split.exit_code, Some(0));
    // A selection that matches nothing is "no tests", sharded or not.
    let request = TestRequest {
        pytest_args: vec!["-k".into(), "nothing_matches_this".into()],
        shards: 3,
        ..TestRequest::default()
    };
    let none = common::sandbox()
        .run_tests(repo.path(), &request)
        .expect("run");
    assert_eq!(none.outcome, RunOutcome::NoTests);
}

#[test]
fn a_limit_in_one_shard_is_the_outcome_of_the_run() {
    let repo = common::make_repo(&[(
        "test_loop.py",
        "import pytest\n\n\n@pytest.mark.parametrize('n', range(6))\ndef test_fine(n):\n    pass\n\n\n\
         def test_spins():\n    while True:\n        pass\n",
    )]);
    let limits = Limits {
        timeout_s: 3.0,
        ..Limits::default()
    };
    for shards in [1, 2] {
        let request = TestRequest {
            limits: Some(limits),
            shards,
            ..TestRequest::default()
        };
        let started = std::time::Instant::now();
        let report = common::sandbox()
            .run_tests(repo.path(), &request)
            .expect("run");
        assert_eq!(report.outcome, RunOutcome::Timeout, "{shards} shard(s)");
        assert!(started.elapsed().as_secs_f64() < 20.0);
        // Every test that finished before the limit is still reported.
        assert_eq!(report.passed, 6, "{shards} shard(s)");
    }
}

#[test]
fn profiles_account_for_the_run() {
    let repo = common::sample_repos().into_iter().next().expect("a sample");
    let report = common::run_clean(&repo);
    let profile = report.profile.expect("profile");
    let total: f64 = profile.phases().iter().map(|(_, s)| s).sum();
    // The phases cover the run: the report's duration is the guest's part of it.
    assert!(
        total >= report.duration_s,
        "{total} < {}",
        report.duration_s
    );
    assert!(
        profile.collection_s > 0.0 && profile.tests_s > 0.0,
        "{profile:?}"
    );
    assert!(profile.per_test_overhead_s >= 0.0);
    assert_eq!((profile.tests, profile.shards), (report.tests.len(), 1));
}

#[test]
fn too_many_shards_is_a_clear_error() {
    let repo = common::make_repo(&[("test_x.py", "def test_x():\n    pass\n")]);
    let err = common::sandbox()
        .run_tests(repo.path(), &sharded(frognano_sandbox::MAX_SHARDS + 1))
        .expect_err("too many shards");
    assert!(err.to_string().contains("at most"), "{err}");
}

#[test]
fn a_layer_snapshot_starts_with_the_requirements_imported() {
    let repo = common::make_repo(&[
        (
            "frognano.toml",
            "[test]\nrequirements = [\"sortedcontainers==2.4.0\"]\n",
        ),
        (
            "test_sorted.py",
            "import sys\n\nPRELOADED = 'sortedcontainers' in sys.modules\n\nimport sortedcontainers\n\n\n\
             def test_uses_it():\n    assert list(sortedcontainers.SortedList([3, 1, 2])) == [1, 2, 3]\n\n\n\
             def test_was_imported_before_the_test_module():\n    assert PRELOADED\n",
        ),
    ]);
    let plain = common::run_clean(repo.path());
    let outcome = |report: &TestReport, name: &str| {
        report
            .tests
            .iter()
            .find(|t| t.id.ends_with(name))
            .map(|t| t.outcome)
    };
    assert_eq!(outcome(&plain, "test_uses_it"), Some(TestOutcome::Passed));
    assert_eq!(
        outcome(&plain, "test_was_imported_before_the_test_module"),
        Some(TestOutcome::Failed)
    );
    let layered = frognano_sandbox::Sandbox::new(
        frognano_sandbox::SandboxOptions {
            layer_snapshots: true,
            ..frognano_sandbox::SandboxOptions::default()
        },
        &|msg| eprintln!("setup: {msg}"),
    )
    .expect("sandbox");
    assert!(layered.uses_layer_snapshots());
    let report = layered
        .run_tests(repo.path(), &TestRequest::default())
        .expect("run");
    assert_eq!(
        report.outcome,
        RunOutcome::Passed,
        "{:?}",
        ids_and_outcomes(&report)
    );
    assert_eq!(report.passed, 2);
    // The same repository's clean copy in a second run: the snapshot is reused.
    let again = layered
        .run_tests(repo.path(), &sharded(2))
        .expect("sharded run");
    assert_eq!(ids_and_outcomes(&again), ids_and_outcomes(&report));
}
