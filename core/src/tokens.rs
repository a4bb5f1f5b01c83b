//! The token-exact form of a [`TrainingBatch`]: flat arrays a language-model learner trains
//! on without ever re-tokenizing text, and their compact on-disk form (safetensors).
//!
//! Every model step of every trajectory is its own (prompt, completion) pair, because a policy
//! that drops old turns to fit its context changes the prefix from one step to the next. Steps
//! keep trajectory order; ragged token lists are concatenated with offsets (step `s`'s prompt
//! is `prompt_ids[prompt_offsets[s]..prompt_offsets[s + 1]]`).
//!
//! The file format ([`TOKEN_BATCH_FORMAT`], version [`TOKEN_BATCH_VERSION`]) is a safetensors
//! file with these tensors (S steps, T trajectories, C completion tokens):
//!
//! | name | dtype | shape | meaning |
//! |---|---|---|---|
//! | `prompt_ids` | int64 | [P] | every step's prompt, concatenated |
//! | `prompt_offsets` | int64 | [S+1] | where each step's prompt starts |
//! | `completion_ids` | int64 | [C] | every step's generated tokens |
//! | `completion_offsets` | int64 | [S+1] | where each step's completion starts |
//! | `rollout_logprobs` | float32 | [C] | log-probs under the rollout policy |
//! | `loss_mask` | uint8 | [C] | 1: a model token to train on |
//! | `temperatures` | float32 | [S] | rollout temperature (1.0 for greedy) |
//! | `top_k` | int64 | [S] | the rollout's top-k (0: none) |
//! | `top_p` | float32 | [S] | the rollout's top-p (1.0: none) |
//! | `length_limited` | uint8 | [S] | 1 where the generation stopped at its token limit |
//! | `step_trajectory` | int64 | [S] | the trajectory of each step |
//! | `step_advantages` | float32 | [S] | its trajectory's advantage |
//! | `advantages`, `rewards` | float32 | [T] | per trajectory |
//! | `truncated`, `resolved` | uint8 | [T] | per trajectory |
//! | `groups` | int64 | [T] | the group (task) of each trajectory |
//!
//! `rollout_logprobs` are log-probs of the distribution each token was drawn from: at the
//! step's temperature, renormalised over the tokens its top-k / top-p kept. `top_k`, `top_p`
//! and `length_limited` may be absent from a file (older writers): they then read as no
//! truncation and no step cut at its limit.
//!
//! and the metadata `format`, `version`, `iteration`, `estimator`, `group_size` and
//! `task_ids` (a JSON list, one per trajectory).

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, TensorView};

use crate::{Error, ErrorKind, Result, TrainingBatch};

/// The `format` metadata of a token batch file.
pub const TOKEN_BATCH_FORMAT: &str = "frognano-token-batch";
/// The `version` metadata of a token batch file this library writes and reads.
pub const TOKEN_BATCH_VERSION: u32 = 1;

/// Temperatures at or below this were greedy decoding, whose log-probs are the model's own
/// distribution (temperature 1).
const GREEDY_TEMPERATURE: f32 = 1e-5;

/// A rollout log-prob above this is not a log-probability (float32 rounding of log 1 allowed).
const MAX_LOGPROB: f32 = 1e-3;

