//! Local language models on ONNX Runtime: the runtime, model resolution, `OnnxPolicy`, registry.
//!
//! A model argument is a folder or a registry name (fetched on first use); `OnnxPolicy` is a
//! local model acting in the environment, a drop-in policy wherever the package takes one; the
//! registry functions are `fetch_model`, `setup_inference`, `make_tiny_model` and
//! `known_models`.
//!
//! ONNX Runtime is loaded once per process, by the first model. Its library is, in order: the
//! `runtime_library` argument; `FROGNANO_ORT_LIBRARY` (or `ORT_DYLIB_PATH`); the library inside
//! this interpreter's `onnxruntime` package, when it has one (so a process that also imports
//! onnxruntime holds a single copy of it); else the automatic search of
//! [`frognano_policy::llm::runtime::find_library`] (the project's inference environment in the
//! cache, then the host Python's package).
//!
//! Every call into a model releases the GIL. A model or policy is shared behind a mutex: calls
//! from several threads run one at a time.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use frognano_core::{Policy, PolicyContext};
use frognano_policy::llm::{
    GenerationOptions, InferenceError, OnnxPolicy, OnnxPolicyConfig, assets, runtime,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use crate::convert::{
    Shared, from_py_json, invalid, lock, output_json, progress_printer, seed_of, to_py, type_name,
};
use crate::errors::{Exception, py_err};

/// A count argument: 0 or more.
pub(crate) fn count(py: Python<'_>, what: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| invalid(py, format!("{what} must be >= 0, got {value}")))
}

/// A path as Python sees it.
pub(crate) fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// The runtime.

/// The library ONNX Runtime was loaded from in this process, once a model has loaded it.
pub(crate) static LOADED_RUNTIME: OnceLock<PathBuf> = OnceLock::new();

fn library_from_environment() -> bool {
    ["FROGNANO_ORT_LIBRARY", "ORT_DYLIB_PATH"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()))
}

/// `libonnxruntime` inside this interpreter's `onnxruntime` package, found without importing it.
fn package_library(py: Python<'_>) -> Option<PathBuf> {
    let spec = py
        .import("importlib.util")
        .and_then(|util| util.call_method1("find_spec", ("onnxruntime",)))
        .ok()?;
    if spec.is_none() {
        return None;
    }
    let origin: String = spec.getattr("origin").ok()?.extract().ok()?;
    runtime::library_in_package(Path::new(&origin).parent()?)
}

/// Loads ONNX Runtime for this process if no model has yet (see the module docs for the
/// library chosen); an explicit library must be the one already loaded, if any.
pub(crate) fn ensure_runtime(py: Python<'_>, explicit: Option<PathBuf>) -> PyResult<()> {
    let given = explicit.is_some();
    let library = match explicit {
        Some(path) => Some(path),
        None if LOADED_RUNTIME.get().is_some() || library_from_environment() => None,
        None => package_library(py),
    };
    let from_package = !given && library.is_some();
    let loaded = py
        .detach(|| runtime::init_runtime(library.as_deref()))
        .map_err(|err| match err {
            InferenceError::Runtime(message) if from_package => Exception::Inference.err(
                py,
                format!(
                    "ONNX Runtime: {message} (the library of this interpreter's onnxruntime \
                     package; pass runtime_library= or set FROGNANO_ORT_LIBRARY to use another)"
                ),
            ),
            other => py_err(py, other),
        })?;
    let _ = LOADED_RUNTIME.set(loaded.library.clone());
    Ok(())
}

/// A model argument as text: a folder, `.onnx` file or registry name, `str` or path-like.
pub(crate) fn model_spec(model: &Bound<'_, PyAny>) -> PyResult<String> {
    let spec: PathBuf = model.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "model must be a model folder (str or path) or a registry name such as \
             \"smollm2-135m\", got {}",
            type_name(model)
        ))
    })?;
    Ok(spec.to_string_lossy().into_owned())
}

