//! Real third-party packages from the package registry (pinned sdists, verified by sha256)
//! run their own test suites in the sandbox with the same per-test outcomes as natively.

mod common;

use std::collections::BTreeMap;

use frognano_core::{RunOutcome, TestOutcome};
use frognano_sandbox::TestRequest;
use frognano_sandbox::testing::{PINNED_SDISTS, PinnedSdist};

/// What a pinned package's suite must show.
struct Expected {
    min_tests: usize,
    /// The suite parametrizes over a `set` of strings, so its parametrize ids follow string
    /// hashing, which differs between the sandbox's interpreter and the host's. Such suites are
    /// compared per test function (outcome counts) instead of per node id.
    ids_follow_string_hash: bool,
}

fn expected(package: &PinnedSdist) -> Expected {
    let (min_tests, ids_follow_string_hash) = match package.name {
        "isodate" => (250, true),
        "semver" => (500, false),
        "schema" => (100, false),
        other => panic!("no expectations for {other}"),
    };
    Expected {
        min_tests,
        ids_follow_string_hash,
    }
}

// One test per package, so that the test harness runs them side by side (each sandboxed and
// native run uses one core).
#[test]
fn isodate_matches_native_pytest() {
    matches_native_pytest("isodate");
}

#[test]
fn semver_matches_native_pytest() {
    matches_native_pytest("semver");
}

#[test]
fn schema_matches_native_pytest() {
    matches_native_pytest("schema");
}

#[test]
fn every_pinned_package_has_a_test() {
    for package in PINNED_SDISTS {
        expected(package);
    }
}

fn matches_native_pytest(name: &str) {
    {
        let package = PINNED_SDISTS
            .iter()
            .find(|p| p.name == name)
            .expect("a pinned package");
        let expected = expected(package);
        let unpacked = tempfile::tempdir().expect("tempdir");
        let repo = package.unpack(unpacked.path());
        let (sandboxed, report) = common::sandbox_outcomes(&repo, &TestRequest::default());
        assert_eq!(
            report.outcome,
            RunOutcome::Passed,
            "{}: {:?}\n{}\n{}",
            package.name,
            report.detail,
            report.stdout,
            report.stderr
        );
        assert!(
            report.tests.len() >= expected.min_tests,
            "{}: {} tests",
            package.name,
            report.tests.len()
        );
        let prepared = common::sandbox()
            .prepare_repo(&repo, &|_| {})
            .expect("prepare");
        let paths = prepared.native_python_path();
        let native = common::native_outcomes(&repo, &paths, &prepared.pytest_args());
        assert_eq!(
            native.len(),
            sandboxed.len(),
            "{}: test count differs",
            package.name
        );
        if expected.ids_follow_string_hash {
            assert_eq!(
                per_function(&sandboxed),
                per_function(&native),
                "{}: outcomes differ from native",
                package.name
            );
        } else {
            let differing: Vec<_> = sandboxed
                .iter()
                .filter(|(id, outcome)| native.get(*id) != Some(outcome))
                .collect();
            assert!(
                differing.is_empty(),
                "{}: outcomes differ from native: {differing:?}",
                package.name
            );
        }
        // The same suite split over two instances: the same tests, outcomes and order.
        let sharded = common::sandbox()
            .run_tests(
                &repo,
                &TestRequest {
                    shards: 2,
                    ..TestRequest::default()
                },
            )
            .expect("sharded run");
        let order = |r: &frognano_core::TestReport| -> Vec<(String, TestOutcome)> {
            r.tests.iter().map(|t| (t.id.clone(), t.outcome)).collect()
        };
        assert_eq!(
            order(&sharded),
            order(&report),
            "{}: sharded run differs",
            package.name
        );
        assert_eq!(sharded.outcome, report.outcome);
        eprintln!(
            "{}: {} tests, identical outcomes to native pytest and when sharded",
            package.name,
            report.tests.len()
        );
    }
}

/// (test function id, outcome) -> count, with parametrize ids stripped.
fn per_function(
    outcomes: &BTreeMap<String, TestOutcome>,
) -> BTreeMap<(String, TestOutcome), usize> {
    let mut counts = BTreeMap::new();
    for (id, outcome) in outcomes {
        let function = id.split('[').next().unwrap_or(id).to_string();
        *counts.entry((function, *outcome)).or_insert(0) += 1;
    }
    counts
}
