//! Python bindings for FrogNano: the native part of the `frognano` package.
//!
//! Exposes the sandbox (run a repository's test suite in a WebAssembly sandbox and get a typed
//! per-test report) to Python. Every long call releases the GIL and answers Ctrl-C: the work
//! runs on a helper thread while the calling thread polls for signals, and a
//! `KeyboardInterrupt` cancels the sandboxed run before it is raised.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use frognano_core::{Limits, TestReport};
use frognano_sandbox::{CancelFlag, ImageKind, Sandbox, SandboxError, SandboxOptions, TestRequest};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

mod env;
mod llm;
mod synth;
mod train;

/// How often a waiting call checks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Maps a sandbox error to the `frognano` exception hierarchy (defined in `frognano._errors`).
pub(crate) fn to_py_err(py: Python<'_>, err: SandboxError) -> PyErr {
    let class = match &err {
        SandboxError::Asset { .. } => "SetupError",
        SandboxError::Runtime(_) => "SandboxFailure",
        SandboxError::Repo { .. } => "RepoNotFoundError",
        SandboxError::Config { .. } => "ConfigError",
        SandboxError::Requirements { .. } => "RequirementsError",
        SandboxError::InvalidOption(_) => "InvalidArgumentError",
        SandboxError::Cancelled => {
            return pyo3::exceptions::PyKeyboardInterrupt::new_err("cancelled");
        }
        _ => "FrognanoError",
    };
    let message = err.to_string();
    match py.import("frognano._errors").and_then(|m| m.getattr(class)) {
        Ok(class) => PyErr::from_type(
            class
                .cast_into()
                .unwrap_or_else(|_| py.get_type::<PyRuntimeError>()),
            message,
        ),
        Err(import_error) => import_error,
    }
}

fn invalid(py: Python<'_>, message: String) -> PyErr {
    to_py_err(py, SandboxError::InvalidOption(message))
}

/// Runs `work` on a helper thread with the GIL released, checking for Ctrl-C meanwhile; on a
/// signal, sets `cancel`, waits for the work to stop, and raises the signal's exception.
pub(crate) fn run_interruptibly<T: Send>(
    py: Python<'_>,
    cancel: &CancelFlag,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    py.detach(|| {
        std::thread::scope(|scope| {
            let (sender, receiver) = mpsc::channel();
            scope.spawn(move || {
                let _ = sender.send(work());
            });
            loop {
                match receiver.recv_timeout(SIGNAL_POLL) {
                    Ok(value) => return Ok(value),
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err(PyRuntimeError::new_err(
                            "frognano: the worker thread panicked",
                        ));
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if let Err(signal) = Python::attach(|py| py.check_signals()) {
                            cancel.store(true, Ordering::Relaxed);
                            // The run stops within milliseconds of the flag; wait for it so no
                            // sandbox outlives the call.
                            let _ = receiver.recv();
                            return Err(signal);
                        }
                    }
                }
            }
        })
    })
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

#[pymethods]
impl PyTestReport {
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
    #[getter]
    fn passed(&self) -> usize {
        self.inner.passed
    }
    #[getter]
    fn failed(&self) -> usize {
        self.inner.failed
    }
    #[getter]
    fn errors(&self) -> usize {
        self.inner.errors
    }
    #[getter]
    fn skipped(&self) -> usize {
        self.inner.skipped
    }
    #[getter]
    fn xfailed(&self) -> usize {
        self.inner.xfailed
    }
    #[getter]
    fn xpassed(&self) -> usize {
        self.inner.xpassed
    }
    #[getter]
    fn duration_s(&self) -> f64 {
        self.inner.duration_s
    }
    #[getter]
    fn exit_code(&self) -> Option<i32> {
        self.inner.exit_code
    }
    #[getter]
    fn detail(&self) -> Option<String> {
        self.inner.detail.clone()
    }
    #[getter]
    fn stdout(&self) -> String {
        self.inner.stdout.clone()
    }
    #[getter]
    fn stderr(&self) -> String {
        self.inner.stderr.clone()
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
            })
            .collect()
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

/// A ready-to-run sandbox. Creating one prepares the runtime (downloaded, verified, compiled and
/// snapshotted once, then cached). Safe to share between threads.
#[pyclass(frozen, module = "frognano", name = "Sandbox")]
struct PySandbox {
    pub(crate) inner: Arc<Sandbox>,
}

pub(crate) fn progress_printer(progress: Option<Py<PyAny>>) -> impl Fn(&str) + Sync {
    move |message: &str| match &progress {
        Some(callback) => Python::attach(|py| {
            // A failing callback must not abort setup; report it like Python would.
            if let Err(err) = callback.call1(py, (message,)) {
                err.print(py);
            }
        }),
        None => eprintln!("frognano: {message}"),
    }
}