/// The model steps of a batch as flat token arrays. See the module docs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenBatch {
    /// Iteration number of the batch.
    pub iteration: usize,
    /// Advantage estimator that filled the advantages.
    pub estimator: String,
    /// Rollouts per task.
    pub group_size: usize,
    /// The task of each trajectory.
    pub task_ids: Vec<String>,
    /// Every step's prompt token ids, concatenated.
    pub prompt_ids: Vec<i64>,
    /// `S + 1` offsets into `prompt_ids`.
    pub prompt_offsets: Vec<i64>,
    /// Every step's generated token ids, concatenated.
    pub completion_ids: Vec<i64>,
    /// `S + 1` offsets into `completion_ids` (and `rollout_logprobs`, `loss_mask`).
    pub completion_offsets: Vec<i64>,
    /// Log-probability of each generated token under the rollout policy.
    pub rollout_logprobs: Vec<f32>,
    /// 1 for a model token to train on, 0 for one to leave out.
    pub loss_mask: Vec<u8>,
    /// Rollout temperature of each step (1.0 for greedy decoding).
    pub temperatures: Vec<f32>,
    /// The top-k each step sampled with (0: no top-k).
    pub top_k: Vec<i64>,
    /// The top-p each step sampled with (1.0: no top-p).
    pub top_p: Vec<f32>,
    /// 1 where the step's generation stopped at its token limit (finish reason "length"):
    /// its completion is cut, not an answer the model chose to end.
    pub length_limited: Vec<u8>,
    /// Trajectory index of each step.
    pub step_trajectory: Vec<i64>,
    /// Advantage of each step (its trajectory's, broadcast).
    pub step_advantages: Vec<f32>,
    /// Advantage of each trajectory.
    pub advantages: Vec<f32>,
    /// Reward of each trajectory.
    pub rewards: Vec<f32>,
    /// 1 where the trajectory ran out of budget.
    pub truncated: Vec<u8>,
    /// 1 where the trajectory resolved its task.
    pub resolved: Vec<u8>,
    /// Group (task) index of each trajectory.
    pub groups: Vec<i64>,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::Invalid {
        kind: ErrorKind::InvalidArgument,
        what: "token batch",
        message: message.into(),
    }
}

impl TokenBatch {
    /// The token arrays of `batch`'s model steps (those with generated token ids); steps
    /// without tokens (scripted actions, candidate choices) are left out. Refuses a batch a
    /// token learner could not train on: a model step without prompt ids or with log-probs or
    /// a loss mask of another length than its tokens, or a non-finite advantage or log-prob.
    pub fn from_batch(batch: &TrainingBatch) -> Result<Self> {
        let mut out = TokenBatch {
            iteration: batch.iteration,
            estimator: batch.estimator.clone(),
            group_size: batch.group_size,
            prompt_offsets: vec![0],
            completion_offsets: vec![0],
            ..TokenBatch::default()
        };
        for (t, trajectory) in batch.trajectories.iter().enumerate() {
            if !trajectory.advantage.is_finite() || !trajectory.reward.is_finite() {
                return Err(invalid(format!(
                    "trajectory {t} ({}) has a non-finite advantage or reward",
                    trajectory.task_id
                )));
            }
            out.task_ids.push(trajectory.task_id.clone());
            out.advantages.push(trajectory.advantage as f32);
            out.rewards.push(trajectory.reward as f32);
            out.truncated.push(u8::from(trajectory.truncated));
            out.resolved.push(u8::from(trajectory.resolved));
            out.groups.push(trajectory.group as i64);
            for (s, step) in trajectory.steps.iter().enumerate() {
                let Some(tokens) = &step.token_ids else {
                    continue;
                };
                let at = || format!("trajectory {t} ({}), step {s}", trajectory.task_id);
                let prompt = step
                    .prompt_ids
                    .as_ref()
                    .filter(|p| !p.is_empty())
                    .ok_or_else(|| {
                        invalid(format!(
                            "{}: generated tokens without the prompt ids they were generated \
                             from (a token learner never re-tokenizes text)",
                            at()
                        ))
                    })?;
                if step.logprobs.len() != tokens.len() {
                    return Err(invalid(format!(
                        "{}: {} log-probs for {} generated tokens",
                        at(),
                        step.logprobs.len(),
                        tokens.len()
                    )));
                }
                if let Some(bad) = step
                    .logprobs
                    .iter()
                    .position(|l| !l.is_finite() || *l > MAX_LOGPROB)
                {
                    return Err(invalid(format!(
                        "{}: log-prob {bad} is {} (log-probs are finite and not above 0)",
                        at(),
                        step.logprobs[bad]
                    )));
                }
                match &step.loss_mask {
                    Some(mask) if mask.len() != tokens.len() => {
                        return Err(invalid(format!(
                            "{}: a loss mask of {} entries for {} generated tokens",
                            at(),
                            mask.len(),
                            tokens.len()
                        )));
                    }
                    Some(mask) => out.loss_mask.extend(mask.iter().map(|m| u8::from(*m))),
                    None => out.loss_mask.extend(std::iter::repeat_n(1, tokens.len())),
                }
                out.prompt_ids.extend(prompt.iter().map(|&i| i64::from(i)));
                out.prompt_offsets.push(out.prompt_ids.len() as i64);
                out.completion_ids
                    .extend(tokens.iter().map(|&i| i64::from(i)));
                out.completion_offsets.push(out.completion_ids.len() as i64);
                out.rollout_logprobs.extend(&step.logprobs);
                let temperature = step
                    .decision
                    .as_ref()
                    .and_then(|d| d.get("temperature"))
                    .and_then(serde_json::Value::as_f64)
                    .map_or(1.0, |t| t as f32);
                let greedy = temperature <= GREEDY_TEMPERATURE;
                out.temperatures
                    .push(if greedy { 1.0 } else { temperature });
                let decision = |key: &str| step.decision.as_ref().and_then(|d| d.get(key));
                // Greedy decoding draws from no truncated distribution: its log-probs are the
                // model's own.
                let top_k = decision("top_k")
                    .and_then(serde_json::Value::as_u64)
                    .filter(|_| !greedy)
                    .unwrap_or(0);
                let top_p = decision("top_p")
                    .and_then(serde_json::Value::as_f64)
                    .filter(|p| !greedy && *p > 0.0 && *p < 1.0)
                    .unwrap_or(1.0);
                out.top_k.push(i64::try_from(top_k).unwrap_or(i64::MAX));
                out.top_p.push(top_p as f32);
                out.length_limited.push(u8::from(
                    decision("finish_reason").and_then(serde_json::Value::as_str) == Some("length"),
                ));
                out.step_trajectory.push(t as i64);
                out.step_advantages.push(trajectory.advantage as f32);
            }
        }
        out.validate()?;
        Ok(out)
    }

