//! Served models: `HttpPolicy`, a model behind an OpenAI-compatible server as a policy.

use std::sync::{Arc, Mutex};

use frognano_core::{Policy, PolicyContext};
use frognano_policy::{HttpPolicy, HttpPolicyConfig};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

use crate::convert::{Shared, from_py_json, invalid, lock, output_json, to_py};
use crate::errors::{Exception, py_err};

/// HttpPolicy(base_url, model, *, check=True, **options)
///
/// A model behind an OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp's server,
/// LM Studio, `frognano serve`) acting through the environment's tool protocol: each episode's
/// chat goes to the server, all episodes of an act call in flight at once (up to
/// `concurrency`). base_url: e.g. "http://127.0.0.1:8000/v1" (vLLM, frognano serve) or
/// "http://127.0.0.1:11434/v1" (Ollama). check: ask the server first whether it serves the
/// model (a clear error now instead of failed episodes later). options: api ("chat" or
/// "completions"), tool_calls (native tool calls), api_key_env (default "OPENAI_API_KEY"),
/// generation (a dict: max_new_tokens, temperature, top_p, top_k, seed, stop), logprobs,
/// system_prompt, max_prompt_chars, max_prompt_tokens (completions with chat_template_dir),
/// concurrency, timeout_s, connect_timeout_s, retries,
/// backoff_s, max_reply_bytes, chat_template_dir, token_id_prompts, extra_body.
///
/// A request that still fails after its retries fails only its episode: its output carries
/// "error" and the rollout ends that episode as failed (record "policy_error").
#[pyclass(frozen, module = "frognano", name = "HttpPolicy")]
pub(crate) struct PyHttpPolicy {
    inner: Arc<Mutex<HttpPolicy>>,
    config: HttpPolicyConfig,
}

impl PyHttpPolicy {
    /// The policy as a Rust component sharing this object's client.
    pub(crate) fn shared(&self) -> Box<dyn Policy> {
        Box::new(Shared(self.inner.clone()))
    }
}

/// The configuration: the given options over the defaults (unknown options are errors).
fn config_of(
    py: Python<'_>,
    base_url: String,
    model: String,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<HttpPolicyConfig> {
    let defaults = HttpPolicyConfig::new(base_url, model);
    let mut merged =
        serde_json::to_value(&defaults).map_err(|e| Exception::Frognano.err(py, e.to_string()))?;
    if let Some(options) = options {
        let Value::Object(given) = from_py_json(py, options.as_any())? else {
            return Err(PyTypeError::new_err("options must be keyword arguments"));
        };
        if let Value::Object(map) = &mut merged {
            for (key, value) in given {
                // A partial generation dict is merged over the default generation.
                match (key.as_str(), map.get_mut("generation"), value) {
                    ("generation", Some(Value::Object(base)), Value::Object(partial)) => {
                        base.extend(partial);
                    }
                    (_, _, value) => {
                        map.insert(key, value);
                    }
                }
            }
        }
    }
    serde_json::from_value(merged)
        .map_err(|e| invalid(py, format!("invalid HttpPolicy option: {e}")))
}

#[pymethods]
impl PyHttpPolicy {
    #[new]
    #[pyo3(signature = (base_url, model, *, check=true, **options))]
    fn new(
        py: Python<'_>,
        base_url: String,
        model: String,
        check: bool,
        options: Option<Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let config = config_of(py, base_url, model, options.as_ref())?;
        let build = config.clone();
        let policy = py
            .detach(|| {
                if check {
                    HttpPolicy::connect(build)
                } else {
                    HttpPolicy::new(build)
                }
            })
            .map_err(|e| py_err(py, frognano_core::Error::from(e)))?;
        Ok(PyHttpPolicy {
            inner: Arc::new(Mutex::new(policy)),
            config,
        })
    }

    /// act(contexts) -> list of dicts {"action", "logprobs", "token_ids", "prompt_ids",
    /// "decision", "error"}
    ///
    /// The next action of each episode context (dicts with task_id, initial, history). action
    /// is the reply text (or, with tool_calls, a tool call dict); logprobs and token_ids are
    /// present when the server returns them; decision holds finish_reason, usage, attempts and
    /// latency_s; error (only on failure) says why no action could be chosen.
    fn act<'py>(
        &self,
        py: Python<'py>,
        contexts: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if contexts.is_instance_of::<PyDict>() {
            return Err(PyTypeError::new_err(
                "act takes a list of contexts (dicts with task_id, initial, history); wrap a \
                 single context in a list",
            ));
        }
        let contexts: Vec<PolicyContext> = serde_json::from_value(from_py_json(py, &contexts)?)
            .map_err(|e| invalid(py, format!("invalid policy contexts: {e}")))?;
        let inner = &self.inner;
        let outputs = py
            .detach(|| lock(inner).reply(&contexts))
            .map_err(|e| py_err(py, frognano_core::Error::from(e)))?;
        let outputs: Vec<Value> = outputs.iter().map(output_json).collect();
        to_py(py, &outputs)
    }

    /// models() -> the model names the server lists, or None when it has no /models endpoint.
    fn models(&self, py: Python<'_>) -> PyResult<Option<Vec<String>>> {
        let inner = &self.inner;
        py.detach(|| lock(inner).models())
            .map_err(|e| py_err(py, frognano_core::Error::from(e)))
    }

    /// The settings (a dict of every option).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.config)
    }

    /// The normalised base URL requests go to.
    #[getter]
    fn base_url(&self) -> String {
        lock(&self.inner).base_url().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "HttpPolicy(base_url={:?}, model={:?}, api={:?}, temperature={})",
            self.config.base_url,
            self.config.model,
            self.config.api,
            self.config.generation.temperature
        )
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyHttpPolicy>()?;
    Ok(())
}
