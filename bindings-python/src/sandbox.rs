//! The sandbox: `Sandbox`, its `TestReport` and `TestResult`, `setup` and `cache_dir`.
//!
//! A `Sandbox` runs a repository's test suite in a WebAssembly sandbox.

use std::path::PathBuf;
use std::sync::Arc;

use frognano_core::{Limits, TestReport};
use frognano_sandbox::{CancelFlag, ImageKind, Sandbox, SandboxError, SandboxOptions, TestRequest};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::convert::{progress_printer, run_interruptibly};
use crate::errors::py_err;

fn invalid(py: Python<'_>, message: String) -> PyErr {
    py_err(py, SandboxError::InvalidOption(message))
}

/// One test's result.
#[pyclass(frozen, module = "frognano", name = "TestResult")]
struct PyTestResult {
    /// pytest node id.
    #[pyo3(get)]
    id: String,
    /// passed, failed, error, skipped, xfailed or xpassed.
    #[pyo3(get)]
    outcome: String,
    /// Seconds spent in setup, call and teardown.
    #[pyo3(get)]
    duration_s: f64,
    /// Short failure text, or None.
    #[pyo3(get)]
    message: Option<String>,
    /// The feature WebAssembly (WASI) lacks that made it fail (e.g. "sockets", "os.umask"),
    /// or None.
    #[pyo3(get)]
    platform: Option<String>,
}

#[pymethods]
impl PyTestResult {
    fn __repr__(&self) -> String {
        format!(
            "TestResult(id={:?}, outcome={:?}, duration_s={:.4})",
            self.id, self.outcome, self.duration_s
        )
    }
}

/// The structured result of one sandboxed test run.
#[pyclass(frozen, module = "frognano", name = "TestReport")]
struct PyTestReport {
    inner: TestReport,
}

/// The `#[pymethods]` of `TestReport`: a getter per report field named (copied, or cloned),
/// then the methods given.
macro_rules! report_methods {
    (copied: $($copied:ident: $ct:ty),*; cloned: $($cloned:ident: $lt:ty),*; $($methods:tt)*) => {
        #[pymethods]
        impl PyTestReport {
            $(
                #[getter]
                fn $copied(&self) -> $ct {
                    self.inner.$copied
                }
            )*
            $(
                #[getter]
                fn $cloned(&self) -> $lt {
                    self.inner.$cloned.clone()
                }
            )*
            $($methods)*
        }
    };
}

report_methods! {
    copied: passed: usize, failed: usize, errors: usize, skipped: usize, xfailed: usize,
        xpassed: usize, duration_s: f64, exit_code: Option<i32>;
    cloned: detail: Option<String>, interrupted: Option<String>, stdout: String, stderr: String;

    /// passed, failed, timeout, memory_exceeded, output_exceeded, crashed or no_tests.
    #[getter]
    fn outcome(&self) -> &'static str {
        self.inner.outcome.as_str()
    }
    /// True when every selected test passed and no limit was hit.
    #[getter]
    fn ok(&self) -> bool {
        self.inner.all_passed()
    }
    /// Per-test results, in the order the tests finished.
    #[getter]
    fn tests(&self) -> Vec<PyTestResult> {
        self.inner
            .tests
            .iter()
            .map(|t| PyTestResult {
                id: t.id.clone(),
                outcome: t.outcome.as_str().to_string(),
                duration_s: t.duration_s,
                message: t.message.clone(),
                platform: t.platform.clone(),
            })
            .collect()
    }
    /// Where the run's time went, phase by phase (seconds: workspace_s, instantiate_s,
    /// startup_s, collection_s, tests_s, per_test_overhead_s, finish_s, host_other_s; tests;
    /// shards), or None.
    #[getter]
    fn profile<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let Some(profile) = &self.inner.profile else {
            return Ok(None);
        };
        let json = serde_json::to_string(profile)
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        py.import("json")?.call_method1("loads", (json,)).map(Some)
    }
    /// The report as JSON text (the same fields as `frognano test --json`).
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(|e| PyRuntimeError::new_err(e.to_string()))
    }
    /// The report as a dict (parsed from `to_json`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = self.to_json()?;
        py.import("json")?.call_method1("loads", (json,))
    }
    fn __repr__(&self) -> String {
        format!(
            "TestReport(outcome={:?}, passed={}, failed={}, errors={}, skipped={}, duration_s={:.3})",
            self.inner.outcome.as_str(),
            self.inner.passed,
            self.inner.failed,
            self.inner.errors,
            self.inner.skipped,
            self.inner.duration_s
        )
    }
}

