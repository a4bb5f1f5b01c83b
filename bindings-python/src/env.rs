//! The environment: task sets, `RepoEnv` (Gymnasium-style), `EnvPool` and `evaluate`.
//!
//! `evaluate` takes a baseline name, an `OnnxPolicy` or a Python policy object.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use frognano_env::{EnvConfig, EnvPool, RepoEnv, taskset};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{
    action_from_py, from_py_json, invalid, parse, run_interruptibly, task_from_py, tasks_from_py,
    to_py,
};
use crate::errors::{Exception, py_err};
use crate::policy::evaluation_policy;
use crate::sandbox::{PySandbox, sandbox_of};

fn config(
    py: Python<'_>,
    max_steps: usize,
    max_observation_chars: usize,
    observation_chars: usize,
) -> PyResult<EnvConfig> {
    let config = EnvConfig {
        max_steps,
        max_observation_chars,
        observation_chars,
        ..EnvConfig::default()
    };
    config.validate().map_err(|e| py_err(py, e))?;
    Ok(config)
}

fn step_tuple<'py>(
    py: Python<'py>,
    result: frognano_core::StepResult,
) -> PyResult<(String, f64, bool, bool, Bound<'py, PyAny>)> {
    let info = to_py(py, &result.info)?;
    Ok((
        result.observation.text,
        result.reward,
        result.terminated,
        result.truncated,
        info,
    ))
}

/// RepoEnv(sandbox=None, *, max_steps=30, max_observation_chars=120000, observation_chars=6000)
///
/// The agent environment, Gymnasium-style: `reset(task)` returns `(observation, info)`,
/// `step(action)` returns `(observation, reward, terminated, truncated, info)`. An action is a
/// command in the tool grammar (`"view pkg/mod.py 1-40"`, `"test"`, `"submit"`, ...) or a JSON
/// tool call as a dict (`{"name": "view", "arguments": {"path": "a.py"}}`). Malformed actions
/// return an error observation; they never raise.
#[pyclass(module = "frognano", name = "RepoEnv")]
struct PyRepoEnv {
    inner: Option<RepoEnv>,
}

impl PyRepoEnv {
    fn env(&mut self, py: Python<'_>) -> PyResult<&mut RepoEnv> {
        self.inner
            .as_mut()
            .ok_or_else(|| Exception::Episode.err(py, "the environment is closed"))
    }
}

#[pymethods]
impl PyRepoEnv {
    #[new]
    #[pyo3(signature = (sandbox=None, *, max_steps=30, max_observation_chars=120_000, observation_chars=6_000))]
    fn new(
        py: Python<'_>,
        sandbox: Option<PyRef<'_, PySandbox>>,
        max_steps: usize,
        max_observation_chars: usize,
        observation_chars: usize,
    ) -> PyResult<Self> {
        let config = config(py, max_steps, max_observation_chars, observation_chars)?;
        let env = RepoEnv::new(sandbox_of(py, sandbox)?, config).map_err(|e| py_err(py, e))?;
        Ok(PyRepoEnv { inner: Some(env) })
    }

