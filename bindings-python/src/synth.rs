//! Task synthesis: `Synthesizer`, the `synthesize` shortcut and the mutation operators.
//!
//! A `Synthesizer` makes validated bug-fix tasks from a repository whose test suite passes.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use frognano_synth::statement::MAX_HINT_LEVEL;
use frognano_synth::{CombineScope, SynthConfig, SynthRequest, Synthesizer};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{invalid, run_interruptibly, seed_of, to_py};
use crate::errors::py_err;
use crate::sandbox::{PySandbox, sandbox_of};

/// A count argument: `min` or more.
fn count(py: Python<'_>, name: &str, value: i64, min: i64) -> PyResult<usize> {
    if value < min {
        return Err(invalid(
            py,
            format!("{name} must be at least {min}, got {value}"),
        ));
    }
    usize::try_from(value).map_err(|_| invalid(py, format!("{name} is too large: {value}")))
}

fn hint_levels_of(py: Python<'_>, levels: &[i64]) -> PyResult<Vec<u8>> {
    levels
        .iter()
        .map(|&level| {
            u8::try_from(level).map_err(|_| {
                invalid(
                    py,
                    format!("hint level {level} is out of range 0..={MAX_HINT_LEVEL}"),
                )
            })
        })
        .collect()
}

/// Synthesizer(repo, *, sandbox=None, seed=0, operators=None, max_bugs=1, scope="file",
///             hint_levels=(2,), workers=None, reproduce=True, select_tests=True,
///             max_candidates=None, skip_unreached=True, timeout_factor=3.0)
///
/// Makes validated bug-fix tasks from a Python repository whose test suite passes: it injects
/// bugs with parser-driven mutation operators and keeps a bug only when some passing test
/// fails with it, another keeps passing, and a second, grading-equivalent run agrees.
///
/// Construction runs the repository's intake (the clean suite twice, with coverage; cached by
/// content) with the GIL released; a repository whose suite cannot validate bugs raises
/// SynthesisError. The same seed on the same repository gives the same tasks.
///
/// operators: names from mutation_operators() (None or empty: all). max_bugs: tasks carry 1
/// to max_bugs bugs, spread evenly. scope: where the bugs of a multi-bug task lie, "function",
/// "file" or "repo". hint_levels: problem-statement hint levels (0 module only, 1 + failing
/// test names, 2 + assertion messages, 3 + function and tracebacks), drawn per task. workers:
/// parallel validations (default: the sandbox's). reproduce: confirm each bug with a second
/// run. select_tests: validate with only the tests that can observe the bug (False: the whole
/// suite). max_candidates: stop after trying this many candidate bugs (None: no limit).
/// skip_unreached: skip code no test executes. timeout_factor: a validation run may take this
/// many times the clean suite's time.
///
/// Also usable as a drop-in task synthesizer: propose(n) and feedback(outcomes). Used by one
/// thread at a time (another thread's call during generate raises RuntimeError); the Sandbox it
/// runs on may be shared.
#[pyclass(module = "frognano", name = "Synthesizer")]
struct PySynthesizer {
    inner: Synthesizer,
}

impl PySynthesizer {
    /// Runs one request with the GIL released; Ctrl-C stops it and raises KeyboardInterrupt.
    fn run<'py>(&mut self, py: Python<'py>, request: &SynthRequest) -> PyResult<Bound<'py, PyAny>> {
        let cancel = Arc::new(AtomicBool::new(false));
        self.inner.set_cancel_flag(cancel.clone());
        let synth = &mut self.inner;
        let tasks = run_interruptibly(py, &cancel, || synth.generate_request(request, &|_| {}))?
            .map_err(|e| py_err(py, e))?;
        to_py(py, &tasks)
    }
}

