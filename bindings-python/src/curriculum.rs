//! Task sources: `FrontierSynthesizer`, `StaticCurriculum`, `EasyToHard` and Python sources.
//!
//! `FrontierSynthesizer` synthesizes online at the frontier of learnability; the curricula are
//! what it is measured against; any Python object with `propose(n)` and `feedback(outcomes)`
//! is a source too. A Rust source lives behind `Arc<Mutex<..>>`, shared by the Python object
//! and the trainers it is handed to, so the object stays usable while and after it is trained
//! with.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use frognano_core::{EpisodeOutcome, Task, TaskSynthesizer};
use frognano_synth::{SynthConfig, Synthesizer};
use frognano_train::{EasyToHard, FrontierConfig, FrontierSynthesizer, StaticCurriculum};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use serde_json::{Value, json};

use crate::convert::{
    ErrorSlot, PyComponent, from_py_json, invalid, lock, map_of, parse, run_interruptibly, seed_of,
    tasks_from_py, to_py,
};
use crate::errors::{Exception, py_err};
use crate::sandbox::{PySandbox, sandbox_of};

/// Seed offset of the frontier's synthesizers, as `frognano train` uses.
const FRONTIER_SYNTH_SEED: u64 = 104_729;

/// Episode outcomes from Python: outcome dicts (only `task_id` is required; `reward` defaults
/// to 1 for a resolved episode, counters to 0, flags to false) or episode records (their
/// `outcome` is used).
fn outcomes_from_py(py: Python<'_>, outcomes: &Bound<'_, PyAny>) -> PyResult<Vec<EpisodeOutcome>> {
    let mut out = Vec::new();
    for item in outcomes.try_iter()? {
        let mut value = from_py_json(py, &item?)?;
        if value.get("resolved").is_none()
            && let Some(inner) = value.get("outcome").filter(|o| o.is_object())
        {
            value = inner.clone();
        }
        if let Some(o) = value.as_object_mut() {
            let resolved = o.get("resolved").and_then(Value::as_bool).unwrap_or(false);
            o.entry("resolved").or_insert(json!(resolved));
            o.entry("reward")
                .or_insert(json!(if resolved { 1.0 } else { 0.0 }));
            for counter in ["steps", "tool_errors", "test_runs"] {
                o.entry(counter).or_insert(json!(0));
            }
            for flag in ["met_failure", "recovered", "submitted", "truncated"] {
                o.entry(flag).or_insert(json!(false));
            }
        }
        out.push(parse(py, "episode outcome", value)?);
    }
    Ok(out)
}

/// Task ids from an iterable of ids or task dicts.
fn task_ids(items: Option<&Bound<'_, PyAny>>) -> PyResult<BTreeSet<String>> {
    let mut ids = BTreeSet::new();
    let Some(items) = items else {
        return Ok(ids);
    };
    for item in items.try_iter()? {
        let item = item?;
        let id = match item.extract::<String>() {
            Ok(id) => id,
            Err(_) => item.get_item("id")?.extract::<String>()?,
        };
        ids.insert(id);
    }
    Ok(ids)
}

/// A Rust task source a Python object holds.
struct SharedSource(Arc<Mutex<dyn TaskSynthesizer>>);

impl TaskSynthesizer for SharedSource {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        lock(&self.0).propose(n)
    }
    fn feedback(&mut self, outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        lock(&self.0).feedback(outcomes)
    }
    fn metrics(&mut self) -> serde_json::Map<String, Value> {
        lock(&self.0).metrics()
    }
    fn state(&self) -> frognano_core::Result<Value> {
        lock(&self.0).state()
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        lock(&self.0).load_state(state)
    }
}

/// A Python object as a task source: `propose(n)` and `feedback(outcomes)`, optional
/// `metrics()`, `state()` and `load_state(state)`.
struct PySource(PyComponent);