/// A model argument (folder, `.onnx` file or registry name, `str` or path-like) resolved to a
/// model folder, fetching a registry model on first use.
pub(crate) fn resolve(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    progress: Option<Py<PyAny>>,
) -> PyResult<PathBuf> {
    let spec = model_spec(model)?;
    let printer = progress_printer(progress);
    py.detach(|| assets::resolve_model(&spec, &printer))
        .map_err(|err| py_err(py, err))
}

// ---------------------------------------------------------------------------------------------
// OnnxPolicy.

/// OnnxPolicy(model, *, generation=None, system_prompt=None, max_prompt_tokens=0,
///            intra_threads=0, runtime_library=None, progress=None)
///
/// A local chat model acting through the environment's tool protocol: each episode is a chat
/// (system prompt, the first observation as the user's message, then one assistant message per
/// action and one user message per observation) and the model's reply is the action. All
/// episodes of an act call are generated as one batch. model: as for LocalModel (it needs a chat
/// template). generation: a dict of generate's options (default: greedy, 384 tokens; the
/// seed advances with each act call). max_prompt_tokens: the longest prompt, older turns
/// dropped to fit (0: the context minus the reply budget).
///
/// Usable wherever the package takes a policy: evaluate(tasks, policy), GrpoTrainer.evaluate,
/// or an agent loop calling act. It does not learn: to train on its rollouts (token_ids and
/// logprobs are in every output), hand a GrpoTrainer an object whose act calls this one and
/// whose learn(batch) updates your model.
#[pyclass(frozen, module = "frognano", name = "OnnxPolicy")]
pub(crate) struct PyOnnxPolicy {
    inner: Arc<Mutex<OnnxPolicy>>,
    config: OnnxPolicyConfig,
    path: Mutex<PathBuf>,
}

impl PyOnnxPolicy {
    /// The policy as a Rust component sharing this object's model.
    pub(crate) fn shared(&self) -> Box<dyn Policy> {
        Box::new(Shared(self.inner.clone()))
    }
}

pub(crate) fn contexts_from_py(
    py: Python<'_>,
    contexts: &Bound<'_, PyAny>,
) -> PyResult<Vec<PolicyContext>> {
    if contexts.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(
            "act takes a list of contexts (dicts with task_id, initial, history); wrap a single \
             context in a list",
        ));
    }
    serde_json::from_value(from_py_json(py, contexts)?)
        .map_err(|e| invalid(py, format!("invalid policy contexts: {e}")))
}

fn context_from_py(py: Python<'_>, context: &Bound<'_, PyAny>) -> PyResult<PolicyContext> {
    serde_json::from_value(from_py_json(py, context)?)
        .map_err(|e| invalid(py, format!("invalid policy context: {e}")))
}

/// Generation options: the given keys over `defaults` (an OnnxPolicy's, or a learning
/// policy's sampled ones).
pub(crate) fn policy_generation(
    py: Python<'_>,
    defaults: GenerationOptions,
    generation: Option<&Bound<'_, PyAny>>,
) -> PyResult<GenerationOptions> {
    let Some(given) = generation.filter(|g| !g.is_none()) else {
        return Ok(defaults);
    };
    let Value::Object(given) = from_py_json(py, given)? else {
        return Err(PyTypeError::new_err(
            "generation must be a dict of generation options",
        ));
    };
    let mut merged =
        serde_json::to_value(&defaults).map_err(|e| Exception::Frognano.err(py, e.to_string()))?;
    if let Value::Object(map) = &mut merged {
        map.extend(given);
    }
    serde_json::from_value(merged)
        .map_err(|e| invalid(py, format!("invalid generation options: {e}")))
}

