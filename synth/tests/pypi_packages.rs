//! Task synthesis on real third-party packages from the package registry (pinned sdists,
//! verified by sha256): tasks from their own test suites, each resolved by the oracle and by
//! nothing else.

mod common;

use std::collections::BTreeSet;

use frognano_sandbox::testing::PINNED_SDISTS;
use frognano_synth::{SynthConfig, Synthesizer};

#[test]
fn real_packages_yield_tasks_only_the_oracle_resolves() {
    for package in PINNED_SDISTS {
        let unpacked = tempfile::tempdir().expect("tempdir");
        let repo = package.unpack(unpacked.path());
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
