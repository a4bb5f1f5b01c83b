//! RL of a language model: an [`OnnxPolicy`] rolls out, a learner process updates the
//! weights from token-exact batches, and the new weights come back to ONNX Runtime.
//!
//! The rollouts can instead go through a served model ([`RolloutServer`]: a
//! `frognano serve --allow-reload` serving the same start model), the pattern of trainers that
//! sample from a vLLM server: each update's weights are then loaded into that server through
//! `POST /v1/frognano/reload` before the next rollouts.
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
use frognano_serve::{HttpApi, HttpPolicy, HttpPolicyConfig};
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
    /// Roll out through a served model instead of an in-process ONNX Runtime session (default:
    /// in process). See [`RolloutServer`].
    pub rollout_server: Option<RolloutServer>,
}

/// A served model the rollouts go through (`[policy.rollout_server]`): a
/// `frognano serve --allow-reload` on this machine serving the same start model (the fp32
/// folder); the trainer's rollouts go through it with [`HttpPolicy`] (with the
/// policy's `generation` and `system_prompt`), and after every update the new weights are
/// loaded into it through `/v1/frognano/reload`. The server must return the prompt and reply
/// token ids and log-probs (vLLM's `return_token_ids`, which `frognano serve` supports); a
/// reply without them stops training with an error. The prompts are rendered here with the
/// start folder's chat template, fitted to `max_prompt_tokens` like local rollouts', and sent
/// as token ids on the completions API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutServer {
    /// Base URL of the API, e.g. `http://127.0.0.1:8000/v1`.
    pub url: String,
    /// The model name the server serves (`frognano serve --served-model-name`).
    pub model: String,
    /// Environment variable holding the server's API key (default: none sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Most requests in flight at once (default 8; the server batches them).
    #[serde(default = "default_rollout_concurrency")]
    pub concurrency: usize,
}

fn default_rollout_concurrency() -> usize {
    8
}

impl RolloutServer {
    /// A server at `url` serving `model`, without an API key, 8 requests at once.
    pub fn new(url: impl Into<String>, model: impl Into<String>) -> Self {
        RolloutServer {
            url: url.into(),
            model: model.into(),
            api_key_env: None,
            concurrency: default_rollout_concurrency(),
        }
    }

    /// Checks the settings (not that the server runs: [`LanguageModelPolicy::new`] does).
    pub fn validate(&self) -> Result<()> {
        let bad = |message: String| {
            Err(TrainError::Config(format!(
                "policy.rollout_server.{message}"
            )))
        };
        let url = self.url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() <= 8 {
            return bad(format!(
                "url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {:?}",
                self.url
            ));
        }
        if self.model.trim().is_empty() {
            return bad("model must name the model the server serves".into());
        }
        if self
            .api_key_env
            .as_deref()
            .is_some_and(|v| v.trim().is_empty())
        {
            return bad("api_key_env must name an environment variable".into());
        }
        if !(1..=1024).contains(&self.concurrency) {
            return bad(format!(
                "concurrency must be in 1..=1024, got {}",
                self.concurrency
            ));
        }
        Ok(())
    }

