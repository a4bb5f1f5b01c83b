//! An entry's manifest: what it is, whether it runs, and what its tests say.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Bump when a manifest's meaning changes: entries of an older format are built again.
pub const MANIFEST_FORMAT: u32 = 1;

/// Why an entry is not an environment, grouped for summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The sdist could not be downloaded.
    Fetch,
    /// The downloaded sdist does not match its pinned sha256.
    HashMismatch,
    /// The archive is damaged, empty or too large.
    MalformedSdist,
    /// The sdist holds no test files.
    NoTests,
    /// The repository's configuration is malformed.
    Config,
    /// A test requirement has no pure-Python wheel, or a module the tests import is missing.
    Requirements,
    /// The suite needs a compiled extension of the package itself.
    CExtension,
    /// pytest collected nothing, or could not start.
    Collection,
    /// Tests ran but none passed.
    NoPassingTests,
    /// The clean suite did not finish within the time limit.
    Timeout,
    /// The clean suite reached the memory cap.
    Memory,
    /// The clean suite flooded its output.
    Output,
    /// The interpreter crashed.
    Crash,
    /// The sandbox failed.
    Sandbox,
    /// A host I/O failure.
    Io,
}

impl FailureKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Fetch => "fetch",
            FailureKind::HashMismatch => "hash_mismatch",
            FailureKind::MalformedSdist => "malformed_sdist",
            FailureKind::NoTests => "no_tests",
            FailureKind::Config => "config",
            FailureKind::Requirements => "requirements",
            FailureKind::CExtension => "c_extension",
            FailureKind::Collection => "collection",
            FailureKind::NoPassingTests => "no_passing_tests",
            FailureKind::Timeout => "timeout",
            FailureKind::Memory => "memory",
            FailureKind::Output => "output",
            FailureKind::Crash => "crash",
            FailureKind::Sandbox => "sandbox",
            FailureKind::Io => "io",
        }
    }

    /// What a user can do about entries failing this way.
    pub fn advice(self) -> &'static str {
        match self {
            FailureKind::Fetch => "check the name and version, and that the release has an sdist",
            FailureKind::HashMismatch => "re-pin the sha256 from a trusted download",
            FailureKind::MalformedSdist => "use another release or a source checkout",
            FailureKind::NoTests => {
                "the release ships no tests: add a source checkout (a directory) instead"
            }
            FailureKind::Config => "fix the named file (frognano.toml or pyproject.toml)",
            FailureKind::Requirements => {
                "the suite needs compiled packages, which cannot run in WebAssembly; list pure \
                 alternatives in frognano.toml [test] requirements or drop the package"
            }
            FailureKind::CExtension => "the package is not pure Python: drop it",
            FailureKind::Collection => {
                "set [test] args or testpaths in frognano.toml so pytest finds the tests"
            }
            FailureKind::NoPassingTests => {
                "see the first errors; deselect what cannot run with frognano.toml [test] deselect"
            }
            FailureKind::Timeout => "raise --timeout, or deselect slow tests in frognano.toml",
            FailureKind::Memory => "raise [test] memory-mb in frognano.toml",
            FailureKind::Output => "the suite prints too much: deselect the noisy tests",
            FailureKind::Crash => {
                "a test crashed the interpreter (deep recursion, os._exit): deselect it"
            }
            FailureKind::Sandbox => "report it: the sandbox itself failed",
            FailureKind::Io => "check disk space and permissions of the corpus directory",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an entry failed, in words a user can act on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The group the reason belongs to.
    pub kind: FailureKind,
    /// The specific reason.
    pub message: String,
}

/// Whether an entry can serve as an environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Its clean suite runs in the sandbox and some tests pass.
    Ready,
    /// It cannot serve; see the failure.
    Failed,
}

/// Per-outcome counts of the clean suite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TestCounts {
    /// Tests pytest reported.
    pub collected: usize,
    /// Passed.
    pub passed: usize,
    /// Failed.
    pub failed: usize,
    /// Errored (setup, teardown or collection).
    pub errors: usize,
    /// Skipped.
    pub skipped: usize,
    /// Expected failures.
    pub xfailed: usize,
    /// Unexpected passes.
    pub xpassed: usize,
}

