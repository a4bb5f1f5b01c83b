//! Local language models on ONNX Runtime: `LocalModel` (batched generation with log-probs, the
//! tokenizer and the chat template), `OnnxPolicy` (a local model acting in the environment, a
//! drop-in policy wherever the package takes one) and the model registry (`fetch_model`,
//! `setup_inference`, `make_tiny_model`).
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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use frognano_core::{Policy, PolicyContext, PolicyOutput, Task};
use frognano_policy::llm::{
    ChatMessage, DecoderModel, Generation, GenerationOptions, GenerationTiming, InferenceError,
    ModelConfig, ModelOptions, OnnxPolicy, OnnxPolicyConfig, TextCodec, assets, generate, runtime,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use serde_json::{Value, json};

use crate::env::{error_class, from_py_json, to_py};
use crate::progress_printer;
use crate::train::output_json;

fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another call leaves the model usable (each call starts from an empty cache).
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Maps local-model errors onto the exception hierarchy: an invalid request (options, prompts)
/// is an `InvalidArgumentError`, everything else an `InferenceError`.
pub(crate) fn inference_err(py: Python<'_>, err: InferenceError) -> PyErr {
    let class = match &err {
        InferenceError::InvalidRequest(_) => "InvalidArgumentError",
        _ => "InferenceError",
    };
    error_class(py, class, err.to_string())
}

fn invalid(py: Python<'_>, message: String) -> PyErr {
    error_class(py, "InvalidArgumentError", message)
}

fn count(py: Python<'_>, what: &str, value: i64) -> PyResult<usize> {
    usize::try_from(value).map_err(|_| invalid(py, format!("{what} must be >= 0, got {value}")))
}

// ---------------------------------------------------------------------------------------------
// The runtime.

/// The library ONNX Runtime was loaded from in this process, once a model has loaded it.
static LOADED_RUNTIME: OnceLock<PathBuf> = OnceLock::new();

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
            InferenceError::Runtime(message) if from_package => error_class(
                py,
                "InferenceError",
                format!(
                    "ONNX Runtime: {message} (the library of this interpreter's onnxruntime \
                     package; pass runtime_library= or set FROGNANO_ORT_LIBRARY to use another)"
                ),
            ),
            other => inference_err(py, other),
        })?;
    let _ = LOADED_RUNTIME.set(loaded.library.clone());
    Ok(())
}

/// A model argument (folder, `.onnx` file or registry name, `str` or path-like) resolved to a
/// model folder, fetching a registry model on first use.
fn resolve(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    progress: Option<Py<PyAny>>,
) -> PyResult<PathBuf> {
    let spec: PathBuf = model.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "model must be a model folder (str or path) or a registry name such as \
             \"smollm2-135m\", got {}",
            model
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })?;
    let spec = spec.to_string_lossy().into_owned();
    let printer = progress_printer(progress);
    py.detach(|| assets::resolve_model(&spec, &printer))
        .map_err(|err| inference_err(py, with_folder_hint(&spec, err)))
}

/// A folder that holds model folders (what make_tiny_model and fetch_model write) is named in
/// the error for a folder without model.onnx.
fn with_folder_hint(spec: &str, err: InferenceError) -> InferenceError {
    let InferenceError::Model { path, message } = err else {
        return err;
    };
    let inside: Vec<String> = assets::PRECISIONS
        .iter()
        .filter(|p| Path::new(spec).join(p).join("model.onnx").is_file())
        .map(|p| p.to_string())
        .collect();
    if inside.is_empty() {
        return InferenceError::Model { path, message };
    }
    InferenceError::Model {
        message: format!(
            "{message}; it holds the model folders {} (pass one of them)",
            inside.join(", ")
        ),
        path,
    }
}

fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn config_json(config: &ModelConfig) -> Value {
    json!({
        "num_layers": config.num_layers,
        "num_kv_heads": config.num_kv_heads,
        "head_dim": config.head_dim,
        "vocab_size": config.vocab_size,
        "context_length": config.context_length,
        "eos_token_ids": config.eos_token_ids,
        "bos_token_id": config.bos_token_id,
        "pad_token_id": config.pad_token_id,
        "model_file": config.model_file,
    })
}