    /// reset(task=None, *, seed=None, options=None) -> (observation, info)
    ///
    /// task: a dict (FrogNano or SWE-bench field names) or a JSON string; it may also be given
    /// as options["task"]. seed is accepted for Gymnasium compatibility (episodes are
    /// deterministic).
    #[pyo3(signature = (task=None, *, seed=None, options=None))]
    fn reset<'py>(
        &mut self,
        py: Python<'py>,
        task: Option<Bound<'py, PyAny>>,
        seed: Option<i64>,
        options: Option<Bound<'py, PyDict>>,
    ) -> PyResult<(String, Bound<'py, PyAny>)> {
        let _ = seed;
        let task = match (
            task,
            options.and_then(|o| o.get_item("task").ok().flatten()),
        ) {
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => {
                return Err(Exception::InvalidArgument.err(
                    py,
                    "reset needs a task: env.reset(task) or env.reset(options={'task': task})",
                ));
            }
        };
        let task = task_from_py(py, &task)?;
        let env = self.env(py)?;
        let cancel = Arc::new(AtomicBool::new(false));
        let observation =
            run_interruptibly(py, &cancel, || env.reset_task(&task))?.map_err(|e| py_err(py, e))?;
        let info = PyDict::new(py);
        info.set_item("task_id", &task.id)?;
        if let Some(path) = self.env(py)?.workspace_path() {
            info.set_item("workspace", path.to_string_lossy().into_owned())?;
        }
        Ok((observation.text, info.into_any()))
    }

    /// step(action) -> (observation, reward, terminated, truncated, info)
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: Bound<'py, PyAny>,
    ) -> PyResult<(String, f64, bool, bool, Bound<'py, PyAny>)> {
        let action = action_from_py(py, &action)?;
        let env = self.env(py)?;
        let cancel = Arc::new(AtomicBool::new(false));
        let result = run_interruptibly(py, &cancel, || env.step_action(&action))?
            .map_err(|e| py_err(py, e))?;
        step_tuple(py, result)
    }

    /// The record of the current or last episode (actions, observations, tests, grading,
    /// the agent's diff), as a dict; None before the first reset.
    fn record<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        match self.env(py)?.record() {
            Some(record) => Ok(Some(to_py(py, &record)?)),
            None => Ok(None),
        }
    }

    /// The episode's summary once it has ended (resolved, steps, tool_errors, test_runs,
    /// met_failure, recovered, submitted, truncated), else None.
    #[getter]
    fn outcome<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        use frognano_core::Environment;
        match self.env(py)?.outcome() {
            Some(outcome) => Ok(Some(to_py(py, &outcome)?)),
            None => Ok(None),
        }
    }

    /// The workspace directory of the current episode (for inspection), or None.
    #[getter]
    fn workspace(&mut self, py: Python<'_>) -> PyResult<Option<String>> {
        Ok(self
            .env(py)?
            .workspace_path()
            .map(|p| p.to_string_lossy().into_owned()))
    }

    /// Frees the workspace. Safe to call twice.
    fn close(&mut self) {
        self.inner = None;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &mut self,
        _exc_type: Option<Bound<'_, PyAny>>,
        _exc: Option<Bound<'_, PyAny>>,
        _tb: Option<Bound<'_, PyAny>>,
    ) {
        self.close();
    }
}

/// EnvPool(num_envs, sandbox=None, *, workers=0, max_steps=30, ...)
///
/// num_envs environments stepped in parallel (on `workers` threads; 0 = one per core) with one
/// call: `reset(tasks)` and `step(actions)` take and return lists, in environment order.
#[pyclass(module = "frognano", name = "EnvPool")]
struct PyEnvPool {
    inner: EnvPool,
}

#[pymethods]
impl PyEnvPool {
    #[new]
    #[pyo3(signature = (num_envs, sandbox=None, *, workers=0, max_steps=30, max_observation_chars=120_000, observation_chars=6_000))]
    fn new(
        py: Python<'_>,
        num_envs: usize,
        sandbox: Option<PyRef<'_, PySandbox>>,
        workers: usize,
        max_steps: usize,
        max_observation_chars: usize,
        observation_chars: usize,
    ) -> PyResult<Self> {
        let config = config(py, max_steps, max_observation_chars, observation_chars)?;
        let pool = EnvPool::new(sandbox_of(py, sandbox)?, num_envs, workers, config)
            .map_err(|e| py_err(py, e))?;
        Ok(PyEnvPool { inner: pool })
    }

    /// Number of environments.
    #[getter]
    fn num_envs(&self) -> usize {
        self.inner.len()
    }

