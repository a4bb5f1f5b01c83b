//! Choosing the next token from logits, with its log-probability.
//!
//! The log-probability returned for a token is `log_softmax(logits / T)[token]` at the request's
//! temperature `T`, taken over the whole vocabulary *before* top-k / top-p truncation (with greedy
//! decoding, `T = 1`: the model's own distribution). That is the density a policy-gradient learner
//! recomputes from the same logits at the same temperature, so importance ratios stay exact; the
//! truncation only narrows which tokens can be drawn.

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

impl Sampler {
    /// Whether this sampler is greedy.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= GREEDY_TEMPERATURE
    }

    /// Chooses a token from one row of logits; returns it with its log-probability (see the
    /// module docs for which distribution).
    pub fn choose(&self, logits: &[f32], rng: &mut StdRng) -> (u32, f32) {
        let temperature = if self.is_greedy() {
            1.0
        } else {
            self.temperature as f64
        };
        let scaled_max = logits
            .iter()
            .fold(f64::NEG_INFINITY, |m, &l| m.max(l as f64 / temperature));
        // log-sum-exp with the maximum subtracted, in f64.
        let sum: f64 = logits
            .iter()
            .map(|&l| (l as f64 / temperature - scaled_max).exp())
            .sum();
        let log_norm = scaled_max + sum.ln();
        let logprob = |token: usize| (logits[token] as f64 / temperature - log_norm) as f32;
        if self.is_greedy() {
            let token = argmax(logits);
            return (token as u32, logprob(token));
        }
        let mut candidates: Vec<(usize, f64)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i, (l as f64 / temperature - scaled_max).exp()))
            .collect();
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
                if kept >= self.top_p as f64 * total {
                    keep = i + 1;
                    break;
                }
            }
            candidates.truncate(keep.max(1));
        }
        let total: f64 = candidates.iter().map(|c| c.1).sum();
        let mut draw = rng.random::<f64>() * total;
        let mut token = candidates[candidates.len() - 1].0;
        for &(i, weight) in &candidates {
            if draw < weight {
                token = i;
                break;
            }
            draw -= weight;
        }
        (token as u32, logprob(token))
    }
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

    fn log_softmax(logits: &[f32], t: f64) -> Vec<f64> {
        let m = logits
            .iter()
            .fold(f64::NEG_INFINITY, |m, &l| m.max(l as f64 / t));
        let s: f64 = logits.iter().map(|&l| (l as f64 / t - m).exp()).sum();
        logits.iter().map(|&l| l as f64 / t - m - s.ln()).collect()
    }

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
    fn top_k_and_top_p_restrict_the_draw_but_not_the_reported_logprob() {
        let logits = [5.0f32, 4.9, 0.0, -3.0, 1.0];
        let expected = log_softmax(&logits, 1.0);
        let mut rng = StdRng::seed_from_u64(7);
        let top_k = Sampler {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
        };
        let top_p = Sampler {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.5,
        };
        for _ in 0..500 {
            let (token, lp) = top_k.choose(&logits, &mut rng);
            assert!(token <= 1);
            assert!((lp as f64 - expected[token as usize]).abs() < 1e-6);
            let (token, _) = top_p.choose(&logits, &mut rng);
            assert!(
                token <= 1,
                "top-p 0.5 keeps the two nearly equal leaders only"
            );
        }
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
