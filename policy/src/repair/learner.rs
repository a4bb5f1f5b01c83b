//! The repair policy's softmax and its learning: the policy-gradient step with Adam, and the
//! checkpoint state.

use std::collections::BTreeMap;

use frognano_core::{LearnStats, Learner, Result, TrainingBatch};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::RepairPolicy;
use super::features::{SparseFeatures, feature_names};

/// The probabilities of the candidates with `features` under `weights` at `temperature`.
pub(super) fn softmax(weights: &[f64], features: &[&SparseFeatures], temperature: f64) -> Vec<f64> {
    let logits: Vec<f64> = features
        .iter()
        .map(|f| {
            f.iter()
                .map(|&(i, v)| weights.get(i).copied().unwrap_or(0.0) * v)
                .sum::<f64>()
                / temperature
        })
        .collect();
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
    let total: f64 = exps.iter().sum();
    exps.iter().map(|e| e / total).collect()
}

/// The index of the largest value (the first of equals; 0 for an empty slice).
pub(super) fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] {
            best = i;
        }
    }
    best
}

/// Adam's moment estimates, one per weight (serialised as `m`, `v`, `t` in checkpoints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct AdamMoments {
    /// First moments (running mean of the gradient).
    #[serde(rename = "m")]
    first: Vec<f64>,
    /// Second moments (running mean of the squared gradient).
    #[serde(rename = "v")]
    second: Vec<f64>,
    /// Steps taken.
    #[serde(rename = "t")]
    steps: u64,
}

impl AdamMoments {
    /// Zero moments for `n` weights.
    pub(super) fn zeros(n: usize) -> Self {
        AdamMoments {
            first: vec![0.0; n],
            second: vec![0.0; n],
            steps: 0,
        }
    }
}

/// A decision as recorded in a batch.
#[derive(Debug, Deserialize)]
struct RecordedDecision {
    chosen: usize,
    #[serde(default = "unit_temperature")]
    temperature: f64,
    features: Vec<SparseFeatures>,
}

fn unit_temperature() -> f64 {
    1.0
}

impl Learner for RepairPolicy {
    /// One policy-gradient step: for every decision of every trajectory, the advantage times
    /// the gradient of the chosen candidate's log-probability (features of the choice minus
    /// their expectation under the softmax), with the importance ratio against the rollout's
    /// log-probability capped at `ratio_cap`; averaged over trajectories (a constant normaliser,
    /// as Dr. GRPO), then an Adam step.
    fn learn(&mut self, batch: &TrainingBatch) -> Result<LearnStats> {
        let n = self.weights.len();
        let mut grad = vec![0.0; n];
        let mut decisions = 0usize;
        let mut entropy_sum = 0.0;
        let mut skipped = 0usize;
        for trajectory in &batch.trajectories {
            for step in &trajectory.steps {
                let Some(value) = &step.decision else {
                    continue;
                };
                let Ok(decision) = serde_json::from_value::<RecordedDecision>(value.clone()) else {
                    skipped += 1;
                    continue;
                };
                if decision.chosen >= decision.features.len() {
                    skipped += 1;
                    continue;
                }
                let temperature = if decision.temperature > 0.0 {
                    decision.temperature
                } else {
                    1.0
                };
                let features: Vec<&SparseFeatures> = decision.features.iter().collect();
                let probs = softmax(&self.weights, &features, temperature);
                let mut expected = vec![0.0; n];
                for (p, f) in probs.iter().zip(&features) {
                    for &(i, v) in f.iter() {
                        if i < n {
                            expected[i] += p * v;
                        }
                    }
                }
                let ratio = match step.logprobs.first() {
                    Some(&old) => {
                        ((probs[decision.chosen].max(f64::MIN_POSITIVE).ln() - old as f64).exp())
                            .min(self.config.ratio_cap)
                    }
                    None => 1.0,
                };
                let scale = trajectory.advantage * ratio / temperature;
                for &(i, v) in &decision.features[decision.chosen] {
                    if i < n {
                        grad[i] += scale * v;
                    }
                }
                for (g, e) in grad.iter_mut().zip(&expected) {
                    *g -= scale * e;
                }
                let entropy: f64 = -probs
                    .iter()
                    .filter(|p| **p > 0.0)
                    .map(|p| p * p.ln())
                    .sum::<f64>();
                entropy_sum += entropy;
                if self.config.entropy_bonus > 0.0 {
                    // d(entropy)/dw = -sum_j p_j (log p_j + H) (phi_j - E[phi]) / T
                    for (p, f) in probs.iter().zip(&features) {
                        if *p <= 0.0 {
                            continue;
                        }
                        let c = -self.config.entropy_bonus * p * (p.ln() + entropy) / temperature;
                        for &(i, v) in f.iter() {
                            if i < n {
                                grad[i] += c * v;
                            }
                        }
                        for (g, e) in grad.iter_mut().zip(&expected) {
                            *g -= c * e;
                        }
                    }
                }
                decisions += 1;
            }
        }
        let trajectories = batch.trajectories.len().max(1) as f64;
        for g in &mut grad {
            *g /= trajectories;
        }
        let grad_norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        if decisions > 0 && grad_norm > 0.0 {
            self.adam_step(&grad);
            self.updates += 1;
        }
        let mut stats = LearnStats::new();
        stats.insert("decisions".into(), json!(decisions));
        stats.insert("grad_norm".into(), json!(grad_norm));
        stats.insert(
            "mean_entropy".into(),
            json!(if decisions > 0 {
                entropy_sum / decisions as f64
            } else {
                0.0
            }),
        );
        if skipped > 0 {
            stats.insert("skipped_decisions".into(), json!(skipped));
        }
        Ok(stats)
    }