#[pymethods]
impl PySandbox {
    /// Sandbox(image=None, workers=None, snapshot=True, progress=None, disk_mb=None)
    ///
    /// image: "python-3.15" (default) or "python-3.12". workers: sandboxes run at once by
    /// run_tests_many (default: CPU count). progress: callable receiving setup messages
    /// (default: printed to stderr). disk_mb: disk cap of one run (workspace plus /tmp;
    /// default 2048).
    #[new]
    #[pyo3(signature = (image=None, workers=None, snapshot=true, progress=None, disk_mb=None))]
    fn new(
        py: Python<'_>,
        image: Option<&str>,
        workers: Option<i64>,
        snapshot: bool,
        progress: Option<Py<PyAny>>,
        disk_mb: Option<i64>,
    ) -> PyResult<Self> {
        let mut options = SandboxOptions {
            snapshot,
            ..SandboxOptions::default()
        };
        if let Some(image) = image {
            options.image = ImageKind::parse(image).map_err(|e| to_py_err(py, e))?;
        }
        if let Some(disk_mb) = disk_mb {
            options.disk_mb = u64::try_from(disk_mb)
                .ok()
                .filter(|d| *d > 0)
                .ok_or_else(|| invalid(py, format!("disk_mb must be at least 1, got {disk_mb}")))?;
        }
        if let Some(workers) = workers {
            options.workers = usize::try_from(workers)
                .ok()
                .filter(|w| *w > 0)
                .ok_or_else(|| invalid(py, format!("workers must be at least 1, got {workers}")))?;
        }
        let printer = progress_printer(progress);
        let sandbox = py
            .detach(|| Sandbox::new(options, &printer))
            .map_err(|e| to_py_err(py, e))?;
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

    /// run_tests(repo, pytest_args=(), *, timeout=None, memory_mb=None, output_bytes=None)
    ///
    /// Runs the repository's test suite on a fresh copy of it and returns a TestReport.
    /// Limits left as None come from the repository's frognano.toml, else the defaults. Limit
    /// outcomes (timeout, memory, output) are report values, not exceptions.
    #[pyo3(signature = (repo, pytest_args=Vec::new(), *, timeout=None, memory_mb=None, output_bytes=None))]
    fn run_tests(
        &self,
        py: Python<'_>,
        repo: PathBuf,
        pytest_args: Vec<String>,
        timeout: Option<f64>,
        memory_mb: Option<i64>,
        output_bytes: Option<i64>,
    ) -> PyResult<PyTestReport> {
        let cancel = CancelFlag::default();
        let request = TestRequest {
            pytest_args,
            limits: limits_from(py, timeout, memory_mb, output_bytes)?,
            cancel: Some(cancel.clone()),
            ..TestRequest::default()
        };
        let sandbox = self.inner.clone();
        let result = run_interruptibly(py, &cancel, move || sandbox.run_tests(&repo, &request))?;
        result
            .map(|inner| PyTestReport { inner })
            .map_err(|e| to_py_err(py, e))
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
        let cancel = CancelFlag::default();
        let request = TestRequest {
            pytest_args,
            limits: limits_from(py, timeout, memory_mb, output_bytes)?,
            cancel: Some(cancel.clone()),
            ..TestRequest::default()
        };
        let jobs: Vec<(PathBuf, TestRequest)> =
            repos.into_iter().map(|r| (r, request.clone())).collect();
        let sandbox = self.inner.clone();
        let results = run_interruptibly(py, &cancel, move || sandbox.run_tests_many(&jobs))?;
        results
            .into_iter()
            .map(|r| {
                r.map(|inner| PyTestReport { inner })
                    .map_err(|e| to_py_err(py, e))
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
    PySandbox::new(py, image, None, true, progress, None).map(|_| ())
}

/// The directory where FrogNano caches its runtime assets.
#[pyfunction]
fn cache_dir() -> PathBuf {
    frognano_sandbox::assets::cache_dir()
}

/// The native module; `frognano/__init__.py` re-exports it.
#[pymodule]
fn _frognano(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySandbox>()?;
    m.add_class::<PyTestReport>()?;
    m.add_class::<PyTestResult>()?;
    m.add_function(wrap_pyfunction!(setup, m)?)?;
    m.add_function(wrap_pyfunction!(cache_dir, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    env::register(m)?;
    synth::register(m)?;
    train::register(m)?;
    llm::register(m)?;
    Ok(())
}
