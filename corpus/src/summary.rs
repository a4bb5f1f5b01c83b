//! A built corpus in one small file: what a user reads to choose environments without building
//! them.
//!
//! A summary holds one JSON line per entry, sorted by id: its manifest without the bulky parts
//! (the list of excluded tests, kept as counts per reason, and the requirement layer's
//! details), so status or failure cause, test counts, suite time and synthesis yield. It is
//! written by `frognano corpus summary` and read by `frognano corpus list FILE` as a corpus
//! directory is; a summary of a large corpus is committed beside its list.

use std::path::Path;

use crate::build::Corpus;
use crate::error::{CorpusError, Result};
use crate::manifest::Manifest;

/// Where a corpus's summary goes unless told otherwise: this file in the corpus directory.
pub const SUMMARY_FILE: &str = "summary.jsonl";

/// The summary line of a manifest: everything but the excluded tests' ids and the
/// requirement layer's details. Paths in a failure's message are made relative to the
/// repository (the sandbox's workspace mount means nothing to a reader of the summary).
pub fn summary_line(manifest: &Manifest) -> Manifest {
    let workspace = format!("{}/", frognano_sandbox::GUEST_WORK);
    let failure = manifest.failure.clone().map(|mut failure| {
        failure.message = failure.message.replace(&workspace, "");
        failure
    });
    Manifest {
        excluded: Vec::new(),
        requirements: serde_json::Value::Null,
        failure,
        ..manifest.clone()
    }
}

/// Writes the summary of `corpus`'s built entries to `path` (whole, or not at all); returns
/// how many entries it holds.
pub fn write_summary(corpus: &Corpus, path: &Path) -> Result<usize> {
    let mut manifests = corpus.manifests()?;
    manifests.sort_by(|a, b| a.id.cmp(&b.id));
    let mut text = String::new();
    for manifest in &manifests {
        let line =
            serde_json::to_string(&summary_line(manifest)).map_err(|e| CorpusError::Corpus {
                path: path.to_path_buf(),
                message: format!("cannot serialise {}: {e}", manifest.id),
            })?;
        text.push_str(&line);
        text.push('\n');
    }
    frognano_repo::write_atomically(path, text.as_bytes()).map_err(|e| CorpusError::Corpus {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(manifests.len())
}

/// Reads a summary written by [`write_summary`]; a malformed line is an error naming it.
pub fn read_summary(path: &Path) -> Result<Vec<Manifest>> {
    let text = std::fs::read_to_string(path)
        .map_err(CorpusError::io(format!("read {}", path.display())))?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(number, line)| {
            serde_json::from_str(line).map_err(|e| CorpusError::Corpus {
                path: path.to_path_buf(),
                message: format!("line {}: not a corpus summary line: {e}", number + 1),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_line_names_files_relative_to_the_repository() {
        // A path under the guest's workspace mount, as the guest reports it.
        let workspace = format!("{}/", frognano_sandbox::GUEST_WORK);
        let line = format!(
            r#"{{"format":1,"id":"p-1.0","spec":"p==1.0","package":"p","version":"1.0","sdist_sha256":null,"status":"failed","failure":{{"kind":"no_passing_tests","message":"first: tests/t.py: E   FileNotFoundError: '{workspace}tests/data.txt'"}},"repo":"repos/p-1.0","tests":{{"collected":1,"passed":0,"failed":0,"errors":1,"skipped":0,"xfailed":0,"xpassed":0}},"excluded":[],"excluded_by_reason":{{}},"requirements":null,"layer":null,"suite_seconds":0.1,"build_seconds":0.2,"synthesis":null}}"#
        );
        let manifest: Manifest = serde_json::from_str(&line).expect("a manifest");
        let summary = summary_line(&manifest);
        assert_eq!(
            summary.failure.map(|f| f.message).as_deref(),
            Some("first: tests/t.py: E   FileNotFoundError: 'tests/data.txt'")
        );
    }
}
