//! Training: the learnable `RepairPolicy`, `GrpoTrainer`, the task sources it draws from
//! (`FrontierSynthesizer`, `StaticCurriculum`, `EasyToHard`), group advantages and the whole
//! `train` job.
//!
//! Python objects are drop-in components: any object with `act(contexts)` and `learn(batch)`
//! is a policy a trainer trains, any object with `propose(n)` and `feedback(outcomes)` a task
//! source. Rust objects a trainer shares with Python (the repair policy, the task sources) live
//! behind `Arc<Mutex<..>>`, so the Python object stays usable while and after it is trained with.
//!
//! Threads and the GIL: a trainer runs on a helper thread with the GIL released
//! ([`run_interruptibly`]); the adapters re-acquire it only for the Python call they make (the
//! environment pool calls the policy from the thread that runs the rollout). No lock is held
//! across a call into Python except the trainer's own, and Python code the trainer runs that
//! reaches back into the same trainer gets a "busy" error instead of a deadlock. A Python
//! exception raised inside an adapter is kept and re-raised as itself when the call returns.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use frognano_core::{
    Action, EpisodeOutcome, LearnStats, Learner, LearningPolicy, Policy, PolicyContext,
    PolicyOutput, Task, TaskSynthesizer, Trainer, TrainingBatch,
};
use frognano_env::EnvConfig;
use frognano_policy::{RepairConfig, RepairPolicy, feature_names};
use frognano_sandbox::CancelFlag;
use frognano_synth::{SynthConfig, Synthesizer};
use frognano_train::{
    EasyToHard, Estimator, FrontierConfig, FrontierSynthesizer, GrpoTrainer, RunObserver,
    StaticCurriculum, TrainConfig, TrainError, TrainerConfig,
};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use serde_json::{Value, json};

use crate::env::{
    env_err, error_class, from_py_json, is_onnx_policy_failure, outputs_from_py, sandbox_of,
    tasks_from_py, to_py,
};
use crate::llm::{PyOnnxPolicy, policy_from_spec};
use crate::synth::synth_err;
use crate::{PySandbox, run_interruptibly};

/// The first Python exception an adapter met during a call, re-raised when the call returns.
type ErrorSlot = Arc<Mutex<Option<PyErr>>>;

/// Seed offset of the frontier's synthesizers, as `frognano train` uses.
const FRONTIER_SYNTH_SEED: u64 = 104_729;

/// The bundled repositories `train()` uses when the configuration names none.
const BUNDLED_REPOS: &[&str] = &["textkit", "tinyparse", "ordstructs"];

fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every holder leaves the value consistent between statements; a panic elsewhere does not
    // make it unusable.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Errors and conversions.

/// Maps training errors onto the exception hierarchy: an invalid configuration is a
/// `ConfigError`, environment and synthesis failures keep their usual classes, cancellation is
/// a `KeyboardInterrupt`, and the rest (checkpoints, no tasks, failing components) is a
/// `TrainingError`.
fn train_err(py: Python<'_>, err: TrainError) -> PyErr {
    match err {
        TrainError::Config(_) => error_class(py, "ConfigError", err.to_string()),
        TrainError::Env(inner) => env_err(py, inner),
        TrainError::Synth(inner) => synth_err(py, inner),
        TrainError::Cancelled => PyKeyboardInterrupt::new_err("cancelled"),
        TrainError::Core(inner) => core_err(py, inner),
        other => error_class(py, "TrainingError", other.to_string()),
    }
}

/// Core errors out of a trainer or task source: an invalid training configuration is a
/// `ConfigError`, anything else a `TrainingError`.
fn core_err(py: Python<'_>, err: frognano_core::Error) -> PyErr {
    match &err {
        frognano_core::Error::Invalid {
            kind: "training configuration",
            ..
        } => error_class(py, "ConfigError", err.to_string()),
        failed if is_onnx_policy_failure(failed) => {
            error_class(py, "InferenceError", err.to_string())
        }
        _ => error_class(py, "TrainingError", err.to_string()),
    }
}

fn invalid(py: Python<'_>, message: String) -> PyErr {
    error_class(py, "InvalidArgumentError", message)
}

fn seed_of(py: Python<'_>, seed: i128) -> PyResult<u64> {
    u64::try_from(seed).map_err(|_| invalid(py, format!("seed must be in 0..2**64, got {seed}")))
}

/// A parsed JSON value from a Python object, as `T`; a mismatch is an `InvalidArgumentError`.
fn parse<T: serde::de::DeserializeOwned>(py: Python<'_>, what: &str, value: Value) -> PyResult<T> {
    serde_json::from_value(value).map_err(|e| invalid(py, format!("invalid {what}: {e}")))
}

/// What a learner or task source returned as metrics: a dict, or None (nothing measured);
/// anything else is kept under `"value"`.
fn map_of(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        Value::Null => serde_json::Map::new(),
        other => {
            let mut map = serde_json::Map::new();
            map.insert("value".into(), other);
            map
        }
    }
}

/// A policy output as Python sees it: the action as a command string or a tool-call dict
/// (`{"name", "arguments"}`, what `RepoEnv.step` and a Python policy's `act` take), with the
/// log-probabilities and the recorded decision.
pub(crate) fn output_json(output: &PolicyOutput) -> Value {
    let action = match &output.action {
        Action::Text { text } => json!(text),
        Action::Tool(call) => json!({"name": call.name, "arguments": call.arguments}),
    };
    let mut map = serde_json::Map::new();
    map.insert("action".into(), action);
    map.insert("logprobs".into(), json!(output.logprobs));
    map.insert(
        "decision".into(),
        output.decision.clone().unwrap_or(Value::Null),
    );
    if let Some(ids) = &output.token_ids {
        map.insert("token_ids".into(), json!(ids));
    }
    if let Some(mask) = &output.loss_mask {
        map.insert("loss_mask".into(), json!(mask));
    }
    Value::Object(map)
}