// ---------------------------------------------------------------------------------------------
// Requests.

/// Generation options from the keyword arguments of `generate` and `chat`.
#[allow(clippy::too_many_arguments)]
fn options(
    py: Python<'_>,
    max_new_tokens: i64,
    temperature: f64,
    top_k: i64,
    top_p: f64,
    seed: i128,
    stop: Option<&Bound<'_, PyAny>>,
    stop_token_ids: Option<Vec<i64>>,
) -> PyResult<GenerationOptions> {
    let stop = match stop {
        None => Vec::new(),
        Some(s) if s.is_none() => Vec::new(),
        Some(s) if s.is_instance_of::<PyString>() => vec![s.extract::<String>()?],
        Some(s) => s
            .extract::<Vec<String>>()
            .map_err(|_| PyTypeError::new_err("stop must be a str or a list of str"))?,
    };
    let stop_token_ids = stop_token_ids
        .map(|ids| {
            ids.into_iter()
                .map(|id| {
                    u32::try_from(id)
                        .map_err(|_| invalid(py, format!("stop token id {id} is out of range")))
                })
                .collect::<PyResult<Vec<u32>>>()
        })
        .transpose()?;
    let options = GenerationOptions {
        max_new_tokens: count(py, "max_new_tokens", max_new_tokens)?,
        temperature: temperature as f32,
        top_k: count(py, "top_k", top_k)?,
        top_p: top_p as f32,
        seed: u64::try_from(seed)
            .map_err(|_| invalid(py, format!("seed must be in 0..2**64, got {seed}")))?,
        stop,
        stop_token_ids,
    };
    options.validate().map_err(|e| inference_err(py, e))?;
    Ok(options)
}

/// One prompt: text (encoded with the tokenizer, special-token markup recognised) or token ids.
enum Prompt {
    Text(String),
    Ids(Vec<u32>),
}

fn prompts_from_py(py: Python<'_>, prompts: &Bound<'_, PyAny>) -> PyResult<Vec<Prompt>> {
    if prompts.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "prompts must be a list of str or of lists of token ids; wrap a single prompt in a \
             list",
        ));
    }
    let mut out = Vec::new();
    for (row, item) in prompts.try_iter()?.enumerate() {
        let item = item?;
        if let Ok(text) = item.extract::<String>() {
            out.push(Prompt::Text(text));
            continue;
        }
        let ids: Vec<i64> = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "prompt {row} must be a str or a list of token ids (int), got {}",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?;
        let ids = ids
            .into_iter()
            .map(|id| {
                u32::try_from(id).map_err(|_| {
                    invalid(py, format!("prompt {row} has token id {id}, out of range"))
                })
            })
            .collect::<PyResult<Vec<u32>>>()?;
        out.push(Prompt::Ids(ids));
    }
    Ok(out)
}

fn message_from_py(py: Python<'_>, message: &Bound<'_, PyAny>) -> PyResult<ChatMessage> {
    if !message.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(format!(
            "a chat message is a dict {{\"role\": ..., \"content\": ...}}, got {}",
            message
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        )));
    }
    serde_json::from_value(from_py_json(py, message)?).map_err(|e| {
        invalid(
            py,
            format!("a chat message is a dict with str \"role\" and \"content\": {e}"),
        )
    })
}

fn messages_from_py(py: Python<'_>, messages: &Bound<'_, PyAny>) -> PyResult<Vec<ChatMessage>> {
    if messages.is_instance_of::<PyString>() || messages.is_instance_of::<PyDict>() {
        return Err(PyTypeError::new_err(
            "messages must be a list of dicts {\"role\": ..., \"content\": ...}",
        ));
    }
    messages
        .try_iter()?
        .map(|m| message_from_py(py, &m?))
        .collect()
}

fn generation_dict<'py>(py: Python<'py>, generation: Generation) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("token_ids", generation.token_ids)?;
    dict.set_item("logprobs", generation.logprobs)?;
    dict.set_item("text", generation.text)?;
    let reason = serde_json::to_value(generation.finish_reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    dict.set_item("finish_reason", reason)?;
    dict.set_item("prompt_tokens", generation.prompt_tokens)?;
    Ok(dict)
}

