//! Local language models on ONNX Runtime: runtime loading, model folders, tokenizer and chat
//! template, batched generation with a key/value cache and log-probs, and [`OnnxPolicy`].

pub mod agent;
pub mod assets;
pub mod bench;
pub mod error;
pub mod generate;
pub mod model;
pub mod runtime;
pub mod sampling;
pub mod tokenizer;

pub use agent::{DEFAULT_SYSTEM_PROMPT, OnnxPolicy, OnnxPolicyConfig};
pub use error::{InferenceError, Result};
pub use generate::{FinishReason, Generation, GenerationOptions, GenerationTiming, generate};
pub use model::{DecoderModel, KvCache, ModelConfig, ModelOptions, StepInput};
pub use sampling::Sampler;
pub use tokenizer::{ChatMessage, TextCodec};