#[pymethods]
impl PySynthesizer {
    #[new]
    #[pyo3(signature = (
        repo, *, sandbox=None, seed=0, operators=None, max_bugs=1, scope="file",
        hint_levels=vec![2], workers=None, reproduce=true, select_tests=true,
        max_candidates=None, skip_unreached=true, timeout_factor=3.0
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        repo: PathBuf,
        sandbox: Option<PyRef<'_, PySandbox>>,
        seed: i128,
        operators: Option<Vec<String>>,
        max_bugs: i64,
        scope: &str,
        hint_levels: Vec<i64>,
        workers: Option<i64>,
        reproduce: bool,
        select_tests: bool,
        max_candidates: Option<i64>,
        skip_unreached: bool,
        timeout_factor: f64,
    ) -> PyResult<Self> {
        let config = SynthConfig {
            seed: seed_of(py, seed)?,
            operators: operators.unwrap_or_default(),
            max_bugs: count(py, "max_bugs", max_bugs, 1)?,
            scope: CombineScope::parse(scope).map_err(|e| py_err(py, e))?,
            hint_levels: hint_levels_of(py, &hint_levels)?,
            workers: match workers {
                Some(w) => count(py, "workers", w, 1)?,
                None => 0,
            },
            reproduce,
            select_tests,
            skip_unreached,
            timeout_factor,
            max_candidates: match max_candidates {
                Some(m) => count(py, "max_candidates", m, 1)?,
                None => 0,
            },
        };
        // Bad options fail before the (slow) intake.
        config.validate().map_err(|e| py_err(py, e))?;
        // Task records name the repository by an absolute path, as load_tasks returns them.
        let repo = std::path::absolute(&repo).unwrap_or(repo);
        let sandbox = sandbox_of(py, sandbox)?;
        // Ctrl-C stops the intake's clean runs too.
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let inner = run_interruptibly(py, &cancel, move || {
            Synthesizer::new_cancellable(sandbox, &repo, config, Some(flag))
        })?
        .map_err(|e| py_err(py, e))?;
        Ok(PySynthesizer { inner })
    }

    /// generate(n) -> list of task dicts
    ///
    /// Makes up to n new tasks (never the same bug twice across calls) with the configured
    /// operators, bug counts and hint levels; fewer when the repository runs out of candidate
    /// bugs or max_candidates is reached. The dicts have the shape load_tasks returns. Releases
    /// the GIL; Ctrl-C stops the validation runs and raises KeyboardInterrupt.
    fn generate<'py>(&mut self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyAny>> {
        let request = SynthRequest {
            count: count(py, "n", n, 0)?,
            operators: Vec::new(),
            min_bugs: 1,
            max_bugs: self.inner.config().max_bugs,
            hint_levels: Vec::new(),
        };
        self.run(py, &request)
    }

    /// generate_request(n, *, operators=None, min_bugs=1, max_bugs=1, hint_levels=None)
    ///     -> list of task dicts
    ///
    /// Like generate, for one slice of a curriculum: tasks with min_bugs to max_bugs bugs
    /// (spread evenly), drawn from `operators` (None: the configured ones) with hint levels
    /// drawn from `hint_levels` (None: the configured ones).
    #[pyo3(signature = (n, *, operators=None, min_bugs=1, max_bugs=1, hint_levels=None))]
    fn generate_request<'py>(
        &mut self,
        py: Python<'py>,
        n: i64,
        operators: Option<Vec<String>>,
        min_bugs: i64,
        max_bugs: i64,
        hint_levels: Option<Vec<i64>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let request = SynthRequest {
            count: count(py, "n", n, 0)?,
            operators: operators.unwrap_or_default(),
            min_bugs: count(py, "min_bugs", min_bugs, 1)?,
            max_bugs: count(py, "max_bugs", max_bugs, 1)?,
            hint_levels: match hint_levels {
                Some(levels) if levels.is_empty() => {
                    return Err(invalid(
                        py,
                        "hint_levels must name at least one level (None: the configured ones)"
                            .into(),
                    ));
                }
                Some(levels) => hint_levels_of(py, &levels)?,
                None => Vec::new(),
            },
        };
        self.run(py, &request)
    }

    /// propose(n) -> list of task dicts: generate(n), under the name trainers call a task
    /// synthesizer by.
    fn propose<'py>(&mut self, py: Python<'py>, n: i64) -> PyResult<Bound<'py, PyAny>> {
        self.generate(py, n)
    }

    /// feedback(outcomes): accepts the episode outcomes of proposed tasks (any iterable) and
    /// ignores them: this synthesizer does not adapt to the policy. Present so that it can
    /// stand in wherever a task synthesizer with feedback is expected.
    fn feedback(&mut self, outcomes: Bound<'_, PyAny>) -> PyResult<()> {
        // Only checks that it is iterable, like a real consumer would find out.
        outcomes.try_iter().map(drop)
    }

    /// Counters so far (dict): candidates, duplicates, valid, validation_runs, by_operator
    /// (sites, unreached, tried, valid, rejected per operator), by_selection, tests_run,
    /// selection_misses, elapsed_s, intake_s and tasks_per_minute.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.inner.stats();
        let dict = to_py(py, stats)?;
        dict.set_item("tasks_per_minute", stats.tasks_per_minute())?;
        Ok(dict)
    }

    /// What the clean suite said (dict): passing (the tests bugs are judged by), flaky,
    /// failing, skipped and order_dependent (excluded) as lists of test ids, suite_seconds and
    /// content_hash.
    #[getter]
    fn intake<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let intake = self.inner.intake();
        // Not the per-test coverage: it is large and of no use outside the synthesizer.
        let value = serde_json::json!({
            "passing": intake.passing,
            "flaky": intake.flaky,
            "failing": intake.failing,
            "skipped": intake.skipped,
            "order_dependent": intake.order_dependent,
            "suite_seconds": intake.suite_seconds,
            "content_hash": intake.content_hash,
        });
        to_py(py, &value)
    }

    /// Candidate single-bug sites per operator that some test reaches (dict name -> count).
    #[getter]
    fn sites_per_operator<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.inner.sites_per_operator())
    }

    /// The configuration (dict): seed, operators, max_bugs, scope, hint_levels, workers,
    /// reproduce, select_tests, skip_unreached, timeout_factor, max_candidates (0: no limit).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, self.inner.config())
    }

    fn __repr__(&self) -> String {
        let stats = self.inner.stats();
        format!(
            "Synthesizer(repo={:?}, sites={}, valid={}, candidates={})",
            self.inner.source().path().display().to_string(),
            self.inner.sites_per_operator().values().sum::<usize>(),
            stats.valid,
            stats.candidates
        )
    }
}

/// synthesize(repo, n, **kwargs) -> (tasks, stats)
///
/// Shortcut for `s = Synthesizer(repo, **kwargs); (s.generate(n), s.stats)`.
#[pyfunction]
#[pyo3(signature = (repo, n, **kwargs))]
fn synthesize<'py>(
    py: Python<'py>,
    repo: Bound<'py, PyAny>,
    n: i64,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let synth = py.get_type::<PySynthesizer>().call((repo,), kwargs)?;
    let tasks = synth.call_method1("generate", (n,))?;
    let stats = synth.getattr("stats")?;
    Ok((tasks, stats))
}

/// mutation_operators() -> list of dicts {"name", "family", "description"}: the operators a
/// Synthesizer can use ("swe-smith" family: SWE-smith's procedural operators; "extra": more).
#[pyfunction]
fn mutation_operators(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_py(py, &frognano_synth::operators())
}

/// Adds this module's classes and functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySynthesizer>()?;
    add_functions!(m: synthesize, mutation_operators);
    Ok(())
}
