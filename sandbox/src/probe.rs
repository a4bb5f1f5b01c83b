//! What the engine settings the sandbox runs with cost or save, measured on a real
//! interpreter: the CPython 3.12 command image (small enough to compile in seconds) runs the
//! same Python workload under the sandbox's engine configuration and under variants of it, in
//! alternation, and each variant's median time is compared with the sandbox's.
//!
//! The variants answer three questions: what epoch interruption (which lets a wall-clock limit
//! stop a busy guest) costs; whether linear-memory accesses carry explicit bounds checks (a
//! variant that forces them should be slower, showing that the sandbox's configuration elides
//! them with guard pages); and what Cranelift's optimisation level buys.

use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, Linker, Module, Store};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use crate::assets::Progress;
use crate::error::{Result, SandboxError};
use crate::image::{ImageKind, prepare_image};
use crate::sandbox::engine_config;

/// Python source the probes time: loops, arithmetic, string formatting, dict and list work and
/// method calls, the mix test suites spend their time on.
pub const WORKLOAD: &str = "\
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm(self):
        return abs(self.x) + abs(self.y)

total = 0
table = {}
for i in range(400_000):
    total += (i * i) % 7
    if i % 3 == 0:
        table[f'k{i % 5000}'] = i
points = [Point(i, -i) for i in range(100_000)]
total += sum(p.norm() for p in points)
words = ' '.join(str(i) for i in range(50_000)).split()
total += len(sorted(words, key=len))
print(total, len(table))
";

/// One engine configuration's timing.
#[derive(Debug, Clone)]
pub struct EngineProbe {
    /// What the variant changes.
    pub name: &'static str,
    /// Whether this is the configuration the sandbox runs with.
    pub sandbox_default: bool,
    /// Median wall-clock seconds of the workload.
    pub median_s: f64,
    /// Seconds to compile the interpreter with this configuration.
    pub compile_s: f64,
}

type Variant = (&'static str, bool, fn(&mut Config));

fn variants() -> Vec<Variant> {
    vec![
        ("sandbox configuration", true, |_| {}),
        (
            "without epoch interruption (no wall-clock limit)",
            false,
            |c| {
                c.epoch_interruption(false);
            },
        ),
        ("explicit bounds checks forced", false, |c| {
            c.memory_reservation(0);
            c.memory_guard_size(0);
            c.signals_based_traps(false);
        }),
        ("Cranelift opt level speed_and_size", false, |c| {
            c.cranelift_opt_level(wasmtime::OptLevel::SpeedAndSize);
        }),
        ("Cranelift unoptimised", false, |c| {
            c.cranelift_opt_level(wasmtime::OptLevel::None);
        }),
    ]
}

/// Times the workload `runs` times under each variant (alternating) and returns the medians;
/// the first entry is the sandbox's own configuration.
pub fn probe_engine(runs: usize, progress: Progress<'_>) -> Result<Vec<EngineProbe>> {
    if runs == 0 {
        return Err(SandboxError::InvalidOption(
            "runs must be at least 1".into(),
        ));
    }
    let image = prepare_image(ImageKind::Python312, progress)?;
    let wasm = std::fs::read(&image.module).map_err(SandboxError::io("read image"))?;
    let mut compiled = Vec::new();
    for (name, default, adjust) in variants() {
        progress(&format!("compiling the 3.12 interpreter: {name}"));
        let mut config = engine_config();
        adjust(&mut config);
        let engine = Engine::new(&config).map_err(SandboxError::runtime)?;
        let started = Instant::now();
        let module = Module::new(&engine, &wasm).map_err(SandboxError::runtime)?;
        let compile_s = started.elapsed().as_secs_f64();
        let mut linker: Linker<WasiP1Ctx> = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |ctx| ctx)
            .map_err(SandboxError::runtime)?;
        compiled.push((name, default, engine, module, linker, compile_s, Vec::new()));
    }
    for round in 0..runs {
        progress(&format!("round {} of {runs}", round + 1));
        for (_, _, engine, module, linker, _, times) in &mut compiled {
            // Synchronous wasm calls run on the calling thread's stack: give it room for the
            // guest's 8 MiB wasm stack.
            let elapsed = std::thread::scope(|scope| {
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn_scoped(scope, || run_workload(engine, module, linker))
                    .map_err(SandboxError::io("start the probe thread"))?
                    .join()
                    .unwrap_or_else(|_| {
                        Err(SandboxError::Runtime("the probe thread panicked".into()))
                    })
            })?;
            times.push(elapsed.as_secs_f64());
        }
    }
    Ok(compiled
        .into_iter()
        .map(|(name, default, _, _, _, compile_s, mut times)| {
            times.sort_by(f64::total_cmp);
            EngineProbe {
                name,
                sandbox_default: default,
                median_s: times[times.len() / 2],
                compile_s,
            }
        })
        .collect())
}

fn run_workload(engine: &Engine, module: &Module, linker: &Linker<WasiP1Ctx>) -> Result<Duration> {
    let stdout = MemoryOutputPipe::new(1 << 16);
    let stderr = MemoryOutputPipe::new(1 << 16);
    let wasi = WasiCtxBuilder::new()
        .args(&["python", "-c", WORKLOAD])
        .stdout(stdout.clone())
        .stderr(stderr.clone())
        .build_p1();
    let mut store = Store::new(engine, wasi);
    // Epoch checks cost the same whatever the deadline; a far one never interrupts.
    store.set_epoch_deadline(u64::MAX / 2);
    let started = Instant::now();
    let instance = linker
        .instantiate(&mut store, module)
        .map_err(SandboxError::runtime)?;
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .map_err(SandboxError::runtime)?;
    if let Err(err) = start.call(&mut store, ())
        && err
            .downcast_ref::<wasmtime_wasi::I32Exit>()
            .is_none_or(|exit| exit.0 != 0)
    {
        return Err(SandboxError::Runtime(format!(
            "the probe workload failed: {err:#}\n{}",
            String::from_utf8_lossy(&stderr.contents())
        )));
    }
    let elapsed = started.elapsed();
    if stdout.contents().is_empty() {
        return Err(SandboxError::Runtime(format!(
            "the probe workload printed nothing\n{}",
            String::from_utf8_lossy(&stderr.contents())
        )));
    }
    Ok(elapsed)
}