#[pymethods]
impl PyOnnxPolicy {
    #[new]
    #[pyo3(signature = (model, *, generation=None, system_prompt=None, max_prompt_tokens=0, intra_threads=0, runtime_library=None, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: Bound<'_, PyAny>,
        generation: Option<Bound<'_, PyAny>>,
        system_prompt: Option<String>,
        max_prompt_tokens: i64,
        intra_threads: i64,
        runtime_library: Option<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let config = OnnxPolicyConfig {
            generation: policy_generation(
                py,
                OnnxPolicyConfig::default().generation,
                generation.as_ref(),
            )?,
            system_prompt,
            max_prompt_tokens: count(py, "max_prompt_tokens", max_prompt_tokens)?,
            intra_threads: count(py, "intra_threads", intra_threads)?,
        };
        config.generation.validate().map_err(|e| py_err(py, e))?;
        let dir = resolve(py, &model, progress)?;
        ensure_runtime(py, runtime_library)?;
        let load_config = config.clone();
        let policy = py
            .detach(|| OnnxPolicy::load(&dir, load_config))
            .map_err(|e| py_err(py, e))?;
        Ok(PyOnnxPolicy {
            inner: Arc::new(Mutex::new(policy)),
            config,
            path: Mutex::new(dir),
        })
    }

    /// reload(model) -> None
    ///
    /// Swaps in another model folder (new weights after a learner's update; same tokenizer
    /// and prompting): the next act runs it. On error the current model stays loaded.
    fn reload(&self, py: Python<'_>, model: Bound<'_, PyAny>) -> PyResult<()> {
        let dir = resolve(py, &model, None)?;
        let inner = &self.inner;
        py.detach(|| lock(inner).reload(&dir))
            .map_err(|e| py_err(py, e))?;
        *lock(&self.path) = dir;
        Ok(())
    }

    /// act(contexts) -> list of dicts {"action", "logprobs", "token_ids", "decision"}
    ///
    /// The next action of each episode context (dicts with task_id, initial, history, as a
    /// Python policy receives them), generated as one batch: action is the reply text,
    /// token_ids the tokens sampled and logprobs one log-probability per token; decision holds
    /// prompt_tokens, finish_reason and temperature.
    fn act<'py>(
        &self,
        py: Python<'py>,
        contexts: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let contexts = contexts_from_py(py, &contexts)?;
        let inner = &self.inner;
        let outputs = py
            .detach(|| lock(inner).reply(&contexts))
            .map_err(|e| py_err(py, e))?;
        let outputs: Vec<Value> = outputs.iter().map(output_json).collect();
        to_py(py, &outputs)
    }

    /// messages(context) -> the chat of an episode context (list of {"role", "content"}).
    fn messages<'py>(
        &self,
        py: Python<'py>,
        context: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let context = context_from_py(py, &context)?;
        let messages = lock(&self.inner).messages(&context, 0);
        to_py(py, &messages)
    }

    /// prompt_ids(context) -> the prompt token ids act would generate from (older turns
    /// dropped to fit the prompt budget).
    fn prompt_ids(&self, py: Python<'_>, context: Bound<'_, PyAny>) -> PyResult<Vec<u32>> {
        let context = context_from_py(py, &context)?;
        let inner = &self.inner;
        py.detach(|| lock(inner).prompt_ids(&context))
            .map_err(|e| py_err(py, e))
    }

    /// The settings (dict: generation, system_prompt, max_prompt_tokens, intra_threads).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.config)
    }

    /// The model folder.
    #[getter]
    fn path(&self) -> String {
        path_text(&lock(&self.path))
    }

    fn __repr__(&self) -> String {
        format!(
            "OnnxPolicy(path={:?}, temperature={}, max_new_tokens={})",
            path_text(&lock(&self.path)),
            self.config.generation.temperature,
            self.config.generation.max_new_tokens
        )
    }
}

// ---------------------------------------------------------------------------------------------
// The registry.

/// fetch_model(name, progress=None) -> str
///
/// Fetches, verifies and converts a registry model (idempotent) and returns its cache folder,
/// which holds one model folder per precision (int4/, fp32/); "NAME:PRECISION" returns that
/// precision's folder. LocalModel and OnnxPolicy take registry names directly.
#[pyfunction]
#[pyo3(signature = (name, progress=None))]
fn fetch_model(py: Python<'_>, name: &str, progress: Option<Py<PyAny>>) -> PyResult<String> {
    let printer = progress_printer(progress);
    let dir = py
        .detach(|| {
            if name.contains(':') {
                assets::resolve_model(name, &printer)
            } else {
                assets::fetch_model(name, &printer)
            }
        })
        .map_err(|e| py_err(py, e))?;
    Ok(path_text(&dir))
}

