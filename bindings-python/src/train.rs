//! Training: `GrpoTrainer`, group advantages, learnability and the whole `train` job.
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

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, TryLockError};

use frognano_core::Trainer;
use frognano_env::EnvConfig;
use frognano_sandbox::CancelFlag;
use frognano_train::{Estimator, GrpoTrainer, RunObserver, TrainConfig, TrainerConfig};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{Value, json};

use crate::convert::{
    ErrorSlot, PyComponent, from_py_json, invalid, lock, run_interruptibly, tasks_from_py, to_py,
};
use crate::curriculum::task_source;
use crate::errors::py_err;
use crate::policy::{Interruptible, acting_policy, learning_policy};
use crate::sandbox::{PySandbox, sandbox_of};

// ---------------------------------------------------------------------------------------------
// GrpoTrainer.

/// GrpoTrainer(sandbox, policy, synthesizer, *, tasks_per_iteration=5, group_size=4,
///             estimator="grpo", drop_zero_variance=True, workers=0, max_steps=40,
///             metrics_file=None, format_reward=None, rollouts=None)
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
/// state(), load_state(state)). rollouts: run the iterations' episodes elsewhere:
/// rollouts(policy_state, tasks, env) -> one {"record"} or {"failed"} entry per task, e.g. a Ray
/// cluster's (`frognano.distributed.Cluster(...).rollouts`). Calls release the GIL; Ctrl-C stops an iteration at the next
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
        metrics_file=None, format_reward=None, rollouts=None
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
        format_reward: Option<f64>,
        rollouts: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let d = TrainerConfig::default();
        let config = TrainerConfig {
            tasks_per_iteration: tasks_per_iteration.unwrap_or(d.tasks_per_iteration),
            group_size: group_size.unwrap_or(d.group_size),
            estimator: Estimator::parse(estimator).map_err(|e| py_err(py, e))?,
            drop_zero_variance: drop_zero_variance.unwrap_or(d.drop_zero_variance),
            workers: workers.unwrap_or(d.workers),
            envs: d.envs,
            env: EnvConfig {
                max_steps: max_steps.unwrap_or(d.env.max_steps),
                ..d.env
            },
            format_reward: format_reward.unwrap_or(d.format_reward),
        };
        config.validate().map_err(|e| py_err(py, e))?;
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
            .map_err(|e| py_err(py, e))?;
        trainer.set_cancel_flag(cancel.clone());
        if let Some(runner) = episode_runner(rollouts, &slot) {
            trainer.set_episode_runner(runner);
        }
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
        let metrics = Self::settle(self.run(py, |t| t.iterate())?, |e| py_err(py, e))?;
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
        let (summary, records) = Self::settle(outcome, |e| py_err(py, e))?;
        Ok((to_py(py, &summary)?, to_py(py, &records)?))
    }

    /// save_checkpoint(path): writes the policy's and the synthesizer's state and the metrics
    /// so far (JSON, replaced atomically).
    fn save_checkpoint(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        Self::settle(self.run(py, |t| t.save_checkpoint(&path))?, |e| {
            py_err(py, e)
        })
    }

    /// resume(path): restores a checkpoint; the next iteration continues where it stopped.
    fn resume(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        Self::settle(self.run(py, |t| t.resume(&path))?, |e| py_err(py, e))
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
    let estimator = Estimator::parse(estimator).map_err(|e| py_err(py, e))?;
    Ok(frognano_train::group_advantages(&rewards, estimator))
}

