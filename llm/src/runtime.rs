//! Finding and loading the ONNX Runtime shared library.
//!
//! No library is linked at build time: the runtime is loaded from the `onnxruntime` Python wheel,
//! looked up in this order: an explicit path given to [`init_runtime`], the `FROGNANO_ORT_LIBRARY`
//! (or `ORT_DYLIB_PATH`) environment variable, the project's inference environment in the cache
//! (made by `frognano models setup`), and finally the `onnxruntime` package of the host Python.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use super::error::{InferenceError, Result};

/// Oldest ONNX Runtime release accepted (the API level the crate is built against).
pub const MIN_RUNTIME_VERSION: &str = "1.22";

/// The process-wide runtime: ONNX Runtime allows one environment per process.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// The library that was loaded.
    pub library: PathBuf,
    pub(crate) environment: ort::environment::Environment,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static INIT_LOCK: Mutex<()> = Mutex::new(());

/// Loads ONNX Runtime once per process and returns it. A later call with a different explicit
/// library than the one loaded is an error (one runtime per process).
pub fn init_runtime(explicit: Option<&Path>) -> Result<&'static Runtime> {
    let _guard = INIT_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(runtime) = RUNTIME.get() {
        if let Some(path) = explicit {
            let same =
                std::fs::canonicalize(path).ok() == std::fs::canonicalize(&runtime.library).ok();
            if !same {
                return Err(InferenceError::Runtime(format!(
                    "{} is already loaded in this process; cannot switch to {}",
                    runtime.library.display(),
                    path.display()
                )));
            }
        }
        return Ok(runtime);
    }
    let library = match explicit {
        Some(path) => path.to_path_buf(),
        None => find_library()?,
    };
    if !library.is_file() {
        return Err(InferenceError::Runtime(format!(
            "no library at {} (install ONNX Runtime with `frognano models setup`, or point \
             FROGNANO_ORT_LIBRARY at libonnxruntime)",
            library.display()
        )));
    }
    let builder = ort::init_from(&library).map_err(|e| {
        InferenceError::Runtime(format!(
            "cannot load {}: {e} (ONNX Runtime {MIN_RUNTIME_VERSION} or newer is required)",
            library.display()
        ))
    })?;
    let environment = builder
        .with_name("frognano")
        .build()
        .map_err(|e| InferenceError::Runtime(format!("{}: {e}", library.display())))?;
    Ok(RUNTIME.get_or_init(|| Runtime {
        library,
        environment,
    }))
}

/// The library that [`init_runtime`] would load, without loading it.
pub fn find_library() -> Result<PathBuf> {
    for var in ["FROGNANO_ORT_LIBRARY", "ORT_DYLIB_PATH"] {
        if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return Ok(PathBuf::from(path));
        }
    }
    if let Some(path) = super::assets::installed_runtime_library() {
        return Ok(path);
    }
    if let Some(path) = host_python_library() {
        return Ok(path);
    }
    Err(InferenceError::Runtime(
        "the ONNX Runtime library was not found: run `frognano models setup` (installs the pinned \
         onnxruntime wheel into the cache), install the `onnxruntime` Python package, or set \
         FROGNANO_ORT_LIBRARY to the path of libonnxruntime"
            .into(),
    ))
}

/// `libonnxruntime.*` inside an `onnxruntime` package folder (`.../onnxruntime/capi/`).
pub fn library_in_package(package_dir: &Path) -> Option<PathBuf> {
    let capi = package_dir.join("capi");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&capi)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|name| {
                    (name.starts_with("libonnxruntime.so")
                        || name.starts_with("libonnxruntime.") && name.ends_with(".dylib")
                        || name == "onnxruntime.dll")
                        && !name.contains("providers")
                })
        })
        .collect();
    // Prefer the fully versioned file name (the real file, not a link).
    found.sort_by_key(|p| std::cmp::Reverse(p.as_os_str().len()));
    found.into_iter().next()
}

fn host_python_library() -> Option<PathBuf> {
    let python = frognano_assets::host_python();
    let output = Command::new(python)
        .args([
            "-c",
            "import os, onnxruntime; print(os.path.dirname(onnxruntime.__file__))",
        ])
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    let dir = String::from_utf8(output.stdout).ok()?;
    library_in_package(Path::new(dir.trim()))
}
