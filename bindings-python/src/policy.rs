//! Policies: the learnable `RepairPolicy`, and the policies calls take, as Rust policies.
//!
//! A call takes a `RepairPolicy`, a `LanguageModelPolicy`, an `OnnxPolicy`, a baseline name
//! or a Python object with `act(contexts)` (and `learn(batch)` to be trained).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use frognano_core::{
    ErrorKind, LearnStats, Learner, LearningPolicy, Policy, PolicyContext, PolicyOutput, Task,
    TrainingBatch,
};
use frognano_policy::{PolicySpec, RepairConfig, RepairPolicy, feature_names};
use frognano_sandbox::CancelFlag;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Value, json};

use crate::convert::{
    ErrorSlot, PyComponent, Shared, from_py_json, invalid, lock, map_of, output_json,
    outputs_from_py, parse, seed_of, to_py,
};
use crate::errors::py_err;
use crate::learning::PyLanguageModelPolicy;
use crate::llm::{PyOnnxPolicy, contexts_from_py, ensure_runtime};
use crate::served::PyHttpPolicy;

// ---------------------------------------------------------------------------------------------
// Adapters.

/// A Python object as a policy (`act(contexts)`: contexts are dicts (task_id, initial,
/// history), actions are what [`outputs_from_py`] reads) and learner (`learn(batch)`, optional
/// `state()` and `load_state(state)`).
struct PyAgent(PyComponent);

impl PyAgent {
    fn boxed(object: &Bound<'_, PyAny>, slot: &ErrorSlot) -> Box<Self> {
        Box::new(PyAgent(PyComponent {
            object: object.clone().unbind(),
            slot: slot.clone(),
        }))
    }
}

impl Policy for PyAgent {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        self.0.call("python policy", |py, object| {
            let returned = object.call_method1("act", (to_py(py, &contexts)?,))?;
            outputs_from_py(py, &returned)
        })
    }
}

impl Learner for PyAgent {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<LearnStats> {
        self.0.call("python learner", |py, object| {
            let returned = object.call_method1("learn", (to_py(py, batch)?,))?;
            Ok(map_of(from_py_json(py, &returned)?))
        })
    }
    fn state(&self) -> frognano_core::Result<Value> {
        self.0.optional_json("python learner", "state")
    }
    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        if state.is_null() {
            return Ok(());
        }
        self.0.load_state("python learner", state)
    }
}

/// Stops a rollout at the next step once `cancel` is set (Ctrl-C during a training call).
pub(crate) struct Interruptible<P: ?Sized> {
    pub(crate) cancel: CancelFlag,
    pub(crate) inner: Box<P>,
}