/// learnability(p, target=0.5) -> float
///
/// The frontier's score of a success rate p: p^a (1-p)^b with its mode (1.0) at `target`
/// (a = 2 target, b = 2 (1 - target)); 4 p (1 - p) for the default target.
#[pyfunction]
#[pyo3(signature = (p, target=0.5))]
fn learnability(py: Python<'_>, p: f64, target: f64) -> PyResult<f64> {
    frognano_train::checked_learnability(p, target).map_err(|e| py_err(py, e))
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

/// A Python callable as the trainer's episode runner: rollouts(policy_state, tasks, env) returns
/// one entry per task, in order: {"record": episode record} or {"failed": {"error": ...}}
/// (what `frognano.distributed.Cluster.rollouts` gives).
struct PyEpisodeRunner(PyComponent);

impl frognano_train::EpisodeRunner for PyEpisodeRunner {
    fn run(
        &mut self,
        policy_state: &Value,
        tasks: &[frognano_core::Task],
        env: &EnvConfig,
        on_done: &mut dyn FnMut(&frognano_env::EpisodeRecord),
    ) -> frognano_train::Result<Vec<Result<frognano_env::EpisodeRecord, String>>> {
        let entries = self.0.call("episode runner", |py, runner| {
            let results = runner.call1((
                to_py(py, policy_state)?,
                to_py(py, &tasks)?,
                to_py(py, env)?,
            ))?;
            from_py_json(py, &results)
        })?;
        let Value::Array(entries) = entries else {
            return Err(frognano_core::Error::invalid(
                "episode runner",
                "it must return a list with one entry per task",
            )
            .into());
        };
        if entries.len() != tasks.len() {
            return Err(frognano_core::Error::invalid(
                "episode runner",
                format!(
                    "it returned {} entries for {} tasks",
                    entries.len(),
                    tasks.len()
                ),
            )
            .into());
        }
        let mut out = Vec::with_capacity(entries.len());
        for mut entry in entries {
            if let Some(record) = entry.get_mut("record").map(Value::take) {
                let record: frognano_env::EpisodeRecord =
                    serde_json::from_value(record).map_err(|e| {
                        frognano_core::Error::invalid("episode runner", format!("a record: {e}"))
                    })?;
                on_done(&record);
                out.push(Ok(record));
            } else {
                let error = entry["failed"]["error"]
                    .as_str()
                    .unwrap_or("the episode did not run")
                    .to_string();
                out.push(Err(error));
            }
        }
        Ok(out)
    }
}

fn episode_runner(
    rollouts: Option<Bound<'_, PyAny>>,
    slot: &ErrorSlot,
) -> Option<Box<dyn frognano_train::EpisodeRunner>> {
    rollouts.map(|callable| -> Box<dyn frognano_train::EpisodeRunner> {
        Box::new(PyEpisodeRunner(PyComponent {
            object: callable.unbind(),
            slot: slot.clone(),
        }))
    })
}

/// train(config=None, out=None, *, sandbox=None, progress=None, rollouts=None) -> report dict
///
/// The whole training job behind `frognano train`: synthesize a held-out set (and, for the
/// static and easy-to-hard curricula, a training set), train the configured policy with the
/// configured curriculum, and evaluate it on the held-out set before and after. config: a dict
/// of TrainConfig fields (read strictly: an unknown key at any depth is a ConfigError) or the
/// path of a TOML file (None: the main job's, examples/train/main.toml, as `frognano train`
/// runs it without --config: SmolLM2-135M trained with RL, fetched on first use; a dict's
/// missing fields take the defaults, which train the repair policy). Without repositories, the bundled
/// examples/repos/{textkit,tinyparse,ordstructs} are used (under the current directory, else
/// the source tree the package was built from), as `frognano train` does. out: output directory (metrics.jsonl, checkpoint.json, held_out.jsonl, eval.jsonl;
/// an existing checkpoint is resumed). progress: a callable receiving (event, data) for
/// "stage" ({"name"}) and "iteration" (the metrics). rollouts: an episode runner for the
/// training rollouts (rollouts(policy_state, tasks, env) -> entries; frognano.train(ray_address=)
/// passes a cluster's). Returns the TrainReport as a dict.
#[pyfunction]
#[pyo3(signature = (config=None, out=None, *, sandbox=None, progress=None, rollouts=None))]
fn train<'py>(
    py: Python<'py>,
    config: Option<Bound<'py, PyAny>>,
    out: Option<PathBuf>,
    sandbox: Option<PyRef<'py, PySandbox>>,
    progress: Option<Py<PyAny>>,
    rollouts: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let slot: ErrorSlot = Arc::default();
    let runner = episode_runner(rollouts, &slot);
    let mut config = match config {
        None => frognano_train::main_job_config().map_err(|e| py_err(py, e))?,
        Some(c) if c.is_instance_of::<PyDict>() => {
            TrainConfig::from_json(from_py_json(py, &c)?).map_err(|e| py_err(py, e))?
        }
        Some(c) => {
            let path: PathBuf = c.extract()?;
            TrainConfig::from_file(&path).map_err(|e| py_err(py, e))?
        }
    };
    if out.is_some() {
        config.out = out;
    }
    let config = config.or_bundled_repos().map_err(|e| py_err(py, e))?;
    config.validate().map_err(|e| py_err(py, e))?;
    let sandbox = sandbox_of(py, sandbox)?;
    let cancel: CancelFlag = Arc::default();
    let flag = cancel.clone();
    let report = run_interruptibly(py, &cancel, move || {
        let mut observer = PyObserver { callback: progress };
        let pools = frognano_train::prepare_pools(&sandbox, &config, &mut observer)?;
        frognano_train::run_with(&sandbox, &config, &pools, &mut observer, Some(flag), runner)
    })?;
    if let Some(raised) = lock(&slot).take() {
        return Err(raised);
    }
    let report = report.map_err(|e| py_err(py, e))?;
    to_py(py, &report)
}

/// Adds this module's classes and functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGrpoTrainer>()?;
    add_functions!(m: group_advantages, learnability, train);
    Ok(())
}
