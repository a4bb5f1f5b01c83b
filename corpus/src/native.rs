//! Fidelity against native pytest: an entry's suite run by the host's Python with the same
//! requirement layer, arguments and plugin, compared test by test with the sandbox's run.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use frognano_core::TestOutcome;
use frognano_sandbox::{Sandbox, TestRequest};

use crate::manifest::NativeAgreement;
use crate::workers::{job_count, run_on_threads};
use crate::{Corpus, CorpusError, Result};

/// One entry's sandboxed and native runs side by side.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NativeComparison {
    /// The entry.
    pub id: String,
    /// Tests that passed in the sandbox.
    pub sandbox_passed: usize,
    /// Tests that passed natively.
    pub native_passed: usize,
    /// Tests that passed in both.
    pub both_passed: usize,
    /// Passed in the sandbox only (first few ids).
    pub sandbox_only: Vec<String>,
    /// Passed natively only, with the sandbox's outcome (first few).
    pub native_only: Vec<(String, String)>,
    /// Tests passing natively but not in the sandbox, by the sandbox's platform label (or
    /// outcome when unlabelled).
    pub native_only_by_reason: BTreeMap<String, usize>,
    /// Wall-clock seconds of each run: (sandbox, native).
    pub seconds: (f64, f64),
    /// Why the native run could not be compared, if it could not.
    pub error: Option<String>,
}

impl NativeComparison {
    /// The counts a manifest keeps.
    pub fn counts(&self) -> NativeAgreement {
        NativeAgreement {
            sandbox_passed: self.sandbox_passed,
            native_passed: self.native_passed,
            both_passed: self.both_passed,
        }
    }

    /// Tests passing in both over tests passing in either (1.0 when neither passes any).
    pub fn agreement(&self) -> f64 {
        self.counts().agreement()
    }
}

const SHOWN: usize = 10;

/// Compares each of `ids` as [`compare_native`] does, `jobs` entries at once (0: the sandbox's
/// worker count), and returns the comparisons in the order of `ids`. An entry that cannot be
/// compared (its tree is gone, its preparation fails) gets its error in its comparison
/// instead of stopping the others; `done` hears of each comparison as it ends.
pub fn compare_entries(
    corpus: &Corpus,
    sandbox: &Arc<Sandbox>,
    ids: &[String],
    python: &str,
    timeout_s: f64,
    jobs: usize,
    done: &(dyn Fn(&NativeComparison) + Sync),
) -> Vec<NativeComparison> {
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<NativeComparison>>> = Mutex::new(vec![None; ids.len()]);
    let worker =
        || {
            loop {
                let index = {
                    let mut next = next.lock().unwrap_or_else(|p| p.into_inner());
                    let index = *next;
                    *next += 1;
                    index
                };
                let Some(id) = ids.get(index) else {
                    return;
                };
                let comparison = compare_native(corpus, sandbox, id, python, timeout_s)
                    .unwrap_or_else(|err| NativeComparison {
                        id: id.clone(),
                        error: Some(err.to_string()),
                        ..NativeComparison::default()
                    });
                done(&comparison);
                results.lock().unwrap_or_else(|p| p.into_inner())[index] = Some(comparison);
            }
        };
    run_on_threads(job_count(jobs, sandbox, ids.len()), worker);
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// Runs entry `id`'s suite in the sandbox and natively with `python` (which needs pytest) and
/// compares the passing tests.
pub fn compare_native(
    corpus: &Corpus,
    sandbox: &Arc<Sandbox>,
    id: &str,
    python: &str,
    timeout_s: f64,
) -> Result<NativeComparison> {
    let manifest = corpus
        .manifest(id)
        .ok_or_else(|| CorpusError::InvalidOption(format!("{id} has not been built")))?;
    let repo = manifest
        .repo
        .as_deref()
        .map(|r| corpus.root().join(r))
        .filter(|p| p.is_dir())
        .ok_or_else(|| CorpusError::InvalidOption(format!("{id} has no source tree")))?;
    let mut comparison = NativeComparison {
        id: id.to_string(),
        ..NativeComparison::default()
    };
    let prepared = sandbox.prepare_repo(&repo, &|_| {})?;
    let mut limits = prepared.config.limits();
    limits.timeout_s = timeout_s;
    let started = Instant::now();
    let report = sandbox.run_tests_prepared(
        &prepared,
        &TestRequest {
            limits: Some(limits),
            pytest_args: frognano_sandbox::clean_suite_args(),
            ..TestRequest::default()
        },
    )?;
    comparison.seconds.0 = started.elapsed().as_secs_f64();
    let mut args = prepared.pytest_args();
    args.extend(frognano_sandbox::clean_suite_args());
    let paths = prepared.native_python_path();
    let started = Instant::now();
    let native =
        match frognano_sandbox::native::native_outcomes(&repo, &paths, &args, python, timeout_s) {
            Ok(native) => native,
            Err(message) => {
                comparison.error = Some(message);
                return Ok(comparison);
            }
        };
    comparison.seconds.1 = started.elapsed().as_secs_f64();
    let sandboxed: BTreeMap<&str, &frognano_core::TestRecord> =
        report.tests.iter().map(|t| (t.id.as_str(), t)).collect();
    let sandbox_pass: BTreeSet<&str> = report.passed_ids().collect();
    let native_pass: BTreeSet<&str> = native
        .iter()
        .filter(|(_, o)| **o == TestOutcome::Passed)
        .map(|(id, _)| id.as_str())
        .collect();
    comparison.sandbox_passed = sandbox_pass.len();
    comparison.native_passed = native_pass.len();
    comparison.both_passed = sandbox_pass.intersection(&native_pass).count();
    comparison.sandbox_only = sandbox_pass
        .difference(&native_pass)
        .take(SHOWN)
        .map(|s| s.to_string())
        .collect();
    for id in native_pass.difference(&sandbox_pass) {
        let reason = match sandboxed.get(id) {
            Some(t) => match &t.platform {
                Some(cause) => format!("platform: {cause}"),
                None => t.outcome.as_str().to_string(),
            },
            None => "not run".to_string(),
        };
        if comparison.native_only.len() < SHOWN {
            comparison
                .native_only
                .push((id.to_string(), reason.clone()));
        }
        *comparison.native_only_by_reason.entry(reason).or_insert(0) += 1;
    }
    // The manifest keeps the counts, so that lists and summaries show the agreement.
    let mut updated = manifest.clone();
    updated.native = Some(comparison.counts());
    corpus.write_manifest(&updated)?;
    Ok(comparison)
}