    /// Model steps in the batch.
    pub fn steps(&self) -> usize {
        self.prompt_offsets.len().saturating_sub(1)
    }

    /// Trajectories in the batch.
    pub fn trajectories(&self) -> usize {
        self.advantages.len()
    }

    /// Generated tokens a learner trains on (loss mask 1, all trajectories).
    pub fn trained_tokens(&self) -> usize {
        self.loss_mask.iter().filter(|m| **m != 0).count()
    }

    /// Checks that every array has the length the others imply and every number is usable.
    pub fn validate(&self) -> Result<()> {
        let steps = self.steps();
        let trajectories = self.trajectories();
        let offsets = |name: &str, offsets: &[i64], total: usize| -> Result<()> {
            if offsets.first() != Some(&0) {
                return Err(invalid(format!("{name} must start at 0")));
            }
            if offsets.len() != steps + 1 {
                return Err(invalid(format!(
                    "{name} has {} entries for {steps} steps (expected {})",
                    offsets.len(),
                    steps + 1
                )));
            }
            if offsets.windows(2).any(|w| w[1] < w[0]) {
                return Err(invalid(format!("{name} must not decrease")));
            }
            if offsets.last().copied() != Some(total as i64) {
                return Err(invalid(format!(
                    "{name} ends at {:?} but there are {total} tokens",
                    offsets.last()
                )));
            }
            Ok(())
        };
        offsets(
            "prompt_offsets",
            &self.prompt_offsets,
            self.prompt_ids.len(),
        )?;
        offsets(
            "completion_offsets",
            &self.completion_offsets,
            self.completion_ids.len(),
        )?;
        if self.prompt_offsets.windows(2).any(|w| w[1] == w[0]) {
            return Err(invalid("a step has an empty prompt"));
        }
        let tokens = self.completion_ids.len();
        // Arrays with one entry per completion token, per step and per trajectory.
        for (expected, per, lengths) in [
            (
                tokens,
                "completion tokens",
                vec![
                    ("rollout_logprobs", self.rollout_logprobs.len()),
                    ("loss_mask", self.loss_mask.len()),
                ],
            ),
            (
                steps,
                "steps",
                vec![
                    ("temperatures", self.temperatures.len()),
                    ("top_k", self.top_k.len()),
                    ("top_p", self.top_p.len()),
                    ("length_limited", self.length_limited.len()),
                    ("step_trajectory", self.step_trajectory.len()),
                    ("step_advantages", self.step_advantages.len()),
                ],
            ),
            (
                trajectories,
                "trajectories",
                vec![
                    ("task_ids", self.task_ids.len()),
                    ("rewards", self.rewards.len()),
                    ("truncated", self.truncated.len()),
                    ("resolved", self.resolved.len()),
                    ("groups", self.groups.len()),
                ],
            ),
        ] {
            if let Some((name, len)) = lengths.into_iter().find(|(_, len)| *len != expected) {
                return Err(invalid(format!(
                    "{name} has {len} entries for {expected} {per}"
                )));
            }
        }
        if let Some(t) = self
            .step_trajectory
            .iter()
            .find(|t| **t < 0 || **t as usize >= trajectories)
        {
            return Err(invalid(format!(
                "a step names trajectory {t} of {trajectories}"
            )));
        }
        if self
            .prompt_ids
            .iter()
            .chain(&self.completion_ids)
            .any(|i| *i < 0)
        {
            return Err(invalid("token ids must not be negative"));
        }
        let finite = |name: &str, values: &[f32]| -> Result<()> {
            match values.iter().position(|v| !v.is_finite()) {
                Some(i) => Err(invalid(format!("{name}[{i}] is {}", values[i]))),
                None => Ok(()),
            }
        };
        finite("rollout_logprobs", &self.rollout_logprobs)?;
        finite("advantages", &self.advantages)?;
        finite("step_advantages", &self.step_advantages)?;
        finite("rewards", &self.rewards)?;
        if let Some(i) = self
            .temperatures
            .iter()
            .position(|t| !t.is_finite() || *t <= 0.0)
        {
            return Err(invalid(format!(
                "temperatures[{i}] is {} (must be positive)",
                self.temperatures[i]
            )));
        }
        if let Some(i) = self.top_k.iter().position(|k| *k < 0) {
            return Err(invalid(format!(
                "top_k[{i}] is {} (0 or more)",
                self.top_k[i]
            )));
        }
        if let Some(i) = self
            .top_p
            .iter()
            .position(|p| !p.is_finite() || *p <= 0.0 || *p > 1.0)
        {
            return Err(invalid(format!(
                "top_p[{i}] is {} (in (0, 1])",
                self.top_p[i]
            )));
        }
        Ok(())
    }