/// A hand-made batch made complete: missing counters and flags take their neutral values, a
/// step's action may be a command string or a `{"name", "arguments"}` tool call.
fn normalise_batch(mut value: Value) -> Value {
    let Some(batch) = value.as_object_mut() else {
        return value;
    };
    batch.entry("iteration").or_insert(json!(0));
    batch.entry("estimator").or_insert(json!("grpo"));
    batch.entry("group_size").or_insert(json!(0));
    if let Some(trajectories) = batch.get_mut("trajectories").and_then(Value::as_array_mut) {
        for t in trajectories.iter_mut().filter_map(Value::as_object_mut) {
            t.entry("task_id").or_insert(json!(""));
            t.entry("group").or_insert(json!(0));
            let reward = t.get("reward").and_then(Value::as_f64).unwrap_or(0.0);
            t.entry("reward").or_insert(json!(reward));
            t.entry("advantage").or_insert(json!(0.0));
            t.entry("resolved").or_insert(json!(reward > 0.0));
            t.entry("truncated").or_insert(json!(false));
            t.entry("steps").or_insert(json!([]));
            if let Some(steps) = t.get_mut("steps").and_then(Value::as_array_mut) {
                for s in steps.iter_mut().filter_map(Value::as_object_mut) {
                    s.entry("observation").or_insert(json!(""));
                    let action = s.entry("action").or_insert(json!(""));
                    match action {
                        Value::String(text) => {
                            *action = json!({"type": "text", "text": text});
                        }
                        Value::Object(call) if !call.contains_key("type") => {
                            call.insert("type".into(), json!("tool"));
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    value
}

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

// ---------------------------------------------------------------------------------------------
// Adapters: Rust objects shared with Python, and Python objects as Rust components.

/// Records `err` (the first one of a call) for re-raising and returns what Rust sees.
fn python_failure(slot: &ErrorSlot, component: &'static str, err: PyErr) -> frognano_core::Error {
    let message = err.to_string();
    let mut kept = lock(slot);
    if kept.is_none() {
        *kept = Some(err);
    }
    frognano_core::Error::Component { component, message }
}

/// The repair policy a Python `RepairPolicy` object holds, trained in place.
struct SharedRepair(Arc<Mutex<RepairPolicy>>);

impl Policy for SharedRepair {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        lock(&self.0).act(contexts)
    }
}

impl Learner for SharedRepair {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<LearnStats> {
        lock(&self.0).learn(batch)
    }
    fn state(&self) -> frognano_core::Result<Value> {
        lock(&self.0).state()
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        lock(&self.0).load_state(state)
    }
}

/// A Python object as a policy (`act(contexts)`) and learner (`learn(batch)`, optional
/// `state()` and `load_state(state)`).
struct PyAgent {
    object: Py<PyAny>,
    slot: ErrorSlot,
}

impl PyAgent {
    fn call<T>(
        &self,
        component: &'static str,
        f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> frognano_core::Result<T> {
        Python::attach(|py| {
            f(py, self.object.bind(py)).map_err(|e| python_failure(&self.slot, component, e))
        })
    }
}

impl Policy for PyAgent {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        self.call("python policy", |py, object| {
            let returned = object.call_method1("act", (to_py(py, &contexts)?,))?;
            outputs_from_py(py, &returned)
        })
    }
}

impl Learner for PyAgent {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<LearnStats> {
        self.call("python learner", |py, object| {
            let returned = object.call_method1("learn", (to_py(py, batch)?,))?;
            Ok(map_of(from_py_json(py, &returned)?))
        })
    }
    fn state(&self) -> frognano_core::Result<Value> {
        self.call("python learner", |py, object| {
            if !object.hasattr("state")? {
                return Ok(Value::Null);
            }
            from_py_json(py, &object.call_method0("state")?)
        })
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        if state.is_null() {
            return Ok(());
        }
        self.call("python learner", |py, object| {
            if object.hasattr("load_state")? {
                object.call_method1("load_state", (to_py(py, state)?,))?;
            }
            Ok(())
        })
    }
}

/// Stops a rollout at the next step once `cancel` is set (Ctrl-C during a training call).
struct Interruptible<P: ?Sized> {
    cancel: CancelFlag,
    inner: Box<P>,
}

impl<P: Policy + ?Sized> Policy for Interruptible<P> {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(frognano_core::Error::Component {
                component: "trainer",
                message: "cancelled".into(),
            });
        }
        self.inner.act(contexts)
    }
}

impl<P: Learner + ?Sized> Learner for Interruptible<P> {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<LearnStats> {
        self.inner.learn(batch)
    }
    fn state(&self) -> frognano_core::Result<Value> {
        self.inner.state()
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        self.inner.load_state(state)
    }
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
struct PySource {
    object: Py<PyAny>,
    slot: ErrorSlot,
}

impl PySource {
    fn call<T>(
        &self,
        f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> frognano_core::Result<T> {
        Python::attach(|py| {
            f(py, self.object.bind(py))
                .map_err(|e| python_failure(&self.slot, "python synthesizer", e))
        })
    }
}

impl TaskSynthesizer for PySource {
    fn propose(&mut self, n: usize) -> frognano_core::Result<Vec<Task>> {
        self.call(|py, object| tasks_from_py(py, &object.call_method1("propose", (n,))?))
    }
    fn feedback(&mut self, outcomes: &[EpisodeOutcome]) -> frognano_core::Result<()> {
        self.call(|py, object| {
            object.call_method1("feedback", (to_py(py, &outcomes)?,))?;
            Ok(())
        })
    }
    fn metrics(&mut self) -> serde_json::Map<String, Value> {
        // A failure is kept in the slot: the trainer raises it when the iteration returns.
        self.call(|py, object| {
            if !object.hasattr("metrics")? {
                return Ok(Value::Null);
            }
            from_py_json(py, &object.call_method0("metrics")?)
        })
        .map(map_of)
        .unwrap_or_default()
    }
    fn state(&self) -> frognano_core::Result<Value> {
        self.call(|py, object| {
            if !object.hasattr("state")? {
                return Ok(Value::Null);
            }
            from_py_json(py, &object.call_method0("state")?)
        })
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        self.call(|py, object| {
            if object.hasattr("load_state")? {
                object.call_method1("load_state", (to_py(py, state)?,))?;
            }
            Ok(())
        })
    }
}

/// The policy a trainer trains: a `RepairPolicy` object (shared) or an object with `act` and
/// `learn`.
fn learning_policy(
    py: Python<'_>,
    policy: &Bound<'_, PyAny>,
    slot: &ErrorSlot,
) -> PyResult<Box<dyn LearningPolicy>> {
    if let Ok(repair) = policy.cast::<PyRepairPolicy>() {
        return Ok(Box::new(SharedRepair(repair.get().inner.clone())));
    }
    if policy.cast::<PyOnnxPolicy>().is_ok() {
        return Err(invalid(
            py,
            "an OnnxPolicy acts but does not learn: hand the trainer an object whose \
             act(contexts) calls the OnnxPolicy and whose learn(batch) updates your model \
             (GrpoTrainer.evaluate takes an OnnxPolicy as it is)"
                .into(),
        ));
    }
    if policy.hasattr("act")? && policy.hasattr("learn")? {
        return Ok(Box::new(PyAgent {
            object: policy.clone().unbind(),
            slot: slot.clone(),
        }));
    }
    Err(invalid(
        py,
        format!(
            "policy must be a frognano.RepairPolicy or an object with act(contexts) and \
             learn(batch), got {}",
            policy.get_type().name()?
        ),
    ))
}

/// A policy to evaluate: a `RepairPolicy` or `OnnxPolicy` object, a name ("oracle", "noop",
/// "random[:SEED]", "onnx:MODEL") or an object with `act`.
fn acting_policy(
    py: Python<'_>,
    policy: &Bound<'_, PyAny>,
    tasks: &[Task],
    slot: &ErrorSlot,
) -> PyResult<Box<dyn Policy>> {
    if let Ok(repair) = policy.cast::<PyRepairPolicy>() {
        return Ok(Box::new(SharedRepair(repair.get().inner.clone())));
    }
    if let Ok(onnx) = policy.cast::<PyOnnxPolicy>() {
        return Ok(onnx.get().shared());
    }
    if let Ok(spec) = policy.extract::<String>() {
        return policy_from_spec(py, &spec, tasks);
    }
    if policy.hasattr("act")? {
        return Ok(Box::new(PyAgent {
            object: policy.clone().unbind(),
            slot: slot.clone(),
        }));
    }
    Err(invalid(
        py,
        format!(
            "policy must be a frognano.RepairPolicy, a baseline name or an object with \
             act(contexts), got {}",
            policy.get_type().name()?
        ),
    ))
}

/// The task source of a trainer: one of the Rust sources (shared), a list of tasks (a static
/// curriculum, seed 0) or an object with `propose` and `feedback`.
fn task_source(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    slot: &ErrorSlot,
) -> PyResult<Box<dyn TaskSynthesizer>> {
    if let Ok(s) = source.cast::<PyFrontierSynthesizer>() {
        return Ok(Box::new(SharedSource(s.get().inner.clone())));
    }
    if let Ok(s) = source.cast::<PyStaticCurriculum>() {
        return Ok(Box::new(SharedSource(s.get().inner.clone())));
    }
    if let Ok(s) = source.cast::<PyEasyToHard>() {
        return Ok(Box::new(SharedSource(s.get().inner.clone())));
    }
    if source.is_instance_of::<PyList>() || source.is_instance_of::<PyTuple>() {
        let tasks = tasks_from_py(py, source)?;
        if tasks.is_empty() {
            return Err(invalid(py, "the list of tasks is empty".into()));
        }
        let curriculum = StaticCurriculum::new(tasks, 0).map_err(|e| train_err(py, e))?;
        return Ok(Box::new(curriculum));
    }
    if source.hasattr("propose")? && source.hasattr("feedback")? {
        return Ok(Box::new(PySource {
            object: source.clone().unbind(),
            slot: slot.clone(),
        }));
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

// ---------------------------------------------------------------------------------------------
// RepairPolicy.

/// RepairPolicy(seed=0, *, max_attempts=8, view_chunk=100, max_file_lines=1200,
///              max_candidates=40, temperature=1.0, greedy=False, learning_rate=0.1,
///              entropy_bonus=0.0, ratio_cap=2.0)
///
/// The learnable repair policy: it runs the tests, reads the code near the failures,
/// enumerates candidate repairs and chooses one with a softmax over features and learned
/// weights, records each choice (`decision`: the candidates' sparse features, the index chosen,
/// the temperature) and learns from batches by policy gradient with Adam. The same object can
/// be handed to a GrpoTrainer and inspected during and after training.
#[pyclass(frozen, module = "frognano", name = "RepairPolicy")]
struct PyRepairPolicy {
    inner: Arc<Mutex<RepairPolicy>>,
}

impl PyRepairPolicy {
    /// Runs `f` on the policy with the GIL released (the lock may be held by a training thread).
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut RepairPolicy) -> T + Send) -> T {
        let inner = &self.inner;
        py.detach(|| f(&mut lock(inner)))
    }
}

#[pymethods]
impl PyRepairPolicy {
    #[new]
    #[pyo3(signature = (
        seed=0, *, max_attempts=None, view_chunk=None, max_file_lines=None,
        max_candidates=None, temperature=None, greedy=None, learning_rate=None,
        entropy_bonus=None, ratio_cap=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        seed: i128,
        max_attempts: Option<usize>,
        view_chunk: Option<usize>,
        max_file_lines: Option<usize>,
        max_candidates: Option<usize>,
        temperature: Option<f64>,
        greedy: Option<bool>,
        learning_rate: Option<f64>,
        entropy_bonus: Option<f64>,
        ratio_cap: Option<f64>,
    ) -> PyResult<Self> {
        let d = RepairConfig::default();
        let config = RepairConfig {
            seed: seed_of(py, seed)?,
            max_attempts: max_attempts.unwrap_or(d.max_attempts),
            view_chunk: view_chunk.unwrap_or(d.view_chunk),
            max_file_lines: max_file_lines.unwrap_or(d.max_file_lines),
            max_candidates: max_candidates.unwrap_or(d.max_candidates),
            temperature: temperature.unwrap_or(d.temperature),
            greedy: greedy.unwrap_or(d.greedy),
            learning_rate: learning_rate.unwrap_or(d.learning_rate),
            entropy_bonus: entropy_bonus.unwrap_or(d.entropy_bonus),
            ratio_cap: ratio_cap.unwrap_or(d.ratio_cap),
        };
        let policy = RepairPolicy::new(config).map_err(|e| invalid(py, e.to_string()))?;
        Ok(PyRepairPolicy {
            inner: Arc::new(Mutex::new(policy)),
        })
    }

    /// act(contexts) -> list of dicts {"action", "logprobs", "decision"}
    ///
    /// The next action of each episode context (dicts with task_id, initial, history, as a
    /// Python policy receives them). `action` is a tool-call dict; `decision` is None for a
    /// scripted step and, for a repair choice, {"chosen", "operator", "temperature",
    /// "features"} with features[i] = [[index, value], ...] for candidate i.
    fn act<'py>(
        &self,
        py: Python<'py>,
        contexts: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let contexts: Vec<PolicyContext> =
            parse(py, "policy contexts", from_py_json(py, &contexts)?)?;
        let outputs = self
            .with(py, |p| p.act(&contexts))
            .map_err(|e| core_err(py, e))?;
        let outputs: Vec<Value> = outputs.iter().map(output_json).collect();
        to_py(py, &outputs)
    }

    /// learn(batch) -> stats dict (decisions, grad_norm, mean_entropy)
    ///
    /// One policy-gradient step from a TrainingBatch dict (what GrpoTrainer hands a learner:
    /// trajectories with an advantage and steps with the recorded decisions). Missing counters
    /// and flags of a hand-made batch take neutral values.
    fn learn<'py>(&self, py: Python<'py>, batch: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let batch: TrainingBatch = parse(
            py,
            "training batch",
            normalise_batch(from_py_json(py, &batch)?),
        )?;
        let stats = self
            .with(py, |p| p.learn(&batch))
            .map_err(|e| core_err(py, e))?;
        to_py(py, &stats)
    }

    /// state() -> dict: weights by feature, optimiser moments, updates and config.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.with(py, |p| p.state()).map_err(|e| core_err(py, e))?;
        to_py(py, &state)
    }

    /// load_state(state): restores a state() (weights are matched by feature name).
    fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        let state = from_py_json(py, &state)?;
        self.with(py, |p| p.load_state(&state))
            .map_err(|e| invalid(py, e.to_string()))
    }

    /// set_weights(weights): a dict feature name -> weight (the others keep theirs) or a list
    /// of every weight in the order of repair_feature_names().
    fn set_weights(&self, py: Python<'_>, weights: Bound<'_, PyAny>) -> PyResult<()> {
        let names = feature_names();
        let mut patch: Vec<(usize, f64)> = Vec::new();
        if let Ok(dict) = weights.cast::<PyDict>() {
            for (name, value) in dict.iter() {
                let name: String = name.extract()?;
                let index = names.iter().position(|n| *n == name).ok_or_else(|| {
                    invalid(
                        py,
                        format!("unknown feature {name:?}: see repair_feature_names()"),
                    )
                })?;
                patch.push((index, value.extract()?));
            }
        } else {
            let all: Vec<f64> = weights.extract()?;
            if all.len() != names.len() {
                return Err(invalid(
                    py,
                    format!("{} weights given for {} features", all.len(), names.len()),
                ));
            }
            patch.extend(all.into_iter().enumerate());
        }
        if let Some((i, _)) = patch.iter().find(|(_, w)| !w.is_finite()) {
            return Err(invalid(
                py,
                format!("the weight of {} is not a finite number", names[*i]),
            ));
        }
        // Through the state, so the optimiser's moments and the update count stay.
        self.with(py, |p| {
            let mut state = p.state()?;
            let mut current = p.weights().to_vec();
            for (i, w) in patch {
                current[i] = w;
            }
            state["weights"] = json!(current);
            p.load_state(&state)
        })
        .map_err(|e| invalid(py, e.to_string()))
    }

    /// The weights (dict feature name -> float, in feature order).
    #[getter]
    fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let weights = self.with(py, |p| p.weights().to_vec());
        let dict = PyDict::new(py);
        for (name, w) in feature_names().iter().zip(weights) {
            dict.set_item(name, w)?;
        }
        Ok(dict)
    }

    /// The settings (dict of RepairConfig's fields).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let config = self.with(py, |p| p.config().clone());
        to_py(py, &config)
    }

    /// Updates applied so far.
    #[getter]
    fn updates(&self, py: Python<'_>) -> u64 {
        self.with(py, |p| p.updates())
    }

    /// set_greedy(greedy): take the most probable candidate (evaluation) or sample (training).
    fn set_greedy(&self, py: Python<'_>, greedy: bool) {
        self.with(py, |p| p.set_greedy(greedy));
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let (config, updates) = self.with(py, |p| (p.config().clone(), p.updates()));
        format!(
            "RepairPolicy(seed={}, greedy={}, temperature={}, learning_rate={}, updates={})",
            config.seed,
            if config.greedy { "True" } else { "False" },
            config.temperature,
            config.learning_rate,
            updates
        )
    }
}

