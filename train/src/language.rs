//! RL of a language model: an [`OnnxPolicy`] rolls out, a learner process updates the
//! weights from token-exact batches, and the new weights come back to ONNX Runtime.
//!
//! The learner is the reference PyTorch learner of the Python package (`torch_learner.py`),
//! run as a child process in the learner environment (or any interpreter given) and driven
//! over a JSON-lines protocol on its stdin/stdout: `init`, `learn` (a [`TokenBatch`] file),
//! `export_onnx` (the hand-back: the updated weights as an ONNX model folder), `save` and
//! `load` (weights, optimizer and RNG state, for checkpoints). A request that fails answers
//! `{"ok": false, "error", "kind"}` and the process keeps serving; a process that dies is an
//! error naming the last lines it wrote to stderr.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use frognano_core::{
    LearnStats, Learner, Policy, PolicyContext, PolicyOutput, TokenBatch, TrainingBatch,
};
use frognano_llm::{GenerationOptions, OnnxPolicy, OnnxPolicyConfig, assets};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{Result, TrainError};

/// The language-model policy of a training job (`[policy] kind = "onnx"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LanguageModelConfig {
    /// A known model name (`smollm2-135m`) or a model folder; training runs its fp32 folder,
    /// which must hold the Hugging Face weights (`model.safetensors`) the learner starts from.
    pub model: String,
    /// Sampling of the rollouts (default: temperature 1, 192 new tokens).
    pub generation: GenerationOptions,
    /// Sampling of the held-out evaluations (default: greedy, the rollouts' token budget).
    pub eval_generation: Option<GenerationOptions>,
    /// System prompt (default: the policy's).
    pub system_prompt: Option<String>,
    /// Longest prompt in tokens (0: the model's context minus the reply budget).
    pub max_prompt_tokens: usize,
    /// ONNX Runtime threads (0: one per core).
    pub intra_threads: usize,
    /// Settings of the learner (learning_rate, clip_low, clip_high, kl_coef, lora_rank, ...),
    /// passed to it as they are: it checks them and names any it does not know.
    pub learner: serde_json::Map<String, Value>,
    /// Python interpreter to run the learner with (default: the managed learner environment,
    /// installed on first use).
    pub python: Option<PathBuf>,
}

impl Default for LanguageModelConfig {
    fn default() -> Self {
        LanguageModelConfig {
            model: "smollm2-135m".into(),
            generation: GenerationOptions {
                temperature: 1.0,
                ..GenerationOptions::greedy(192)
            },
            eval_generation: None,
            system_prompt: None,
            max_prompt_tokens: 0,
            intra_threads: 0,
            learner: serde_json::Map::new(),
            python: None,
        }
    }
}

impl LanguageModelConfig {
    /// Checks the settings the Rust side owns.
    pub fn validate(&self) -> Result<()> {
        if self.model.trim().is_empty() {
            return Err(TrainError::Config("policy.model must name a model".into()));
        }
        self.generation
            .validate()
            .map_err(|e| TrainError::Config(format!("policy.generation: {e}")))?;
        if let Some(eval) = &self.eval_generation {
            eval.validate()
                .map_err(|e| TrainError::Config(format!("policy.eval_generation: {e}")))?;
        }
        Ok(())
    }

    /// The evaluation sampling: the configured one, else greedy with the rollouts' budget.
    pub fn evaluation_generation(&self) -> GenerationOptions {
        self.eval_generation
            .clone()
            .unwrap_or_else(|| GenerationOptions {
                stop: self.generation.stop.clone(),
                stop_token_ids: self.generation.stop_token_ids.clone(),
                ..GenerationOptions::greedy(self.generation.max_new_tokens)
            })
    }

    /// The fp32 model folder training starts from (fetched and converted on first use for a
    /// known model name).
    pub fn start_folder(&self, progress: assets::Progress<'_>) -> Result<PathBuf> {
        // A folder or `name:precision` as given; a bare name means its fp32 folder.
        let spec = if Path::new(&self.model).exists() || self.model.contains(':') {
            self.model.clone()
        } else {
            format!("{}:fp32", self.model)
        };
        let dir = assets::resolve_model(&spec, progress).map_err(frognano_core::Error::from)?;
        if !dir.join("model.safetensors").is_file() {
            return Err(TrainError::Config(format!(
                "{} holds no model.safetensors (the Hugging Face weights a learner trains); \
                 train the fp32 folder of a converted model, or convert a checkpoint with \
                 `frognano models convert`",
                dir.display()
            )));
        }
        Ok(dir)
    }

