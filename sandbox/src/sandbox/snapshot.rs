//! The memory snapshot: an interpreter that has already imported pytest and run a warm-up
//! session, taken once with wizer and cached as a compiled module.

use std::fs;
use std::path::Path;
use std::time::Duration;

use wasmtime::{Engine, Linker, Module, Store};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::engine::{engine_key, load_or_compile, wasmtime_version};
use super::guest::{MemoryCap, Mounts, Program, RunState, build_wasi, turn};
use super::pytest::base_pytest_args;
use super::report::read_results;
use super::{
    DEVNULL_FILE, GUEST_DEPS, GUEST_PYTEST, GUEST_TMP, GUEST_WORK, RESULTS_FILE,
    python_string_literal,
};
use crate::assets::{self, Progress};
use crate::error::{Result, SandboxError};
use crate::image::ImageFiles;
use crate::layers;

const SNAPSHOT_INIT: &str = include_str!("../guest/snapshot_init.py");
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

/// A requirements layer to snapshot on top of pytest: its directory and the top-level modules
/// to import (those the repository's tests import); its pytest plugins load in the warm-up.
pub(super) struct LayerImports<'a> {
    pub(super) layer: &'a Path,
    pub(super) modules: &'a [String],
}

pub(super) fn load_or_build_snapshot(
    engine: &Engine,
    linker: &Linker<RunState>,
    runtime: &tokio::runtime::Runtime,
    image: &ImageFiles,
    pytest_layer: &Path,
    deps: Result<LayerImports<'_>, &Path>,
    progress: Progress<'_>,
) -> Result<Module> {
    let name = |path: &Path| {
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string()
    };
    let mut key = format!(
        "{}-{}-{}-{}-{}",
        image.module_sha256,
        name(pytest_layer),
        // The guest's libc keeps the mounts it saw in the snapshot: a change of mounts is
        // a new snapshot.
        assets::sha256_bytes(
            format!(
                "{SNAPSHOT_INIT}{PRELOAD_MODULES:?}{:?}",
                image
                    .data_dirs
                    .iter()
                    .map(|(_, guest)| guest)
                    .collect::<Vec<_>>()
            )
            .as_bytes()
        ),
        wasmtime_version(),
        engine_key(engine)
    );
    // A layer's snapshot is its own artifact: one per layer and module list, none superseding
    // another.
    let (prefix, what) = match &deps {
        Ok(imports) => {
            key.push_str(&format!("-{}-{:?}", name(imports.layer), imports.modules));
            (
                format!(
                    "{}-layer-{}",
                    image.kind,
                    &assets::sha256_bytes(key.as_bytes())[..16]
                ),
                "compiling the snapshot with the requirements imported",
            )
        }
        Err(_) => (
            format!("{}-snapshot", image.kind),
            "compiling the pytest snapshot",
        ),
    };
    load_or_compile(engine, &prefix, &key, progress, what, || {
        runtime.block_on(build_snapshot(
            engine,
            linker,
            image,
            pytest_layer,
            &deps,
            progress,
        ))
    })
}

async fn build_snapshot(
    engine: &Engine,
    linker: &Linker<RunState>,
    image: &ImageFiles,
    pytest_layer: &Path,
    deps: &Result<LayerImports<'_>, &Path>,
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
    let (deps_dir, layer_modules) = match deps {
        Ok(imports) => (imports.layer, imports.modules),
        Err(empty) => (*empty, &[][..]),
    };
    let mounts = Mounts {
        pytest: pytest_layer,
        // The pytest layer's bytecode is compiled by the base snapshot's initialisation.
        pytest_writable: deps.is_err(),
        deps: deps_dir,
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
        "deps": deps.is_ok().then_some(GUEST_DEPS),
        "deps_modules": layer_modules,
        "site_packages": [GUEST_DEPS, GUEST_PYTEST],
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
            instantiate: Duration::ZERO,
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
    let results = read_results(tmp.path())?;
    let (records, exit) = (results.records, results.exit_code);
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