/// repair_feature_names() -> list of the RepairPolicy's feature names, in weight order (the
/// indices of a decision's sparse features).
#[pyfunction]
fn repair_feature_names() -> Vec<String> {
    feature_names().to_vec()
}

// ---------------------------------------------------------------------------------------------
// Task sources.

/// The task-source protocol over a shared Rust source, with the GIL released.
fn source_propose<'py>(
    py: Python<'py>,
    source: &Mutex<dyn TaskSynthesizer>,
    n: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let tasks = py
        .detach(|| lock(source).propose(n))
        .map_err(|e| core_err(py, e))?;
    to_py(py, &tasks)
}

fn source_feedback(
    py: Python<'_>,
    source: &Mutex<dyn TaskSynthesizer>,
    outcomes: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let outcomes = outcomes_from_py(py, outcomes)?;
    py.detach(|| lock(source).feedback(&outcomes))
        .map_err(|e| core_err(py, e))
}

fn source_metrics<'py>(
    py: Python<'py>,
    source: &Mutex<dyn TaskSynthesizer>,
) -> PyResult<Bound<'py, PyAny>> {
    let metrics = py.detach(|| lock(source).metrics());
    to_py(py, &metrics)
}

fn source_state<'py>(
    py: Python<'py>,
    source: &Mutex<dyn TaskSynthesizer>,
) -> PyResult<Bound<'py, PyAny>> {
    let state = py
        .detach(|| lock(source).state())
        .map_err(|e| core_err(py, e))?;
    to_py(py, &state)
}