    /// The policy's prompting and sampling with `generation`.
    pub fn policy_config(&self, generation: GenerationOptions) -> OnnxPolicyConfig {
        OnnxPolicyConfig {
            generation,
            system_prompt: self.system_prompt.clone(),
            max_prompt_tokens: self.max_prompt_tokens,
            intra_threads: self.intra_threads,
        }
    }
}

fn learner_error(kind: &str, message: impl Into<String>) -> TrainError {
    TrainError::Learner {
        kind: kind.to_string(),
        message: message.into(),
    }
}

/// A running learner process (see the module docs for the protocol).
#[derive(Debug)]
pub struct LearnerProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    /// The `init` answer: device, parameter counts.
    pub info: Value,
}

impl LearnerProcess {
    /// Starts the learner with `python` (default: the managed learner environment, installed
    /// on first use) on the Hugging Face weights in `model_dir`, with `settings`.
    pub fn start(
        python: Option<&Path>,
        model_dir: &Path,
        settings: &serde_json::Map<String, Value>,
        progress: assets::Progress<'_>,
    ) -> Result<Self> {
        let setup = |e: frognano_llm::InferenceError| TrainError::Core(e.into());
        let python = match python {
            Some(p) => p.to_path_buf(),
            None => assets::ensure_learner_env(progress).map_err(setup)?.python,
        };
        let script = assets::learner_script().map_err(setup)?;
        let converter = assets::converter_script().map_err(setup)?;
        let mut child = Command::new(&python)
            .arg(&script)
            .arg("serve")
            .env("FROGNANO_CONVERTER", &converter)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                learner_error(
                    "setup",
                    format!("cannot start the learner with {}: {e}", python.display()),
                )
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(learner_error("setup", "the learner's pipes are missing"));
        };
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr)
                .lines()
                .map_while(std::result::Result::ok)
            {
                if std::env::var_os("FROGNANO_LEARNER_LOG").is_some() {
                    eprintln!("learner: {line}");
                }
                let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
                tail.push_back(line);
                if tail.len() > 20 {
                    tail.pop_front();
                }
            }
        });
        let mut process = LearnerProcess {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr_tail,
            info: Value::Null,
        };
        process.info = process.request(json!({
            "op": "init",
            "model": model_dir,
            "config": settings,
        }))?;
        Ok(process)
    }

    /// Sends one request and returns the answer's fields (without `ok`); a failed request is
    /// a [`TrainError::Learner`] with the learner's message.
    pub fn request(&mut self, request: Value) -> Result<Value> {
        let op = request["op"].as_str().unwrap_or("?").to_string();
        let line = serde_json::to_string(&request).map_err(frognano_core::Error::from)?;
        let sent = writeln!(self.stdin, "{line}").and_then(|()| self.stdin.flush());
        let mut answer = String::new();
        let read = sent.and_then(|()| self.stdout.read_line(&mut answer));
        match read {
            Ok(n) if n > 0 => {}
            _ => {
                // Give the reader thread a moment to collect the last words.
                std::thread::sleep(std::time::Duration::from_millis(200));
                let status = self.child.try_wait().ok().flatten();
                let tail = self.stderr_tail();
                return Err(learner_error(
                    "died",
                    format!(
                        "the learner process ended during `{op}`{}: {tail}",
                        status.map(|s| format!(" ({s})")).unwrap_or_default()
                    ),
                ));
            }
        }
        let mut value: Value = serde_json::from_str(answer.trim()).map_err(|e| {
            learner_error(
                "protocol",
                format!("unreadable answer to `{op}`: {e}: {}", answer.trim()),
            )
        })?;
        if value["ok"] != Value::Bool(true) {
            let kind = value["kind"].as_str().unwrap_or("internal").to_string();
            let message = value["error"]
                .as_str()
                .unwrap_or("the learner failed without saying why")
                .to_string();
            return Err(learner_error(&kind, format!("`{op}`: {message}")));
        }
        if let Some(map) = value.as_object_mut() {
            map.remove("ok");
        }
        Ok(value)
    }

    fn stderr_tail(&self) -> String {
        let tail = self.stderr_tail.lock().unwrap_or_else(|p| p.into_inner());
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        if lines.is_empty() {
            "(it wrote nothing to stderr)".into()
        } else {
            lines.join("\n")
        }
    }
}