/// How a Python task source's failures are reported.
const PY_SOURCE: &str = "python synthesizer";

impl TaskSynthesizer for PySource {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        self.0.call(PY_SOURCE, |py, object| {
            tasks_from_py(py, &object.call_method1("propose", (n,))?)
        })
    }
    fn feedback(&mut self, outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        self.0.call(PY_SOURCE, |py, object| {
            object.call_method1("feedback", (to_py(py, &outcomes)?,))?;
            Ok(())
        })
    }
    fn metrics(&mut self) -> serde_json::Map<String, Value> {
        // A failure is kept in the slot: the trainer raises it when the iteration returns.
        self.0
            .optional_json(PY_SOURCE, "metrics")
            .map(map_of)
            .unwrap_or_default()
    }
    fn state(&self) -> frognano_core::Result<Value> {
        self.0.optional_json(PY_SOURCE, "state")
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        self.0.load_state(PY_SOURCE, state)
    }
}

/// The Rust source behind a `FrontierSynthesizer`, `StaticCurriculum` or `EasyToHard`.
fn shared_source(source: &Bound<'_, PyAny>) -> Option<Arc<Mutex<dyn TaskSynthesizer>>> {
    if let Ok(s) = source.cast::<PyFrontierSynthesizer>() {
        return Some(s.get().inner.clone());
    }
    if let Ok(s) = source.cast::<PyStaticCurriculum>() {
        return Some(s.get().inner.clone());
    }
    if let Ok(s) = source.cast::<PyEasyToHard>() {
        return Some(s.get().inner.clone());
    }
    None
}

/// The task source of a trainer: one of the Rust sources (shared), a list of tasks (a static
/// curriculum, seed 0) or an object with `propose` and `feedback`.
pub(crate) fn task_source(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    slot: &ErrorSlot,
) -> PyResult<Box<dyn TaskSynthesizer>> {
    if let Some(shared) = shared_source(source) {
        return Ok(Box::new(SharedSource(shared)));
    }
    if source.is_instance_of::<PyList>() || source.is_instance_of::<PyTuple>() {
        let tasks = tasks_from_py(py, source)?;
        if tasks.is_empty() {
            return Err(invalid(py, "the list of tasks is empty".into()));
        }
        let curriculum = StaticCurriculum::new(tasks, 0).map_err(|e| py_err(py, e))?;
        return Ok(Box::new(curriculum));
    }
    if source.hasattr("propose")? && source.hasattr("feedback")? {
        return Ok(Box::new(PySource(PyComponent {
            object: source.clone().unbind(),
            slot: slot.clone(),
        })));
    }
    Err(invalid(
        py,
        format!(
            "synthesizer must be a FrontierSynthesizer, StaticCurriculum, EasyToHard, a list \
             of tasks or an object with propose(n) and feedback(outcomes), got {}",
            source.get_type().name()?
        ),
    ))
}

/// What `f` returns from the shared Rust `source`, called with the GIL released.
fn source_call<T: Send>(
    py: Python<'_>,
    source: &Mutex<dyn TaskSynthesizer>,
    f: impl Send + FnOnce(&mut dyn TaskSynthesizer) -> frognano_core::Result<T>,
) -> PyResult<T> {
    py.detach(|| f(&mut *lock(source)))
        .map_err(|e| py_err(py, e))
}

