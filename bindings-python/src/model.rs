//! `LocalModel`: a local decoder language model with its tokenizer and chat template.
//!
//! Generation is batched, seeded and returns per-token log-probabilities.

use std::path::PathBuf;
use std::sync::Mutex;

use frognano_policy::llm::{
    ChatMessage, DecoderModel, Generation, GenerationOptions, GenerationTiming, InferenceError,
    ModelConfig, ModelOptions, TextCodec, generate,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use serde_json::{Value, json};

use crate::convert::{from_py_json, invalid, lock, seed_of, to_py, type_name};
use crate::errors::py_err;
use crate::llm::{LOADED_RUNTIME, count, ensure_runtime, path_text, resolve};

fn config_json(config: &ModelConfig) -> Value {
    let mut json = config.shape_json();
    json.insert("model_file".into(), json!(config.model_file));
    Value::Object(json)
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
        seed: seed_of(py, seed)?,
        stop,
        stop_token_ids,
    };
    options.validate().map_err(|e| py_err(py, e))?;
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
                type_name(&item)
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
            type_name(message)
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
        .map_err(|e| py_err(py, e))
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
            .map_err(|e| py_err(py, e))?;
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
            .map_err(|e| py_err(py, e))?;
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
            .map_err(|e| py_err(py, e))?;
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
        py.detach(|| codec.encode(&text)).map_err(|e| py_err(py, e))
    }

    /// decode(ids, skip_special=True) -> str; special tokens are dropped when skip_special.
    #[pyo3(signature = (ids, skip_special=true))]
    fn decode(&self, py: Python<'_>, ids: Vec<u32>, skip_special: bool) -> PyResult<String> {
        let codec = &self.codec;
        py.detach(|| codec.decode(&ids, skip_special))
            .map_err(|e| py_err(py, e))
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
            .map_err(|e| py_err(py, e))
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
            .map_err(|e| py_err(py, e))?;
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

/// Adds this module's classes to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLocalModel>()?;
    Ok(())
}
