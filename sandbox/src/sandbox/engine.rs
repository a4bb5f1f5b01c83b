//! The wasmtime engine: its configuration, the epoch ticker that lets runs yield and time out,
//! the linker, and compiled modules cached on disk.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, Linker, Module};

use super::guest::RunState;
use crate::assets::{self, Progress};
use crate::error::{Result, SandboxError};

/// Wasm stack: CPython needs several MiB to reach its own RecursionError.
const MAX_WASM_STACK: usize = 8 << 20;
const EPOCH_TICK: Duration = Duration::from_millis(10);

pub(crate) fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.max_wasm_stack(MAX_WASM_STACK);
    config.async_stack_size(MAX_WASM_STACK * 2);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    config.parallel_compilation(true);
    config
}

pub(super) fn engine_key(engine: &Engine) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

pub(super) fn wasmtime_version() -> &'static str {
    "48.0.8"
}

pub(super) fn make_linker(engine: &Engine) -> Result<Linker<RunState>> {
    let mut linker: Linker<RunState> = Linker::new(engine);
    wasmtime_wasi::p1::add_to_linker_async(&mut linker, |state| &mut state.wasi)
        .map_err(SandboxError::runtime)?;
    // The 3.15 image imports a host "door" for tool calls; the sandbox offers none (-1).
    linker
        .func_wrap(
            "host",
            "call",
            |_a: i32, _b: i32, _c: i32, _d: i32| -> i32 { -1 },
        )
        .map_err(SandboxError::runtime)?;
    Ok(linker)
}

pub(super) fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    let spawned = std::thread::Builder::new()
        .name("frognano-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        });
    // Without a ticker guests still run; they only yield less often. Nothing to recover.
    drop(spawned);
}

/// The cache folder of compiled modules (and of their compiled functions, `function_cache`).
pub(super) fn compiled_dir() -> std::path::PathBuf {
    assets::cache_dir().join("compiled")
}

pub(super) fn load_or_compile(
    engine: &Engine,
    prefix: &str,
    key: &str,
    progress: Progress<'_>,
    what: &str,
    wasm: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Module> {
    let dir = compiled_dir();
    let path = dir.join(format!(
        "{prefix}-{}.cwasm",
        &assets::sha256_bytes(key.as_bytes())[..32]
    ));
    if path.is_file() {
        // SAFETY: the file was written by `Module::serialize` of this same wasmtime version and
        // engine configuration (both are in the cache key) into our own cache directory.
        match unsafe { Module::deserialize_file(engine, &path) } {
            Ok(module) => return Ok(module),
            Err(err) => progress(&format!("compiled cache unusable ({err}); recompiling")),
        }
    }
    let bytes = wasm()?;
    progress(&format!("{what} (one time, cached)"));
    let started = Instant::now();
    let module = Module::new(engine, &bytes).map_err(SandboxError::runtime)?;
    let serialized = module.serialize().map_err(SandboxError::runtime)?;
    assets::ensure_dir(&dir)?;
    let mut tmp =
        tempfile::NamedTempFile::new_in(&dir).map_err(SandboxError::io("create cache file"))?;
    std::io::Write::write_all(&mut tmp, &serialized)
        .map_err(SandboxError::io("write compiled module"))?;
    tmp.persist(&path)
        .map_err(|e| SandboxError::io("store compiled module")(e.error))?;
    remove_superseded(&dir, prefix, &path);
    progress(&format!(
        "compiled in {:.1} s",
        started.elapsed().as_secs_f64()
    ));
    drop((module, serialized, bytes));
    release_freed_memory();
    // Reload from disk so the module's memory image is mapped copy-on-write from the file.
    // SAFETY: as above; the file was just written by `serialize`.
    unsafe { Module::deserialize_file(engine, &path) }.map_err(SandboxError::runtime)
}

/// Hands the heap that a compile freed back to the system. Compiling an interpreter image
/// allocates about 1.5 GiB in many mid-sized blocks that glibc's allocator keeps after they
/// are freed: without this, a process that compiled its snapshot (the first run on a machine)
/// carries that for its whole life, a trainer's included.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel; it touches no live
    // allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Removes older artifacts of the same kind (they are hundreds of MB each): files named
/// `{prefix}-{32 hex digits}.cwasm`, other than `keep`.
fn remove_superseded(dir: &Path, prefix: &str, keep: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let same_kind = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|rest| rest.strip_suffix(".cwasm"))
            .is_some_and(|hash| hash.len() == 32 && hash.chars().all(|c| c.is_ascii_hexdigit()));
        if path != keep && same_kind {
            // Best effort: another process may still map it, which Unix allows.
            let _ = fs::remove_file(&path);
        }
    }
}