/// The `#[pymethods]` of a task source class holding `inner: Arc<Mutex<..>>`: the task-source
/// protocol with the GIL released (`propose`, `feedback`, `metrics` and `state` with the docs
/// given, and `load_state`), then the class's own methods.
macro_rules! task_source_methods {
    (
        $class:ident;
        $(#[$propose:meta])* propose;
        $(#[$feedback:meta])* feedback;
        $(#[$metrics:meta])* metrics;
        $(#[$state:meta])* state;
        $($own:tt)*
    ) => {
        #[pymethods]
        impl $class {
            $(#[$propose])*
            fn propose<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
                to_py(py, &source_call(py, &*self.inner, |s| s.propose(n))?)
            }

            $(#[$feedback])*
            fn feedback(&self, py: Python<'_>, outcomes: Bound<'_, PyAny>) -> PyResult<()> {
                let outcomes = outcomes_from_py(py, &outcomes)?;
                source_call(py, &*self.inner, |s| s.feedback(&outcomes))
            }

            $(#[$metrics])*
            fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                to_py(py, &source_call(py, &*self.inner, |s| Ok(s.metrics()))?)
            }

            $(#[$state])*
            fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                to_py(py, &source_call(py, &*self.inner, |s| s.state())?)
            }

            /// load_state(state): restores a state().
            fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
                let state = from_py_json(py, &state)?;
                let inner = &*self.inner;
                py.detach(|| lock(inner).load_state(&state))
                    .map_err(|e| invalid(py, e.to_string()))
            }

            $($own)*
        }
    };
}

/// FrontierSynthesizer(sandbox, repos, *, seed=0, operators=None, bug_counts=[1, 2],
///                     hint_levels=[2], target_success=0.5, decay=0.8, exploration=0.1,
///                     buffer=2, buffered_families=4, max_uses=4, max_idle=12,
///                     max_wait_s=600.0, prior_strength=4.0, cold_start=True,
///                     exclude=None, synth_workers=1)
///
/// Online task synthesis at the frontier of learnability: tasks are grouped into families
/// (operator x bug count x hint level); each family keeps a decayed Beta posterior of the
/// policy's success rate, families are chosen by Thompson sampling on a score that peaks at
/// `target_success` (a family borrows `prior_strength` pseudo-counts from related families),
/// and a background thread synthesizes tasks for the most promising families
/// while rollouts run. cold_start: until some group succeeds, propose only the easiest rung
/// (fewest bugs, highest hint level), spread over its operators. One Synthesizer per repository (its intake runs at construction, with
/// the GIL released); a corpus directory (`frognano corpus build`) in `repos` stands for its
/// ready entries. exclude: task ids (or task dicts) never to propose, e.g. a held-out set.
#[pyclass(frozen, module = "frognano", name = "FrontierSynthesizer")]
struct PyFrontierSynthesizer {
    inner: Arc<Mutex<FrontierSynthesizer>>,
}

task_source_methods! {
    PyFrontierSynthesizer;
    /// propose(n) -> list of task dicts (waits for synthesis when no family has a task ready).
    propose;
    /// feedback(outcomes): episode outcomes (dicts with task_id and resolved, or episode
    /// records) update the families' posteriors and retire tasks without signal.
    feedback;
    /// metrics() -> dict measured since the last call (synthesis_wait_s, families, buffered,
    /// active_tasks, generated_total, retired, chosen_families, top_families, ...).
    metrics;
    /// state() -> dict (the families' posteriors), for checkpoints.
    state;

    #[new]
    #[pyo3(signature = (
        sandbox, repos, *, seed=0, operators=None, bug_counts=None, hint_levels=None,
        target_success=None, decay=None, exploration=None, buffer=None, buffered_families=None,
        max_uses=None, max_idle=None, max_wait_s=None, prior_strength=None, cold_start=None,
        exclude=None, synth_workers=1
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sandbox: Option<PyRef<'_, PySandbox>>,
        repos: Vec<PathBuf>,
        seed: i128,
        operators: Option<Vec<String>>,
        bug_counts: Option<Vec<usize>>,
        hint_levels: Option<Vec<u8>>,
        target_success: Option<f64>,
        decay: Option<f64>,
        exploration: Option<f64>,
        buffer: Option<usize>,
        buffered_families: Option<usize>,
        max_uses: Option<usize>,
        max_idle: Option<u64>,
        max_wait_s: Option<f64>,
        prior_strength: Option<f64>,
        cold_start: Option<bool>,
        exclude: Option<Bound<'_, PyAny>>,
        synth_workers: usize,
    ) -> PyResult<Self> {
        let seed = seed_of(py, seed)?;
        let d = FrontierConfig::default();
        let config = FrontierConfig {
            operators: operators.unwrap_or_default(),
            bug_counts: bug_counts.unwrap_or(d.bug_counts),
            hint_levels: hint_levels.unwrap_or(d.hint_levels),
            target_success: target_success.unwrap_or(d.target_success),
            decay: decay.unwrap_or(d.decay),
            exploration: exploration.unwrap_or(d.exploration),
            max_idle: max_idle.unwrap_or(d.max_idle),
            buffer: buffer.unwrap_or(d.buffer),
            buffered_families: buffered_families.unwrap_or(d.buffered_families),
            max_uses: max_uses.unwrap_or(d.max_uses),
            seed,
            max_wait_s: max_wait_s.unwrap_or(d.max_wait_s),
            prior_strength: prior_strength.unwrap_or(d.prior_strength),
            cold_start: cold_start.unwrap_or(d.cold_start),
        };
        // Bad options fail before the (slow) intakes.
        config.validate().map_err(|e| py_err(py, e))?;
        if repos.is_empty() {
            return Err(Exception::Config.err(py, "the frontier needs at least one repository",
            ));
        }
        let synth_config = SynthConfig {
            seed: seed.wrapping_add(FRONTIER_SYNTH_SEED),
            operators: config.operators.clone(),
            max_bugs: config.bug_counts.iter().copied().max().unwrap_or(1),
            hint_levels: config.hint_levels.clone(),
            workers: synth_workers,
            ..SynthConfig::default()
        };
        synth_config.validate().map_err(|e| py_err(py, e))?;
        let exclude = task_ids(exclude.as_ref())?;
        // Task records name their repository by an absolute path, as load_tasks returns them.
        // A corpus directory stands for its ready entries.
        let repos: Vec<PathBuf> = repos
            .into_iter()
            .map(|r| std::path::absolute(&r).unwrap_or(r))
            .collect();
        let repos = frognano_corpus::expand_repos(&repos).map_err(|e| py_err(py, e))?;
        let sandbox = sandbox_of(py, sandbox)?;
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let synthesizers = run_interruptibly(py, &cancel, move || {
            repos
                .iter()
                .map(|repo| {
                    Synthesizer::new_cancellable(
                        sandbox.clone(),
                        repo,
                        synth_config.clone(),
                        Some(flag.clone()),
                    )
                })
                .collect::<Result<Vec<_>, _>>()
        })?
        .map_err(|e| py_err(py, e))?;
        let frontier = FrontierSynthesizer::new(synthesizers, config, exclude)
            .map_err(|e| py_err(py, e))?;
        Ok(PyFrontierSynthesizer {
            inner: Arc::new(Mutex::new(frontier)),
        })
    }

    /// The families (list of dicts: key {operator, bugs, hint}, label, alpha, beta, mean (of
    /// the family's own evidence), posterior_mean (with the prior borrowed from related
    /// families), groups, chosen, last_chosen, barren).
    #[getter]
    fn families<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = &self.inner;
        let families: Vec<Value> = py.detach(|| {
            let frontier = lock(inner);
            frontier
                .families()
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let (a, b) = frontier.posterior(i);
                    let mut value = json!(f);
                    value["label"] = json!(f.key.label());
                    value["mean"] = json!(f.mean());
                    value["posterior_mean"] = json!(a / (a + b));
                    value
                })
                .collect()
        });
        to_py(py, &families)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let inner = &self.inner;
        let (families, barren) = py.detach(|| {
            let frontier = lock(inner);
            let families = frontier.families();
            (families.len(), families.iter().filter(|f| f.barren).count())
        });
        format!("FrontierSynthesizer(families={families}, barren={barren})")
    }
}