/// A test left out of the environment's graded set, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExcludedTest {
    /// pytest node id.
    pub id: String,
    /// `platform: <cause>` for a feature WebAssembly lacks, else the outcome (`failed`,
    /// `error`, `skipped`, `xfailed`, `xpassed`).
    pub reason: String,
}

/// What synthesis made of the entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SynthesisSummary {
    /// Validated tasks written.
    pub tasks: usize,
    /// Candidate bugs run in the sandbox.
    pub candidates: usize,
    /// Tasks per operator.
    pub tasks_by_operator: BTreeMap<String, usize>,
    /// (tried, valid) per operator.
    pub yield_by_operator: BTreeMap<String, (usize, usize)>,
    /// Tests the intake found flaky or order-dependent (excluded from grading).
    pub unstable_tests: usize,
    /// Why synthesis could not use the entry, if it could not.
    pub error: Option<String>,
    /// Seconds synthesis took (intake included).
    pub seconds: f64,
}

/// Everything known about one corpus entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`MANIFEST_FORMAT`] when it was written.
    pub format: u32,
    /// The entry's id (its directory name under `repos/`).
    pub id: String,
    /// The spec it was built from, as written in the list.
    pub spec: String,
    /// The distribution name (registry specs, or the project's own metadata).
    pub package: Option<String>,
    /// The version.
    pub version: Option<String>,
    /// sha256 of the sdist it was unpacked from.
    pub sdist_sha256: Option<String>,
    /// Ready or failed.
    pub status: Status,
    /// Why it failed.
    pub failure: Option<Failure>,
    /// The source tree, relative to the corpus directory (absent when fetching failed).
    pub repo: Option<String>,
    /// Clean-suite counts.
    pub tests: TestCounts,
    /// Tests left out of grading, with reasons.
    pub excluded: Vec<ExcludedTest>,
    /// Excluded tests per reason.
    pub excluded_by_reason: BTreeMap<String, usize>,
    /// The requirement layer: what was detected (and where), added, left out, unresolved.
    pub requirements: serde_json::Value,
    /// The requirement layer's cache directory name (entries with equal requirements share it).
    pub layer: Option<String>,
    /// Wall-clock seconds of the clean suite in the sandbox.
    pub suite_seconds: Option<f64>,
    /// Wall-clock seconds the whole entry took to build.
    pub build_seconds: f64,
    /// What synthesis made of it (after `corpus synth`).
    pub synthesis: Option<SynthesisSummary>,
    /// How its passing tests agree with native pytest's (after `corpus compare`; absent in
    /// manifests never compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<NativeAgreement>,
}

/// Passing tests in the sandbox against native pytest, for one entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NativeAgreement {
    /// Tests that passed in the sandbox.
    pub sandbox_passed: usize,
    /// Tests that passed natively.
    pub native_passed: usize,
    /// Tests that passed in both.
    pub both_passed: usize,
}

impl NativeAgreement {
    /// Tests passing in both over tests passing in either (1.0 when neither passes any).
    pub fn agreement(&self) -> f64 {
        let either = self.sandbox_passed + self.native_passed - self.both_passed;
        if either == 0 {
            1.0
        } else {
            self.both_passed as f64 / either as f64
        }
    }

    /// Share of the natively passing tests that pass in the sandbox too (1.0 when none pass
    /// natively): the corpus's readiness bar is 90%.
    pub fn native_share(&self) -> f64 {
        if self.native_passed == 0 {
            1.0
        } else {
            self.both_passed as f64 / self.native_passed as f64
        }
    }
}

impl Manifest {
    /// A manifest for an entry that failed before its suite ran.
    pub fn failed(id: &str, spec: &str, failure: Failure) -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT,
            id: id.to_string(),
            spec: spec.to_string(),
            package: None,
            version: None,
            sdist_sha256: None,
            status: Status::Failed,
            failure: Some(failure),
            repo: None,
            tests: TestCounts::default(),
            excluded: Vec::new(),
            excluded_by_reason: BTreeMap::new(),
            requirements: serde_json::Value::Null,
            layer: None,
            suite_seconds: None,
            build_seconds: 0.0,
            synthesis: None,
            native: None,
        }
    }

    /// True when the entry can serve as an environment.
    pub fn is_ready(&self) -> bool {
        self.status == Status::Ready
    }
}
