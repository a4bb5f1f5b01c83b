//! C ABI for FrogNano: run a Python repository's pytest suite inside a WebAssembly sandbox
//! from C (or any language with a C FFI) and read the per-test report.
//!
//! The library is built as `libfrognano.so` / `libfrognano.a`; its header,
//! `include/frognano.h`, is generated from this crate's modules by cbindgen (see
//! `tests/header.rs`).
//!
//! # Conventions
//!
//! - **Handles.** `FrognanoSandbox`, `FrognanoReport`, `FrognanoTaskSet`, `FrognanoEnv`,
//!   `FrognanoStep`, `FrognanoTrainer`, `FrognanoModel` and `FrognanoError` are opaque. Each is
//!   created by this library and released with its own `_free` function
//!   (`frognano_sandbox_free`, `frognano_report_free`, `frognano_task_set_free`,
//!   `frognano_env_free`, `frognano_step_free`, `frognano_trainer_free`, `frognano_model_free`,
//!   `frognano_error_free`); every `_free` accepts `NULL`. Strings returned as `char *` are
//!   owned by the caller and released with `frognano_string_free`; strings returned as
//!   `const char *` are borrowed from the handle they were read from and stay valid until that
//!   handle is freed.
//! - **Errors.** Every fallible function returns `FrognanoError *`: `NULL` on success, else an
//!   error object the caller must free. Results are written through out-parameters only on
//!   success; on failure the out-parameters are left untouched.
//! - **Robustness.** `NULL` where a value is required and strings that are not valid UTF-8 give
//!   an error object (`FROGNANO_ERROR_CODE_NULL_POINTER`, `FROGNANO_ERROR_CODE_INVALID_UTF8`),
//!   never a crash. A Rust panic never unwinds into C: it becomes an error object with
//!   `FROGNANO_ERROR_CODE_PANIC` (or, for functions that cannot return an error, the documented
//!   fallback value).
//! - **Threads.** A `FrognanoSandbox` may be used from several threads at once. Reports and
//!   errors are immutable once returned: reading one from several threads at once is safe,
//!   freeing it while another thread still reads it is not. Task sets and steps are immutable
//!   likewise. A `FrognanoEnv`, a `FrognanoTrainer` and a `FrognanoModel` are used by one
//!   thread at a time.
//! - **Agent environment.** Tasks, step information and episode records are exchanged as JSON
//!   text (`frognano_task_set_get_json`, `frognano_step_info_json`,
//!   `frognano_env_record_json`, `frognano_evaluate`).
//! - **Task synthesis.** `frognano_synthesize` makes a `FrognanoTaskSet` of validated bug-fix
//!   tasks from a repository whose test suite passes; its options and statistics are JSON
//!   text, and `frognano_mutation_operators_json` lists the mutation operators.
//! - **Training.** `frognano_group_advantages` and `frognano_learnability` are the trainer's
//!   building blocks for C trainers of their own. A `FrognanoTrainer` (`frognano_trainer_new`,
//!   freed with `frognano_trainer_free`) trains the bundled repair policy with group advantages
//!   on synthesized tasks, one `frognano_trainer_iterate` at a time, with held-out evaluation
//!   and checkpoints; `frognano_train` runs a whole job. Configurations, metrics, summaries,
//!   policy states and reports are JSON text.
//! - **Local language models.** A `FrognanoModel` (`frognano_model_load`, freed with
//!   `frognano_model_free`) is a decoder model on ONNX Runtime with its tokenizer and chat
//!   template; `frognano_model_generate` takes a JSON request (prompts as text, token ids or
//!   conversations, and the sampling options) and returns the generations (token ids,
//!   per-token log-probabilities, text) as JSON. `frognano_evaluate` also takes a local model
//!   as its policy (`"onnx:MODEL"`), or one behind an OpenAI-compatible server
//!   (`"openai:URL@MODEL"`).
//!
//! What the guest does (failing tests, timeouts, memory or output floods, interpreter crashes)
//! is never an error: it is the report's `FrognanoRunOutcome`.

// cbindgen emits items in the order it parses them (`sort_by = "None"` in cbindgen.toml):
// module by module, in the order declared here, which is the order of the header. Each
// declaration stands alone so that rustfmt keeps this order.
mod error;

mod ffi;

mod sandbox;

mod report;

mod env;

mod eval;

mod synth;

mod train;

mod model;

pub use env::*;
pub use error::*;
pub use eval::*;
pub use ffi::*;
pub use model::*;
pub use report::*;
pub use sandbox::*;
pub use synth::*;
pub use train::*;
