//! Choosing the next token from logits, with its log-probability.
//!
//! The log-probability returned for a token is that of the distribution it was drawn from:
//! `log_softmax(logits / T)` at the request's temperature `T`, renormalised over the tokens that
//! top-k / top-p kept (with greedy decoding, `T = 1` over the whole vocabulary: the model's own
//! distribution). [`Sampler::logprob`] computes the same figure for a given token, and a
//! policy-gradient learner recomputes it from the same logits with the same truncation, so
//! importance ratios compare the distribution actually sampled.

use rand::Rng;
use rand::rngs::StdRng;

/// Temperatures at or below this decode greedily.
pub const GREEDY_TEMPERATURE: f32 = 1e-5;

/// How to choose a token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampler {
    /// Softmax temperature; at or below [`GREEDY_TEMPERATURE`]: greedy (argmax).
    pub temperature: f32,
    /// Keep only the k most likely tokens (0: all).
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches p (1: all).
    pub top_p: f32,
}

/// The tokens a sampler may draw, with their unnormalised weights `exp(l / T - max)`.
struct Kept {
    candidates: Vec<(usize, f64)>,
    temperature: f64,
    scaled_max: f64,
}

impl Kept {
    fn log_total(&self) -> f64 {
        self.candidates.iter().map(|c| c.1).sum::<f64>().ln()
    }
}

impl Sampler {
    /// Whether this sampler is greedy.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= GREEDY_TEMPERATURE
    }

    fn temperature(&self) -> f64 {
        if self.is_greedy() {
            1.0
        } else {
            f64::from(self.temperature)
        }
    }

    /// The tokens this sampler may draw from `logits`: all of them when greedy (its
    /// log-probs are the model's own distribution), else those top-k and top-p keep.
    fn kept(&self, logits: &[f32]) -> Kept {
        let temperature = self.temperature();
        let scaled_max = logits
            .iter()
            .fold(f64::NEG_INFINITY, |m, &l| m.max(f64::from(l) / temperature));
        let mut candidates: Vec<(usize, f64)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i, (f64::from(l) / temperature - scaled_max).exp()))
            .collect();
        if !self.is_greedy() {
            if self.top_k > 0 && self.top_k < candidates.len() {
                candidates.select_nth_unstable_by(self.top_k - 1, |a, b| b.1.total_cmp(&a.1));
                candidates.truncate(self.top_k);
            }
            if self.top_p < 1.0 {
                candidates.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
                let total: f64 = candidates.iter().map(|c| c.1).sum();
                let mut kept = 0.0;
                let mut keep = candidates.len();
                for (i, c) in candidates.iter().enumerate() {
                    kept += c.1;
                    if kept >= f64::from(self.top_p) * total {
                        keep = i + 1;
                        break;
                    }
                }
                candidates.truncate(keep.max(1));
            }
        }
        Kept {
            candidates,
            temperature,
            scaled_max,
        }
    }

    /// Chooses a token from one row of logits; returns it with its log-probability (see the
    /// module docs for which distribution).
    pub fn choose(&self, logits: &[f32], rng: &mut StdRng) -> (u32, f32) {
        let kept = self.kept(logits);
        let log_total = kept.log_total();
        let logprob = |token: usize| {
            (f64::from(logits[token]) / kept.temperature - kept.scaled_max - log_total) as f32
        };
        if self.is_greedy() {
            let token = argmax(logits);
            return (token as u32, logprob(token));
        }
        let total: f64 = kept.candidates.iter().map(|c| c.1).sum();
        let mut draw = rng.random::<f64>() * total;
        let mut token = kept.candidates[kept.candidates.len() - 1].0;
        for &(i, weight) in &kept.candidates {
            if draw < weight {
                token = i;
                break;
            }
            draw -= weight;
        }
        (token as u32, logprob(token))
    }

    /// The log-probability [`Sampler::choose`] reports for `token` from `logits` (teacher
    /// forcing a recorded rollout). A token outside the kept set (the logits moved since it
    /// was drawn) is scored as if it had been kept, like the learner does, so that the figure
    /// stays finite. `None` when `token` lies outside the vocabulary.
    pub fn logprob(&self, logits: &[f32], token: usize) -> Option<f32> {
        let logit = f64::from(*logits.get(token)?);
        let mut kept = self.kept(logits);
        if !kept.candidates.iter().any(|c| c.0 == token) {
            kept.candidates
                .push((token, (logit / kept.temperature - kept.scaled_max).exp()));
        }
        Some((logit / kept.temperature - kept.scaled_max - kept.log_total()) as f32)
    }
}