    fn state(&self) -> Result<serde_json::Value> {
        Ok(json!({
            "kind": "repair",
            "features": feature_names(),
            "weights": self.weights,
            "adam": self.adam,
            "updates": self.updates,
            "config": self.config,
        }))
    }

    fn load_state(&mut self, state: &serde_json::Value) -> Result<()> {
        let bad = |m: String| frognano_core::Error::invalid("repair policy state", m);
        let names: Vec<String> = serde_json::from_value(state["features"].clone())
            .map_err(|e| bad(format!("features: {e}")))?;
        let weights: Vec<f64> = serde_json::from_value(state["weights"].clone())
            .map_err(|e| bad(format!("weights: {e}")))?;
        if names.len() != weights.len() {
            return Err(bad("features and weights differ in length".into()));
        }
        // Map by name, so a checkpoint survives features being added or reordered.
        let by_name: BTreeMap<&str, f64> = names
            .iter()
            .map(String::as_str)
            .zip(weights.iter().copied())
            .collect();
        let current = feature_names();
        self.weights = current
            .iter()
            .map(|n| by_name.get(n.as_str()).copied().unwrap_or(0.0))
            .collect();
        let n = current.len();
        self.adam = match serde_json::from_value::<AdamMoments>(state["adam"].clone()) {
            Ok(adam)
                if adam.first.len() == n
                    && adam.second.len() == n
                    && names.as_slice() == current =>
            {
                adam
            }
            _ => AdamMoments::zeros(n),
        };
        self.updates = state["updates"].as_u64().unwrap_or(0);
        Ok(())
    }
}

impl RepairPolicy {
    /// Gradient ascent with Adam (the gradient is of the objective, to be maximised).
    fn adam_step(&mut self, grad: &[f64]) {
        const BETA1: f64 = 0.9;
        const BETA2: f64 = 0.999;
        const EPS: f64 = 1e-8;
        self.adam.steps += 1;
        let t = self.adam.steps as i32;
        let moments = self.adam.first.iter_mut().zip(self.adam.second.iter_mut());
        for ((w, g), (m, v)) in self.weights.iter_mut().zip(grad).zip(moments) {
            *m = BETA1 * *m + (1.0 - BETA1) * g;
            *v = BETA2 * *v + (1.0 - BETA2) * g * g;
            let m_hat = *m / (1.0 - BETA1.powi(t));
            let v_hat = *v / (1.0 - BETA2.powi(t));
            *w += self.config.learning_rate * m_hat / (v_hat.sqrt() + EPS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::repair::RepairConfig;
    use crate::repair::features::feature_index;
    use frognano_core::{Action, StepSample, Trajectory};

    #[test]
    fn learning_raises_the_probability_of_rewarded_choices() {
        let mut policy = RepairPolicy::new(RepairConfig::default()).expect("policy");
        let good: SparseFeatures = vec![(0, 1.0), (feature_index("on_traceback_line"), 1.0)];
        let bad: SparseFeatures = vec![(1, 1.0)];
        let decision = |chosen: usize| json!({"chosen": chosen, "features": [good.clone(), bad.clone()], "temperature": 1.0});
        let step = |chosen: usize| StepSample {
            action: Action::Text {
                text: "edit".into(),
            },
            observation: String::new(),
            logprobs: vec![(0.5f64).ln() as f32],
            prompt_ids: None,
            token_ids: None,
            loss_mask: None,
            decision: Some(decision(chosen)),
        };
        let batch = TrainingBatch {
            iteration: 0,
            estimator: "grpo".into(),
            group_size: 2,
            trajectories: vec![
                Trajectory {
                    task_id: "t".into(),
                    group: 0,
                    reward: 1.0,
                    advantage: 1.0,
                    resolved: true,
                    truncated: false,
                    steps: vec![step(0)],
                },
                Trajectory {
                    task_id: "t".into(),
                    group: 0,
                    reward: 0.0,
                    advantage: -1.0,
                    resolved: false,
                    truncated: false,
                    steps: vec![step(1)],
                },
            ],
        };
        let before = softmax(policy.weights(), &[&good, &bad], 1.0)[0];
        for _ in 0..5 {
            let stats = policy.learn(&batch).expect("learn");
            assert_eq!(stats["decisions"], json!(2));
        }
        let after = softmax(policy.weights(), &[&good, &bad], 1.0)[0];
        assert!(after > before + 0.2, "{before} -> {after}");
        // Checkpoints restore the same distribution.
        let state = policy.state().expect("state");
        assert_eq!(
            state["adam"]["t"],
            json!(5),
            "checkpoint field names are kept"
        );
        let mut restored = RepairPolicy::new(RepairConfig::default()).expect("policy");
        restored.load_state(&state).expect("load");
        assert_eq!(restored.weights(), policy.weights());
        assert!(restored.load_state(&json!({"weights": "x"})).is_err());
    }
}