/// StaticCurriculum(tasks, seed=0)
///
/// Samples tasks uniformly from a fixed set (distinct within a call, with replacement across
/// calls): the baseline most synthetic-task pipelines train with.
#[pyclass(frozen, module = "frognano", name = "StaticCurriculum")]
struct PyStaticCurriculum {
    inner: Arc<Mutex<StaticCurriculum>>,
}

task_source_methods! {
    PyStaticCurriculum;
    /// propose(n) -> list of n task dicts.
    propose;
    /// feedback(outcomes): accepted and ignored (the curriculum does not adapt).
    feedback;
    /// metrics() -> dict (empty: nothing adapts).
    metrics;
    /// state() -> dict (the number of proposals so far).
    state;

    #[new]
    #[pyo3(signature = (tasks, seed=0))]
    fn new(py: Python<'_>, tasks: Bound<'_, PyAny>, seed: i128) -> PyResult<Self> {
        let tasks = tasks_from_py(py, &tasks)?;
        if tasks.is_empty() {
            return Err(invalid(py, "the curriculum needs at least one task".into()));
        }
        let curriculum =
            StaticCurriculum::new(tasks, seed_of(py, seed)?).map_err(|e| py_err(py, e))?;
        Ok(PyStaticCurriculum {
            inner: Arc::new(Mutex::new(curriculum)),
        })
    }

    /// The task set (list of task dicts).
    #[getter]
    fn tasks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let tasks = lock(&self.inner).tasks().to_vec();
        to_py(py, &tasks)
    }

    fn __len__(&self) -> usize {
        lock(&self.inner).tasks().len()
    }

    fn __repr__(&self) -> String {
        format!(
            "StaticCurriculum(tasks={})",
            lock(&self.inner).tasks().len()
        )
    }
}