fn source_load_state(
    py: Python<'_>,
    source: &Mutex<dyn TaskSynthesizer>,
    state: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let state = from_py_json(py, state)?;
    py.detach(|| lock(source).load_state(&state))
        .map_err(|e| invalid(py, e.to_string()))
}

/// FrontierSynthesizer(sandbox, repos, *, seed=0, operators=None, bug_counts=[1, 2],
///                     hint_levels=[2], target_success=0.5, decay=0.8, exploration=0.1,
///                     buffer=2, buffered_families=4, max_uses=4, max_idle=12,
///                     max_wait_s=600.0, prior_strength=2.0, exclude=None,
///                     synth_workers=1)
///
/// Online task synthesis at the frontier of learnability: tasks are grouped into families
/// (operator x bug count x hint level); each family keeps a decayed Beta posterior of the
/// policy's success rate, families are chosen by Thompson sampling on a score that peaks at
/// `target_success` (a family borrows `prior_strength` pseudo-counts from related families),
/// and a background thread synthesizes tasks for the most promising families
/// while rollouts run. One Synthesizer per repository (its intake runs at construction, with
/// the GIL released). exclude: task ids (or task dicts) never to propose, e.g. a held-out set.
#[pyclass(frozen, module = "frognano", name = "FrontierSynthesizer")]
struct PyFrontierSynthesizer {
    inner: Arc<Mutex<FrontierSynthesizer>>,
}