impl Drop for LearnerProcess {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "shutdown"}));
        let _ = self.stdin.flush();
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The model folder the rollouts currently run, shared with whoever evaluates the policy.
pub type WeightsHandle = Arc<Mutex<PathBuf>>;

/// An [`OnnxPolicy`] that learns: rollouts in ONNX Runtime, updates in a
/// [`LearnerProcess`], new weights handed back after every update.
#[derive(Debug)]
pub struct LanguageModelPolicy {
    policy: OnnxPolicy,
    learner: Mutex<LearnerProcess>,
    work_dir: PathBuf,
    weights: WeightsHandle,
    updates: usize,
    rollout_tokens: u64,
    rollout_s: f64,
}

/// Learner checkpoints kept: the last one and the one before it, which the trainer's
/// checkpoint still names if it is interrupted while writing the next.
const KEPT_CHECKPOINTS: usize = 2;

impl LanguageModelPolicy {
    /// A policy rolling out `start` (an fp32 model folder with `model.safetensors`) with
    /// `config`'s sampling and learning with a learner process on the same weights; new
    /// weights and learner checkpoints go under `work_dir`.
    pub fn new(
        config: &LanguageModelConfig,
        start: &Path,
        work_dir: &Path,
        progress: assets::Progress<'_>,
    ) -> Result<Self> {
        config.validate()?;
        std::fs::create_dir_all(work_dir)
            .map_err(TrainError::io(format!("create {}", work_dir.display())))?;
        let policy = OnnxPolicy::load(start, config.policy_config(config.generation.clone()))
            .map_err(frognano_core::Error::from)?;
        let learner =
            LearnerProcess::start(config.python.as_deref(), start, &config.learner, progress)?;
        Ok(LanguageModelPolicy {
            policy,
            learner: Mutex::new(learner),
            work_dir: work_dir.to_path_buf(),
            weights: Arc::new(Mutex::new(start.to_path_buf())),
            updates: 0,
            rollout_tokens: 0,
            rollout_s: 0.0,
        })
    }

    /// The folder the rollouts run now (it changes after every update).
    pub fn weights(&self) -> WeightsHandle {
        self.weights.clone()
    }

    /// Updates applied so far.
    pub fn updates(&self) -> usize {
        self.updates
    }

    /// The learner's `init` answer (device, parameters).
    pub fn learner_info(&self) -> Value {
        self.lock().info.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LearnerProcess> {
        self.learner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Exports the learner's weights as the model folder of update `update` and makes the
    /// rollouts run it; returns the seconds it took. Older folders are removed.
    fn hand_back(&mut self, update: usize) -> Result<f64> {
        let started = Instant::now();
        let root = self.work_dir.join("weights");
        let dir = root.join(format!("update-{update:05}"));
        let partial = root.join(format!("update-{update:05}.partial"));
        let _ = std::fs::remove_dir_all(&partial);
        std::fs::create_dir_all(&root)
            .map_err(TrainError::io(format!("create {}", root.display())))?;
        self.lock().request(json!({
            "op": "export_onnx",
            "dir": partial,
            "precisions": ["fp32"],
        }))?;
        // The export writes the folder whole or not at all.
        let _ = std::fs::remove_dir_all(&dir);
        let exported = if partial.join("fp32").is_dir() {
            partial.join("fp32")
        } else {
            partial.clone()
        };
        std::fs::rename(&exported, &dir).map_err(TrainError::io(format!(
            "move the new weights to {}",
            dir.display()
        )))?;
        let _ = std::fs::remove_dir_all(&partial);
        self.policy
            .reload(&dir)
            .map_err(frognano_core::Error::from)?;
        let previous = std::mem::replace(
            &mut *self.weights.lock().unwrap_or_else(|p| p.into_inner()),
            dir.clone(),
        );
        if previous.starts_with(&root) && previous != dir {
            let _ = std::fs::remove_dir_all(&previous);
        }
        Ok(started.elapsed().as_secs_f64())
    }

    fn checkpoint_path(&self, update: usize) -> PathBuf {
        self.work_dir
            .join("checkpoints")
            .join(format!("learner-{update:05}.pt"))
    }
}

impl Policy for LanguageModelPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        let started = Instant::now();
        let outputs = self.policy.act(contexts)?;
        self.rollout_s += started.elapsed().as_secs_f64();
        self.rollout_tokens += outputs
            .iter()
            .map(|o| o.token_ids.as_ref().map_or(0, Vec::len) as u64)
            .sum::<u64>();
        Ok(outputs)
    }
}

