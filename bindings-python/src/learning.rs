//! `LanguageModelPolicy`: the training job's language model that learns, as a Python object.
//!
//! One home for RL of a language model: this class is [`frognano_train::LanguageModelPolicy`]
//! (rollouts in ONNX Runtime or through a served model, a learner process updating the
//! weights from token-exact batches, every update's weights handed back to the rollouts,
//! learner checkpoints), the same object `frognano train` runs. A `GrpoTrainer` given one
//! trains it natively; Python code can also call `act`, `learn`, `state` and `load_state`
//! itself. `frognano.torch_learner.LearningOnnxPolicy` is this class.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use frognano_core::{LearningPolicy, Policy};
use frognano_train::{LanguageModelConfig, LanguageModelPolicy, RolloutServer, WeightsHandle};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Map, Value};

use crate::convert::{
    Shared, from_py_json, invalid, lock, parse, progress_printer, to_py, type_name,
};
use crate::errors::py_err;
use crate::llm::{count, ensure_runtime, model_spec, path_text, policy_generation};
use crate::policy::{shared_act, shared_learn, shared_load_state, shared_state};

/// LanguageModelPolicy(model, learner=None, *, work_dir=None, generation=None,
///                     system_prompt=None, max_prompt_tokens=0, intra_threads=0, python=None,
///                     rollout_server=None, runtime_library=None, progress=None)
///
/// A language model that learns, the policy of `frognano train`'s language-model jobs: act
/// rolls out in ONNX Runtime (or through rollout_server), learn(batch) takes one update in a
/// PyTorch learner process from the batch's exact token ids and rollout log-probs, exports the
/// new weights as an fp32 ONNX folder under work_dir and makes the rollouts run it (the
/// hand-back; handback_s in the stats); state()/load_state(state) write and restore learner
/// checkpoints (weights, optimizer, RNG). Hand it to a GrpoTrainer as its policy.
///
/// model: a registry name ("smollm2-135m": its fp32 folder) or an fp32 model folder holding
/// model.safetensors. learner: the learner's settings (a dict or a LearnerConfig:
/// learning_rate, kl_coef, lora_rank, ...). generation: sampling of the rollouts, over the
/// default temperature 1 and 192 new tokens; greedy rollouts are refused (every rollout of a
/// group would be the same and nothing would be learned). python: the interpreter the learner
/// runs in (default: this one, which needs the frognano[torch] extra). rollout_server: a dict
/// {"url", "model", "api_key_env", "concurrency"} naming a `frognano serve --allow-reload`
/// serving the same start folder. work_dir: where weights and checkpoints go (default: a
/// temporary folder removed with the object).
#[pyclass(frozen, module = "frognano", name = "LanguageModelPolicy")]
pub(crate) struct PyLanguageModelPolicy {
    inner: Arc<Mutex<LanguageModelPolicy>>,
    weights: WeightsHandle,
    start: PathBuf,
    work_dir: PathBuf,
    config: LanguageModelConfig,
    /// The default work folder, removed when the object goes.
    _temporary: Option<tempfile::TempDir>,
}

impl PyLanguageModelPolicy {
    /// The policy as the trainer's learning component, sharing this object's state.
    pub(crate) fn shared(&self) -> Box<dyn LearningPolicy> {
        Box::new(Shared(self.inner.clone()))
    }

    /// The policy as an acting component (evaluation), sharing this object's weights.
    pub(crate) fn acting(&self) -> Box<dyn Policy> {
        Box::new(Shared(self.inner.clone()))
    }

    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut LanguageModelPolicy) -> T + Send,
    ) -> T {
        let inner = &self.inner;
        py.detach(|| f(&mut lock(inner)))
    }
}

