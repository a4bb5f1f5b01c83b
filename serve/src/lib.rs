//! Served models for FrogNano.
//!
//! Two halves of the OpenAI-compatible HTTP API. [`HttpPolicy`] is a
//! [`frognano_core::Policy`] that asks any compatible server (vLLM, SGLang, Ollama, llama.cpp's
//! server, LM Studio, FrogNano's own) for each episode's next action, through chat completions
//! (text commands or native tool calls) or plain completions, many episodes in flight at once,
//! with timeouts, retries and the token log-probs and ids a server returns recorded for
//! learners. [`server`] puts FrogNano's own ONNX models behind that API (`frognano serve`):
//! concurrent requests batched into the batched generator, log-probs, token ids and streaming.
//! [`bench`] measures both side by side with llama.cpp's server ([`LlamaCppServer`]).

pub mod admin;
pub mod bench;
pub mod client;
pub mod error;
pub mod server;

pub use bench::{LlamaCppServer, ServingBenchConfig, ServingBenchReport, bench_serving};
pub use client::{HttpApi, HttpPolicy, HttpPolicyConfig};
pub use error::{Result, ServeError};
