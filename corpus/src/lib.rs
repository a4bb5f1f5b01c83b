//! Corpora of real Python packages as environments.
//!
//! A corpus is a directory that turns a list of package specs (registry pins
//! `NAME==VERSION --hash=sha256:...`, local source trees, local sdists) into environments with
//! no hand configuration: each entry's source is fetched (sdists verified by hash and cached by
//! content) and unpacked, its test requirements are found where the project declares them and
//! provided as pure-Python wheels, its clean suite runs once in the sandbox, and a manifest
//! records what happened: tests collected, passing and excluded (with reasons, features
//! WebAssembly lacks told apart), the requirement layer, the suite's time, and later what task
//! synthesis made of it. Every entry that cannot serve gets a reason a user can act on, grouped
//! by [`FailureKind`]. Builds run entries in parallel and resume where they stopped.
//! [`synthesize`] makes tasks balanced across the ready entries, [`export`] writes them as a
//! dataset in SWE-bench's fields with a dataset card, [`compare_native`] checks an entry's
//! passing tests against native pytest, and [`Corpus::ready_repos`] is what
//! trainers and synthesizers take. The `frognano corpus` command is a thin layer over this crate.

mod build;
mod error;
mod export;
mod fetch;
mod manifest;
mod native;
mod spec;
mod summary;
mod synth;
mod workers;

use std::collections::BTreeMap;

pub use build::{BuildEvent, BuildOptions, BuildSummary, Corpus, SPECS_FILE};
pub use error::{CorpusError, Result};
pub use export::{CARD_FILE, DATASET_FILE, ExportSummary, export};
pub use fetch::{materialise, registry_sdist};
pub use manifest::{
    ExcludedTest, Failure, FailureKind, MANIFEST_FORMAT, Manifest, NativeAgreement, Status,
    SynthesisSummary, TestCounts,
};
pub use native::{NativeComparison, compare_entries, compare_native};
pub use spec::{Spec, normalise, parse_list};
pub use summary::{SUMMARY_FILE, read_summary, summary_line, write_summary};
pub use synth::{CorpusSynthOptions, CorpusTasks, SynthEvent, synthesize};

/// The starter list shipped with FrogNano: widely used pure-Python packages whose sdists hold
/// their tests, pinned with hashes.
pub const STARTER_LIST: &str = include_str!("../starter/packages.txt");

/// Failed entries grouped by kind: kind -> (count, example entry ids with their messages).
pub fn failures_by_kind(manifests: &[Manifest]) -> BTreeMap<FailureKind, Vec<(String, String)>> {
    let mut groups: BTreeMap<FailureKind, Vec<(String, String)>> = BTreeMap::new();
    for m in manifests {
        if let Some(failure) = &m.failure {
            groups
                .entry(failure.kind)
                .or_default()
                .push((m.id.clone(), failure.message.clone()));
        }
    }
    groups
}

/// Expands repository paths for trainers and synthesizers: a corpus directory stands for its
/// ready entries' source trees, any other path for itself.
pub fn expand_repos(paths: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for path in paths {
        if Corpus::is_corpus(path) {
            let repos = Corpus::open(path)?.ready_repos()?;
            if repos.is_empty() {
                return Err(CorpusError::Corpus {
                    path: path.clone(),
                    message: "the corpus has no ready entries: run `frognano corpus build` first"
                        .into(),
                });
            }
            out.extend(repos);
        } else {
            out.push(path.clone());
        }
    }
    Ok(out)
}