/// `log_softmax(logits / temperature)` over the whole vocabulary, in f64: the untruncated
/// distribution a sampler's truncation starts from (and the reference the tests compare the
/// engine's log-probs with).
pub fn log_softmax(logits: &[f32], temperature: f64) -> Vec<f64> {
    let max = logits
        .iter()
        .fold(f64::NEG_INFINITY, |m, &l| m.max(f64::from(l) / temperature));
    let total: f64 = logits
        .iter()
        .map(|&l| (f64::from(l) / temperature - max).exp())
        .sum();
    logits
        .iter()
        .map(|&l| f64::from(l) / temperature - max - total.ln())
        .collect()
}

/// Index of the largest value (the first one on ties).
pub fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn greedy_picks_the_argmax_with_its_untempered_logprob() {
        let logits = [0.5f32, 3.0, -1.0, 3.0];
        let sampler = Sampler {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
        };
        let (token, lp) = sampler.choose(&logits, &mut StdRng::seed_from_u64(0));
        assert_eq!(token, 1);
        assert!((lp as f64 - log_softmax(&logits, 1.0)[1]).abs() < 1e-6);
    }

    #[test]
    fn sampling_follows_the_tempered_distribution_and_reports_it() {
        let logits = [0.0f32, 1.0, 2.0];
        let sampler = Sampler {
            temperature: 0.7,
            top_k: 0,
            top_p: 1.0,
        };
        let expected = log_softmax(&logits, 0.7);
        let mut rng = StdRng::seed_from_u64(42);
        let mut counts = [0usize; 3];
        let draws = 20_000;
        for _ in 0..draws {
            let (token, lp) = sampler.choose(&logits, &mut rng);
            counts[token as usize] += 1;
            assert!((lp as f64 - expected[token as usize]).abs() < 1e-6);
        }
        for (i, &c) in counts.iter().enumerate() {
            let freq = c as f64 / draws as f64;
            assert!((freq - expected[i].exp()).abs() < 0.02, "token {i}: {freq}");
        }
    }

    #[test]
    fn top_k_and_top_p_report_the_log_prob_of_the_truncated_distribution() {
        let logits = [5.0f32, 4.9, 0.0, -3.0, 1.0];
        let mut rng = StdRng::seed_from_u64(7);
        let top_k = Sampler {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
        };
        let top_p = Sampler {
            temperature: 0.5,
            top_k: 0,
            top_p: 0.5,
        };
        // Two kept tokens at T = 1: renormalised over {0, 1}.
        let pair = (5.0f64.exp() + 4.9f64.exp()).ln();
        let mut counts = [0usize; 2];
        for _ in 0..2000 {
            let (token, lp) = top_k.choose(&logits, &mut rng);
            assert!(token <= 1);
            counts[token as usize] += 1;
            let expected = f64::from(logits[token as usize]) - pair;
            assert!(
                (f64::from(lp) - expected).abs() < 1e-6,
                "{lp} vs {expected}"
            );
            assert_eq!(top_k.logprob(&logits, token as usize), Some(lp));
            // At T = 0.5 the leader alone holds more than half the mass: it is always drawn,
            // with probability 1 under the truncated distribution.
            let (token, lp) = top_p.choose(&logits, &mut rng);
            assert_eq!(token, 0);
            assert!(lp.abs() < 1e-6, "{lp}");
        }
        let share = counts[0] as f64 / 2000.0;
        let expected = 1.0 / (1.0 + (-0.1f64).exp());
        assert!((share - expected).abs() < 0.04, "{share} vs {expected}");
        // A token outside the kept set is scored as if kept, finite.
        let outside = top_k.logprob(&logits, 2).expect("in the vocabulary");
        assert!(outside.is_finite() && outside < -4.0, "{outside}");
        assert_eq!(top_k.logprob(&logits, 5), None);
    }

    #[test]
    fn same_seed_same_draws() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let sampler = Sampler {
            temperature: 1.2,
            top_k: 40,
            top_p: 0.9,
        };
        let run = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..50)
                .map(|_| sampler.choose(&logits, &mut rng).0)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
