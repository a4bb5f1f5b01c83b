//! The sandbox: a compiled (and, where the image allows, pre-initialised) CPython for WASI,
//! instantiated fresh for every run with only its workspace and read-only layers visible.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use frognano_core::{Coverage, FileLines, Limits, RunOutcome, TestRecord, TestReport};
use wasmtime::{Config, Engine, InstancePre, Linker, Module, ResourceLimiter, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::assets::{self, Progress};
use crate::bytecode;
use crate::config::RepoConfig;
use crate::error::{Result, SandboxError};
use crate::image::{self, ImageFiles, ImageKind};
use crate::layers;
use crate::workspace;

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
/// Wasm stack: CPython needs several MiB to reach its own RecursionError.
const MAX_WASM_STACK: usize = 8 << 20;
const EPOCH_TICK: Duration = Duration::from_millis(10);
const CANCEL_POLL: Duration = Duration::from_millis(20);
const DISK_POLL: Duration = Duration::from_millis(300);
/// Modules a test suite commonly imports lazily; importing them before the snapshot saves
/// every run the cost.
const PRELOAD_MODULES: &[&str] = &[
    "unittest",
    "unittest.mock",
    "doctest",
    "dataclasses",
    "decimal",
    "fractions",
    "datetime",
    "collections",
    "itertools",
    "functools",
    "re",
    "json",
    "string",
    "textwrap",
    "typing",
    "enum",
    "copy",
    "math",
    "operator",
    "heapq",
    "bisect",
    "pathlib",
    "tempfile",
    "logging",
];

/// How the sandbox is built.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Which CPython build to run.
    pub image: ImageKind,
    /// How many sandboxes run at once in batched calls (default: all cores).
    pub workers: usize,
    /// Use a memory snapshot with pytest pre-imported (only images that support it).
    pub snapshot: bool,
    /// Disk cap of one run, in MiB: the workspace plus `/tmp`, repository included. A run that
    /// writes past it ends as `output_exceeded`.
    pub disk_mb: u64,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            image: ImageKind::default(),
            workers: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            snapshot: true,
            disk_mb: 2048,
        }
    }
}

/// What to run on a workspace: pytest with arguments.
#[derive(Debug, Clone, Default)]
pub struct TestRequest {
    /// Extra pytest arguments (node ids, `-k`, ...), after the repository's own.
    pub pytest_args: Vec<String>,
    /// Limits; `None` takes the repository's `frognano.toml` values, else the defaults.
    pub limits: Option<Limits>,
    /// Set it to stop the run early (e.g. on Ctrl-C); the run then returns
    /// [`SandboxError::Cancelled`]. Checked every few milliseconds.
    pub cancel: Option<CancelFlag>,
    /// Record which lines of the workspace's files each test executes
    /// ([`TestReport::coverage`]); costs one callback per executed line per test.
    pub coverage: bool,
}

/// A flag that cancels the runs it was given to.
pub type CancelFlag = std::sync::Arc<std::sync::atomic::AtomicBool>;

/// A finished guest run, before interpretation as a test report.
#[derive(Debug, Clone)]
pub struct GuestRun {
    /// The guest's exit status (`turn`'s return or the `proc_exit` code).
    pub exit_code: Option<i32>,
    /// Why the run ended abnormally, if it did.
    pub limit: Option<RunOutcome>,
    /// A description of a trap or limit.
    pub detail: Option<String>,
    /// Captured standard output.
    pub stdout: String,
    /// Captured standard error.
    pub stderr: String,
    /// Wall-clock duration.
    pub duration: Duration,
}

/// Host directories mounted into one guest, always in the same order (the snapshot records
/// the preopen table, so the order must match the one it was taken with).
struct Mounts<'a> {
    pytest: &'a Path,
    pytest_writable: bool,
    deps: &'a Path,
    deps_writable: bool,
    tmp: &'a Path,
    work: &'a Path,
}

/// Which layer a maintenance run may write.
#[derive(Clone, Copy)]
enum LayerAccess<'a> {
    ReadOnly,
    PytestWritable,
    DepsWritable(&'a Path),
}

enum Program<'a> {
    /// Python source run with `turn` in a snapshot instance.
    Turn(&'a str),
    /// Command-line arguments for `_start` of a command image.
    Command(Vec<String>),
}

struct RunState {
    wasi: WasiP1Ctx,
    memory: MemoryCap,
}

