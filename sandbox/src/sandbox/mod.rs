//! The sandbox: a compiled (and, where the image allows, pre-initialised) CPython for WASI,
//! instantiated fresh for every run with only its workspace and read-only layers visible.
//!
//! [`Sandbox::new`] builds the engine and the instance template (`engine`, `snapshot`);
//! `options` holds what a caller chooses; `guest` is one guest run (mounts, WASI context,
//! memory, time, disk and output limits, cancellation); `python` runs plain Python source,
//! `prepare` readies a repository (requirements layer, bytecode cache), `pytest` runs its
//! test suite, `shard` splits one suite over several instances, `batch` runs many suites at
//! once, and `report` turns a run into a test report with its time profile.

mod batch;
mod engine;
mod function_cache;
mod guest;
mod options;
mod prepare;
mod pytest;
mod python;
mod report;
mod shard;
mod snapshot;
mod time_budget;
mod trap_handlers;

use std::fs;
use std::path::PathBuf;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use wasmtime::{Engine, InstancePre, Linker};

pub use guest::GuestRun;
pub use options::{
    CancelFlag, MAX_SHARDS, SandboxOptions, TestRequest, clean_suite_args, grading_args,
};
pub use prepare::PreparedRepo;

use crate::assets::Progress;
use crate::error::{Result, SandboxError};
use crate::image::{self, ImageFiles, ImageKind};
use crate::layers;
pub(crate) use engine::engine_config;
use engine::{engine_key, load_or_compile, make_linker, start_epoch_ticker, wasmtime_version};
use guest::{LayerAccess, RunState};
use snapshot::{LayerImports, load_or_build_snapshot};

/// Guest path of the stdlib directory (images that ship a stdlib zip).
const GUEST_STDLIB: &str = "/usr/local/lib";
/// Guest path of the read-only pytest layer.
pub const GUEST_PYTEST: &str = "/frognano/pytest";
/// Guest path of the read-only layer of the repository's requirements.
pub const GUEST_DEPS: &str = "/frognano/deps";
/// Guest path of the per-run scratch directory (results, `tmp_path`, `os.devnull`).
pub const GUEST_TMP: &str = "/tmp";
/// Guest path of the workspace (the run's copy of the repository).
pub const GUEST_WORK: &str = "/work";
const RESULTS_FILE: &str = ".frognano-results.jsonl";
const DEVNULL_FILE: &str = ".devnull";

/// A ready-to-run sandbox. Cheap to share (`Arc`) and safe to use from many threads.
pub struct Sandbox {
    engine: Engine,
    image: ImageFiles,
    pytest_layer: PathBuf,
    empty_layer: PathBuf,
    pre: InstancePre<RunState>,
    linker: Linker<RunState>,
    /// Snapshots with a requirements layer imported, by layer directory (when enabled).
    layer_pres: Mutex<HashMap<PathBuf, InstancePre<RunState>>>,
    layer_snapshots: bool,
    snapshot: bool,
    runtime: tokio::runtime::Runtime,
    workers: usize,
    disk_limit: u64,
}

impl std::fmt::Debug for Sandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sandbox")
            .field("image", &self.image.kind)
            .field("snapshot", &self.snapshot)
            .field("workers", &self.workers)
            .finish()
    }
}