/// Learner settings: None, a dict, or a dataclass such as `LearnerConfig` (its fields).
fn learner_settings(
    py: Python<'_>,
    learner: Option<&Bound<'_, PyAny>>,
) -> PyResult<Map<String, Value>> {
    let Some(learner) = learner.filter(|l| !l.is_none()) else {
        return Ok(Map::new());
    };
    let value = if learner.hasattr("__dataclass_fields__")? {
        let fields = py
            .import("dataclasses")?
            .call_method1("asdict", (learner,))?;
        from_py_json(py, &fields)?
    } else if learner.is_instance_of::<PyDict>() {
        from_py_json(py, learner)?
    } else {
        return Err(invalid(
            py,
            format!(
                "learner must be a dict of learner settings or a LearnerConfig, got {}",
                type_name(learner)
            ),
        ));
    };
    match value {
        // Unset settings keep the learner's defaults.
        Value::Object(map) => Ok(map.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        _ => Err(invalid(py, "learner settings must be a dict".into())),
    }
}

#[pymethods]
impl PyLanguageModelPolicy {
    #[new]
    #[pyo3(signature = (
        model, learner=None, *, work_dir=None, generation=None, system_prompt=None,
        max_prompt_tokens=0, intra_threads=0, python=None, rollout_server=None,
        runtime_library=None, progress=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        model: Bound<'_, PyAny>,
        learner: Option<Bound<'_, PyAny>>,
        work_dir: Option<PathBuf>,
        generation: Option<Bound<'_, PyAny>>,
        system_prompt: Option<String>,
        max_prompt_tokens: i64,
        intra_threads: i64,
        python: Option<PathBuf>,
        rollout_server: Option<Bound<'_, PyAny>>,
        runtime_library: Option<PathBuf>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let model = model_spec(&model)?;
        let rollout_server: Option<RolloutServer> = match rollout_server.filter(|s| !s.is_none()) {
            Some(server) => Some(parse(py, "rollout_server", from_py_json(py, &server)?)?),
            None => None,
        };
        let python = match python {
            Some(python) => python,
            None => py.import("sys")?.getattr("executable")?.extract()?,
        };
        let config = LanguageModelConfig {
            model,
            generation: policy_generation(
                py,
                LanguageModelConfig::default().generation,
                generation.as_ref(),
            )?,
            system_prompt,
            max_prompt_tokens: count(py, "max_prompt_tokens", max_prompt_tokens)?,
            intra_threads: count(py, "intra_threads", intra_threads)?,
            learner: learner_settings(py, learner.as_ref())?,
            python: Some(python),
            rollout_server,
            ..LanguageModelConfig::default()
        };
        config.validate().map_err(|e| py_err(py, e))?;
        if config.rollout_server.is_none() {
            ensure_runtime(py, runtime_library)?;
        }
        let (work_dir, temporary) = match work_dir {
            Some(dir) => (dir, None),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("frognano-llm-")
                    .tempdir()
                    .map_err(|e| invalid(py, format!("cannot make a work folder: {e}")))?;
                (dir.path().to_path_buf(), Some(dir))
            }
        };
        let printer = progress_printer(progress);
        let (policy, start) = py
            .detach(|| {
                let start = config.start_folder(&printer)?;
                LanguageModelPolicy::new(&config, &start, &work_dir, &printer)
                    .map(|policy| (policy, start))
            })
            .map_err(|e| py_err(py, e))?;
        Ok(PyLanguageModelPolicy {
            weights: policy.weights(),
            inner: Arc::new(Mutex::new(policy)),
            start,
            work_dir,
            config,
            _temporary: temporary,
        })
    }

    /// act(contexts) -> list of dicts {"action", "logprobs", "token_ids", "prompt_ids", "decision"}
    ///
    /// The next action of each episode context (dicts with task_id, initial, history), sampled
    /// from the current weights as one batch.
    fn act<'py>(
        &self,
        py: Python<'py>,
        contexts: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        shared_act(py, &self.inner, &contexts)
    }

    /// learn(batch) -> stats dict (loss, updated, updates, handback_s, rollout_tokens_per_s, ...)
    ///
    /// One update from a TrainingBatch dict (what GrpoTrainer hands a learner), then the
    /// hand-back when the weights changed.
    fn learn<'py>(&self, py: Python<'py>, batch: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        shared_learn(py, &self.inner, &batch)
    }

    /// state() -> dict {"kind": "language-model", "updates", "learner_checkpoint"}: writes a
    /// learner checkpoint under work_dir (the two newest are kept).
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        shared_state(py, &self.inner)
    }

    /// load_state(state): restores a state() (learner weights, optimizer, RNG) and hands its
    /// weights to the rollouts.
    fn load_state(&self, py: Python<'_>, state: Bound<'_, PyAny>) -> PyResult<()> {
        shared_load_state(py, &self.inner, &state)
    }

    /// Updates applied so far.
    #[getter]
    fn updates(&self, py: Python<'_>) -> usize {
        self.with(py, |p| p.updates())
    }

    /// The model folder the rollouts run now (a pathlib.Path; it changes after every update).
    #[getter]
    fn weights<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let path = lock(&self.weights).clone();
        py.import("pathlib")?.getattr("Path")?.call1((path,))
    }

    /// The fp32 model folder training started from.
    #[getter]
    fn start(&self) -> String {
        path_text(&self.start)
    }

    /// Where weights and checkpoints go.
    #[getter]
    fn work_dir(&self) -> String {
        path_text(&self.work_dir)
    }

    /// The learner's `init` answer (device, parameter counts).
    #[getter]
    fn learner_info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let info = self.with(py, |p| p.learner_info());
        to_py(py, &info)
    }

    /// The settings (dict: the `[policy]` table of a training config).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.config)
    }

    fn __repr__(&self) -> String {
        format!(
            "LanguageModelPolicy(start={:?}, weights={:?}, temperature={}, max_new_tokens={})",
            path_text(&self.start),
            path_text(&lock(&self.weights)),
            self.config.generation.temperature,
            self.config.generation.max_new_tokens
        )
    }
}

/// Adds this module's class to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLanguageModelPolicy>()
}