#[pymethods]
impl PyFrontierSynthesizer {
    #[new]
    #[pyo3(signature = (
        sandbox, repos, *, seed=0, operators=None, bug_counts=None, hint_levels=None,
        target_success=None, decay=None, exploration=None, buffer=None, buffered_families=None,
        max_uses=None, max_idle=None, max_wait_s=None, prior_strength=None, exclude=None,
        synth_workers=1
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
        };
        // Bad options fail before the (slow) intakes.
        config.validate().map_err(|e| train_err(py, e))?;
        if repos.is_empty() {
            return Err(error_class(
                py,
                "ConfigError",
                "the frontier needs at least one repository".into(),
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
        synth_config.validate().map_err(|e| synth_err(py, e))?;
        let exclude = task_ids(exclude.as_ref())?;
        // Task records name their repository by an absolute path, as load_tasks returns them.
        let repos: Vec<PathBuf> = repos
            .into_iter()
            .map(|r| std::path::absolute(&r).unwrap_or(r))
            .collect();
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
        .map_err(|e| synth_err(py, e))?;
        let frontier = FrontierSynthesizer::new(synthesizers, config, exclude)
            .map_err(|e| train_err(py, e))?;
        Ok(PyFrontierSynthesizer {
            inner: Arc::new(Mutex::new(frontier)),
        })
    }

    /// propose(n) -> list of task dicts (waits for synthesis when no family has a task ready).
    fn propose<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        source_propose(py, &*self.inner, n)
    }

    /// feedback(outcomes): episode outcomes (dicts with task_id and resolved, or episode
    /// records) update the families' posteriors and retire tasks without signal.
    fn feedback(&self, py: Python<'_>, outcomes: Bound<'_, PyAny>) -> PyResult<()> {
        source_feedback(py, &*self.inner, &outcomes)
    }

    /// metrics() -> dict measured since the last call (synthesis_wait_s, families, buffered,
    /// active_tasks, generated_total, retired, chosen_families, top_families, ...).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        source_metrics(py, &*self.inner)
    }

    /// state() -> dict (the families' posteriors), for checkpoints.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        source_state(py, &*self.inner)
    }

    /// load_state(state): restores a state().
    fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        source_load_state(py, &*self.inner, &state)
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

#[pymethods]
impl PyStaticCurriculum {
    #[new]
    #[pyo3(signature = (tasks, seed=0))]
    fn new(py: Python<'_>, tasks: Bound<'_, PyAny>, seed: i128) -> PyResult<Self> {
        let tasks = tasks_from_py(py, &tasks)?;
        if tasks.is_empty() {
            return Err(invalid(py, "the curriculum needs at least one task".into()));
        }
        let curriculum =
            StaticCurriculum::new(tasks, seed_of(py, seed)?).map_err(|e| train_err(py, e))?;
        Ok(PyStaticCurriculum {
            inner: Arc::new(Mutex::new(curriculum)),
        })
    }