/// setup_inference(progress=None) -> dict {"dir", "python", "runtime_library"}
///
/// Installs the inference environment once (a virtual environment in the cache with the pinned,
/// hash-checked converter packages, onnxruntime included) and returns where it is.
#[pyfunction]
#[pyo3(signature = (progress=None))]
fn setup_inference<'py>(
    py: Python<'py>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let printer = progress_printer(progress);
    let env = py
        .detach(|| assets::ensure_inference_env(false, &printer))
        .map_err(|e| py_err(py, e))?;
    let dict = PyDict::new(py);
    dict.set_item("dir", path_text(&env.dir))?;
    dict.set_item("python", path_text(&env.python))?;
    dict.set_item("runtime_library", path_text(&env.runtime_library))?;
    Ok(dict)
}

/// make_tiny_model(out_dir, seed=0, progress=None) -> str
///
/// Writes a tiny randomly initialised model (the layout, tokenizer and chat template of the real
/// ones, through the same conversion; for fast tests) into out_dir/fp32 and out_dir/int4, and
/// returns the fp32 folder. Needs the inference environment (installed on first use).
#[pyfunction]
#[pyo3(signature = (out_dir, seed=0, progress=None))]
fn make_tiny_model(
    py: Python<'_>,
    out_dir: PathBuf,
    seed: i128,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let seed = seed_of(py, seed)?;
    let out_dir = std::path::absolute(&out_dir).unwrap_or(out_dir);
    let printer = progress_printer(progress);
    py.detach(|| assets::make_tiny_model(&out_dir, seed, &printer))
        .map_err(|e| py_err(py, e))?;
    Ok(path_text(&out_dir.join("fp32")))
}

/// The registry's model names.
#[pyfunction]
fn known_models() -> Vec<&'static str> {
    assets::KNOWN_MODELS.iter().map(|m| m.name).collect()
}

/// convert_checkpoint(checkpoint, out, precisions=("fp32", "int4"), progress=None) -> dict
///
/// Converts a Hugging Face checkpoint folder (config.json, model.safetensors or a sharded
/// index, tokenizer files; llama, qwen2 or mistral) into ONNX model folders out/fp32 (also a
/// checkpoint again, so it trains further) and out/int4, which OnnxPolicy and LocalModel run.
/// Returns the converter's summary ("folders": precision -> folder). A checkpoint the converter
/// refuses raises InferenceError naming the reason.
#[pyfunction]
#[pyo3(signature = (checkpoint, out, precisions=None, progress=None))]
fn convert_checkpoint<'py>(
    py: Python<'py>,
    checkpoint: PathBuf,
    out: PathBuf,
    precisions: Option<Vec<String>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let precisions = precisions.unwrap_or_else(|| vec!["fp32".into(), "int4".into()]);
    let printer = progress_printer(progress);
    let summary = py
        .detach(|| {
            let precisions: Vec<&str> = precisions.iter().map(String::as_str).collect();
            frognano_policy::llm::convert_checkpoint(&checkpoint, &out, &precisions, &printer)
        })
        .map_err(|e| py_err(py, e))?;
    to_py(py, &summary)
}

/// The model converter (frognano_models.py and its parts, embedded in this package) written into
/// the cache as one folder; the path of its entry file. The torch learner imports it (with its
/// folder on sys.path) to hand new weights back as ONNX.
#[pyfunction]
fn _converter_script(py: Python<'_>) -> PyResult<String> {
    let path = assets::converter_script().map_err(|e| py_err(py, e))?;
    Ok(path_text(&path))
}

/// Adds this module's classes and functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOnnxPolicy>()?;
    add_functions!(m: fetch_model, setup_inference, make_tiny_model, known_models,
        _converter_script, convert_checkpoint);
    Ok(())
}