// ---------------------------------------------------------------------------------------------
// LocalModel.

/// LocalModel(model, *, intra_threads=0, runtime_library=None, progress=None)
///
/// A local decoder language model on ONNX Runtime, with its tokenizer and chat template.
/// model: a model folder (holding model.onnx, config.json, tokenizer.json) or a registry name
/// such as "smollm2-135m" (int4) or "smollm2-135m:fp32", fetched and converted into the cache on
/// first use. intra_threads: ONNX Runtime threads (0: one per core). runtime_library: the
/// libonnxruntime to load (see the package docs for the default). progress: a callable
/// receiving fetch/setup messages (default: printed to stderr). Calls release the GIL; calls
/// from several threads run one at a time.
#[pyclass(frozen, module = "frognano", name = "LocalModel")]
struct PyLocalModel {
    model: Mutex<DecoderModel>,
    codec: TextCodec,
    config: ModelConfig,
    path: PathBuf,
    timing: Mutex<Option<GenerationTiming>>,
}

impl PyLocalModel {
    fn encode_prompts(&self, py: Python<'_>, prompts: Vec<Prompt>) -> PyResult<Vec<Vec<u32>>> {
        let codec = &self.codec;
        py.detach(|| {
            prompts
                .into_iter()
                .map(|p| match p {
                    Prompt::Text(text) => codec.encode(&text),
                    Prompt::Ids(ids) => Ok(ids),
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .map_err(|e| inference_err(py, e))
    }

    fn run<'py>(
        &self,
        py: Python<'py>,
        prompts: Vec<Vec<u32>>,
        options: GenerationOptions,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let (model, codec) = (&self.model, &self.codec);
        let (generations, timing) = py
            .detach(|| generate(&mut lock(model), codec, &prompts, &options))
            .map_err(|e| inference_err(py, e))?;
        *lock(&self.timing) = Some(timing);
        generations
            .into_iter()
            .map(|g| generation_dict(py, g))
            .collect()
    }
}

#[pymethods]
impl PyLocalModel {
    #[new]
    #[pyo3(signature = (model, *, intra_threads=0, runtime_library=None, progress=None))]
    fn new(
        py: Python<'_>,
        model: Bound<'_, PyAny>,
        intra_threads: i64,
        runtime_library: Option<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let intra_threads = count(py, "intra_threads", intra_threads)?;
        let dir = resolve(py, &model, progress)?;
        ensure_runtime(py, runtime_library)?;
        let options = ModelOptions {
            intra_threads,
            runtime_library: None,
        };
        let (model, codec) = py
            .detach(|| -> Result<_, InferenceError> {
                Ok((DecoderModel::load(&dir, &options)?, TextCodec::load(&dir)?))
            })
            .map_err(|e| inference_err(py, e))?;
        Ok(PyLocalModel {
            config: model.config.clone(),
            model: Mutex::new(model),
            codec,
            path: dir,
            timing: Mutex::new(None),
        })
    }

    /// generate(prompts, *, max_new_tokens=256, temperature=1.0, top_k=0, top_p=1.0, seed=0,
    ///          stop=None, stop_token_ids=None) -> list of dicts
    ///
    /// Continues each prompt, all rows in one batch. prompts: a list of str (raw text, encoded
    /// with the tokenizer; special-token markup such as <|im_start|> is recognised, nothing is
    /// added) or of lists of token ids. temperature 0 decodes greedily; top_k 0 and top_p 1 keep
    /// every token; row r samples from a generator seeded by (seed, r), so a request is
    /// reproducible. stop: a str or list of str ending a row (the text stops before it).
    /// stop_token_ids: tokens ending a row (default: the model's end-of-sequence tokens).
    ///
    /// Each dict: token_ids (every token sampled, a final stop token included), logprobs (one
    /// per token: its log-probability under the distribution it was sampled from), text (special
    /// tokens removed), finish_reason ("eos", "stop" or "length") and prompt_tokens.
    #[pyo3(signature = (prompts, *, max_new_tokens=256, temperature=1.0, top_k=0, top_p=1.0, seed=0, stop=None, stop_token_ids=None))]
    #[allow(clippy::too_many_arguments)]
    fn generate<'py>(
        &self,
        py: Python<'py>,
        prompts: Bound<'py, PyAny>,
        max_new_tokens: i64,
        temperature: f64,
        top_k: i64,
        top_p: f64,
        seed: i128,
        stop: Option<Bound<'py, PyAny>>,
        stop_token_ids: Option<Vec<i64>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let options = options(
            py,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            seed,
            stop.as_ref(),
            stop_token_ids,
        )?;
        let prompts = prompts_from_py(py, &prompts)?;
        let prompts = self.encode_prompts(py, prompts)?;
        self.run(py, prompts, options)
    }

    /// chat(messages, *, max_new_tokens=256, temperature=1.0, top_k=0, top_p=1.0, seed=0,
    ///      stop=None, stop_token_ids=None) -> dict, or list of dicts
    ///
    /// Renders a conversation (a list of {"role", "content"} dicts) with the model's chat
    /// template and the assistant's turn header, and generates the reply: returns one dict as
    /// generate does. Given a list of conversations, replies to each in one batch and returns a
    /// list of dicts.
    #[pyo3(signature = (messages, *, max_new_tokens=256, temperature=1.0, top_k=0, top_p=1.0, seed=0, stop=None, stop_token_ids=None))]
    #[allow(clippy::too_many_arguments)]
    fn chat<'py>(
        &self,
        py: Python<'py>,
        messages: Bound<'py, PyAny>,
        max_new_tokens: i64,
        temperature: f64,
        top_k: i64,
        top_p: f64,
        seed: i128,
        stop: Option<Bound<'py, PyAny>>,
        stop_token_ids: Option<Vec<i64>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = options(
            py,
            max_new_tokens,
            temperature,
            top_k,
            top_p,
            seed,
            stop.as_ref(),
            stop_token_ids,
        )?;
        if messages.is_instance_of::<PyString>() || messages.is_instance_of::<PyDict>() {
            return Err(PyTypeError::new_err(
                "chat takes a conversation (a list of {\"role\": ..., \"content\": ...} dicts) \
                 or a list of conversations",
            ));
        }
        let items: Vec<Bound<'py, PyAny>> = messages.try_iter()?.collect::<PyResult<_>>()?;
        let Some(first) = items.first() else {
            return Ok(PyList::empty(py).into_any());
        };
        let single = first.is_instance_of::<PyDict>();
        let conversations: Vec<Vec<ChatMessage>> = if single {
            vec![
                items
                    .iter()
                    .map(|m| message_from_py(py, m))
                    .collect::<PyResult<_>>()?,
            ]
        } else {
            items
                .iter()
                .map(|c| messages_from_py(py, c))
                .collect::<PyResult<_>>()?
        };
        let codec = &self.codec;
        let prompts = py
            .detach(|| {
                conversations
                    .iter()
                    .map(|c| codec.encode(&codec.render_chat(c, true)?))
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|e| inference_err(py, e))?;
        let mut replies = self.run(py, prompts, options)?;
        if single {
            Ok(replies.remove(0).into_any())
        } else {
            Ok(PyList::new(py, replies)?.into_any())
        }
    }

    /// encode(text) -> list of token ids (special-token markup recognised, nothing added).
    fn encode(&self, py: Python<'_>, text: String) -> PyResult<Vec<u32>> {
        let codec = &self.codec;
        py.detach(|| codec.encode(&text))
            .map_err(|e| inference_err(py, e))
    }

    /// decode(ids, skip_special=True) -> str; special tokens are dropped when skip_special.
    #[pyo3(signature = (ids, skip_special=true))]
    fn decode(&self, py: Python<'_>, ids: Vec<u32>, skip_special: bool) -> PyResult<String> {
        let codec = &self.codec;
        py.detach(|| codec.decode(&ids, skip_special))
            .map_err(|e| inference_err(py, e))
    }

    /// render_chat(messages, add_generation_prompt=True) -> str
    ///
    /// The conversation rendered with the model's chat template, as transformers'
    /// apply_chat_template renders it; add_generation_prompt appends the header of the
    /// assistant's next turn.
    #[pyo3(signature = (messages, add_generation_prompt=true))]
    fn render_chat(
        &self,
        py: Python<'_>,
        messages: Bound<'_, PyAny>,
        add_generation_prompt: bool,
    ) -> PyResult<String> {
        let messages = messages_from_py(py, &messages)?;
        let codec = &self.codec;
        py.detach(|| codec.render_chat(&messages, add_generation_prompt))
            .map_err(|e| inference_err(py, e))
    }

    /// full_logits(ids, *, as_bytes=False) -> list of lists of floats, or (bytes, (seq, vocab))
    ///
    /// The logits of every position of one unpadded sequence, computed without a cache (the
    /// reference cached decoding is checked against). as_bytes returns the float32 values in
    /// native byte order with their shape instead, e.g. for
    /// numpy.frombuffer(data, numpy.float32).reshape(shape).
    #[pyo3(signature = (ids, *, as_bytes=false))]
    fn full_logits<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<i64>,
        as_bytes: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let vocab = self.config.vocab_size;
        if ids.is_empty() {
            return Err(invalid(py, "full_logits needs at least one token".into()));
        }
        if ids.len() > self.config.context_length {
            return Err(invalid(
                py,
                format!(
                    "{} tokens; the model's context is {}",
                    ids.len(),
                    self.config.context_length
                ),
            ));
        }
        let ids = ids
            .into_iter()
            .map(|id| {
                u32::try_from(id)
                    .ok()
                    .filter(|&t| (t as usize) < vocab)
                    .ok_or_else(|| {
                        invalid(
                            py,
                            format!("token {id} is outside the vocabulary of {vocab}"),
                        )
                    })
            })
            .collect::<PyResult<Vec<u32>>>()?;
        let model = &self.model;
        let logits = py
            .detach(|| lock(model).full_logits(&ids))
            .map_err(|e| inference_err(py, e))?;
        let seq = logits.len() / vocab.max(1);
        if as_bytes {
            let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let shape = PyTuple::new(py, [seq, vocab])?;
            return Ok(
                PyTuple::new(py, [PyBytes::new(py, &bytes).into_any(), shape.into_any()])?
                    .into_any(),
            );
        }
        let rows: Vec<&[f32]> = logits.chunks(vocab.max(1)).collect();
        Ok(PyList::new(py, rows)?.into_any())
    }

    /// The model's configuration (dict: num_layers, num_kv_heads, head_dim, vocab_size,
    /// context_length, eos_token_ids, bos_token_id, pad_token_id, model_file).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &config_json(&self.config))
    }

