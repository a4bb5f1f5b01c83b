//! [`RepairPolicy`]: a small policy that learns from reward through the tool protocol.
//!
//! Each episode it runs the tests, localises the bug from the failures (traceback locations,
//! the modules the problem statement names, the names in the failing tests), reads the file in
//! chunks with `view`, enumerates candidate repairs (the inverse of common bug patterns:
//! flipped comparisons, changed operators and constants, swapped operands, arguments and
//! statements, inverted branches, a dropped or added `not`), and chooses one with a softmax
//! over hand-made features and learned weights. It edits, re-runs the tests, keeps the edit when
//! the failures shrank without new ones, undoes it otherwise, and submits when the suite passes
//! or its attempts run out.
//!
//! The policy is stateless between calls: everything is rebuilt from the episode's history, so
//! one instance serves any number of concurrent episodes. Test runs are read from the typed
//! [`frognano_core::TestRunObservation`] the environment attaches to their observations, not
//! from their text. Every choice records its candidates' features (sparse) and the index chosen
//! in [`PolicyOutput::decision`], so a learner can recompute the choice's probability from the
//! batch alone; [`RepairPolicy`] is its own learner (policy gradient with Adam).
//!
//! The parts: `episode` replays the history into what the agent knows and decides the next
//! move, `test_run` reads each test run, `candidates` enumerates the repairs of a file,
//! `features` describes each with the features the weights apply to, `source` reads Python
//! source and failure text, and `learner` holds the softmax and the learning step.

mod candidates;
mod episode;
mod features;
mod learner;
mod source;
mod test_run;

use std::collections::BTreeMap;

use frognano_core::{Action, PolicyContext, PolicyOutput, Result};
use frognano_env::ToolRequest;
use frognano_mutate as mutate;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::json;

use candidates::Candidate;
use episode::{EpisodeState, Move};
use features::SparseFeatures;
pub use features::{feature_names, repair_operators};
use learner::{AdamMoments, argmax, softmax};

/// Settings of a [`RepairPolicy`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RepairConfig {
    /// Seed of the sampling generator.
    pub seed: u64,
    /// Edits tried per episode before submitting.
    pub max_attempts: usize,
    /// Lines per `view` when reading a file.
    pub view_chunk: usize,
    /// Files longer than this are not read (the policy skips them).
    pub max_file_lines: usize,
    /// Candidates scored per choice (the closest to the failure are kept).
    pub max_candidates: usize,
    /// Softmax temperature (1: the learned distribution; lower: greedier).
    pub temperature: f64,
    /// Always take the most probable candidate (evaluation).
    pub greedy: bool,
    /// Adam learning rate.
    pub learning_rate: f64,
    /// Weight of the entropy bonus in the update.
    pub entropy_bonus: f64,
    /// Importance ratios (current / rollout probability) are capped at this.
    pub ratio_cap: f64,
}

impl Default for RepairConfig {
    fn default() -> Self {
        RepairConfig {
            seed: 0,
            max_attempts: 8,
            view_chunk: 100,
            max_file_lines: 1200,
            max_candidates: 40,
            temperature: 1.0,
            greedy: false,
            learning_rate: 0.1,
            entropy_bonus: 0.0,
            ratio_cap: 2.0,
        }
    }
}

impl RepairConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(frognano_core::Error::invalid("repair policy config", m));
        if self.max_attempts == 0 {
            return bad("max_attempts must be positive");
        }
        if self.view_chunk < 10 {
            return bad("view_chunk must be at least 10 lines");
        }
        if self.max_candidates == 0 {
            return bad("max_candidates must be positive");
        }
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return bad("temperature must be a positive number");
        }
        if !(self.learning_rate.is_finite() && self.learning_rate >= 0.0) {
            return bad("learning_rate must be a non-negative number");
        }
        if !(self.entropy_bonus.is_finite() && self.entropy_bonus >= 0.0) {
            return bad("entropy_bonus must be a non-negative number");
        }
        if !(self.ratio_cap.is_finite() && self.ratio_cap >= 1.0) {
            return bad("ratio_cap must be at least 1");
        }
        Ok(())
    }
}

