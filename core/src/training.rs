//! What a trainer hands a learner: groups of trajectories with rewards and advantages, in a
//! format that serves both small feature-based policies and token-level LLM learners.

use serde::{Deserialize, Serialize};

use crate::{Action, Result};

/// Declares a record of one policy step: its own fields, then the token-level fields a learner
/// needs (`prompt_ids`, `token_ids`, `loss_mask`, `decision`; each absent unless set, and left
/// out of the JSON when absent), then the fields of an optional `after { ... }` block. The
/// records a policy's choice passes through ([`PolicyOutput`](crate::PolicyOutput),
/// [`StepSample`], the environment's step record) declare these fields this one way, so a
/// new one reaches every record. The calling crate must depend on `serde` and `serde_json`.
#[macro_export]
macro_rules! learner_step_record {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident: $ty:ty,)*
        }
        $(after {
            $($(#[$ameta:meta])* $avis:vis $afield:ident: $aty:ty,)*
        })?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $ty,)*
            /// The exact prompt token ids the model was fed for this reply (after chat-template
            /// rendering and context truncation), for token-in/token-out learners: a learner
            /// never re-tokenizes text.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub prompt_ids: Option<Vec<u32>>,
            /// Generated token ids, for token-in/token-out learners.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub token_ids: Option<Vec<u32>>,
            /// Which of `token_ids` the learner trains on (true: a model token; false: a token
            /// the policy inserted, such as a tool result spliced into its own completion).
            /// Absent: all.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub loss_mask: Option<Vec<bool>>,
            /// Policy-specific data a learner needs to recompute this choice's probability (for
            /// the repair policy: the candidates' features and the index chosen).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub decision: Option<::serde_json::Value>,
            $($($(#[$ameta])* $avis $afield: $aty,)*)?
        }
    };
}

crate::learner_step_record! {
    /// One action of a trajectory, with what the policy recorded when it chose it.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct StepSample {
        /// The action taken.
        pub action: Action,
        /// The observation that came back (tool output: never trained on).
        pub observation: String,
        /// Log-probabilities under the rollout policy of the sampled choice(s): one per
        /// generated token, or one per decision for a policy that chooses among candidates.
        /// Empty for scripted steps (nothing to learn).
        #[serde(default)]
        pub logprobs: Vec<f32>,
    }
}

impl StepSample {
    /// The step a policy's `output` made, answered by `observation`: what the policy recorded
    /// for a learner (log-probs, prompt and generated ids, loss mask, decision) travels with it.
    pub fn from_output(output: &crate::PolicyOutput, observation: String) -> Self {
        StepSample {
            action: output.action.clone(),
            observation,
            logprobs: output.logprobs.clone(),
            prompt_ids: output.prompt_ids.clone(),
            token_ids: output.token_ids.clone(),
            loss_mask: output.loss_mask.clone(),
            decision: output.decision.clone(),
        }
    }

    /// The step carries something to learn from (log-probs, tokens or a decision).
    pub fn is_trainable(&self) -> bool {
        !self.logprobs.is_empty() || self.token_ids.is_some() || self.decision.is_some()
    }
}

/// One episode, with its reward and the advantage its group assigned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// The task attempted.
    pub task_id: String,
    /// Index of the group (one task, G rollouts) in the batch.
    pub group: usize,
    /// Outcome reward (1 resolved, 0 not).
    pub reward: f64,
    /// Advantage broadcast to every trainable step of the trajectory.
    pub advantage: f64,
    /// The task was resolved.
    pub resolved: bool,
    /// The episode ran out of budget (some learners mask these out).
    pub truncated: bool,
    /// Every step in order.
    pub steps: Vec<StepSample>,
}

impl Trajectory {
    /// A one-step episode of `task_id` in group 0: the policy's `output`, scored with `reward`
    /// (resolved when positive) and `advantage`. Benchmarks and learner checks build batches
    /// of these without running episodes.
    pub fn single_step(
        task_id: impl Into<String>,
        output: &crate::PolicyOutput,
        reward: f64,
        advantage: f64,
    ) -> Self {
        Trajectory {
            task_id: task_id.into(),
            group: 0,
            reward,
            advantage,
            resolved: reward > 0.0,
            truncated: false,
            steps: vec![StepSample::from_output(output, String::new())],
        }
    }
}

/// What one training iteration hands the learner: groups with non-zero reward variance.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TrainingBatch {
    /// Iteration number, from 0.
    pub iteration: usize,
    /// Which advantage estimator filled `advantage` (`grpo`, `dr_grpo`, `rloo`).
    pub estimator: String,
    /// Rollouts per task.
    pub group_size: usize,
    /// The trajectories of the kept groups.
    pub trajectories: Vec<Trajectory>,
}

impl TrainingBatch {
    /// Iteration 0's batch of one GRPO group: `trajectories`, all of one task.
    pub fn one_group(trajectories: Vec<Trajectory>) -> Self {
        TrainingBatch {
            iteration: 0,
            estimator: "grpo".into(),
            group_size: trajectories.len(),
            trajectories,
        }
    }

    /// Number of trainable steps in the batch.
    pub fn trainable_steps(&self) -> usize {
        self.trajectories
            .iter()
            .flat_map(|t| &t.steps)
            .filter(|s| s.is_trainable())
            .count()
    }
}

/// What a learner reports about one update (loss, gradient norm, ...).
pub type LearnStats = serde_json::Map<String, serde_json::Value>;

/// What updates a policy from a batch of scored trajectories.
pub trait Learner: Send {
    /// One update from `batch`; returns whatever the learner measured.
    fn learn(&mut self, batch: &TrainingBatch) -> Result<LearnStats>;
    /// The learnable state, for checkpoints.
    fn state(&self) -> Result<serde_json::Value>;
    /// Restores a state written by [`Learner::state`].
    fn load_state(&mut self, state: &serde_json::Value) -> Result<()>;
}

/// A policy that learns: what [`crate::Trainer`]s train.
pub trait LearningPolicy: crate::Policy + Learner {}

impl<T: crate::Policy + Learner + ?Sized> LearningPolicy for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_round_trip_and_count_trainable_steps() {
        let scripted = StepSample {
            action: Action::Text {
                text: "test".into(),
            },
            observation: "Ran 3 tests".into(),
            logprobs: Vec::new(),
            prompt_ids: None,
            token_ids: None,
            loss_mask: None,
            decision: None,
        };
        let chosen = StepSample {
            logprobs: vec![-0.5],
            decision: Some(serde_json::json!({"chosen": 1})),
            ..scripted.clone()
        };
        let batch = TrainingBatch {
            iteration: 3,
            estimator: "grpo".into(),
            group_size: 2,
            trajectories: vec![Trajectory {
                task_id: "t".into(),
                group: 0,
                reward: 1.0,
                advantage: 0.7,
                resolved: true,
                truncated: false,
                steps: vec![scripted, chosen],
            }],
        };
        assert_eq!(batch.trainable_steps(), 1);
        let text = serde_json::to_string(&batch).expect("serialise");
        let back: TrainingBatch = serde_json::from_str(&text).expect("parse");
        assert_eq!(back, batch);
    }
}