fn limits_from(
    py: Python<'_>,
    timeout: Option<f64>,
    memory_mb: Option<i64>,
    output_bytes: Option<i64>,
) -> PyResult<Option<Limits>> {
    if timeout.is_none() && memory_mb.is_none() && output_bytes.is_none() {
        return Ok(None);
    }
    let mut limits = Limits::default();
    if let Some(t) = timeout {
        limits.timeout_s = t;
    }
    if let Some(m) = memory_mb {
        limits.memory_mb = u64::try_from(m)
            .map_err(|_| invalid(py, format!("memory_mb must be positive, got {m}")))?;
    }
    if let Some(o) = output_bytes {
        limits.output_bytes = usize::try_from(o)
            .map_err(|_| invalid(py, format!("output_bytes must be positive, got {o}")))?;
    }
    limits.validate().map_err(|e| invalid(py, e.to_string()))?;
    Ok(Some(limits))
}

/// The request of a `run_tests` call and the flag that cancels it.
fn request_from(
    py: Python<'_>,
    pytest_args: Vec<String>,
    timeout: Option<f64>,
    memory_mb: Option<i64>,
    output_bytes: Option<i64>,
) -> PyResult<(TestRequest, CancelFlag)> {
    let cancel = CancelFlag::default();
    let request = TestRequest {
        pytest_args,
        limits: limits_from(py, timeout, memory_mb, output_bytes)?,
        cancel: Some(cancel.clone()),
        ..TestRequest::default()
    };
    Ok((request, cancel))
}

/// A count option of at least 1.
fn at_least_one(py: Python<'_>, name: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| invalid(py, format!("{name} must be at least 1, got {value}")))
}

/// A ready-to-run sandbox. Creating one prepares the runtime (downloaded, verified, compiled and
/// snapshotted once, then cached). Safe to share between threads.
#[pyclass(frozen, module = "frognano", name = "Sandbox")]
pub(crate) struct PySandbox {
    inner: Arc<Sandbox>,
}

/// The given sandbox, or a new one with the default options.
pub(crate) fn sandbox_of(
    py: Python<'_>,
    sandbox: Option<PyRef<'_, PySandbox>>,
) -> PyResult<Arc<Sandbox>> {
    match sandbox {
        Some(s) => Ok(s.inner.clone()),
        None => py
            .detach(|| Sandbox::new(SandboxOptions::default(), &|_| {}))
            .map(Arc::new)
            .map_err(|e| py_err(py, e)),
    }
}

