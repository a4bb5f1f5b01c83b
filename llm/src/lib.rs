//! Local language models on ONNX Runtime.
//!
//! `frognano-llm` runs small decoder-only language models on the CPU for FrogNano agents. It finds
//! and loads the ONNX Runtime library at run time ([`runtime`]; nothing is linked at build time),
//! installs the pinned inference environment and fetches, verifies and converts registry models
//! into the cache ([`assets`], with the GGUF to ONNX converter and its numpy reference under
//! `python/`), reads model folders ([`model`]), the tokenizer and chat template ([`tokenizer`]),
//! and generates in batches with a key/value cache and per-token log-probs ([`mod@generate`],
//! [`sampling`], [`mod@bench`]). [`OnnxPolicy`] acts with such a model through the tool protocol as
//! a [`frognano_core::Policy`].

pub mod agent;
pub mod assets;
pub mod bench;
pub mod checkpoint;
pub mod error;
pub mod generate;
pub mod model;
pub mod runtime;
pub mod sampling;
pub mod tokenizer;

pub use agent::{
    DEFAULT_SYSTEM_PROMPT, OnnxPolicy, OnnxPolicyConfig, action_text, episode_messages,
    fitted_prompt,
};
pub use checkpoint::convert_checkpoint;
pub use error::{InferenceError, Result};
pub use generate::{FinishReason, Generation, GenerationOptions, GenerationTiming, generate};
pub use model::{DecoderModel, KvCache, ModelConfig, ModelOptions, StepInput};
pub use sampling::Sampler;
pub use tokenizer::{ChatMessage, TextCodec};