impl Learner for LanguageModelPolicy {
    fn learn(&mut self, batch: &TrainingBatch) -> frognano_core::Result<LearnStats> {
        let tokens = TokenBatch::from_batch(batch)?;
        let mut stats = if tokens.trained_tokens() == 0 {
            // Nothing to learn (every group had equal rewards): no update, but the same
            // metrics, so every iteration reports a loss.
            json!({"loss": 0.0, "pg_loss": 0.0, "learner_tokens": 0, "skipped": true})
                .as_object()
                .cloned()
                .unwrap_or_default()
        } else {
            let dir = self.work_dir.join("batches");
            std::fs::create_dir_all(&dir)?;
            let path = dir.join(format!("batch-{:05}.safetensors", batch.iteration));
            tokens.save(&path)?;
            let answer = self
                .lock()
                .request(json!({"op": "learn", "batch": path}))
                .map_err(frognano_core::Error::from)?;
            let mut stats = answer["stats"].as_object().cloned().unwrap_or_default();
            // The learner skips batches it has nothing to train on (every trajectory masked
            // as truncated, say): no update, nothing to hand back.
            let skipped = stats
                .get("skipped")
                .is_some_and(|s| !s.is_null() && *s != json!(false));
            if !skipped {
                self.updates += 1;
                let seconds = self
                    .hand_back(self.updates)
                    .map_err(frognano_core::Error::from)?;
                stats.insert("handback_s".into(), json!(seconds));
            }
            stats
        };
        stats.insert("updates".into(), json!(self.updates));
        stats.insert("batch_steps".into(), json!(tokens.steps()));
        stats.insert(
            "rollout_tokens_per_s".into(),
            json!(self.rollout_tokens as f64 / self.rollout_s.max(1e-9)),
        );
        stats.insert("rollout_tokens".into(), json!(self.rollout_tokens));
        self.rollout_tokens = 0;
        self.rollout_s = 0.0;
        Ok(stats)
    }

    fn state(&self) -> frognano_core::Result<Value> {
        let path = self.checkpoint_path(self.updates);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        self.lock()
            .request(json!({"op": "save", "path": path}))
            .map_err(frognano_core::Error::from)?;
        // Keep the newest few; the trainer's checkpoint names the newest.
        if let Ok(entries) = std::fs::read_dir(self.work_dir.join("checkpoints")) {
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pt"))
                .collect();
            files.sort();
            let excess = files.len().saturating_sub(KEPT_CHECKPOINTS);
            for old in &files[..excess] {
                let _ = std::fs::remove_file(old);
            }
        }
        Ok(json!({
            "kind": "language-model",
            "updates": self.updates,
            "learner_checkpoint": path,
        }))
    }

    fn load_state(&mut self, state: &Value) -> frognano_core::Result<()> {
        let bad = |message: String| {
            frognano_core::Error::invalid_as(
                frognano_core::ErrorKind::Training,
                "language-model checkpoint",
                message,
            )
        };
        if state["kind"] != "language-model" {
            return Err(bad("not a language-model policy state".into()));
        }
        let path = state["learner_checkpoint"]
            .as_str()
            .ok_or_else(|| bad("no learner_checkpoint".into()))?;
        let updates = state["updates"]
            .as_u64()
            .ok_or_else(|| bad("no update count".into()))? as usize;
        if !Path::new(path).is_file() {
            return Err(bad(format!("the learner checkpoint {path} is missing")));
        }
        self.lock()
            .request(json!({"op": "load", "path": path}))
            .map_err(frognano_core::Error::from)?;
        self.updates = updates;
        if updates > 0 {
            self.hand_back(updates)
                .map_err(frognano_core::Error::from)?;
        }
        Ok(())
    }
}