    /// The API key from `api_key_env` (none when no variable is named; an error when the
    /// named one is unset or empty).
    fn api_key(&self) -> Result<Option<String>> {
        match &self.api_key_env {
            None => Ok(None),
            Some(var) => match std::env::var(var) {
                Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_string())),
                _ => Err(TrainError::Config(format!(
                    "policy.rollout_server.api_key_env: the environment variable {var} is \
                     unset or empty"
                ))),
            },
        }
    }
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
            rollout_server: None,
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
        if self.generation.temperature <= frognano_llm::sampling::GREEDY_TEMPERATURE {
            return Err(TrainError::Config(
                "policy.generation.temperature is 0 (greedy): every rollout of a group would \
                 be the same, every group would have equal rewards and nothing would be \
                 learned; sample the rollouts (temperature 1 is the default) and set \
                 policy.eval_generation for greedy evaluations"
                    .into(),
            ));
        }
        if let Some(eval) = &self.eval_generation {
            eval.validate()
                .map_err(|e| TrainError::Config(format!("policy.eval_generation: {e}")))?;
        }
        if let Some(server) = &self.rollout_server {
            server.validate()?;
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

/// A key kept out of logs.
struct SecretKey(String);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where the rollouts run.
#[derive(Debug)]
enum Rollouts {
    /// In process, in ONNX Runtime.
    Local(Box<OnnxPolicy>),
    /// Through a served model that reloads every update's weights.
    Served {
        policy: Box<HttpPolicy>,
        server: RolloutServer,
        api_key: Option<SecretKey>,
    },
}

impl Rollouts {
    fn start(config: &LanguageModelConfig, start: &Path) -> Result<Self> {
        let Some(server) = &config.rollout_server else {
            let policy = OnnxPolicy::load(start, config.policy_config(config.generation.clone()))
                .map_err(frognano_core::Error::from)?;
            return Ok(Rollouts::Local(Box::new(policy)));
        };
        let api_key = server.api_key()?;
        // The completions API with the prompt rendered here, from the start folder's tokenizer
        // and chat template, and sent as token ids: the server runs exactly the recorded ids,
        // and the prompt is fitted to `max_prompt_tokens` as local rollouts fit theirs.
        let http = HttpPolicyConfig {
            base_url: server.url.trim().to_string(),
            model: server.model.clone(),
            api: HttpApi::Completions,
            chat_template_dir: Some(start.to_path_buf()),
            token_id_prompts: true,
            max_prompt_tokens: config.max_prompt_tokens,
            tool_calls: false,
            // The key is sent by name of its variable; none named: none sent.
            api_key_env: server.api_key_env.clone().unwrap_or_default(),
            generation: config.generation.clone(),
            logprobs: true,
            system_prompt: config.system_prompt.clone(),
            concurrency: server.concurrency,
            ..HttpPolicyConfig::default()
        };
        let policy = HttpPolicy::connect(http).map_err(|e| {
            TrainError::Config(format!(
                "policy.rollout_server: {e} (start it with `frognano serve --allow-reload` on \
                 the start model)"
            ))
        })?;
        Ok(Rollouts::Served {
            policy: Box::new(policy),
            server: server.clone(),
            api_key: api_key.map(SecretKey),
        })
    }

    fn act(&mut self, contexts: &[PolicyContext]) -> frognano_core::Result<Vec<PolicyOutput>> {
        match self {
            Rollouts::Local(policy) => policy.act(contexts),
            Rollouts::Served { policy, server, .. } => {
                let outputs = policy.act(contexts)?;
                check_served_outputs(server, &outputs)?;
                Ok(outputs)
            }
        }
    }

    /// Makes the rollouts run the model folder `dir`.
    fn reload(&mut self, dir: &Path) -> Result<()> {
        match self {
            Rollouts::Local(policy) => {
                Ok(policy.reload(dir).map_err(frognano_core::Error::from)?)
            }
            Rollouts::Served {
                policy,
                server,
                api_key,
            } => {
                // The server resolves the folder on its own: send an absolute path.
                let absolute = std::path::absolute(dir)
                    .map_err(TrainError::io(format!("resolve {}", dir.display())))?;
                frognano_serve::admin::reload_weights(
                    policy.base_url(),
                    api_key.as_ref().map(|k| k.0.as_str()),
                    &absolute,
                )
                .map_err(|e| {
                    TrainError::Config(format!(
                        "policy.rollout_server {}: cannot load the new weights into the \
                         server: {e}",
                        server.url
                    ))
                })?;
                Ok(())
            }
        }
    }
}

/// A served reply the learner cannot use (no prompt or reply token ids, or log-probs that do
/// not line up with them) is an error: training on it is impossible, and going on would waste
/// the whole rollout.
fn check_served_outputs(server: &RolloutServer, outputs: &[PolicyOutput]) -> Result<()> {
    for (row, output) in outputs.iter().enumerate() {
        // A failed request ends its episode as failed; the rollout goes on with the others.
        if output.error.is_some() {
            continue;
        }
        let missing = match (&output.prompt_ids, &output.token_ids) {
            (None, _) => Some("prompt token ids"),
            (Some(prompt), _) if prompt.is_empty() => Some("prompt token ids"),
            (_, None) => Some("reply token ids with a log-prob each"),
            (_, Some(ids)) if ids.len() != output.logprobs.len() => {
                Some("one log-prob per reply token")
            }
            _ => None,
        };
        if let Some(what) = missing {
            return Err(TrainError::Config(format!(
                "policy.rollout_server {}: reply {row} has no {what}, which the learner needs; \
                 the server must return them (vLLM's `return_token_ids` with `logprobs`, as \
                 `frognano serve` does)",
                server.url
            )));
        }
    }
    Ok(())
}

/// A language model that learns: rollouts in ONNX Runtime (or through a [`RolloutServer`]),
/// updates in a [`LearnerProcess`], new weights handed back after every update.
#[derive(Debug)]
pub struct LanguageModelPolicy {
    rollouts: Rollouts,
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
    /// weights and learner checkpoints go under `work_dir`. With `config.rollout_server`, the
    /// rollouts go through that server instead (which must serve `start`); it is checked to
    /// answer and serve the named model here.
    pub fn new(
        config: &LanguageModelConfig,
        start: &Path,
        work_dir: &Path,
        progress: assets::Progress<'_>,
    ) -> Result<Self> {
        config.validate()?;
        std::fs::create_dir_all(work_dir)
            .map_err(TrainError::io(format!("create {}", work_dir.display())))?;
        let rollouts = Rollouts::start(config, start)?;
        let learner =
            LearnerProcess::start(config.python.as_deref(), start, &config.learner, progress)?;
        Ok(LanguageModelPolicy {
            rollouts,
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
        self.rollouts.reload(&dir)?;
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
        let outputs = self.rollouts.act(contexts)?;
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
            json!({"loss": 0.0, "pg_loss": 0.0, "learner_tokens": 0, "skipped": true, "updated": false})
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
            // The learner says whether the weights changed: a batch with nothing to train on,
            // or with every optimizer step skipped, leaves them as they were (nothing to hand
            // back); one with some minibatch steps skipped still changed them.
            let updated = stats
                .get("updated")
                .and_then(Value::as_bool)
                .unwrap_or_else(|| stats.get("skipped").is_none_or(Value::is_null));
            if updated {
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

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::Action;

    fn output(prompt: Option<Vec<u32>>, tokens: Option<Vec<u32>>, logprobs: usize) -> PolicyOutput {
        PolicyOutput {
            action: Action::Text { text: "ls".into() },
            logprobs: vec![-0.5; logprobs],
            prompt_ids: prompt,
            token_ids: tokens,
            loss_mask: None,
            decision: None,
            error: None,
        }
    }

    #[test]
    fn served_replies_without_token_ids_are_refused() {
        let server = RolloutServer::new("http://127.0.0.1:8000/v1", "m");
        let good = output(Some(vec![1, 2]), Some(vec![3, 4]), 2);
        assert!(check_served_outputs(&server, std::slice::from_ref(&good)).is_ok());
        for (bad, says) in [
            (output(None, Some(vec![3]), 1), "prompt token ids"),
            (output(Some(vec![1]), None, 0), "reply token ids"),
            (
                output(Some(vec![1]), Some(vec![3, 4]), 1),
                "one log-prob per reply token",
            ),
        ] {
            let err = check_served_outputs(&server, &[good.clone(), bad]).expect_err("refused");
            assert!(err.to_string().contains(says), "{err}");
            assert!(err.to_string().contains("reply 1"), "{err}");
        }
        // A failed request is the rollout's business, not a protocol error.
        let failed = PolicyOutput {
            error: Some("timeout".into()),
            ..output(None, None, 0)
        };
        assert!(check_served_outputs(&server, &[failed]).is_ok());
    }

    #[test]
    fn greedy_training_rollouts_are_refused() {
        assert!(LanguageModelConfig::default().validate().is_ok());
        let greedy = LanguageModelConfig {
            generation: GenerationOptions::greedy(64),
            ..LanguageModelConfig::default()
        };
        let err = greedy.validate().expect_err("greedy rollouts").to_string();
        assert!(
            err.contains("temperature") && err.contains("eval_generation"),
            "{err}"
        );
        // Greedy evaluations stay the default.
        assert!(
            LanguageModelConfig::default()
                .evaluation_generation()
                .temperature
                == 0.0
        );
    }
}