    /// The model folder.
    #[getter]
    fn path(&self) -> String {
        path_text(&self.path)
    }

    /// Whether the model has a chat template (chat and render_chat need one).
    #[getter]
    fn has_chat_template(&self) -> bool {
        self.codec.has_chat_template()
    }

    /// Where the time of the last generate/chat call went (dict: prefill_s, decode_s,
    /// first_token_s, prompt_tokens, generated_tokens, decode_steps), or None.
    #[getter]
    fn last_timing<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let timing = *lock(&self.timing);
        timing.map(|t| to_py(py, &t)).transpose()
    }

    /// The ONNX Runtime library loaded in this process.
    #[getter]
    fn runtime_library(&self) -> Option<String> {
        LOADED_RUNTIME.get().map(|p| path_text(p))
    }

    fn __repr__(&self) -> String {
        format!(
            "LocalModel(path={:?}, vocab_size={}, context_length={})",
            path_text(&self.path),
            self.config.vocab_size,
            self.config.context_length
        )
    }
}

// ---------------------------------------------------------------------------------------------
// OnnxPolicy.

/// The policy an `OnnxPolicy` object holds, shared with the rollouts it is handed to.
struct SharedOnnx(Arc<Mutex<OnnxPolicy>>);

impl Policy for SharedOnnx {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        lock(&self.0).act(contexts)
    }
}

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
    path: PathBuf,
}