    /// reset(tasks) -> list of (observation, info); environment i gets tasks[i]. A None task
    /// leaves its environment alone (its entry is None), so single environments can be reset.
    #[allow(clippy::type_complexity)]
    fn reset<'py>(
        &mut self,
        py: Python<'py>,
        tasks: Bound<'py, PyAny>,
    ) -> PyResult<Vec<Option<(String, Bound<'py, PyAny>)>>> {
        let mut indexed = Vec::new();
        let mut count = 0;
        for (i, item) in tasks.try_iter()?.enumerate() {
            let item = item?;
            count += 1;
            if !item.is_none() {
                indexed.push((i, task_from_py(py, &item)?));
            }
        }
        if count > self.inner.len() {
            return Err(Exception::InvalidArgument.err(
                py,
                format!("{count} tasks for {} environments", self.inner.len()),
            ));
        }
        let results = on_some(py, &mut self.inner, &indexed, EnvPool::reset_some)?;
        let mut out: Vec<Option<_>> = (0..count).map(|_| None).collect();
        for ((i, task), result) in indexed.iter().zip(results) {
            let observation = result.map_err(|e| py_err(py, e))?;
            let info = PyDict::new(py);
            info.set_item("task_id", &task.id)?;
            out[*i] = Some((observation.text, info.into_any()));
        }
        Ok(out)
    }

    /// step(actions) -> list of (observation, reward, terminated, truncated, info); a None
    /// action leaves its environment alone (its entry is None).
    #[allow(clippy::type_complexity)]
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        actions: Vec<Option<Bound<'py, PyAny>>>,
    ) -> PyResult<Vec<Option<(String, f64, bool, bool, Bound<'py, PyAny>)>>> {
        let mut indexed = Vec::new();
        for (i, action) in actions.iter().enumerate() {
            if let Some(action) = action {
                indexed.push((i, action_from_py(py, action)?));
            }
        }
        let results = on_some(py, &mut self.inner, &indexed, EnvPool::step_some)?;
        let mut out: Vec<Option<_>> = (0..actions.len()).map(|_| None).collect();
        for ((i, _), result) in indexed.iter().zip(results) {
            out[*i] = Some(step_tuple(py, result.map_err(|e| py_err(py, e))?)?);
        }
        Ok(out)
    }

    /// Episode records of every environment (None where none has run).
    fn records<'py>(&self, py: Python<'py>) -> PyResult<Vec<Option<Bound<'py, PyAny>>>> {
        self.inner
            .envs()
            .iter()
            .map(|env| env.record().map(|r| to_py(py, &r)).transpose())
            .collect()
    }
}

/// Runs `call` (a pool's `reset_some` or `step_some`) on the environments `indexed` names, each
/// with its input, where Ctrl-C can stop it; one result per entry.
fn on_some<T: Sync, R: Send>(
    py: Python<'_>,
    pool: &mut EnvPool,
    indexed: &[(usize, T)],
    call: impl FnOnce(&mut EnvPool, &[(usize, &T)]) -> Vec<R> + Send,
) -> PyResult<Vec<R>> {
    let cancel = Arc::new(AtomicBool::new(false));
    run_interruptibly(py, &cancel, || {
        let refs: Vec<(usize, &T)> = indexed.iter().map(|(i, input)| (*i, input)).collect();
        call(pool, &refs)
    })
}

/// evaluate(tasks, policy="oracle", *, sandbox=None, workers=None, max_steps=30, out=None)
///     -> (summary, records)
///
/// Runs `policy` on every task through an EnvPool: "oracle", "noop", "random[:SEED]",
/// "onnx:MODEL" (a local model folder or registry name), an OnnxPolicy, or any object with
/// `act(contexts) -> actions`. Returns the evaluation report (the dict `frognano eval --json`
/// prints and C's `frognano_evaluate` returns: resolved_rate, recovery_rate, mean_steps,
/// steps_per_s, wall_s, failed_tasks as {task_id, error} dicts, ...) and the episode records;
/// `out` also writes them as JSONL.
#[pyfunction]
#[pyo3(signature = (tasks, policy=None, *, sandbox=None, workers=None, max_steps=30, out=None))]
fn evaluate<'py>(
    py: Python<'py>,
    tasks: Bound<'py, PyAny>,
    policy: Option<Bound<'py, PyAny>>,
    sandbox: Option<PyRef<'py, PySandbox>>,
    workers: Option<usize>,
    max_steps: usize,
    out: Option<std::path::PathBuf>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let tasks = tasks_from_py(py, &tasks)?;
    let mut policy = evaluation_policy(py, policy.as_ref(), &tasks)?;
    let config = config(
        py,
        max_steps,
        EnvConfig::default().max_observation_chars,
        EnvConfig::default().observation_chars,
    )?;
    let sandbox = sandbox_of(py, sandbox)?;
    let mut pool = EnvPool::for_tasks(sandbox, tasks.len(), workers.unwrap_or(0), config)
        .map_err(|e| py_err(py, e))?;
    let cancel = Arc::new(AtomicBool::new(false));
    let (report, records) = run_interruptibly(py, &cancel, || {
        frognano_env::evaluate(&mut pool, policy.as_mut(), &tasks, |_| {}, |_| {})
    })?
    .map_err(|e| py_err(py, e))?;
    if let Some(path) = &out {
        let mut text = String::new();
        for record in &records {
            text.push_str(
                &serde_json::to_string(record)
                    .map_err(|e| Exception::Frognano.err(py, e.to_string()))?,
            );
            text.push('\n');
        }
        taskset::write_atomically(path, text.as_bytes()).map_err(|e| py_err(py, e))?;
    }
    Ok((to_py(py, &report)?, to_py(py, &records)?))
}

