//! Shared helpers: Python <-> Rust values, argument checks, GIL release and Python components.
//!
//! Values cross as JSON (tasks, actions, policy outputs); long calls run with the GIL released
//! and answer Ctrl-C; Python objects used as Rust components keep their first exception.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::Duration;

use frognano_core::{
    Action, ErrorKind, LearnStats, Learner, Policy, PolicyContext, PolicyOutput, Task,
    TrainingBatch,
};
use frognano_env::taskset;
use frognano_sandbox::CancelFlag;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Value, json};

use crate::errors::Exception;

// ---------------------------------------------------------------------------------------------
// Threads, the GIL and Python components.

/// How often a waiting call checks for Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

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

/// Progress messages to a Python callable, or to stderr when there is none.
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

/// Locks a mutex shared with Python objects.
pub(crate) fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every holder leaves the value consistent between statements; a panic elsewhere (in
    // another call) does not make it unusable.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A component a Python object holds, shared with the Rust calls it is handed to (rollouts,
/// trainers); each call locks it.
pub(crate) struct Shared<T: ?Sized>(pub(crate) Arc<Mutex<T>>);

impl<P: Policy + ?Sized> Policy for Shared<P> {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        lock(&self.0).act(contexts)
    }
}

impl<L: Learner + ?Sized> Learner for Shared<L> {
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

/// The first Python exception an adapter met during a call, re-raised when the call returns.
pub(crate) type ErrorSlot = Arc<Mutex<Option<PyErr>>>;

/// Records `err` (the first one of a call) for re-raising and returns what Rust sees.
pub(crate) fn python_failure(
    slot: &ErrorSlot,
    component: &'static str,
    err: PyErr,
) -> frognano_core::Error {
    let message = err.to_string();
    let mut kept = lock(slot);
    if kept.is_none() {
        *kept = Some(err);
    }
    frognano_core::Error::component(component, ErrorKind::External, message)
}

/// A Python object used as a Rust component: its exceptions are kept in `slot`.
pub(crate) struct PyComponent {
    pub(crate) object: Py<PyAny>,
    pub(crate) slot: ErrorSlot,
}

impl PyComponent {
    /// Calls into the object with the GIL held; a Python exception becomes `component`'s error.
    pub(crate) fn call<T>(
        &self,
        component: &'static str,
        f: impl FnOnce(Python<'_>, &Bound<'_, PyAny>) -> PyResult<T>,
    ) -> frognano_core::Result<T> {
        Python::attach(|py| {
            f(py, self.object.bind(py)).map_err(|e| python_failure(&self.slot, component, e))
        })
    }

    /// What the object's optional method `method()` returns (None when it has no such method).
    pub(crate) fn optional_json(
        &self,
        component: &'static str,
        method: &str,
    ) -> frognano_core::Result<Value> {
        self.call(component, |py, object| {
            if !object.hasattr(method)? {
                return Ok(Value::Null);
            }
            from_py_json(py, &object.call_method0(method)?)
        })
    }

