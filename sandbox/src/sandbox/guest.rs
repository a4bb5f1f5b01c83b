//! One guest run: the mounts and WASI context, the memory cap, and the time (the guest's own
//! time, with a wall-clock backstop), disk and output limits and cancellation that end a run as
//! an outcome instead of an error.

use std::path::Path;
use std::time::{Duration, Instant};

use frognano_core::{Limits, RunOutcome};
use wasmtime::{InstancePre, ResourceLimiter, Store};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use super::time_budget::{Metered, OwnClock, wall_backstop};
use super::{CancelFlag, GUEST_DEPS, GUEST_PYTEST, GUEST_STDLIB, GUEST_TMP, GUEST_WORK, Sandbox};
use crate::error::{Result, SandboxError};
use crate::image::ImageFiles;

const CANCEL_POLL: Duration = Duration::from_millis(20);
const DISK_POLL: Duration = Duration::from_millis(300);

/// The environment of every guest process. `USER` and `LOGNAME` name a user because WASI has
/// no user database: `getpass.getuser()` (test fixtures, cache paths) reads them.
pub(super) const GUEST_ENVIRONMENT: [(&str, &str); 6] = [
    ("HOME", GUEST_TMP),
    ("TMPDIR", GUEST_TMP),
    ("PYTHONHASHSEED", "0"),
    ("LANG", "C.UTF-8"),
    ("USER", "frognano"),
    ("LOGNAME", "frognano"),
];

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
    /// CPU time the guest used (what its time limit counts).
    pub cpu: Duration,
    /// Of which: making the instance and handing it the program.
    pub instantiate: Duration,
}

/// Host directories mounted into one guest, always in the same order (the snapshot records
/// the preopen table, so the order must match the one it was taken with).
pub(super) struct Mounts<'a> {
    pub(super) pytest: &'a Path,
    pub(super) pytest_writable: bool,
    pub(super) deps: &'a Path,
    pub(super) deps_writable: bool,
    pub(super) tmp: &'a Path,
    pub(super) work: &'a Path,
}

/// Which layer a maintenance run may write.
#[derive(Clone, Copy)]
pub(super) enum LayerAccess<'a> {
    ReadOnly,
    PytestWritable,
    DepsWritable(&'a Path),
}

pub(super) enum Program<'a> {
    /// Python source run with `turn` in a snapshot instance.
    Turn(&'a str),
    /// Command-line arguments for `_start` of a command image.
    Command(Vec<String>),
}

pub(super) struct RunState {
    pub(super) wasi: WasiP1Ctx,
    pub(super) memory: MemoryCap,
    /// How long instantiation took (set once the program starts).
    pub(super) instantiate: Duration,
}

/// A memory limiter that remembers whether it refused a growth.
pub(super) struct MemoryCap {
    pub(super) limit: usize,
    pub(super) refused: bool,
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

impl Sandbox {
    pub(super) async fn run_guest(
        &self,
        template: &InstancePre<RunState>,
        mounts: &Mounts<'_>,
        program: &Program<'_>,
        limits: &Limits,
        cancel: Option<&CancelFlag>,
    ) -> Result<GuestRun> {
        super::trap_handlers::reinstate();
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
                instantiate: Duration::ZERO,
            },
        );
        store.limiter(|state| &mut state.memory);
        store.epoch_deadline_async_yield_and_update(1);
        let started = Instant::now();
        let cpu_used = std::sync::atomic::AtomicU64::new(0);
        let budget = Duration::from_secs_f64(limits.timeout_s);
        let clock = OwnClock::start();
        let call = tokio::time::timeout(
            wall_backstop(limits.timeout_s),
            Metered::new(
                call_program(template, &mut store, program),
                budget,
                &clock,
                &cpu_used,
            ),
        );
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
            () = clock.reached(budget) => Some(Ok(None)),
            () = cancelled => return Err(SandboxError::Cancelled),
            () = disk_full => None,
        };
        let duration = started.elapsed();
        let own = clock.elapsed();
        let cpu = Duration::from_nanos(cpu_used.load(std::sync::atomic::Ordering::Relaxed));
        let memory_refused = store.data().memory.refused;
        let instantiate = store.data().instantiate;
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
            cpu,
            instantiate,
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
                    "wall-clock backstop of {:.1} s reached with {:.1} s of CPU used (the limit \
                     is {:.1} s of the guest's own time; where the kernel does not say how long \
                     the guest waited for a core, a guest that waits instead of working ends \
                     here)",
                    wall_backstop(limits.timeout_s).as_secs_f64(),
                    cpu.as_secs_f64(),
                    limits.timeout_s
                ));
            }
            Some(Ok(None)) => {
                run.limit = Some(RunOutcome::Timeout);
                run.detail = Some(format!(
                    "time limit of {:.1} s reached: {:.1} s of CPU and {:.1} s waiting of its \
                     own accord ({:.1} s of wall-clock time)",
                    limits.timeout_s,
                    cpu.as_secs_f64(),
                    own.saturating_sub(cpu).as_secs_f64(),
                    duration.as_secs_f64()
                ));
            }
            Some(Ok(Some(Ok(code)))) => run.exit_code = Some(code),
            Some(Ok(Some(Err(err)))) => {
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

pub(super) fn build_wasi(
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
    // Last, so that the descriptors above keep their numbers: a data folder mounted at its
    // path inside the stdlib zip (`/usr/local/lib/python315.zip/matplotlib/mpl-data`). The
    // guest's libc resolves a path against the mount with the longest matching prefix, so
    // file calls under that path reach the folder while imports still read the zip.
    for (host, relative) in &image.data_dirs {
        open(
            &mut builder,
            host,
            &format!("{GUEST_STDLIB}/{relative}"),
            false,
        )?;
    }
    // A command image reads these at every start. The 3.15 image runs in isolated mode and
    // ignores the WASI environment; the per-run prelude sets `os.environ` instead. Either way
    // string hashing is the same in every run, so set ordering (and the parametrize ids built
    // from it) is reproducible.
    for (key, value) in GUEST_ENVIRONMENT {
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
    let started = Instant::now();
    let instance = pre.instantiate_async(&mut *store).await?;
    store.data_mut().instantiate = started.elapsed();
    match program {
        Program::Command(_) => {
            let start = instance.get_typed_func::<(), ()>(&mut *store, "_start")?;
            start.call_async(&mut *store, ()).await?;
            Ok(0)
        }
        Program::Turn(source) => turn(&instance, store, source).await,
    }
}

pub(super) async fn turn(
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
