use serde::{Deserialize, Serialize};

use crate::{
    Action, EpisodeOutcome, Observation, PolicyContext, PolicyOutput, Result, StepResult, Task,
};

/// Where an agent acts: a repository with a bug, a tool protocol and a reward.
///
/// Environments are `Send` so a pool can step many of them on worker threads.
pub trait Environment: Send {
    /// Starts an episode on `task` and returns the first observation.
    fn reset(&mut self, task: &Task) -> Result<Observation>;
    /// Executes one action. Malformed actions are not errors: they return an error
    /// observation and count as a step. `Err` means the environment itself failed.
    fn step(&mut self, action: &Action) -> Result<StepResult>;
    /// The summary of the current episode once it has ended.
    fn outcome(&self) -> Option<EpisodeOutcome>;
}

/// Where tasks come from: a fixed set, a generator, or a curriculum that adapts.
pub trait TaskSynthesizer: Send {
    /// Returns up to `n` tasks to attempt next.
    fn propose(&mut self, n: usize) -> Result<Vec<Task>>;
    /// Tells the synthesizer how attempts went, so it can adapt difficulty.
    fn feedback(&mut self, outcomes: &[EpisodeOutcome]) -> Result<()>;
    /// What the synthesizer measured since the last call (for a trainer's metrics).
    fn metrics(&mut self) -> serde_json::Map<String, serde_json::Value> {
        serde_json::Map::new()
    }
    /// The adaptive state, for checkpoints (`null` when there is none).
    fn state(&self) -> Result<serde_json::Value> {
        Ok(serde_json::Value::Null)
    }
    /// Restores a state written by [`TaskSynthesizer::state`].
    fn load_state(&mut self, _state: &serde_json::Value) -> Result<()> {
        Ok(())
    }
}

/// What chooses actions. Batched: one call decides the next action of many episodes.
pub trait Policy: Send {
    /// Chooses the next action for each context, in order.
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>>;
}

/// Metrics of one training iteration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IterationMetrics {
    /// Iteration number, from 0.
    pub iteration: usize,
    /// Fraction of rollouts that resolved their task.
    pub resolved_rate: f64,
    /// Number of rollouts run.
    pub rollouts: usize,
    /// Anything else the trainer measures.
    #[serde(default)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What improves a policy from experience.
pub trait Trainer {
    /// Runs one iteration (rollouts, rewards, update, feedback) and returns its metrics.
    fn iterate(&mut self) -> Result<IterationMetrics>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send + ?Sized>() {}

    #[test]
    fn trait_objects_are_send() {
        assert_send::<Box<dyn Environment>>();
        assert_send::<Box<dyn Policy>>();
        assert_send::<Box<dyn TaskSynthesizer>>();
        let _ = std::any::type_name::<Observation>();
    }
}