    /// The batch as a safetensors file (see the module docs).
    pub fn to_safetensors(&self) -> Result<Vec<u8>> {
        self.validate()?;
        // Each tensor: its name, type, little-endian bytes and length.
        type Buffer = (&'static str, Dtype, Vec<u8>, usize);
        fn buffer<T: Copy, const N: usize>(
            name: &'static str,
            dtype: Dtype,
            values: &[T],
            to_le: impl Fn(T) -> [u8; N],
        ) -> Buffer {
            let data = values.iter().flat_map(|v| to_le(*v)).collect();
            (name, dtype, data, values.len())
        }
        let i64s = |name, values: &[i64]| buffer(name, Dtype::I64, values, i64::to_le_bytes);
        let f32s = |name, values: &[f32]| buffer(name, Dtype::F32, values, f32::to_le_bytes);
        let u8s =
            |name, values: &[u8]| -> Buffer { (name, Dtype::U8, values.to_vec(), values.len()) };
        let buffers: Vec<Buffer> = vec![
            i64s("prompt_ids", &self.prompt_ids),
            i64s("prompt_offsets", &self.prompt_offsets),
            i64s("completion_ids", &self.completion_ids),
            i64s("completion_offsets", &self.completion_offsets),
            f32s("rollout_logprobs", &self.rollout_logprobs),
            u8s("loss_mask", &self.loss_mask),
            f32s("temperatures", &self.temperatures),
            i64s("top_k", &self.top_k),
            f32s("top_p", &self.top_p),
            u8s("length_limited", &self.length_limited),
            i64s("step_trajectory", &self.step_trajectory),
            f32s("step_advantages", &self.step_advantages),
            f32s("advantages", &self.advantages),
            f32s("rewards", &self.rewards),
            u8s("truncated", &self.truncated),
            u8s("resolved", &self.resolved),
            i64s("groups", &self.groups),
        ];
        let mut views = Vec::with_capacity(buffers.len());
        for (name, dtype, data, len) in &buffers {
            let view = TensorView::new(*dtype, vec![*len], data)
                .map_err(|e| invalid(format!("{name}: {e}")))?;
            views.push((*name, view));
        }
        let metadata = HashMap::from([
            ("format".to_string(), TOKEN_BATCH_FORMAT.to_string()),
            ("version".to_string(), TOKEN_BATCH_VERSION.to_string()),
            ("iteration".to_string(), self.iteration.to_string()),
            ("estimator".to_string(), self.estimator.clone()),
            ("group_size".to_string(), self.group_size.to_string()),
            (
                "task_ids".to_string(),
                serde_json::to_string(&self.task_ids)?,
            ),
        ]);
        safetensors::serialize(views, Some(metadata)).map_err(|e| invalid(e.to_string()))
    }

    /// Reads a batch written by [`TokenBatch::to_safetensors`] (or by any writer of the same
    /// format), validated.
    pub fn from_safetensors(data: &[u8]) -> Result<Self> {
        let (_, metadata) = safetensors::SafeTensors::read_metadata(data)
            .map_err(|e| invalid(format!("not a safetensors file: {e}")))?;
        let meta = metadata.metadata().clone().unwrap_or_default();
        let field = |key: &str| {
            meta.get(key)
                .cloned()
                .ok_or_else(|| invalid(format!("the metadata has no `{key}`")))
        };
        if field("format")? != TOKEN_BATCH_FORMAT {
            return Err(invalid(format!(
                "the file's format is not {TOKEN_BATCH_FORMAT}"
            )));
        }
        let version = field("version")?;
        if version != TOKEN_BATCH_VERSION.to_string() {
            return Err(invalid(format!(
                "version {version} (this library reads version {TOKEN_BATCH_VERSION})"
            )));
        }
        let number = |key: &str| -> Result<usize> {
            field(key)?
                .parse()
                .map_err(|_| invalid(format!("the metadata's `{key}` is not a number")))
        };
        let tensors = safetensors::SafeTensors::deserialize(data)
            .map_err(|e| invalid(format!("not a safetensors file: {e}")))?;
        let raw = |name: &str, dtype: Dtype| -> Result<Vec<u8>> {
            let view = tensors
                .tensor(name)
                .map_err(|_| invalid(format!("no tensor `{name}`")))?;
            if view.dtype() != dtype || view.shape().len() != 1 {
                return Err(invalid(format!(
                    "`{name}` is {:?} {:?} (expected a 1-D {dtype:?} tensor)",
                    view.dtype(),
                    view.shape()
                )));
            }
            Ok(view.data().to_vec())
        };
        let i64s = |name: &str| -> Result<Vec<i64>> {
            Ok(raw(name, Dtype::I64)?
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect())
        };
        let f32s = |name: &str| -> Result<Vec<f32>> {
            Ok(raw(name, Dtype::F32)?
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        let present = |name: &str| tensors.names().contains(&name);
        let task_ids: Vec<String> = serde_json::from_str(&field("task_ids")?)
            .map_err(|e| invalid(format!("the metadata's `task_ids`: {e}")))?;
        let temperatures = f32s("temperatures")?;
        let steps = temperatures.len();
        let batch = TokenBatch {
            iteration: number("iteration")?,
            estimator: field("estimator")?,
            group_size: number("group_size")?,
            task_ids,
            prompt_ids: i64s("prompt_ids")?,
            prompt_offsets: i64s("prompt_offsets")?,
            completion_ids: i64s("completion_ids")?,
            completion_offsets: i64s("completion_offsets")?,
            rollout_logprobs: f32s("rollout_logprobs")?,
            loss_mask: raw("loss_mask", Dtype::U8)?,
            top_k: if present("top_k") {
                i64s("top_k")?
            } else {
                vec![0; steps]
            },
            top_p: if present("top_p") {
                f32s("top_p")?
            } else {
                vec![1.0; steps]
            },
            length_limited: if present("length_limited") {
                raw("length_limited", Dtype::U8)?
            } else {
                vec![0; steps]
            },
            temperatures,
            step_trajectory: i64s("step_trajectory")?,
            step_advantages: f32s("step_advantages")?,
            advantages: f32s("advantages")?,
            rewards: f32s("rewards")?,
            truncated: raw("truncated", Dtype::U8)?,
            resolved: raw("resolved", Dtype::U8)?,
            groups: i64s("groups")?,
        };
        batch.validate()?;
        Ok(batch)
    }

    /// Writes the batch to `path` (safetensors), replacing the file whole.
    pub fn save(&self, path: &Path) -> Result<()> {
        let data = self.to_safetensors()?;
        let partial = path.with_extension("partial");
        let written = (|| {
            let mut file = std::fs::File::create(&partial)?;
            std::io::Write::write_all(&mut file, &data)?;
            file.sync_all()?;
            std::fs::rename(&partial, path)
        })();
        if let Err(err) = written {
            // A full disk or a failed rename leaves the old file and no partial one.
            let _ = std::fs::remove_file(&partial);
            return Err(Error::Path {
                path: path.to_path_buf(),
                message: format!("cannot write the token batch: {err}"),
            });
        }
        Ok(())
    }

    /// Reads a batch file written by [`TokenBatch::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let data = std::fs::read(path).map_err(|e| Error::Path {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::from_safetensors(&data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Action, StepSample, Trajectory};

    fn model_step(prompt: Vec<u32>, tokens: Vec<u32>, temperature: f64) -> StepSample {
        StepSample {
            action: Action::Text {
                text: "test".into(),
            },
            observation: "ran".into(),
            logprobs: tokens.iter().map(|t| -0.1 * *t as f32).collect(),
            prompt_ids: Some(prompt),
            loss_mask: Some(tokens.iter().map(|t| *t != 7).collect()),
            token_ids: Some(tokens),
            decision: Some(serde_json::json!({"temperature": temperature})),
        }
    }

    fn batch() -> TrainingBatch {
        let scripted = StepSample {
            action: Action::Text {
                text: "submit".into(),
            },
            observation: String::new(),
            logprobs: Vec::new(),
            prompt_ids: None,
            token_ids: None,
            loss_mask: None,
            decision: None,
        };
        TrainingBatch {
            iteration: 2,
            estimator: "grpo".into(),
            group_size: 2,
            trajectories: vec![
                Trajectory {
                    task_id: "a".into(),
                    group: 0,
                    reward: 1.0,
                    advantage: 0.5,
                    resolved: true,
                    truncated: false,
                    steps: vec![
                        model_step(vec![1, 2, 3], vec![4, 5], 0.7),
                        scripted.clone(),
                        model_step(vec![1, 2, 3, 4, 5, 6], vec![7, 8, 9], 0.0),
                    ],
                },
                Trajectory {
                    task_id: "a".into(),
                    group: 0,
                    reward: 0.0,
                    advantage: -0.5,
                    resolved: false,
                    truncated: true,
                    steps: vec![model_step(vec![1, 2], vec![3], 1.0), scripted],
                },
            ],
        }
    }

    #[test]
    fn model_steps_become_flat_arrays_and_round_trip_through_safetensors() {
        let tokens = TokenBatch::from_batch(&batch()).expect("token batch");
        assert_eq!(tokens.steps(), 3);
        assert_eq!(tokens.trajectories(), 2);
        assert_eq!(tokens.prompt_offsets, vec![0, 3, 9, 11]);
        assert_eq!(tokens.completion_ids, vec![4, 5, 7, 8, 9, 3]);
        assert_eq!(tokens.completion_offsets, vec![0, 2, 5, 6]);
        assert_eq!(tokens.loss_mask, vec![1, 1, 0, 1, 1, 1]);
        // Greedy steps report the model's own distribution (temperature 1).
        assert_eq!(tokens.temperatures, vec![0.7, 1.0, 1.0]);
        assert_eq!(tokens.step_trajectory, vec![0, 0, 1]);
        assert_eq!(tokens.step_advantages, vec![0.5, 0.5, -0.5]);
        assert_eq!(tokens.truncated, vec![0, 1]);
        assert_eq!(tokens.trained_tokens(), 5);
        let bytes = tokens.to_safetensors().expect("write");
        let back = TokenBatch::from_safetensors(&bytes).expect("read");
        assert_eq!(back, tokens);
    }

    #[test]
    fn sampling_truncation_and_length_cuts_travel_per_step_and_older_files_still_read() {
        let mut b = batch();
        b.trajectories[0].steps[0].decision = Some(serde_json::json!({
            "temperature": 0.7, "top_k": 40, "top_p": 0.9, "finish_reason": "length"
        }));
        // Greedy decoding ignores top-k / top-p: its log-probs are the model's own.
        b.trajectories[0].steps[2].decision = Some(serde_json::json!({
            "temperature": 0.0, "top_k": 40, "top_p": 0.9, "finish_reason": "eos"
        }));
        let tokens = TokenBatch::from_batch(&b).expect("token batch");
        assert_eq!(tokens.top_k, vec![40, 0, 0]);
        assert_eq!(tokens.top_p, vec![0.9, 1.0, 1.0]);
        assert_eq!(tokens.length_limited, vec![1, 0, 0]);
        let back =
            TokenBatch::from_safetensors(&tokens.to_safetensors().expect("write")).expect("read");
        assert_eq!(back, tokens);

        // A file of an older writer, without the three per-step tensors.
        let bytes = tokens.to_safetensors().expect("write");
        let (_, metadata) = safetensors::SafeTensors::read_metadata(&bytes).expect("metadata");
        let views = safetensors::SafeTensors::deserialize(&bytes).expect("views");
        let kept: Vec<(String, TensorView<'_>)> = views
            .tensors()
            .into_iter()
            .filter(|(name, _)| !matches!(name.as_str(), "top_k" | "top_p" | "length_limited"))
            .collect();
        let older = safetensors::serialize(kept, metadata.metadata().clone()).expect("older");
        let read = TokenBatch::from_safetensors(&older).expect("an older file reads");
        assert_eq!(read.top_k, vec![0, 0, 0]);
        assert_eq!(read.top_p, vec![1.0, 1.0, 1.0]);
        assert_eq!(read.length_limited, vec![0, 0, 0]);

        let mut bad = tokens.clone();
        bad.top_p[1] = 0.0;
        assert!(
            bad.validate()
                .expect_err("top_p 0")
                .to_string()
                .contains("top_p[1]")
        );
    }

    #[test]
    fn batches_a_token_learner_cannot_use_are_refused_with_the_reason() {
        type Spoil = Box<dyn Fn(&mut TrainingBatch)>;
        let cases: Vec<(&str, Spoil)> = vec![
            (
                "without the prompt ids",
                Box::new(|b| b.trajectories[0].steps[0].prompt_ids = None),
            ),
            (
                "3 log-probs for 2 generated tokens",
                Box::new(|b| b.trajectories[0].steps[0].logprobs.push(-1.0)),
            ),
            (
                "a loss mask of 1 entries for 2",
                Box::new(|b| b.trajectories[0].steps[0].loss_mask = Some(vec![true])),
            ),
            (
                "non-finite advantage",
                Box::new(|b| b.trajectories[1].advantage = f64::NAN),
            ),
            (
                "is inf",
                Box::new(|b| b.trajectories[0].steps[0].logprobs[0] = f32::INFINITY),
            ),
        ];
        for (expected, spoil) in cases {
            let mut b = batch();
            spoil(&mut b);
            let err = TokenBatch::from_batch(&b).expect_err(expected).to_string();
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
        }
    }

    #[test]
    fn malformed_files_are_refused() {
        let tokens = TokenBatch::from_batch(&batch()).expect("token batch");
        let mut broken = tokens.clone();
        broken.loss_mask.pop();
        assert!(broken.to_safetensors().is_err());
        assert!(TokenBatch::from_safetensors(b"not a file").is_err());
        let mut shifted = tokens;
        shifted.completion_offsets[1] = 9;
        let err = shifted.validate().expect_err("offsets").to_string();
        assert!(err.contains("must not decrease"), "{err}");
    }
}
