//! Python bindings for FrogNano: the native part of the `frognano` package.
//!
//! Exposes the SDK to Python: the sandbox and its test reports, the agent environment
//! (`RepoEnv`, `EnvPool`, task sets, `evaluate`), task synthesis, policies (the learnable
//! `RepairPolicy` and local language models on ONNX Runtime), and training (`GrpoTrainer`, its
//! task sources, the whole `train` job). One module per part of the SDK; this one only
//! registers them. Every long call releases the GIL and answers Ctrl-C: the work runs on a
//! helper thread while the calling thread polls for signals, and a `KeyboardInterrupt` cancels
//! the sandboxed run before it is raised.

use pyo3::prelude::*;

/// `add_functions!(module: f, g, ...)`: adds each `#[pyfunction]` to the module.
macro_rules! add_functions {
    ($module:ident: $($function:ident),+ $(,)?) => {
        $($module.add_function(pyo3::wrap_pyfunction!($function, $module)?)?;)+
    };
}

mod convert;
mod corpus;
mod curriculum;
mod env;
mod errors;
mod learning;
mod llm;
mod model;
mod policy;
mod sandbox;
mod served;
mod synth;
mod tokens;
mod train;

/// What each part of the SDK registers itself with.
type Register = fn(&Bound<'_, PyModule>) -> PyResult<()>;

/// The native module; `frognano/__init__.py` re-exports it.
#[pymodule]
fn _frognano(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::load(m.py())?;
    // Each part of the SDK adds its own classes and functions.
    let parts: &[Register] = &[
        sandbox::register,
        env::register,
        synth::register,
        corpus::register,
        policy::register,
        model::register,
        llm::register,
        learning::register,
        served::register,
        curriculum::register,
        train::register,
        tokens::register,
    ];
    for register in parts {
        register(m)?;
    }
    Ok(())
}