    /// propose(n) -> list of n task dicts.
    fn propose<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        source_propose(py, &*self.inner, n)
    }

    /// feedback(outcomes): accepted and ignored (the curriculum does not adapt).
    fn feedback(&self, py: Python<'_>, outcomes: Bound<'_, PyAny>) -> PyResult<()> {
        source_feedback(py, &*self.inner, &outcomes)
    }

    /// metrics() -> dict (empty: nothing adapts).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        source_metrics(py, &*self.inner)
    }

    /// state() -> dict (the number of proposals so far).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        source_state(py, &*self.inner)
    }

    /// load_state(state): restores a state().
    fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        source_load_state(py, &*self.inner, &state)
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

#[pymethods]
impl PyEasyToHard {
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
            .map_err(|e| train_err(py, e))?;
        Ok(PyEasyToHard {
            inner: Arc::new(Mutex::new(schedule)),
        })
    }

    /// propose(n) -> list of n task dicts from the open (easiest) part of the set.
    fn propose<'py>(&self, py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
        source_propose(py, &*self.inner, n)
    }

    /// feedback(outcomes): accepted and ignored (the schedule is fixed).
    fn feedback(&self, py: Python<'_>, outcomes: Bound<'_, PyAny>) -> PyResult<()> {
        source_feedback(py, &*self.inner, &outcomes)
    }

    /// metrics() -> dict (open_fraction of the last proposal).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        source_metrics(py, &*self.inner)
    }

    /// state() -> dict (the number of proposals so far).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        source_state(py, &*self.inner)
    }

    /// load_state(state): restores a state().
    fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        source_load_state(py, &*self.inner, &state)
    }

    /// open_fraction(call) -> the fraction of the sorted set open at proposal number `call`.
    fn open_fraction(&self, call: u64) -> f64 {
        lock(&self.inner).open_fraction(call)
    }

    fn __repr__(&self) -> String {
        "EasyToHard()".to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// GrpoTrainer.

/// GrpoTrainer(sandbox, policy, synthesizer, *, tasks_per_iteration=5, group_size=4,
///             estimator="grpo", drop_zero_variance=True, workers=0, max_steps=40,
///             metrics_file=None)
///
/// The group-advantage trainer: each iterate() proposes tasks, runs group_size rollouts of
/// each through an environment pool, turns rewards into group advantages ("grpo", "dr_grpo"
/// or "rloo"), drops groups whose rewards are all equal, hands the batch to the policy's
/// learner and the outcomes back to the task source.
///
/// policy: a RepairPolicy (trained in place) or any object with act(contexts) and
/// learn(batch) (optional state() and load_state(state), for checkpoints). synthesizer: a
/// FrontierSynthesizer, StaticCurriculum, EasyToHard, a list of tasks (a static curriculum,
/// seed 0) or any object with propose(n) and feedback(outcomes) (optional metrics(),
/// state(), load_state(state)). Calls release the GIL; Ctrl-C stops an iteration at the next
/// policy step. Used by one thread at a time (a call while an iteration runs raises
/// RuntimeError).
#[pyclass(frozen, module = "frognano", name = "GrpoTrainer")]
struct PyGrpoTrainer {
    inner: Mutex<GrpoTrainer>,
    slot: ErrorSlot,
    cancel: CancelFlag,
    policy: Py<PyAny>,
    synthesizer: Py<PyAny>,
}

fn busy() -> PyErr {
    PyRuntimeError::new_err(
        "the GrpoTrainer is busy: an iteration is running (a trainer is used by one thread at \
         a time, and not from the policy or synthesizer it runs)",
    )
}

impl PyGrpoTrainer {
    /// Runs `work` on the trainer on a helper thread with the GIL released (Ctrl-C stops it);
    /// returns its result, and the first Python exception an adapter raised meanwhile.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce(&mut GrpoTrainer) -> T + Send,
    ) -> PyResult<(T, Option<PyErr>)> {
        let (inner, cancel, slot) = (&self.inner, &self.cancel, &self.slot);
        let out = run_interruptibly(py, &self.cancel, || {
            let mut trainer = match inner.try_lock() {
                Ok(trainer) => trainer,
                Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            };
            // Only the call holding the trainer resets what the adapters report to it.
            cancel.store(false, Ordering::Relaxed);
            lock(slot).take();
            let out = work(&mut trainer);
            Some((out, lock(slot).take()))
        })?;
        out.ok_or_else(busy)
    }

    /// Reads the trainer (never blocks: a running iteration makes it a "busy" error).
    fn peek<T>(&self, f: impl FnOnce(&GrpoTrainer) -> T) -> PyResult<T> {
        match self.inner.try_lock() {
            Ok(trainer) => Ok(f(&trainer)),
            Err(TryLockError::Poisoned(poisoned)) => Ok(f(&poisoned.into_inner())),
            Err(TryLockError::WouldBlock) => Err(busy()),
        }
    }

    /// A call's outcome for Python: a Python exception an adapter raised wins (it may have
    /// made the call fail, or been kept from one that could not fail, like metrics()); else
    /// the call's own error, mapped.
    fn settle<T, E>(
        (result, raised): (Result<T, E>, Option<PyErr>),
        map: impl FnOnce(E) -> PyErr,
    ) -> PyResult<T> {
        match (result, raised) {
            (_, Some(err)) => Err(err),
            (Ok(value), None) => Ok(value),
            (Err(err), None) => Err(map(err)),
        }
    }
}