#[pymethods]
impl PySandbox {
    /// Sandbox(image=None, workers=None, snapshot=True, progress=None, disk_mb=None, layer_snapshots=False)
    ///
    /// image: "python-3.15" (default) or "python-3.12". workers: sandboxes run at once by
    /// run_tests_many (default: CPU count). progress: callable receiving setup messages
    /// (default: printed to stderr). disk_mb: disk cap of one run (workspace plus /tmp;
    /// default 2048). layer_snapshots: give each repository with test requirements a snapshot
    /// with them imported (minutes and about 300 MB once per layer; saves each run their import).
    #[new]
    #[pyo3(signature = (image=None, workers=None, snapshot=true, progress=None, disk_mb=None, layer_snapshots=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        image: Option<&str>,
        workers: Option<i64>,
        snapshot: bool,
        progress: Option<Py<PyAny>>,
        disk_mb: Option<i64>,
        layer_snapshots: bool,
    ) -> PyResult<Self> {
        let mut options = SandboxOptions {
            snapshot,
            layer_snapshots,
            ..SandboxOptions::default()
        };
        if let Some(image) = image {
            options.image = ImageKind::parse(image).map_err(|e| py_err(py, e))?;
        }
        if let Some(disk_mb) = disk_mb {
            options.disk_mb = at_least_one(py, "disk_mb", disk_mb)? as u64;
        }
        if let Some(workers) = workers {
            options.workers = at_least_one(py, "workers", workers)?;
        }
        let printer = progress_printer(progress);
        let sandbox = py
            .detach(|| Sandbox::new(options, &printer))
            .map_err(|e| py_err(py, e))?;
        Ok(PySandbox {
            inner: Arc::new(sandbox),
        })
    }

    /// The CPython image the sandbox runs.
    #[getter]
    fn image(&self) -> &'static str {
        self.inner.image().name()
    }

    /// How many sandboxes run_tests_many runs at once.
    #[getter]
    fn workers(&self) -> usize {
        self.inner.workers()
    }

    /// Whether runs start from a pre-initialised interpreter snapshot.
    #[getter]
    fn uses_snapshot(&self) -> bool {
        self.inner.uses_snapshot()
    }

    /// run_tests(repo, pytest_args=(), *, timeout=None, memory_mb=None, output_bytes=None, shards=1)
    ///
    /// Runs the repository's test suite on a fresh copy of it and returns a TestReport.
    /// Limits left as None come from the repository's frognano.toml, else the defaults. Limit
    /// outcomes (timeout, memory, output) are report values, not exceptions. shards > 1 splits
    /// the tests over that many sandbox instances run at once (results merged in collection
    /// order; worth it for one long run on idle cores).
    #[pyo3(signature = (repo, pytest_args=Vec::new(), *, timeout=None, memory_mb=None, output_bytes=None, shards=1))]
    #[allow(clippy::too_many_arguments)]
    fn run_tests(
        &self,
        py: Python<'_>,
        repo: PathBuf,
        pytest_args: Vec<String>,
        timeout: Option<f64>,
        memory_mb: Option<i64>,
        output_bytes: Option<i64>,
        shards: i64,
    ) -> PyResult<PyTestReport> {
        let (mut request, cancel) =
            request_from(py, pytest_args, timeout, memory_mb, output_bytes)?;
        request.shards = at_least_one(py, "shards", shards)?;
        let sandbox = self.inner.clone();
        let result = run_interruptibly(py, &cancel, move || sandbox.run_tests(&repo, &request))?;
        result
            .map(|inner| PyTestReport { inner })
            .map_err(|e| py_err(py, e))
    }

    /// run_tests_many(repos, pytest_args=(), *, timeout=None, memory_mb=None, output_bytes=None)
    ///
    /// Runs several repositories' suites, `workers` at a time; returns the reports in order.
    /// Raises the first error if any run could not be made.
    #[pyo3(signature = (repos, pytest_args=Vec::new(), *, timeout=None, memory_mb=None, output_bytes=None))]
    fn run_tests_many(
        &self,
        py: Python<'_>,
        repos: Vec<PathBuf>,
        pytest_args: Vec<String>,
        timeout: Option<f64>,
        memory_mb: Option<i64>,
        output_bytes: Option<i64>,
    ) -> PyResult<Vec<PyTestReport>> {
        let (request, cancel) = request_from(py, pytest_args, timeout, memory_mb, output_bytes)?;
        let jobs: Vec<(PathBuf, TestRequest)> =
            repos.into_iter().map(|r| (r, request.clone())).collect();
        let sandbox = self.inner.clone();
        let results = run_interruptibly(py, &cancel, move || sandbox.run_tests_many(&jobs))?;
        results
            .into_iter()
            .map(|r| {
                r.map(|inner| PyTestReport { inner })
                    .map_err(|e| py_err(py, e))
            })
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Sandbox(image={:?}, workers={}, snapshot={})",
            self.inner.image().name(),
            self.inner.workers(),
            self.inner.uses_snapshot()
        )
    }
}

/// setup(image=None, progress=None): fetch, verify, compile and snapshot the runtime now
/// (idempotent; a Sandbox does the same on creation).
#[pyfunction]
#[pyo3(signature = (image=None, progress=None))]
fn setup(py: Python<'_>, image: Option<&str>, progress: Option<Py<PyAny>>) -> PyResult<()> {
    PySandbox::new(py, image, None, true, progress, None, false).map(|_| ())
}

/// The directory where FrogNano caches its runtime assets.
#[pyfunction]
fn cache_dir() -> PathBuf {
    frognano_sandbox::assets::cache_dir()
}

/// Adds this module's classes and functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySandbox>()?;
    m.add_class::<PyTestReport>()?;
    m.add_class::<PyTestResult>()?;
    add_functions!(m: setup, cache_dir);
    // Folders a workspace never copies: what a repository shipped to other machines leaves out.
    m.add(
        "SKIPPED_DIRS",
        frognano_sandbox::workspace::SKIPPED_DIRS.to_vec(),
    )?;
    Ok(())
}
