//! Task synthesis on real third-party packages from the package registry (pinned sdists,
//! verified by sha256): tasks from their own test suites, each resolved by the oracle and by
//! nothing else.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use frognano_sandbox::assets;
use frognano_synth::{SynthConfig, Synthesizer};

struct Package {
    name: &'static str,
    version: &'static str,
    sha256: &'static str,
    /// `frognano.toml` written into the unpacked sdist, as a user would.
    config: Option<&'static str>,
}

const PACKAGES: &[Package] = &[
    Package {
        name: "isodate",
        version: "0.7.2",
        sha256: "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        config: None,
    },
    Package {
        name: "semver",
        version: "3.1.2",
        sha256: "bea193552413194252d33ff26ce0962b76669bd1c6fb17e8e203ac37f072feaf",
        config: None,
    },
    Package {
        name: "schema",
        version: "0.7.8",
        sha256: "e86cc08edd6fe6e2522648f4e47e3a31920a76e82cce8937535422e310862ab5",
        config: Some("[test]\nrequirements = [\"mock\"]\n"),
    },
];

/// Downloads (once, into the cache) and unpacks a pinned sdist into `dest`.
fn unpack_sdist(package: &Package, dest: &Path) -> PathBuf {
    let file =
        assets::fetch_sdist(package.name, package.version, package.sha256).expect("pinned sdist");
    let archive = std::fs::File::open(&file).expect("open sdist");
    tar::Archive::new(flate2::read::GzDecoder::new(archive))
        .unpack(dest)
        .expect("unpack sdist");
    let root = dest.join(format!("{}-{}", package.name, package.version));
    if let Some(config) = package.config {
        std::fs::write(root.join("frognano.toml"), config).expect("write config");
    }
    root
}

#[test]
fn real_packages_yield_tasks_only_the_oracle_resolves() {
    for package in PACKAGES {
        let unpacked = tempfile::tempdir().expect("tempdir");
        let repo = unpack_sdist(package, unpacked.path());
        let config = SynthConfig {
            seed: 21,
            ..SynthConfig::default()
        };
        let mut synth = Synthesizer::new(common::sandbox(), &repo, config).expect("intake");
        let tasks = synth.generate(6, &|_| {}).expect("generate");
        let stats = synth.stats();
        assert_eq!(tasks.len(), 6, "{}: {stats:?}", package.name);
        assert_eq!(stats.selection_misses, 0, "{}", package.name);
        let operators: BTreeSet<&str> = tasks
            .iter()
            .filter_map(|t| t.metadata["difficulty"]["operators"][0].as_str())
            .collect();
        assert!(operators.len() >= 4, "{}: {operators:?}", package.name);
        common::assert_oracle_only(&tasks);
        eprintln!(
            "{}: {} tasks from {} candidates ({} passing tests, {:.1} tasks/min)",
            package.name,
            tasks.len(),
            stats.candidates,
            synth.intake().passing.len(),
            stats.tasks_per_minute()
        );
    }
}