/// EasyToHard(tasks, iterations, start_fraction=0.3, seed=0)
///
/// A fixed set ordered by difficulty (bugs, files and lines changed, hint level), sampled
/// uniformly from an easiest fraction that grows linearly from `start_fraction` to the whole
/// set over `iterations` proposals.
#[pyclass(frozen, module = "frognano", name = "EasyToHard")]
struct PyEasyToHard {
    inner: Arc<Mutex<EasyToHard>>,
}

task_source_methods! {
    PyEasyToHard;
    /// propose(n) -> list of n task dicts from the open (easiest) part of the set.
    propose;
    /// feedback(outcomes): accepted and ignored (the schedule is fixed).
    feedback;
    /// metrics() -> dict (open_fraction of the last proposal).
    metrics;
    /// state() -> dict (the number of proposals so far).
    state;

    #[new]
    #[pyo3(signature = (tasks, iterations, start_fraction=0.3, seed=0))]
    fn new(
        py: Python<'_>,
        tasks: Bound<'_, PyAny>,
        iterations: usize,
        start_fraction: f64,
        seed: i128,
    ) -> PyResult<Self> {
        let tasks = tasks_from_py(py, &tasks)?;
        if tasks.is_empty() {
            return Err(invalid(py, "the schedule needs at least one task".into()));
        }
        let schedule = EasyToHard::new(tasks, iterations, start_fraction, seed_of(py, seed)?)
            .map_err(|e| py_err(py, e))?;
        Ok(PyEasyToHard {
            inner: Arc::new(Mutex::new(schedule)),
        })
    }

    /// open_fraction(call) -> the fraction of the sorted set open at proposal number `call`.
    fn open_fraction(&self, call: u64) -> f64 {
        lock(&self.inner).open_fraction(call)
    }

    fn __repr__(&self) -> String {
        "EasyToHard()".to_string()
    }
}

/// Adds this module's classes to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFrontierSynthesizer>()?;
    m.add_class::<PyStaticCurriculum>()?;
    m.add_class::<PyEasyToHard>()?;
    Ok(())
}
