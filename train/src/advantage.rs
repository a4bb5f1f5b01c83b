//! Group advantages: every rollout of a task is scored against the others of its group.

use serde::{Deserialize, Serialize};

use crate::{Result, TrainError};

/// How a group's rewards become advantages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Estimator {
    /// GRPO: `(r - mean) / (std + eps)`, the sample standard deviation of the group.
    #[default]
    Grpo,
    /// Dr. GRPO: `r - mean` (no division by the standard deviation, which over-weights groups
    /// that are nearly all right or all wrong).
    DrGrpo,
    /// RLOO: `r - mean of the other G - 1 rewards` = `G / (G - 1) * (r - mean)`.
    Rloo,
}

impl Estimator {
    /// Parses `grpo`, `dr_grpo` (or `dr-grpo`, `drgrpo`) or `rloo`.
    pub fn parse(text: &str) -> Result<Self> {
        match text.to_ascii_lowercase().replace('-', "_").as_str() {
            "grpo" => Ok(Estimator::Grpo),
            "dr_grpo" | "drgrpo" => Ok(Estimator::DrGrpo),
            "rloo" => Ok(Estimator::Rloo),
            other => Err(TrainError::Config(format!(
                "unknown advantage estimator {other:?}: use grpo, dr_grpo or rloo"
            ))),
        }
    }

    /// The name used in configs and batches.
    pub fn as_str(self) -> &'static str {
        match self {
            Estimator::Grpo => "grpo",
            Estimator::DrGrpo => "dr_grpo",
            Estimator::Rloo => "rloo",
        }
    }
}

/// Advantages of one group's rewards (all zero when the rewards are all equal or the group has
/// a single member).
pub fn group_advantages(rewards: &[f64], estimator: Estimator) -> Vec<f64> {
    let n = rewards.len();
    if n < 2 || has_zero_variance(rewards) {
        return vec![0.0; n];
    }
    let mean = rewards.iter().sum::<f64>() / n as f64;
    match estimator {
        Estimator::Grpo => {
            let var = rewards.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let std = var.sqrt();
            rewards.iter().map(|r| (r - mean) / (std + 1e-6)).collect()
        }
        Estimator::DrGrpo => rewards.iter().map(|r| r - mean).collect(),
        Estimator::Rloo => {
            let scale = n as f64 / (n - 1) as f64;
            rewards.iter().map(|r| scale * (r - mean)).collect()
        }
    }
}

/// Every reward of the group is the same: no learning signal (GRPO-style advantages are 0).
pub fn has_zero_variance(rewards: &[f64]) -> bool {
    rewards
        .windows(2)
        .all(|w| (w[0] - w[1]).abs() <= f64::EPSILON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimators_match_their_definitions() {
        let r = [1.0, 0.0, 0.0, 1.0];
        let grpo = group_advantages(&r, Estimator::Grpo);
        // mean 0.5, sample std sqrt(1/3)
        let std = (1.0f64 / 3.0).sqrt();
        assert!((grpo[0] - 0.5 / (std + 1e-6)).abs() < 1e-9);
        assert!((grpo[1] + 0.5 / (std + 1e-6)).abs() < 1e-9);
        assert_eq!(
            group_advantages(&r, Estimator::DrGrpo),
            vec![0.5, -0.5, -0.5, 0.5]
        );
        // RLOO: r - mean of the others.
        let rloo = group_advantages(&[1.0, 0.0, 0.0], Estimator::Rloo);
        assert!((rloo[0] - 1.0).abs() < 1e-12);
        assert!((rloo[1] + 0.5).abs() < 1e-12);
        for e in [Estimator::Grpo, Estimator::DrGrpo, Estimator::Rloo] {
            assert_eq!(group_advantages(&[1.0, 1.0], e), vec![0.0, 0.0]);
            assert_eq!(group_advantages(&[0.0], e), vec![0.0]);
            let sum: f64 = group_advantages(&[1.0, 0.0, 1.0], e).iter().sum();
            assert!(sum.abs() < 1e-9, "{e:?} advantages sum to zero");
        }
        assert_eq!(Estimator::parse("Dr-GRPO").ok(), Some(Estimator::DrGrpo));
        assert!(Estimator::parse("ppo").is_err());
    }
}