/// A memory limiter that remembers whether it refused a growth.
struct MemoryCap {
    limit: usize,
    refused: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            self.refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

/// A ready-to-run sandbox. Cheap to share (`Arc`) and safe to use from many threads.
pub struct Sandbox {
    engine: Engine,
    image: ImageFiles,
    pytest_layer: PathBuf,
    empty_layer: tempfile::TempDir,
    pre: InstancePre<RunState>,
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

fn engine_config() -> Config {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.max_wasm_stack(MAX_WASM_STACK);
    config.async_stack_size(MAX_WASM_STACK * 2);
    config.cranelift_opt_level(wasmtime::OptLevel::Speed);
    config.parallel_compilation(true);
    config
}

fn engine_key(engine: &Engine) -> String {
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
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
        let engine = Engine::new(&engine_config()).map_err(SandboxError::runtime)?;
        start_epoch_ticker(&engine);
        let linker = make_linker(&engine)?;
        let snapshot = options.snapshot && options.image.supports_snapshot();
        let empty_layer = tempfile::Builder::new()
            .prefix("frognano-empty-")
            .tempdir()
            .map_err(SandboxError::io("create empty layer"))?;
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
                empty_layer.path(),
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

    /// Compiles a layer's bytecode with the guest's own interpreter, once per image (a `.pyc`
    /// must match the guest's magic number). Snapshot images compile the pytest layer while
    /// the snapshot is taken.
    fn compile_layer_bytecode(
        &self,
        access: LayerAccess<'_>,
        progress: Progress<'_>,
    ) -> Result<()> {
        let (host, guest) = match access {
            LayerAccess::PytestWritable => (self.pytest_layer.as_path(), GUEST_PYTEST),
            LayerAccess::DepsWritable(dir) => (dir, GUEST_DEPS),
            LayerAccess::ReadOnly => return Ok(()),
        };
        let marker = host.join(format!(".compiled-{}", self.image.kind));
        if marker.is_file() {
            return Ok(());
        }
        progress(&format!("compiling {guest} to guest bytecode (one time)"));
        let source = format!("import compileall; compileall.compile_dir({guest:?}, quiet=1)");
        let limits = Limits {
            timeout_s: 600.0,
            ..Limits::default()
        };
        let run = self.run_python_with(&source, access, None, limits)?;
        if run.exit_code != Some(0) {
            return Err(SandboxError::Runtime(format!(
                "compiling {guest} failed: {:?} {}",
                run.detail, run.stderr
            )));
        }
        fs::write(&marker, b"").map_err(SandboxError::io("mark layer compiled"))?;
        Ok(())
    }

    /// Runs Python source in a fresh sandbox with an empty workspace; returns the raw run.
    pub fn run_python(&self, source: &str, limits: Limits) -> Result<GuestRun> {
        self.run_python_with(source, LayerAccess::ReadOnly, None, limits)
    }

    /// Runs Python source in a fresh sandbox whose `/work` (also the working directory) is
    /// `workspace`; the guest may modify it. Returns the raw run.
    pub fn run_python_in(
        &self,
        workspace: &Path,
        source: &str,
        limits: Limits,
    ) -> Result<GuestRun> {
        if !workspace.is_dir() {
            return Err(SandboxError::Repo {
                path: workspace.to_path_buf(),
                message: "not a directory".into(),
            });
        }
        let source = format!("import os; os.chdir({GUEST_WORK:?})\n{source}");
        self.run_python_with(&source, LayerAccess::ReadOnly, Some(workspace), limits)
    }

    fn run_python_with(
        &self,
        source: &str,
        access: LayerAccess<'_>,
        workspace: Option<&Path>,
        limits: Limits,
    ) -> Result<GuestRun> {
        limits
            .validate()
            .map_err(|e| SandboxError::InvalidOption(e.to_string()))?;
        let tmp = tempfile::Builder::new()
            .prefix("frognano-tmp-")
            .tempdir()
            .map_err(SandboxError::io("create tmp"))?;
        let empty_work = tempfile::Builder::new()
            .prefix("frognano-work-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        let work = workspace.unwrap_or(empty_work.path());
        let mounts = Mounts {
            pytest: &self.pytest_layer,
            pytest_writable: matches!(access, LayerAccess::PytestWritable),
            deps: match access {
                LayerAccess::DepsWritable(dir) => dir,
                _ => self.empty_layer.path(),
            },
            deps_writable: matches!(access, LayerAccess::DepsWritable(_)),
            tmp: tmp.path(),
            work,
        };
        let program = if self.snapshot {
            Program::Turn(source)
        } else {
            Program::Command(vec!["python".into(), "-c".into(), source.into()])
        };
        self.runtime
            .block_on(self.run_guest(&mounts, &program, &limits, None))
    }

    /// Runs a repository's test suite on a fresh copy of it. The user's directory is not
    /// modified.
    pub fn run_tests(&self, repo: &Path, request: &TestRequest) -> Result<TestReport> {
        let prepared = self.prepare_repo(repo, &|_| {})?;
        self.run_tests_prepared(&prepared, request)
    }

    /// Runs a prepared repository's test suite on a fresh copy of it (see
    /// [`Sandbox::prepare_repo`]); the user's directory is not modified.
    pub fn run_tests_prepared(
        &self,
        prepared: &PreparedRepo,
        request: &TestRequest,
    ) -> Result<TestReport> {
        self.runtime.block_on(self.run_prepared(prepared, request))
    }

    /// Runs the tests of an existing workspace in place (for environments that manage their
    /// own copy). The workspace is modified by the guest exactly as a test run would.
    pub fn run_tests_in_workspace(
        &self,
        prepared: &PreparedRepo,
        workspace: &Path,
        request: &TestRequest,
    ) -> Result<TestReport> {
        self.runtime
            .block_on(self.run_in_workspace(prepared, workspace, request))
    }

    /// Runs many test jobs, up to [`Sandbox::workers`] at once on as many threads; results
    /// are in job order.
    pub fn run_tests_many(&self, jobs: &[(PathBuf, TestRequest)]) -> Vec<Result<TestReport>> {
        // Preparation may run maintenance guests of its own, so it happens before the batch.
        // A repository that appears in several jobs is prepared once.
        let mut by_repo: std::collections::HashMap<&Path, PreparedRepo> =
            std::collections::HashMap::new();
        let mut prepared = Vec::with_capacity(jobs.len());
        let mut results = Vec::with_capacity(jobs.len());
        for (repo, _) in jobs {
            let ready = match by_repo.get(repo.as_path()) {
                Some(ready) => Ok(ready.clone()),
                None => self.prepare_repo(repo, &|_| {}).inspect(|ready| {
                    by_repo.insert(repo, ready.clone());
                }),
            };
            match ready {
                Ok(ready) => {
                    prepared.push(Some(ready));
                    results.push(std::sync::Mutex::new(None));
                }
                Err(err) => {
                    prepared.push(None);
                    results.push(std::sync::Mutex::new(Some(Err(err))));
                }
            }
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            for _ in 0..self.workers.min(jobs.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, request)) = jobs.get(i) else {
                            break;
                        };
                        let Some(ready) = &prepared[i] else { continue };
                        let result = self.runtime.block_on(self.run_prepared(ready, request));
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(result);
                        }
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|slot| {
                slot.into_inner().ok().flatten().unwrap_or_else(|| {
                    Err(SandboxError::Runtime("a worker thread panicked".into()))
                })
            })
            .collect()
    }