/// eval_report(records, failed_tasks=(), *, steps=None, wall_s=0.0, workers=0) -> dict
///
/// The report `evaluate` returns, made from episode records gathered elsewhere (a cluster's
/// workers, several runs): the same summary fields, with `steps` (default: the records' steps)
/// over `wall_s` as steps_per_s. failed_tasks: dicts with task_id and error.
#[pyfunction]
#[pyo3(signature = (records, failed_tasks=None, *, steps=None, wall_s=0.0, workers=0))]
fn eval_report<'py>(
    py: Python<'py>,
    records: Bound<'py, PyAny>,
    failed_tasks: Option<Bound<'py, PyAny>>,
    steps: Option<usize>,
    wall_s: f64,
    workers: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let records: Vec<frognano_env::EpisodeRecord> =
        parse(py, "episode records", from_py_json(py, &records)?)?;
    let failed: Vec<frognano_env::FailedTask> = match failed_tasks {
        Some(failed) => parse(py, "failed tasks", from_py_json(py, &failed)?)?,
        None => Vec::new(),
    };
    if !wall_s.is_finite() || wall_s < 0.0 {
        return Err(invalid(
            py,
            format!("wall_s must be a finite number >= 0, got {wall_s}"),
        ));
    }
    let steps = steps.unwrap_or_else(|| records.iter().map(|r| r.steps.len()).sum());
    let report = frognano_env::EvalReport::from_records(&records, failed, steps, wall_s, workers);
    to_py(py, &report)
}

/// load_tasks(path) -> list of task dicts (repository paths resolved against the file).
#[pyfunction]
fn load_tasks<'py>(py: Python<'py>, path: std::path::PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let tasks = taskset::load_tasks(&path).map_err(|e| py_err(py, e))?;
    to_py(py, &tasks)
}

/// save_tasks(path, tasks): writes tasks (dicts) as JSONL, validating each.
#[pyfunction]
fn save_tasks(py: Python<'_>, path: std::path::PathBuf, tasks: Bound<'_, PyAny>) -> PyResult<()> {
    let tasks = tasks_from_py(py, &tasks)?;
    taskset::save_tasks(&path, &tasks).map_err(|e| py_err(py, e))
}

/// to_swe_bench(task) -> dict in SWE-bench's field names (`patch` is the fix).
#[pyfunction]
fn to_swe_bench<'py>(py: Python<'py>, task: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let task = task_from_py(py, &task)?;
    let value = taskset::to_swe_bench(&task).map_err(|e| py_err(py, e))?;
    to_py(py, &value)
}

/// The tool grammar shown to agents.
#[pyfunction]
fn tool_instructions() -> &'static str {
    frognano_env::protocol::INSTRUCTIONS
}

/// JSON schemas of the tools in the OpenAI `tools` shape, for served models.
#[pyfunction]
fn tool_schemas(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    to_py(py, &frognano_env::protocol::tool_schemas())
}

/// parse_action(action) -> dict {"name", "arguments"}; raises ActionError with the message an
/// agent would see when the action is malformed.
#[pyfunction]
fn parse_action<'py>(py: Python<'py>, action: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let action = action_from_py(py, &action)?;
    match frognano_env::parse_action(&action) {
        Ok(request) => to_py(py, &request.to_tool_call()),
        Err(e) => Err(Exception::Action.err(py, e.message)),
    }
}

/// Adds this module's classes and functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRepoEnv>()?;
    m.add_class::<PyEnvPool>()?;
    add_functions!(m: evaluate, eval_report, load_tasks, save_tasks, to_swe_bench,
        tool_instructions, tool_schemas, parse_action);
    Ok(())
}