#[pymethods]
impl PyGrpoTrainer {
    #[new]
    #[pyo3(signature = (
        sandbox, policy, synthesizer, *, tasks_per_iteration=None, group_size=None,
        estimator="grpo", drop_zero_variance=None, workers=None, max_steps=None,
        metrics_file=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        sandbox: Option<PyRef<'_, PySandbox>>,
        policy: Bound<'_, PyAny>,
        synthesizer: Bound<'_, PyAny>,
        tasks_per_iteration: Option<usize>,
        group_size: Option<usize>,
        estimator: &str,
        drop_zero_variance: Option<bool>,
        workers: Option<usize>,
        max_steps: Option<usize>,
        metrics_file: Option<PathBuf>,
    ) -> PyResult<Self> {
        let d = TrainerConfig::default();
        let config = TrainerConfig {
            tasks_per_iteration: tasks_per_iteration.unwrap_or(d.tasks_per_iteration),
            group_size: group_size.unwrap_or(d.group_size),
            estimator: Estimator::parse(estimator).map_err(|e| train_err(py, e))?,
            drop_zero_variance: drop_zero_variance.unwrap_or(d.drop_zero_variance),
            workers: workers.unwrap_or(d.workers),
            envs: d.envs,
            env: EnvConfig {
                max_steps: max_steps.unwrap_or(d.env.max_steps),
                ..d.env
            },
        };
        config.validate().map_err(|e| train_err(py, e))?;
        let slot: ErrorSlot = Arc::default();
        let cancel: CancelFlag = Arc::default();
        let learner = Box::new(Interruptible {
            cancel: cancel.clone(),
            inner: learning_policy(py, &policy, &slot)?,
        });
        let source = task_source(py, &synthesizer, &slot)?;
        let sandbox = sandbox_of(py, sandbox)?;
        let mut trainer = py
            .detach(|| GrpoTrainer::new(sandbox, learner, source, config))
            .map_err(|e| train_err(py, e))?;
        trainer.set_cancel_flag(cancel.clone());
        if let Some(path) = metrics_file {
            trainer.set_metrics_file(path);
        }
        Ok(PyGrpoTrainer {
            inner: Mutex::new(trainer),
            slot,
            cancel,
            policy: policy.unbind(),
            synthesizer: synthesizer.unbind(),
        })
    }

    /// iterate() -> metrics dict {iteration, resolved_rate, rollouts, extra}
    ///
    /// One iteration: propose, roll out the groups, score, learn, feed back. `extra` holds
    /// groups, zero_variance_groups, mean_learnability, difficulty, rollouts_per_s,
    /// env_steps_per_s, propose_s, rollout_s, learn_s, trainable_steps, learner (the learner's
    /// stats), synthesizer (its metrics) and more. A Python exception raised by the policy,
    /// learner or synthesizer propagates as itself.
    fn iterate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let metrics = Self::settle(self.run(py, |t| t.iterate())?, |e| core_err(py, e))?;
        to_py(py, &metrics)
    }

    /// evaluate(policy, tasks) -> (summary, records)
    ///
    /// Rolls `policy` out once on each task in the trainer's pool (no learning). policy: a
    /// RepairPolicy (as configured: call set_greedy(True) for greedy evaluation), an
    /// OnnxPolicy, a name ("oracle", "noop", "random[:SEED]", "onnx:MODEL") or an object with
    /// act(contexts).
    fn evaluate<'py>(
        &self,
        py: Python<'py>,
        policy: Bound<'py, PyAny>,
        tasks: Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let tasks = tasks_from_py(py, &tasks)?;
        if tasks.is_empty() {
            return Err(invalid(py, "no tasks".into()));
        }
        let mut policy = Interruptible {
            cancel: self.cancel.clone(),
            inner: acting_policy(py, &policy, &tasks, &self.slot)?,
        };
        let outcome = self.run(py, |t| t.evaluate(&mut policy, &tasks, |_| {}))?;
        let (summary, records) = Self::settle(outcome, |e| train_err(py, e))?;
        Ok((to_py(py, &summary)?, to_py(py, &records)?))
    }

    /// save_checkpoint(path): writes the policy's and the synthesizer's state and the metrics
    /// so far (JSON, replaced atomically).
    fn save_checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        Self::settle(self.run(py, |t| t.save_checkpoint(&path))?, |e| {
            train_err(py, e)
        })
    }

    /// resume(path): restores a checkpoint; the next iteration continues where it stopped.
    fn resume(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        Self::settle(self.run(py, |t| t.resume(&path))?, |e| train_err(py, e))
    }

    /// Metrics of every iteration so far (list of dicts, restored ones included).
    #[getter]
    fn history<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let history = self.peek(|t| t.history().to_vec())?;
        to_py(py, &history)
    }

    /// Iterations run (including those restored by resume).
    #[getter]
    fn iteration(&self) -> PyResult<usize> {
        self.peek(|t| t.iteration())
    }

    /// The batch the learner got in the last iteration (dict), or None.
    #[getter]
    fn last_batch<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let batch = self.peek(|t| t.last_batch().cloned())?;
        batch.map(|b| to_py(py, &b)).transpose()
    }

    /// The settings (dict: tasks_per_iteration, group_size, estimator, drop_zero_variance,
    /// workers, env).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let config = self.peek(|t| t.config().clone())?;
        to_py(py, &config)
    }

    /// The policy being trained (the object given).
    #[getter]
    fn policy(&self, py: Python<'_>) -> Py<PyAny> {
        self.policy.clone_ref(py)
    }

    /// The task source (the object given).
    #[getter]
    fn synthesizer(&self, py: Python<'_>) -> Py<PyAny> {
        self.synthesizer.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        match self.inner.try_lock() {
            Ok(t) => format!(
                "GrpoTrainer(iteration={}, tasks_per_iteration={}, group_size={}, estimator={:?})",
                t.iteration(),
                t.config().tasks_per_iteration,
                t.config().group_size,
                t.config().estimator.as_str()
            ),
            Err(_) => "GrpoTrainer(busy)".to_string(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Functions.

/// group_advantages(rewards, estimator="grpo") -> list of floats
///
/// The advantages of one group's rewards: "grpo" (r - mean) / (sample std + 1e-6), "dr_grpo"
/// r - mean, "rloo" r - mean of the others. All zero when the rewards are all equal.
#[pyfunction]
#[pyo3(signature = (rewards, estimator="grpo"))]
fn group_advantages(py: Python<'_>, rewards: Vec<f64>, estimator: &str) -> PyResult<Vec<f64>> {
    let estimator = Estimator::parse(estimator).map_err(|e| train_err(py, e))?;
    Ok(frognano_train::group_advantages(&rewards, estimator))
}

/// learnability(p, target=0.5) -> float
///
/// The frontier's score of a success rate p: p^a (1-p)^b with its mode (1.0) at `target`
/// (a = 2 target, b = 2 (1 - target)); 4 p (1 - p) for the default target.
#[pyfunction]
#[pyo3(signature = (p, target=0.5))]
fn learnability(py: Python<'_>, p: f64, target: f64) -> PyResult<f64> {
    if !(target > 0.0 && target < 1.0) {
        return Err(invalid(
            py,
            format!("target must lie strictly between 0 and 1, got {target}"),
        ));
    }
    Ok(frognano_train::learnability(p, target))
}

/// Reports a training job's stages and iterations to a Python callable.
struct PyObserver {
    callback: Option<Py<PyAny>>,
}

impl PyObserver {
    fn emit(&self, event: &str, data: Value) {
        if let Some(callback) = &self.callback {
            Python::attach(|py| {
                // A failing callback must not abort training; report it like Python would.
                let result = to_py(py, &data).and_then(|d| callback.call1(py, (event, d)));
                if let Err(err) = result {
                    err.print(py);
                }
            });
        }
    }
}

impl RunObserver for PyObserver {
    fn stage(&mut self, name: &str) {
        self.emit("stage", json!({"name": name}));
    }
    fn iteration(&mut self, metrics: &frognano_core::IterationMetrics) {
        self.emit("iteration", json!(metrics));
    }
}

/// train(config=None, out=None, *, sandbox=None, progress=None) -> report dict
///
/// The whole training job behind `frognano train`: synthesize a held-out set (and, for the
/// static and easy-to-hard curricula, a training set), train the repair policy with the
/// configured curriculum, and evaluate it on the held-out set before and after. config: a dict
/// of TrainConfig fields or the path of a TOML file (None: the defaults). Without repositories,
/// the bundled examples/repos/{textkit,tinyparse,ordstructs} under the current directory are
/// used. out: output directory (metrics.jsonl, checkpoint.json, held_out.jsonl, eval.jsonl;
/// an existing checkpoint is resumed). progress: a callable receiving (event, data) for
/// "stage" ({"name"}) and "iteration" (the metrics). Returns the TrainReport as a dict.
#[pyfunction]
#[pyo3(signature = (config=None, out=None, *, sandbox=None, progress=None))]
fn train<'py>(
    py: Python<'py>,
    config: Option<Bound<'py, PyAny>>,
    out: Option<PathBuf>,
    sandbox: Option<PyRef<'py, PySandbox>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut config = match config {
        None => TrainConfig::default(),
        Some(c) if c.is_instance_of::<PyDict>() => {
            let mut config: TrainConfig =
                serde_json::from_value(from_py_json(py, &c)?).map_err(|e| {
                    error_class(
                        py,
                        "ConfigError",
                        format!("invalid training configuration: {e}"),
                    )
                })?;
            for repo in &mut config.repos {
                *repo = std::path::absolute(&*repo).unwrap_or_else(|_| repo.clone());
            }
            config
        }
        Some(c) => {
            let path: PathBuf = c.extract()?;
            TrainConfig::from_file(&path).map_err(|e| train_err(py, e))?
        }
    };
    if out.is_some() {
        config.out = out;
    }
    if config.repos.is_empty() {
        let base = std::env::current_dir()
            .map_err(|e| error_class(py, "ConfigError", e.to_string()))?
            .join("examples")
            .join("repos");
        let bundled: Vec<PathBuf> = BUNDLED_REPOS.iter().map(|r| base.join(r)).collect();
        if let Some(missing) = bundled.iter().find(|r| !r.is_dir()) {
            return Err(error_class(
                py,
                "ConfigError",
                format!(
                    "no repositories given and the bundled {} is not there: name repos in the \
                     config, or run from the root of a FrogNano checkout",
                    missing.display()
                ),
            ));
        }
        config.repos = bundled;
    }
    config.validate().map_err(|e| train_err(py, e))?;
    let sandbox = sandbox_of(py, sandbox)?;
    let cancel: CancelFlag = Arc::default();
    let flag = cancel.clone();
    let report = run_interruptibly(py, &cancel, move || {
        let mut observer = PyObserver { callback: progress };
        let pools = frognano_train::prepare_pools(&sandbox, &config, &mut observer)?;
        frognano_train::run(&sandbox, &config, &pools, &mut observer, Some(flag))
    })?
    .map_err(|e| train_err(py, e))?;
    to_py(py, &report)
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRepairPolicy>()?;
    m.add_class::<PyGrpoTrainer>()?;
    m.add_class::<PyFrontierSynthesizer>()?;
    m.add_class::<PyStaticCurriculum>()?;
    m.add_class::<PyEasyToHard>()?;
    m.add_function(wrap_pyfunction!(repair_feature_names, m)?)?;
    m.add_function(wrap_pyfunction!(group_advantages, m)?)?;
    m.add_function(wrap_pyfunction!(learnability, m)?)?;
    m.add_function(wrap_pyfunction!(train, m)?)?;
    Ok(())
}
