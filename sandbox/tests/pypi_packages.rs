//! Real third-party packages from the package registry (pinned sdists, verified by sha256)
//! run their own test suites in the sandbox with the same per-test outcomes as natively.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use std::collections::BTreeMap;

use frognano_core::{RunOutcome, TestOutcome};
use frognano_sandbox::{TestRequest, assets};

struct Package {
    name: &'static str,
    version: &'static str,
    sha256: &'static str,
    /// `frognano.toml` written into the unpacked sdist, as a user would.
    config: Option<&'static str>,
    min_tests: usize,
    /// The suite parametrizes over a `set` of strings, so its parametrize ids follow string
    /// hashing, which differs between the sandbox's interpreter and the host's. Such suites are
    /// compared per test function (outcome counts) instead of per node id.
    ids_follow_string_hash: bool,
}

const PACKAGES: &[Package] = &[
    Package {
        name: "isodate",
        version: "0.7.2",
        sha256: "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        config: None,
        min_tests: 250,
        ids_follow_string_hash: true,
    },
    Package {
        name: "semver",
        version: "3.1.2",
        sha256: "bea193552413194252d33ff26ce0962b76669bd1c6fb17e8e203ac37f072feaf",
        config: None,
        min_tests: 500,
        ids_follow_string_hash: false,
    },
    Package {
        name: "schema",
        version: "0.7.8",
        sha256: "e86cc08edd6fe6e2522648f4e47e3a31920a76e82cce8937535422e310862ab5",
        config: Some("[test]\nrequirements = [\"mock\"]\n"),
        min_tests: 100,
        ids_follow_string_hash: false,
    },
];

/// Downloads (once, into the cache) and unpacks a pinned sdist into `dest`.
fn unpack_sdist(package: &Package, dest: &Path) -> PathBuf {
    let file =
        assets::fetch_sdist(package.name, package.version, package.sha256).expect("pinned sdist");
    let status = Command::new("tar")
        .arg("xzf")
        .arg(&file)
        .arg("-C")
        .arg(dest)
        .status()
        .expect("tar");
    assert!(status.success());
    let root = dest.join(format!("{}-{}", package.name, package.version));
    if let Some(config) = package.config {
        std::fs::write(root.join("frognano.toml"), config).expect("write config");
    }
    root
}

#[test]
fn real_packages_match_native_pytest() {
    for package in PACKAGES {
        let unpacked = tempfile::tempdir().expect("tempdir");
        let repo = unpack_sdist(package, unpacked.path());
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
            report.tests.len() >= package.min_tests,
            "{}: {} tests",
            package.name,
            report.tests.len()
        );
        let prepared = common::sandbox()
            .prepare_repo(&repo, &|_| {})
            .expect("prepare");
        let mut paths: Vec<PathBuf> = prepared
            .config
            .import_roots
            .iter()
            .map(PathBuf::from)
            .collect();
        paths.extend(prepared.deps_layer.clone());
        let native = common::native_outcomes(&repo, &paths, &prepared.config.test.args);
        assert_eq!(
            native.len(),
            sandboxed.len(),
            "{}: test count differs",
            package.name
        );
        if package.ids_follow_string_hash {
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
        eprintln!(
            "{}: {} tests, identical outcomes to native pytest",
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