impl PyOnnxPolicy {
    /// The policy as a Rust component sharing this object's model.
    pub(crate) fn shared(&self) -> Box<dyn Policy> {
        Box::new(SharedOnnx(self.inner.clone()))
    }
}

fn contexts_from_py(py: Python<'_>, contexts: &Bound<'_, PyAny>) -> PyResult<Vec<PolicyContext>> {
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

/// The generation options of an OnnxPolicy: the given keys over the policy's defaults.
fn policy_generation(
    py: Python<'_>,
    generation: Option<&Bound<'_, PyAny>>,
) -> PyResult<GenerationOptions> {
    let defaults = OnnxPolicyConfig::default().generation;
    let Some(given) = generation.filter(|g| !g.is_none()) else {
        return Ok(defaults);
    };
    let Value::Object(given) = from_py_json(py, given)? else {
        return Err(PyTypeError::new_err(
            "generation must be a dict of generation options",
        ));
    };
    let mut merged = serde_json::to_value(&defaults)
        .map_err(|e| error_class(py, "FrognanoError", e.to_string()))?;
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
            generation: policy_generation(py, generation.as_ref())?,
            system_prompt,
            max_prompt_tokens: count(py, "max_prompt_tokens", max_prompt_tokens)?,
            intra_threads: count(py, "intra_threads", intra_threads)?,
        };
        config
            .generation
            .validate()
            .map_err(|e| inference_err(py, e))?;
        let dir = resolve(py, &model, progress)?;
        ensure_runtime(py, runtime_library)?;
        let load_config = config.clone();
        let policy = py
            .detach(|| OnnxPolicy::load(&dir, load_config))
            .map_err(|e| inference_err(py, e))?;
        Ok(PyOnnxPolicy {
            inner: Arc::new(Mutex::new(policy)),
            config,
            path: dir,
        })
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
            .map_err(|e| inference_err(py, e))?;
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
            .map_err(|e| inference_err(py, e))
    }

    /// The settings (dict: generation, system_prompt, max_prompt_tokens, intra_threads).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.config)
    }

    /// The model folder.
    #[getter]
    fn path(&self) -> String {
        path_text(&self.path)
    }

    fn __repr__(&self) -> String {
        format!(
            "OnnxPolicy(path={:?}, temperature={}, max_new_tokens={})",
            path_text(&self.path),
            self.config.generation.temperature,
            self.config.generation.max_new_tokens
        )
    }
}