    /// Reads a repository's configuration and builds its requirements layer (cached).
    pub fn prepare_repo(&self, repo: &Path, progress: Progress<'_>) -> Result<PreparedRepo> {
        let config = RepoConfig::load(repo)?;
        let deps_layer = if config.requirements.is_empty() {
            None
        } else {
            let layer = self.requirements_layer(&config, progress)?;
            self.compile_layer_bytecode(LayerAccess::DepsWritable(&layer), progress)?;
            Some(layer)
        };
        let bytecode = self.repo_bytecode(&config.root, progress)?;
        Ok(PreparedRepo {
            config,
            deps_layer,
            bytecode,
        })
    }

    /// The bytecode cache of a clean repository, built on first use (see [`crate::bytecode`]).
    /// A repository that does not compile cleanly simply gets no cache.
    fn repo_bytecode(&self, root: &Path, progress: Progress<'_>) -> Result<Option<PathBuf>> {
        let layer_name = self
            .pytest_layer
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let salt = format!(
            "{}-{}-{}",
            self.image.module_sha256,
            layer_name,
            assets::sha256_bytes(COMPILE_BYTECODE.as_bytes())
        );
        let key = bytecode::source_key(root, &salt)?;
        let dir = assets::cache_dir()
            .join("bytecode")
            .join(self.image.kind.name())
            .join(&key[..32]);
        if bytecode::is_complete(&dir) {
            return Ok(Some(dir));
        }
        progress("compiling the repository to bytecode (one time per repository version)");
        let work = tempfile::Builder::new()
            .prefix("frognano-compile-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        workspace::copy_repo(root, work.path())?;
        let config =
            serde_json::json!({"root": GUEST_WORK, "patterns": ["test_*.py", "*_test.py"]});
        let source = COMPILE_BYTECODE.replace(
            "__FROGNANO_CONFIG__",
            &python_string_literal(&config.to_string()),
        );
        let limits = Limits {
            timeout_s: 600.0,
            ..Limits::default()
        };
        let run =
            self.run_python_with(&source, LayerAccess::ReadOnly, Some(work.path()), limits)?;
        if run.exit_code != Some(0) {
            progress(&format!(
                "bytecode compilation skipped: {}",
                run.detail.as_deref().unwrap_or(run.stderr.trim())
            ));
            return Ok(None);
        }
        bytecode::harvest(work.path(), &dir)?;
        Ok(Some(dir))
    }

    fn requirements_layer(&self, config: &RepoConfig, progress: Progress<'_>) -> Result<PathBuf> {
        let version = self.image.kind.python_version();
        match layers::prepare_requirements_layer(&config.requirements, version, progress) {
            Ok(dir) => Ok(dir),
            Err(err) if config.requirements_detected => {
                // Detected requirements are a guess: keep those that resolve to pure wheels.
                let usable: Vec<String> = config
                    .requirements
                    .iter()
                    .filter(|r| {
                        layers::prepare_requirements_layer(
                            std::slice::from_ref(*r),
                            version,
                            &|_| {},
                        )
                        .is_ok()
                    })
                    .cloned()
                    .collect();
                progress(&format!(
                    "some detected requirements are not pure Python and were left out: {err}"
                ));
                layers::prepare_requirements_layer(&usable, version, progress)
            }
            Err(err) => Err(err),
        }
    }

    async fn run_prepared(
        &self,
        prepared: &PreparedRepo,
        request: &TestRequest,
    ) -> Result<TestReport> {
        let work = tempfile::Builder::new()
            .prefix("frognano-work-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        workspace::copy_repo(&prepared.config.root, work.path())?;
        self.run_in_workspace(prepared, work.path(), request).await
    }

    async fn run_in_workspace(
        &self,
        prepared: &PreparedRepo,
        work: &Path,
        request: &TestRequest,
    ) -> Result<TestReport> {
        let config = &prepared.config;
        let limits = request.limits.unwrap_or_else(|| config.limits());
        limits
            .validate()
            .map_err(|e| SandboxError::InvalidOption(e.to_string()))?;
        if let Some(cache) = &prepared.bytecode {
            // Best effort: without it the guest compiles the modules itself.
            let _ = bytecode::overlay(cache, work);
        }
        let tmp = tempfile::Builder::new()
            .prefix("frognano-tmp-")
            .tempdir()
            .map_err(SandboxError::io("create tmp"))?;
        fs::write(tmp.path().join(DEVNULL_FILE), b"")
            .map_err(SandboxError::io("create devnull"))?;
        let mut sys_path: Vec<String> = config
            .import_roots
            .iter()
            .map(|r| {
                if r == "." {
                    GUEST_WORK.to_string()
                } else {
                    format!("{GUEST_WORK}/{r}")
                }
            })
            .collect();
        if prepared.deps_layer.is_some() {
            sys_path.push(GUEST_DEPS.to_string());
        }
        if let Some((name, version)) = &config.distribution {
            // Tests often ask importlib.metadata for the project's own version.
            let site = tmp.path().join(".frognano-site");
            let info = site.join(format!("{}-{}.dist-info", name.replace('-', "_"), version));
            fs::create_dir_all(&info).map_err(SandboxError::io("create dist-info"))?;
            fs::write(
                info.join("METADATA"),
                format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"),
            )
            .map_err(SandboxError::io("write dist-info"))?;
            sys_path.push(format!("{GUEST_TMP}/.frognano-site"));
        }
        let mut args = base_pytest_args();
        args.extend(config.test.args.iter().cloned());
        for ignore in &config.test.ignore {
            args.push(format!("--ignore={ignore}"));
        }
        for deselect in &config.test.deselect {
            args.push(format!("--deselect={deselect}"));
        }
        args.extend(request.pytest_args.iter().cloned());
        let mut env = serde_json::json!({"HOME": GUEST_TMP, "TMPDIR": GUEST_TMP, "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"});
        if prepared.deps_layer.is_none() {
            // Only a requirements layer can hold pytest plugins that register through entry
            // points; without one, skip the scan of every distribution on the path (tens of ms).
            env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1".into();
        }
        let run_config = serde_json::json!({
            "sys_path": sys_path,
            "env": env,
            "cwd": GUEST_WORK,
            "devnull": format!("{GUEST_TMP}/{DEVNULL_FILE}"),
            "args": args,
            "plugin": layers::PLUGIN_MODULE,
            "results": format!("{GUEST_TMP}/{RESULTS_FILE}"),
            "coverage": request.coverage.then_some(GUEST_WORK),
        });
        let source = RUN_PYTEST.replace(
            "__FROGNANO_CONFIG__",
            &python_string_literal(&run_config.to_string()),
        );
        let mounts = Mounts {
            pytest: &self.pytest_layer,
            pytest_writable: false,
            deps: prepared
                .deps_layer
                .as_deref()
                .unwrap_or(self.empty_layer.path()),
            deps_writable: false,
            tmp: tmp.path(),
            work,
        };
        let program = if self.snapshot {
            Program::Turn(&source)
        } else {
            let mut argv = vec!["python".to_string(), "-c".to_string(), source.clone()];
            argv.extend(args.iter().cloned());
            Program::Command(argv)
        };
        let run = self
            .run_guest(&mounts, &program, &limits, request.cancel.as_ref())
            .await?;
        let (records, exit_code, coverage) = read_results(tmp.path())?;
        let mut report = build_report(records, exit_code, run);
        report.coverage = coverage;
        Ok(report)
    }

    async fn run_guest(
        &self,
        mounts: &Mounts<'_>,
        program: &Program<'_>,
        limits: &Limits,
        cancel: Option<&CancelFlag>,
    ) -> Result<GuestRun> {
        let stdout = MemoryOutputPipe::new(limits.output_bytes);
        let stderr = MemoryOutputPipe::new(limits.output_bytes);
        let wasi = build_wasi(mounts, program, &self.image, &stdout, &stderr)?;
        let memory_limit =
            usize::try_from(limits.memory_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        let mut store = Store::new(
            &self.engine,
            RunState {
                wasi,
                memory: MemoryCap {
                    limit: memory_limit,
                    refused: false,
                },
            },
        );
        store.limiter(|state| &mut state.memory);
        store.epoch_deadline_async_yield_and_update(1);
        let started = Instant::now();
        let deadline = Duration::from_secs_f64(limits.timeout_s);
        let call = tokio::time::timeout(deadline, call_program(&self.pre, &mut store, program));
        let cancelled = async {
            let Some(flag) = cancel else {
                // Nothing can cancel this run: no timer to wake.
                return std::future::pending().await;
            };
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(CANCEL_POLL).await;
            }
        };
        // Writes to files cannot be capped inside WASI, so the run's directories are measured
        // a few times a second instead.
        let disk_limit = self.disk_limit;
        let disk_full = async {
            loop {
                tokio::time::sleep(DISK_POLL).await;
                let used = disk_usage(mounts.tmp).saturating_add(disk_usage(mounts.work));
                if used > disk_limit {
                    break;
                }
            }
        };
        let outcome = tokio::select! {
            outcome = call => Some(outcome),
            () = cancelled => return Err(SandboxError::Cancelled),
            () = disk_full => None,
        };
        let duration = started.elapsed();
        let memory_refused = store.data().memory.refused;
        drop(store);
        let stdout_bytes = stdout.contents();
        let stderr_bytes = stderr.contents();
        let output_exceeded =
            stdout_bytes.len() >= limits.output_bytes || stderr_bytes.len() >= limits.output_bytes;
        let mut run = GuestRun {
            exit_code: None,
            limit: None,
            detail: None,
            stdout: String::from_utf8_lossy(&stdout_bytes).into_owned(),
            stderr: String::from_utf8_lossy(&stderr_bytes).into_owned(),
            duration,
        };
        match outcome {
            None => {
                run.limit = Some(RunOutcome::OutputExceeded);
                run.detail = Some(format!(
                    "disk cap of {} MiB reached (workspace and /tmp)",
                    self.disk_limit >> 20
                ));
            }
            Some(Err(_elapsed)) => {
                run.limit = Some(RunOutcome::Timeout);
                run.detail = Some(format!(
                    "wall-clock limit of {:.1} s reached",
                    limits.timeout_s
                ));
            }
            Some(Ok(Ok(code))) => run.exit_code = Some(code),
            Some(Ok(Err(err))) => {
                if let Some(exit) = err.downcast_ref::<I32Exit>() {
                    run.exit_code = Some(exit.0);
                } else {
                    run.limit = Some(RunOutcome::Crashed);
                    let trap = err.downcast_ref::<wasmtime::Trap>().map(|t| t.to_string());
                    run.detail = Some(match trap {
                        Some(trap) => format!("guest trapped: {trap}"),
                        None => format!("guest failed: {err:#}"),
                    });
                }
            }
        }
        if run.limit.is_none() || run.limit == Some(RunOutcome::Crashed) {
            if memory_refused {
                run.limit = Some(RunOutcome::MemoryExceeded);
                run.detail = Some(format!("memory cap of {} MiB reached", limits.memory_mb));
            } else if output_exceeded {
                run.limit = Some(RunOutcome::OutputExceeded);
                run.detail = Some(format!(
                    "output cap of {} bytes reached",
                    limits.output_bytes
                ));
            }
        }
        Ok(run)
    }
}

/// A repository ready to run: its configuration and requirements layer.
#[derive(Debug, Clone)]
pub struct PreparedRepo {
    /// The repository's configuration.
    pub config: RepoConfig,
    /// Its requirements layer, if it has requirements.
    pub deps_layer: Option<PathBuf>,
    /// Its bytecode cache, overlaid into each workspace before a run.
    pub bytecode: Option<PathBuf>,
}

const RUN_PYTEST: &str = include_str!("guest/run_pytest.py");
const SNAPSHOT_INIT: &str = include_str!("guest/snapshot_init.py");
const COMPILE_BYTECODE: &str = include_str!("guest/compile_bytecode.py");

/// pytest options every guest session needs: no cache or faulthandler plugins (no `os.dup`,
/// nothing to keep between runs), `sys`-level capture, and log and temp paths in `/tmp`.
fn base_pytest_args() -> Vec<String> {
    vec![
        "-p".into(),
        "no:cacheprovider".into(),
        "-p".into(),
        "no:faulthandler".into(),
        "--capture=sys".into(),
        "--color=no".into(),
        "-o".into(),
        format!("log_file={GUEST_TMP}/.pytest.log"),
        format!("--basetemp={GUEST_TMP}/pytest"),
    ]
}

fn python_string_literal(text: &str) -> String {
    // JSON string syntax is valid Python string syntax for these contents.
    serde_json::Value::String(text.to_string()).to_string()
}

fn wasmtime_version() -> &'static str {
    "48.0.8"
}

fn make_linker(engine: &Engine) -> Result<Linker<RunState>> {
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

fn build_wasi(
    mounts: &Mounts<'_>,
    program: &Program<'_>,
    image: &ImageFiles,
    stdout: &MemoryOutputPipe,
    stderr: &MemoryOutputPipe,
) -> Result<WasiP1Ctx> {
    let mut builder = WasiCtxBuilder::new();
    builder.stdout(stdout.clone()).stderr(stderr.clone());
    builder.allow_blocking_current_thread(true);
    builder
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    let perms = |writable: bool| {
        if writable {
            FsPerms::ReadWrite
        } else {
            FsPerms::ReadOnly
        }
    };
    let open =
        |builder: &mut WasiCtxBuilder, host: &Path, guest: &str, writable: bool| -> Result<()> {
            builder
                .preopened_dir(host, guest, perms(writable))
                .map(|_| ())
                .map_err(|e| {
                    SandboxError::Runtime(format!("mount {} at {guest}: {e:#}", host.display()))
                })
        };
    if let Some(stdlib) = &image.stdlib_dir {
        open(&mut builder, stdlib, GUEST_STDLIB, false)?;
    }
    open(
        &mut builder,
        mounts.pytest,
        GUEST_PYTEST,
        mounts.pytest_writable,
    )?;
    open(&mut builder, mounts.deps, GUEST_DEPS, mounts.deps_writable)?;
    open(&mut builder, mounts.tmp, GUEST_TMP, true)?;
    open(&mut builder, mounts.work, GUEST_WORK, true)?;
    // A command image reads these at every start. The 3.15 image runs in isolated mode and
    // ignores the WASI environment; the per-run prelude sets `os.environ` instead. Either way
    // string hashing is the same in every run, so set ordering (and the parametrize ids built
    // from it) is reproducible.
    for (key, value) in [
        ("HOME", GUEST_TMP),
        ("TMPDIR", GUEST_TMP),
        ("PYTHONHASHSEED", "0"),
        ("LANG", "C.UTF-8"),
    ] {
        builder.env(key, value);
    }
    if let Program::Command(argv) = program {
        builder.args(argv);
        builder.env("PYTHONPATH", GUEST_PYTEST);
    }
    Ok(builder.build_p1())
}

async fn call_program(
    pre: &InstancePre<RunState>,
    store: &mut Store<RunState>,
    program: &Program<'_>,
) -> wasmtime::Result<i32> {
    let instance = pre.instantiate_async(&mut *store).await?;
    match program {
        Program::Command(_) => {
            let start = instance.get_typed_func::<(), ()>(&mut *store, "_start")?;
            start.call_async(&mut *store, ()).await?;
            Ok(0)
        }
        Program::Turn(source) => turn(&instance, store, source).await,
    }
}

async fn turn(
    instance: &wasmtime::Instance,
    store: &mut Store<RunState>,
    source: &str,
) -> wasmtime::Result<i32> {
    let alloc = instance.get_typed_func::<i32, i32>(&mut *store, "host_alloc")?;
    let turn = instance.get_typed_func::<(i32, i32), i32>(&mut *store, "turn")?;
    let memory = instance
        .get_memory(&mut *store, "memory")
        .ok_or_else(|| wasmtime::format_err!("image exports no memory"))?;
    let bytes = source.as_bytes();
    let len = i32::try_from(bytes.len())?;
    let ptr = alloc.call_async(&mut *store, len).await?;
    if ptr == 0 {
        wasmtime::bail!("guest could not allocate {len} bytes for the program");
    }
    memory.write(&mut *store, ptr as u32 as usize, bytes)?;
    turn.call_async(&mut *store, (ptr, len)).await
}

fn start_epoch_ticker(engine: &Engine) {
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

fn load_or_compile(
    engine: &Engine,
    prefix: &str,
    key: &str,
    progress: Progress<'_>,
    what: &str,
    wasm: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Module> {
    let dir = assets::cache_dir().join("compiled");
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
    // Reload from disk so the module's memory image is mapped copy-on-write from the file.
    // SAFETY: as above; the file was just written by `serialize`.
    unsafe { Module::deserialize_file(engine, &path) }.map_err(SandboxError::runtime)
}

/// Apparent size in bytes of every file under `dir` (links not followed).
fn disk_usage(dir: &Path) -> u64 {
    walkdir::WalkDir::new(dir)
        .follow_links(false)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .fold(0, u64::saturating_add)
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

fn load_or_build_snapshot(
    engine: &Engine,
    linker: &Linker<RunState>,
    runtime: &tokio::runtime::Runtime,
    image: &ImageFiles,
    pytest_layer: &Path,
    empty: &Path,
    progress: Progress<'_>,
) -> Result<Module> {
    let layer_name = pytest_layer
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let key = format!(
        "{}-{}-{}-{}-{}",
        image.module_sha256,
        layer_name,
        assets::sha256_bytes(format!("{SNAPSHOT_INIT}{PRELOAD_MODULES:?}").as_bytes()),
        wasmtime_version(),
        engine_key(engine)
    );
    let prefix = format!("{}-snapshot", image.kind);
    load_or_compile(
        engine,
        &prefix,
        &key,
        progress,
        "compiling the pytest snapshot",
        || {
            runtime.block_on(build_snapshot(
                engine,
                linker,
                image,
                pytest_layer,
                empty,
                progress,
            ))
        },
    )
}

async fn build_snapshot(
    engine: &Engine,
    linker: &Linker<RunState>,
    image: &ImageFiles,
    pytest_layer: &Path,
    empty: &Path,
    progress: Progress<'_>,
) -> Result<Vec<u8>> {
    let wasm = fs::read(&image.module).map_err(SandboxError::io("read image"))?;
    let mut wizer = wasmtime_wizer::Wizer::new();
    wizer.init_func("wizer.initialize");
    let (cx, instrumented) = wizer.instrument(&wasm).map_err(SandboxError::runtime)?;
    progress("compiling the interpreter for snapshotting (one time)");
    let module = Module::new(engine, &instrumented).map_err(SandboxError::runtime)?;
    let tmp = tempfile::tempdir().map_err(SandboxError::io("create tmp"))?;
    let work = tempfile::tempdir().map_err(SandboxError::io("create workspace"))?;
    fs::write(tmp.path().join(DEVNULL_FILE), b"").map_err(SandboxError::io("create devnull"))?;
    fs::write(
        work.path().join("test_frognano_warmup.py"),
        "import pytest\n\n\n@pytest.mark.parametrize('x', [1, 2])\ndef test_warm(x, tmp_path):\n    assert x\n\n\n\
         def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n",
    )
    .map_err(SandboxError::io("write warm-up test"))?;
    let mounts = Mounts {
        pytest: pytest_layer,
        pytest_writable: true,
        deps: empty,
        deps_writable: false,
        tmp: tmp.path(),
        work: work.path(),
    };
    let stdout = MemoryOutputPipe::new(1 << 20);
    let stderr = MemoryOutputPipe::new(1 << 20);
    let warmup_args = [vec!["-q".to_string()], base_pytest_args()].concat();
    let source_config = serde_json::json!({
        "layer": GUEST_PYTEST,
        "cwd": GUEST_WORK,
        "devnull": format!("{GUEST_TMP}/{DEVNULL_FILE}"),
        "preload": PRELOAD_MODULES,
        "plugin": layers::PLUGIN_MODULE,
        "results": format!("{GUEST_TMP}/{RESULTS_FILE}"),
        "args": warmup_args,
    });
    let source = SNAPSHOT_INIT.replace(
        "__FROGNANO_CONFIG__",
        &python_string_literal(&source_config.to_string()),
    );
    let program = Program::Turn(&source);
    let wasi = build_wasi(&mounts, &program, image, &stdout, &stderr)?;
    let mut store = Store::new(
        engine,
        RunState {
            wasi,
            memory: MemoryCap {
                limit: usize::MAX,
                refused: false,
            },
        },
    );
    store.limiter(|state| &mut state.memory);
    store.epoch_deadline_async_yield_and_update(1);
    progress("initialising the interpreter and importing pytest");
    let instance = linker
        .instantiate_async(&mut store, &module)
        .await
        .map_err(SandboxError::runtime)?;
    for init in ["_initialize", "wizer.initialize"] {
        if let Ok(func) = instance.get_typed_func::<(), ()>(&mut store, init) {
            func.call_async(&mut store, ())
                .await
                .map_err(|e| SandboxError::Runtime(format!("{init}: {e:#}")))?;
        }
    }
    let tail = |pipe: &MemoryOutputPipe| {
        let text = String::from_utf8_lossy(&pipe.contents()).into_owned();
        let start = text.len().saturating_sub(3000);
        text.get(start..).unwrap_or_default().to_string()
    };
    let code = turn(&instance, &mut store, &source).await.map_err(|e| {
        SandboxError::Runtime(format!(
            "snapshot initialisation failed: {e:#}\n{}",
            tail(&stderr)
        ))
    })?;
    let (records, exit, _) = read_results(tmp.path())?;
    if code != 0 || exit != Some(0) || records.len() != 3 {
        return Err(SandboxError::Runtime(format!(
            "the warm-up pytest session in the snapshot did not pass (turn {code}, pytest {exit:?}, {} results)\n{}\n{}",
            records.len(),
            tail(&stdout),
            tail(&stderr)
        )));
    }
    progress("taking the memory snapshot");
    let snapshot = wizer
        .snapshot(
            &cx,
            &mut wasmtime_wizer::WasmtimeWizer {
                store: &mut store,
                instance,
            },
        )
        .await
        .map_err(SandboxError::runtime)?;
    Ok(snapshot)
}

/// Reads the plugin's JSONL results; a partial last line (a run cut short) is ignored.
type RunResults = (Vec<TestRecord>, Option<i32>, Option<Coverage>);

fn read_results(tmp: &Path) -> Result<RunResults> {
    // Read through a capability handle: a guest that replaced the file with a symlink
    // pointing out of its directory cannot make the host read another file.
    let dir = cap_std::fs::Dir::open_ambient_dir(tmp, cap_std::ambient_authority())
        .map_err(SandboxError::io("open run directory"))?;
    let text = match dir.read_to_string(RESULTS_FILE) {
        Ok(text) => text,
        Err(_) => return Ok((Vec::new(), None, None)),
    };
    let mut records = Vec::new();
    let mut exit_code = None;
    let mut coverage: Option<Coverage> = None;
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(code) = value.get("exit_code").and_then(|c| c.as_i64()) {
            exit_code = i32::try_from(code).ok();
        } else if let Some(why) = value.get("coverage_unavailable").and_then(|w| w.as_str()) {
            coverage.get_or_insert_with(Coverage::default).unavailable = Some(why.to_string());
        } else if let Some(test) = value.get("coverage") {
            let files: FileLines = value
                .get("files")
                .and_then(|f| serde_json::from_value(f.clone()).ok())
                .unwrap_or_default();
            let coverage = coverage.get_or_insert_with(Coverage::default);
            match test.as_str() {
                Some(id) => {
                    coverage.tests.insert(id.to_string(), files);
                }
                None => coverage.shared = files,
            }
        } else if let Ok(record) = serde_json::from_value::<TestRecord>(value) {
            records.push(record);
        }
    }
    Ok((records, exit_code, coverage))
}

fn build_report(records: Vec<TestRecord>, pytest_exit: Option<i32>, run: GuestRun) -> TestReport {
    let mut report = TestReport::from_records(records, run.duration.as_secs_f64());
    report.exit_code = pytest_exit;
    report.stdout = run.stdout;
    report.stderr = run.stderr;
    report.detail = run.detail;
    if let Some(limit) = run.limit {
        report.outcome = limit;
    } else if pytest_exit.is_none() {
        // The guest ended without pytest finishing (e.g. a test called os._exit).
        report.outcome = RunOutcome::Crashed;
        report.detail = Some(format!(
            "the interpreter exited (status {:?}) before pytest finished",
            run.exit_code
        ));
    } else if pytest_exit == Some(5) && report.tests.is_empty() {
        report.outcome = RunOutcome::NoTests;
    } else if matches!(pytest_exit, Some(2..=4)) && report.failed == 0 && report.errors == 0 {
        // Interrupted, internal or usage error with nothing else to show for it.
        report.outcome = RunOutcome::Failed;
        report.detail = Some(format!("pytest exited with status {pytest_exit:?}"));
    }
    report
}