/// The learned repair chooser. See the module documentation.
#[derive(Debug, Clone)]
pub struct RepairPolicy {
    config: RepairConfig,
    weights: Vec<f64>,
    adam: AdamMoments,
    rng: StdRng,
    updates: u64,
}

impl RepairPolicy {
    /// A policy with all weights zero (uniform choice among candidates).
    pub fn new(config: RepairConfig) -> Result<Self> {
        config.validate()?;
        let n = feature_names().len();
        Ok(RepairPolicy {
            rng: StdRng::seed_from_u64(config.seed),
            config,
            weights: vec![0.0; n],
            adam: AdamMoments::zeros(n),
            updates: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &RepairConfig {
        &self.config
    }

    /// Switches between sampling (training) and taking the most probable candidate.
    pub fn set_greedy(&mut self, greedy: bool) {
        self.config.greedy = greedy;
    }

    /// The weights, in the order of [`feature_names`].
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// The weights by feature name.
    pub fn named_weights(&self) -> BTreeMap<String, f64> {
        feature_names()
            .iter()
            .cloned()
            .zip(self.weights.iter().copied())
            .collect()
    }

    /// Updates applied so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    fn choose(&mut self, context: &PolicyContext) -> PolicyOutput {
        let state = EpisodeState::replay(context);
        match state.next_move(&self.config) {
            Move::Tool(request) => PolicyOutput::action(Action::Tool(request.to_tool_call())),
            Move::Choose(candidates) => self.sample(candidates),
        }
    }

    /// Draws one candidate from the softmax (or takes the most probable one when greedy) and
    /// records the decision.
    fn sample(&mut self, candidates: Vec<Candidate>) -> PolicyOutput {
        let features: Vec<&SparseFeatures> = candidates.iter().map(|c| &c.features).collect();
        let probs = softmax(&self.weights, &features, self.config.temperature);
        let chosen = if self.config.greedy {
            argmax(&probs)
        } else {
            let u: f64 = self.rng.random();
            let mut acc = 0.0;
            let mut pick = probs.len() - 1;
            for (i, p) in probs.iter().enumerate() {
                acc += p;
                if u < acc {
                    pick = i;
                    break;
                }
            }
            pick
        };
        let candidate = &candidates[chosen];
        let logprob = probs[chosen].max(f64::MIN_POSITIVE).ln();
        let request = ToolRequest::Edit {
            path: candidate.path.clone(),
            search: candidate.search.clone(),
            replace: candidate.replace.clone(),
        };
        PolicyOutput {
            logprobs: vec![logprob as f32],
            decision: Some(json!({
                "chosen": chosen,
                "operator": candidate.operator,
                "temperature": self.config.temperature,
                "features": candidates.iter().map(|c| &c.features).collect::<Vec<_>>(),
            })),
            ..PolicyOutput::action(Action::Tool(request.to_tool_call()))
        }
    }
}

impl frognano_core::Policy for RepairPolicy {
    fn act(&mut self, contexts: &[PolicyContext]) -> Result<Vec<PolicyOutput>> {
        Ok(contexts.iter().map(|c| self.choose(c)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::{
        FailingTest, Observation, Policy, RunOutcome, TestOutcome, TestRunObservation, Turn,
    };

    const SOURCE: &str = "def clamp(x, lo, hi):\n    if x > hi:\n        return hi\n    if x < lo:\n        return lo\n    return x\n";

    fn tool(name: &str, arguments: serde_json::Value) -> Action {
        Action::Tool(frognano_core::ToolCall {
            name: name.into(),
            arguments,
        })
    }

    fn turn(action: Action, text: &str, is_error: bool) -> Turn {
        Turn {
            action,
            observation: Observation {
                text: text.into(),
                is_error,
                test_run: None,
            },
        }
    }

    /// A test-run turn: its text and the typed summary the environment attaches.
    fn test_turn(action: Action, text: &str, test_run: TestRunObservation) -> Turn {
        Turn {
            action,
            observation: Observation {
                text: text.into(),
                is_error: false,
                test_run: Some(test_run),
            },
        }
    }

    fn numbered(text: &str) -> String {
        text.lines()
            .enumerate()
            .map(|(i, l)| format!("{:>6}\t{l}\n", i + 1))
            .collect()
    }

    #[test]
    fn an_episode_reads_chooses_tests_and_undoes() {
        let buggy = SOURCE.replace("x > hi", "x >= hi");
        let mut policy = RepairPolicy::new(RepairConfig::default()).expect("policy");
        let mut context = PolicyContext {
            task_id: "t".into(),
            initial: Observation {
                text: "Something is wrong in module `pkg.m`.\n\nRepository:\npkg/m.py (6 lines): clamp\ntests/test_m.py (9 lines)\n".into(),
                ..Default::default()
            },
            history: Vec::new(),
        };
        let mut act = |context: &PolicyContext| {
            policy
                .act(std::slice::from_ref(context))
                .expect("act")
                .remove(0)
        };
        let first = act(&context);
        assert!(
            matches!(&first.action, Action::Tool(c) if c.name == "run_tests"),
            "{first:?}"
        );
        let failing = "Ran 3 tests in 0.10 s: 2 passed, 1 failed.\n\nFAILED tests/test_m.py::test_clamp_high\n    E       assert clamp(3, 0, 3) == 3\n";
        let failing_run = TestRunObservation {
            outcome: RunOutcome::Failed,
            total: 3,
            passed: 2,
            failed: 1,
            skipped: 0,
            duration_s: 0.1,
            failing: vec![FailingTest {
                id: "tests/test_m.py::test_clamp_high".into(),
                outcome: TestOutcome::Failed,
                message: Some("E       assert clamp(3, 0, 3) == 3".into()),
                locations: Vec::new(),
            }],
        };
        let passing_run = TestRunObservation {
            outcome: RunOutcome::Passed,
            passed: 3,
            failed: 0,
            failing: Vec::new(),
            ..failing_run.clone()
        };
        context
            .history
            .push(test_turn(first.action, failing, failing_run.clone()));
        let view = act(&context);
        let Action::Tool(call) = &view.action else {
            panic!("{view:?}")
        };
        assert_eq!(call.name, "view");
        assert_eq!(call.arguments["path"], "pkg/m.py");
        context
            .history
            .push(turn(view.action.clone(), &numbered(&buggy), false));
        let edit = act(&context);
        let Action::Tool(call) = &edit.action else {
            panic!("{edit:?}")
        };
        assert_eq!(call.name, "edit");
        assert_eq!(edit.logprobs.len(), 1);
        let decision = edit.decision.clone().expect("decision");
        let n = decision["features"].as_array().expect("features").len();
        assert!(n >= 3, "candidates: {n}");
        // Uniform at the start.
        assert!((edit.logprobs[0] as f64 + (n as f64).ln()).abs() < 1e-4);
        context
            .history
            .push(turn(edit.action.clone(), "Edited.", false));
        let rerun = act(&context);
        assert!(matches!(&rerun.action, Action::Tool(c) if c.name == "run_tests"));
        context
            .history
            .push(test_turn(rerun.action, failing, failing_run.clone()));
        let undo = act(&context);
        assert!(
            matches!(&undo.action, Action::Tool(c) if c.name == "undo"),
            "{undo:?}"
        );
        context.history.push(turn(undo.action, "Undone.", false));
        let again = act(&context);
        let again_decision = again.decision.clone().expect("second choice");
        assert_eq!(
            again_decision["features"].as_array().map(Vec::len),
            Some(n - 1),
            "the tried edit is not offered again"
        );
        context.history.push(turn(again.action, "Edited.", false));
        context.history.push(test_turn(
            tool("run_tests", json!({})),
            "Ran 3 tests in 0.10 s: 3 passed, 0 failed.",
            passing_run,
        ));
        let done = act(&context);
        assert!(
            matches!(&done.action, Action::Tool(c) if c.name == "submit"),
            "{done:?}"
        );
    }
}