/// A policy named by a string: "onnx:MODEL" (an OnnxPolicy with the default settings on a
/// model folder or registry name) or a baseline ("oracle", "noop", "random[:SEED]", ...).
pub(crate) fn policy_from_spec(
    py: Python<'_>,
    spec: &str,
    tasks: &[Task],
) -> PyResult<Box<dyn Policy>> {
    if let Some(model) = spec.strip_prefix("onnx:") {
        let dir = resolve(py, &PyString::new(py, model).into_any(), None)?;
        ensure_runtime(py, None)?;
        let policy = py
            .detach(|| OnnxPolicy::load(&dir, OnnxPolicyConfig::default()))
            .map_err(|e| inference_err(py, e))?;
        return Ok(Box::new(policy));
    }
    frognano_policy::baseline(spec, tasks).map_err(|e| invalid(py, e.to_string()))
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
        .map_err(|e| inference_err(py, e))?;
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
        .map_err(|e| inference_err(py, e))?;
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
    let seed = u64::try_from(seed)
        .map_err(|_| invalid(py, format!("seed must be in 0..2**64, got {seed}")))?;
    let out_dir = std::path::absolute(&out_dir).unwrap_or(out_dir);
    let printer = progress_printer(progress);
    py.detach(|| assets::make_tiny_model(&out_dir, seed, &printer))
        .map_err(|e| inference_err(py, e))?;
    Ok(path_text(&out_dir.join("fp32")))
}

/// The registry's model names.
#[pyfunction]
fn known_models() -> Vec<&'static str> {
    assets::KNOWN_MODELS.iter().map(|m| m.name).collect()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLocalModel>()?;
    m.add_class::<PyOnnxPolicy>()?;
    m.add_function(wrap_pyfunction!(fetch_model, m)?)?;
    m.add_function(wrap_pyfunction!(setup_inference, m)?)?;
    m.add_function(wrap_pyfunction!(make_tiny_model, m)?)?;
    m.add_function(wrap_pyfunction!(known_models, m)?)?;
    Ok(())
}