impl<P: Policy + ?Sized> Policy for Interruptible<P> {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(frognano_core::Error::component(
                "trainer",
                ErrorKind::Cancelled,
                "cancelled",
            ));
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

/// A policy named by a string: "onnx:MODEL" (an OnnxPolicy with the default settings on a
/// model folder or registry name), "openai:URL@MODEL" (an HttpPolicy with the default
/// settings) or a baseline ("oracle", "noop", "random[:SEED]", ...).
fn policy_from_spec(py: Python<'_>, spec: &str, tasks: &[Task]) -> PyResult<Box<dyn Policy>> {
    let spec: PolicySpec = spec.parse().map_err(|e| py_err(py, e))?;
    if matches!(spec, PolicySpec::Onnx { .. }) {
        // The runtime library may come from this interpreter's onnxruntime package.
        ensure_runtime(py, None)?;
    }
    py.detach(|| spec.build(tasks, &|_| {}))
        .map_err(|e| py_err(py, e))
}

/// The policy `evaluate` runs: "oracle" when none is given, an `OnnxPolicy` object, a name
/// (see [`policy_from_spec`]) or any other object, whose `act` is called.
pub(crate) fn evaluation_policy(
    py: Python<'_>,
    policy: Option<&Bound<'_, PyAny>>,
    tasks: &[Task],
) -> PyResult<Box<dyn Policy>> {
    Ok(match policy {
        None => policy_from_spec(py, "oracle", tasks)?,
        Some(p) => match (p.cast::<PyOnnxPolicy>(), p.extract::<String>()) {
            (Ok(onnx), _) => onnx.get().shared(),
            (_, Ok(spec)) => policy_from_spec(py, &spec, tasks)?,
            _ => match (p.cast::<PyHttpPolicy>(), p.cast::<PyLanguageModelPolicy>()) {
                (Ok(http), _) => http.get().shared(),
                (_, Ok(language)) => language.get().acting(),
                _ => PyAgent::boxed(p, &ErrorSlot::default()),
            },
        },
    })
}

/// The policy a trainer trains: a `RepairPolicy` or `LanguageModelPolicy` object (shared) or
/// an object with `act` and `learn`.
pub(crate) fn learning_policy(
    py: Python<'_>,
    policy: &Bound<'_, PyAny>,
    slot: &ErrorSlot,
) -> PyResult<Box<dyn LearningPolicy>> {
    if let Ok(repair) = policy.cast::<PyRepairPolicy>() {
        return Ok(Box::new(Shared(repair.get().inner.clone())));
    }
    if let Ok(language) = policy.cast::<PyLanguageModelPolicy>() {
        return Ok(language.get().shared());
    }
    if policy.cast::<PyOnnxPolicy>().is_ok() || policy.cast::<PyHttpPolicy>().is_ok() {
        return Err(invalid(
            py,
            "an OnnxPolicy or HttpPolicy acts but does not learn: hand the trainer an object \
             whose act(contexts) calls it and whose learn(batch) updates your model \
             (GrpoTrainer.evaluate takes either as it is)"
                .into(),
        ));
    }
    if policy.hasattr("act")? && policy.hasattr("learn")? {
        return Ok(PyAgent::boxed(policy, slot));
    }
    Err(invalid(
        py,
        format!(
            "policy must be a frognano.RepairPolicy, a frognano.LanguageModelPolicy or an \
             object with act(contexts) and learn(batch), got {}",
            policy.get_type().name()?
        ),
    ))
}

/// A policy to evaluate: a `RepairPolicy` or `OnnxPolicy` object, a name ("oracle", "noop",
/// "random[:SEED]", "onnx:MODEL") or an object with `act`.
pub(crate) fn acting_policy(
    py: Python<'_>,
    policy: &Bound<'_, PyAny>,
    tasks: &[Task],
    slot: &ErrorSlot,
) -> PyResult<Box<dyn Policy>> {
    if let Ok(repair) = policy.cast::<PyRepairPolicy>() {
        return Ok(Box::new(Shared(repair.get().inner.clone())));
    }
    if let Ok(onnx) = policy.cast::<PyOnnxPolicy>() {
        return Ok(onnx.get().shared());
    }
    if let Ok(language) = policy.cast::<PyLanguageModelPolicy>() {
        return Ok(language.get().acting());
    }
    if let Ok(http) = policy.cast::<PyHttpPolicy>() {
        return Ok(http.get().shared());
    }
    if let Ok(spec) = policy.extract::<String>() {
        return policy_from_spec(py, &spec, tasks);
    }
    if policy.hasattr("act")? {
        return Ok(PyAgent::boxed(policy, slot));
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

/// A hand-made batch made complete: missing counters and flags take their neutral values, a
/// step's action may be a command string or a `{"name", "arguments"}` tool call.
pub(crate) fn normalise_batch(mut value: Value) -> Value {
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

// ---------------------------------------------------------------------------------------------
// The Python methods of a Rust learning policy shared with the trainer (RepairPolicy,
// LanguageModelPolicy): one implementation each. Calls release the GIL; the lock may be held by
// a training thread.

/// `act(contexts)`: the next action of each episode context, as output dicts.
pub(crate) fn shared_act<'py, P: Policy + Send + ?Sized>(
    py: Python<'py>,
    inner: &Mutex<P>,
    contexts: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let contexts = contexts_from_py(py, contexts)?;
    let outputs = py
        .detach(|| lock(inner).act(&contexts))
        .map_err(|e| py_err(py, e))?;
    let outputs: Vec<Value> = outputs.iter().map(output_json).collect();
    to_py(py, &outputs)
}

/// `learn(batch)`: one update from a TrainingBatch dict (a hand-made batch's missing counters
/// and flags take neutral values); the stats dict.
pub(crate) fn shared_learn<'py, L: Learner + Send + ?Sized>(
    py: Python<'py>,
    inner: &Mutex<L>,
    batch: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let batch: TrainingBatch = parse(
        py,
        "training batch",
        normalise_batch(from_py_json(py, batch)?),
    )?;
    let stats = py
        .detach(|| lock(inner).learn(&batch))
        .map_err(|e| py_err(py, e))?;
    to_py(py, &stats)
}

/// `state()`: the learner's state as a dict.
pub(crate) fn shared_state<'py, L: Learner + Send + ?Sized>(
    py: Python<'py>,
    inner: &Mutex<L>,
) -> PyResult<Bound<'py, PyAny>> {
    let state = py
        .detach(|| lock(inner).state())
        .map_err(|e| py_err(py, e))?;
    to_py(py, &state)
}

/// `load_state(state)`: restores a `state()`; a state that does not fit is an invalid
/// argument.
pub(crate) fn shared_load_state<L: Learner + Send + ?Sized>(
    py: Python<'_>,
    inner: &Mutex<L>,
    state: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let state = from_py_json(py, state)?;
    py.detach(|| lock(inner).load_state(&state))
        .map_err(|e| invalid(py, e.to_string()))
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
        shared_act(py, &self.inner, &contexts)
    }

    /// learn(batch) -> stats dict (decisions, grad_norm, mean_entropy)
    ///
    /// One policy-gradient step from a TrainingBatch dict (what GrpoTrainer hands a learner:
    /// trajectories with an advantage and steps with the recorded decisions). Missing counters
    /// and flags of a hand-made batch take neutral values.
    fn learn<'py>(&self, py: Python<'py>, batch: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        shared_learn(py, &self.inner, &batch)
    }

    /// state() -> dict: weights by feature, optimiser moments, updates and config.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shared_state(py, &self.inner)
    }

    /// load_state(state): restores a state() (weights are matched by feature name).
    fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        shared_load_state(py, &self.inner, &state)
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

/// Adds this module's classes and functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRepairPolicy>()?;
    add_functions!(m: repair_feature_names);
    Ok(())
}
