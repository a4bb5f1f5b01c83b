//! Policies for FrogNano agents.
//!
//! A [`frognano_core::Policy`] chooses the next action of many episodes at once. This crate holds
//! the SDK's baselines for exercising the environment loop: [`OraclePolicy`] derives the fix
//! from each task's bug and applies it through the tool protocol (it must resolve every valid
//! task), [`NoopPolicy`] submits at once (it must resolve none), and [`RandomPolicy`] emits
//! random, often malformed or hostile, actions for fuzzing the protocol and the sandbox. It also
//! holds [`RepairPolicy`], the small policy that learns from reward (a softmax over candidate
//! repairs with learned weights, its own [`frognano_core::Learner`]): the fast baseline for RL
//! and curriculum research on a CPU. And it re-exports [`OnnxPolicy`] from [`llm`]
//! (`frognano-llm`): a local language model run with ONNX Runtime (int4 or fp32), batched
//! generation with a key/value cache and per-token log-probs, acting through the same tool
//! protocol; and [`HttpPolicy`] from `frognano-serve`: a model behind any OpenAI-compatible
//! server (vLLM, SGLang, Ollama, llama.cpp), asked over HTTP with many episodes in flight.

mod baselines;
mod repair;
mod spec;

pub use frognano_llm as llm;

pub use baselines::{EpisodeSeededRandom, NoopPolicy, OraclePolicy, RandomPolicy, edits_between};
pub use frognano_llm::{OnnxPolicy, OnnxPolicyConfig};
pub use frognano_serve::{HttpApi, HttpPolicy, HttpPolicyConfig};
pub use repair::{RepairConfig, RepairPolicy, feature_names, repair_operators};
pub use spec::{POLICY_SPEC_FORMS, PolicySpec, policy_from_spec};