    /// Hands `state` to the object's optional `load_state(state)`.
    pub(crate) fn load_state(
        &self,
        component: &'static str,
        state: &Value,
    ) -> frognano_core::Result<()> {
        self.call(component, |py, object| {
            if object.hasattr("load_state")? {
                object.call_method1("load_state", (to_py(py, state)?,))?;
            }
            Ok(())
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Arguments.

/// An `InvalidArgumentError`.
pub(crate) fn invalid(py: Python<'_>, message: String) -> PyErr {
    Exception::InvalidArgument.err(py, message)
}

/// A seed argument: 0 to 2**64 - 1.
pub(crate) fn seed_of(py: Python<'_>, seed: i128) -> PyResult<u64> {
    u64::try_from(seed).map_err(|_| invalid(py, format!("seed must be in 0..2**64, got {seed}")))
}

/// The name of an object's type, for messages.
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// JSON values.

fn to_json(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
    py.import("json")?
        .call_method1("dumps", (value,))?
        .extract::<String>()
}

fn from_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// A JSON value from any JSON-serialisable Python object.
pub(crate) fn from_py_json(
    py: Python<'_>,
    value: &Bound<'_, PyAny>,
) -> PyResult<serde_json::Value> {
    let text = to_json(py, value)?;
    serde_json::from_str(&text).map_err(|e| {
        // Python's json writes NaN and infinities as bare words, which are not JSON.
        if text.contains("NaN") || text.contains("Infinity") {
            invalid(
                py,
                format!("a value is NaN or infinite, which is not allowed here ({e})"),
            )
        } else {
            Exception::Frognano.err(py, e.to_string())
        }
    })
}

/// A Rust value as the Python object its JSON form parses to.
pub(crate) fn to_py<'py, T: serde::Serialize>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    let text =
        serde_json::to_string(value).map_err(|e| Exception::Frognano.err(py, e.to_string()))?;
    from_json(py, &text)
}

/// A parsed JSON value from a Python object, as `T`; a mismatch is an `InvalidArgumentError`.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    py: Python<'_>,
    what: &str,
    value: Value,
) -> PyResult<T> {
    serde_json::from_value(value).map_err(|e| invalid(py, format!("invalid {what}: {e}")))
}

/// What a learner or task source returned as metrics: a dict, or None (nothing measured);
/// anything else is kept under `"value"`.
pub(crate) fn map_of(value: Value) -> serde_json::Map<String, Value> {
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

// ---------------------------------------------------------------------------------------------
// Tasks, actions and policy outputs.

/// A task from a dict (FrogNano or SWE-bench field names) or a JSON string.
pub(crate) fn task_from_py(py: Python<'_>, task: &Bound<'_, PyAny>) -> PyResult<Task> {
    let text = match task.extract::<String>() {
        Ok(s) => s,
        Err(_) => to_json(py, task)?,
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Exception::Task.err(py, format!("a task must be a JSON object: {e}")))?;
    if value.get("instance_id").is_some() && value.get("id").is_none() {
        return taskset::from_swe_bench(&value, std::path::Path::new("."))
            .map_err(|m| Exception::Task.err(py, format!("invalid task: {m}")));
    }
    taskset::parse_task(&text).map_err(|m| Exception::Task.err(py, format!("invalid task: {m}")))
}

/// Tasks from an iterable of what [`task_from_py`] reads.
pub(crate) fn tasks_from_py(py: Python<'_>, tasks: &Bound<'_, PyAny>) -> PyResult<Vec<Task>> {
    let mut out = Vec::new();
    for item in tasks.try_iter()? {
        out.push(task_from_py(py, &item?)?);
    }
    Ok(out)
}

/// An action from a string (the text grammar, or JSON) or a dict (a JSON tool call).
pub(crate) fn action_from_py(py: Python<'_>, action: &Bound<'_, PyAny>) -> PyResult<Action> {
    if let Ok(text) = action.extract::<String>() {
        return Ok(Action::Text { text });
    }
    if action.is_instance_of::<PyDict>() {
        return Ok(Action::Text {
            text: to_json(py, action)?,
        });
    }
    Err(Exception::InvalidArgument.err(
        py,
        format!(
            "an action is a str (a command) or a dict (a tool call), got {}",
            action.get_type().name()?
        ),
    ))
}

/// An optional entry of an output dict (absent or None: None).
fn entry<'py, T>(
    dict: &Bound<'py, PyDict>,
    key: &str,
    read: impl FnOnce(Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<Option<T>> {
    dict.get_item(key)?
        .filter(|v| !v.is_none())
        .map(read)
        .transpose()
}

/// The outputs a Python policy's `act` returned: per context a str or dict action, or a dict
/// {"action": ..., "logprobs": [...], "prompt_ids": [...], "token_ids": [...], "loss_mask":
/// [...], "decision": ..., "error": "why no action could be chosen" (that episode then ends
/// as failed)}.
pub(crate) fn outputs_from_py(
    py: Python<'_>,
    returned: &Bound<'_, PyAny>,
) -> PyResult<Vec<PolicyOutput>> {
    let mut out = Vec::new();
    for item in returned.try_iter()? {
        let item = item?;
        let output = match item.cast::<PyDict>() {
            Ok(dict) if dict.contains("action")? => {
                let action = dict
                    .get_item("action")?
                    .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("missing action"))?;
                PolicyOutput {
                    action: action_from_py(py, &action)?,
                    logprobs: entry(dict, "logprobs", |v| v.extract())?.unwrap_or_default(),
                    prompt_ids: entry(dict, "prompt_ids", |v| v.extract())?,
                    token_ids: entry(dict, "token_ids", |v| v.extract())?,
                    loss_mask: entry(dict, "loss_mask", |v| v.extract())?,
                    decision: entry(dict, "decision", |v| from_py_json(py, &v))?,
                    error: entry(dict, "error", |v| v.extract())?,
                }
            }
            _ => PolicyOutput::action(action_from_py(py, &item)?),
        };
        out.push(output);
    }
    Ok(out)
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
    if let Some(ids) = &output.prompt_ids {
        map.insert("prompt_ids".into(), json!(ids));
    }
    if let Some(ids) = &output.token_ids {
        map.insert("token_ids".into(), json!(ids));
    }
    if let Some(mask) = &output.loss_mask {
        map.insert("loss_mask".into(), json!(mask));
    }
    if let Some(error) = &output.error {
        map.insert("error".into(), json!(error));
    }
    Value::Object(map)
}