impl Sandbox {
    /// Prepares every asset (fetching, verifying, compiling and snapshotting as needed; each
    /// step is cached) and returns a sandbox ready to run.
    pub fn new(options: SandboxOptions, progress: Progress<'_>) -> Result<Self> {
        if options.disk_mb == 0 {
            return Err(SandboxError::InvalidOption(
                "disk_mb must be at least 1".into(),
            ));
        }
        if options.workers == 0 {
            return Err(SandboxError::InvalidOption(
                "workers must be at least 1".into(),
            ));
        }
        let image = image::prepare_image(options.image, progress)?;
        let pytest_layer = layers::prepare_pytest_layer(progress)?;
        let mut config = engine_config();
        // Snapshots compile the interpreter's functions again: load them from the cache.
        if let Some(cache) = function_cache::FunctionCache::open(&engine::compiled_dir()) {
            config
                .enable_incremental_compilation(std::sync::Arc::new(cache))
                .map_err(SandboxError::runtime)?;
        }
        let engine = Engine::new(&config).map_err(SandboxError::runtime)?;
        trap_handlers::record();
        start_epoch_ticker(&engine);
        let linker = make_linker(&engine)?;
        let snapshot = options.snapshot && options.image.supports_snapshot();
        let empty_layer = layers::prepare_empty_layer()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.workers)
            .thread_name("frognano-sandbox")
            .enable_time()
            .build()
            .map_err(SandboxError::io("start runtime"))?;
        let module = if snapshot {
            load_or_build_snapshot(
                &engine,
                &linker,
                &runtime,
                &image,
                &pytest_layer,
                Err(&empty_layer),
                progress,
            )?
        } else {
            let key = format!(
                "{}-{}-{}-{}",
                image.kind,
                image.module_sha256,
                wasmtime_version(),
                engine_key(&engine)
            );
            load_or_compile(
                &engine,
                &format!("{}-module", image.kind),
                &key,
                progress,
                &format!("compiling {}", image.kind),
                || fs::read(&image.module).map_err(SandboxError::io("read image")),
            )?
        };
        let pre = linker
            .instantiate_pre(&module)
            .map_err(SandboxError::runtime)?;
        let sandbox = Sandbox {
            engine,
            image,
            pytest_layer,
            empty_layer,
            pre,
            linker,
            layer_pres: Mutex::new(HashMap::new()),
            layer_snapshots: options.layer_snapshots && snapshot,
            snapshot,
            runtime,
            workers: options.workers,
            disk_limit: options.disk_mb.saturating_mul(1 << 20),
        };
        if !sandbox.snapshot {
            sandbox.compile_layer_bytecode(LayerAccess::PytestWritable, progress)?;
        }
        Ok(sandbox)
    }

    /// The image this sandbox runs.
    pub fn image(&self) -> ImageKind {
        self.image.kind
    }

    /// Whether runs start from a pre-initialised interpreter snapshot.
    pub fn uses_snapshot(&self) -> bool {
        self.snapshot
    }

    /// The number of sandboxes [`Sandbox::run_tests_many`] runs at once.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Whether repositories with requirements get a snapshot with them imported.
    pub fn uses_layer_snapshots(&self) -> bool {
        self.layer_snapshots
    }

    /// The instance template of runs with requirements layer `layer`: its own snapshot where
    /// one was built (see [`SandboxOptions::layer_snapshots`]), else the pytest snapshot.
    fn template_for(&self, layer: Option<&Path>) -> InstancePre<RunState> {
        layer
            .and_then(|layer| {
                self.layer_pres
                    .lock()
                    .ok()
                    .and_then(|pres| pres.get(layer).cloned())
            })
            .unwrap_or_else(|| self.pre.clone())
    }

    /// Builds (or loads) the snapshot of `layer` with `modules` imported, once per layer.
    fn ensure_layer_snapshot(
        &self,
        layer: &Path,
        modules: &[String],
        progress: Progress<'_>,
    ) -> Result<()> {
        if self
            .layer_pres
            .lock()
            .map_err(|_| SandboxError::Runtime("layer snapshots lock poisoned".into()))?
            .contains_key(layer)
        {
            return Ok(());
        }
        let module = load_or_build_snapshot(
            &self.engine,
            &self.linker,
            &self.runtime,
            &self.image,
            &self.pytest_layer,
            Ok(LayerImports { layer, modules }),
            progress,
        )?;
        let pre = self
            .linker
            .instantiate_pre(&module)
            .map_err(SandboxError::runtime)?;
        self.layer_pres
            .lock()
            .map_err(|_| SandboxError::Runtime("layer snapshots lock poisoned".into()))?
            .insert(layer.to_path_buf(), pre);
        Ok(())
    }
}

fn python_string_literal(text: &str) -> String {
    // JSON string syntax is valid Python string syntax for these contents.
    serde_json::Value::String(text.to_string()).to_string()
}
