//! What a caller chooses: how the sandbox is built and what one test run does.

use frognano_core::Limits;

use crate::image::ImageKind;

/// How the sandbox is built.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Which CPython build to run.
    pub image: ImageKind,
    /// How many sandboxes run at once in batched calls (default: all cores).
    pub workers: usize,
    /// Use a memory snapshot with pytest pre-imported (only images that support it).
    pub snapshot: bool,
    /// Disk cap of one run, in MiB: the workspace plus `/tmp`, repository included. A run that
    /// writes past it ends as `output_exceeded`.
    pub disk_mb: u64,
    /// Give each repository with test requirements a snapshot of its own, with its
    /// requirements layer on the path and the modules its tests import (and the layer's pytest
    /// plugins) already imported, built once per layer and cached like the pytest snapshot.
    /// Each one costs minutes of compilation and about 300 MB of cache, and saves every run the
    /// import of its requirements (seconds for Hypothesis): worth it for repositories run many
    /// times (training, synthesis), not for a corpus build that runs each once. Needs the
    /// snapshot image.
    pub layer_snapshots: bool,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            image: ImageKind::default(),
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            snapshot: true,
            disk_mb: 2048,
            layer_snapshots: false,
        }
    }
}

/// What to run on a workspace: pytest with arguments.
#[derive(Debug, Clone, Default)]
pub struct TestRequest {
    /// Extra pytest arguments (node ids, `-k`, ...), after the repository's own.
    pub pytest_args: Vec<String>,
    /// Limits; `None` takes the repository's `frognano.toml` values, else the defaults.
    pub limits: Option<Limits>,
    /// Set it to stop the run early (e.g. on Ctrl-C); the run then returns
    /// [`crate::SandboxError::Cancelled`]. Checked every few milliseconds.
    pub cancel: Option<CancelFlag>,
    /// Record which lines of the workspace's files each test executes
    /// ([`frognano_core::TestReport::coverage`]); costs one callback per executed line per test.
    pub coverage: bool,
    /// Split the selected tests over this many sandbox instances run at once (0 or 1: one
    /// instance, at most [`MAX_SHARDS`]). Each instance starts from the snapshot, collects the
    /// suite and runs every `shards`-th test; the per-test results are merged in collection
    /// order and a limit one instance hits is the run's outcome, as it would be unsharded.
    /// It shortens a single run on an idle machine; when many runs already share the cores
    /// (an `EnvPool`, batched calls) it only adds collection work.
    pub shards: usize,
}

/// Most sandbox instances one run may be split over.
pub const MAX_SHARDS: usize = 64;

/// A flag that cancels the runs it was given to.
pub type CancelFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// The pytest arguments of a clean run of a whole suite (a corpus build, synthesis's intake, a
/// native comparison), as grading runs it: a module that fails to import (it needs a feature
/// or a compiled distribution WebAssembly lacks) fails only its own tests instead of stopping
/// the collection of every other module.
pub fn clean_suite_args() -> Vec<String> {
    vec!["--continue-on-collection-errors".to_string()]
}

/// The pytest arguments of a grading run: every FAIL_TO_PASS and PASS_TO_PASS id once, in
/// sorted order (a canonical order, so that task synthesis can validate a bug with exactly the
/// run that grades it), and a module that fails to import fails only its own tests.
pub fn grading_args(fail_to_pass: &[String], pass_to_pass: &[String]) -> Vec<String> {
    let ids: std::collections::BTreeSet<&String> =
        fail_to_pass.iter().chain(pass_to_pass).collect();
    let mut args = clean_suite_args();
    args.extend(ids.into_iter().cloned());
    args
}
