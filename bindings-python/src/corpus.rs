//! Corpora from Python: `corpus_add`, `corpus_entries`, `corpus_build`, `corpus_summary` and
//! `read_corpus_summary` (what `frognano corpus add/list/build/summary` do), so that a corpus can be built from Python and its entries spread
//! over a cluster's workers (`frognano.distributed`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use frognano_corpus::{BuildEvent, BuildOptions, Corpus, Manifest, Spec};
use frognano_sandbox::CancelFlag;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{lock, run_interruptibly, to_py};
use crate::errors::py_err;
use crate::sandbox::{PySandbox, sandbox_of};

/// corpus_add(corpus, specs) -> list of entry ids
///
/// Creates the corpus directory when needed and adds the specs (registry packages such as
/// "attrs==25.3.0", local trees, sdists; relative paths are read against the working
/// directory). Returns the ids of the given specs, in order.
#[pyfunction]
fn corpus_add(py: Python<'_>, corpus: PathBuf, specs: Vec<String>) -> PyResult<Vec<String>> {
    let corpus = Corpus::create(&corpus).map_err(|e| py_err(py, e))?;
    let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let specs = specs
        .iter()
        .map(|text| Spec::parse(text, &base, "corpus_add"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| py_err(py, e))?;
    corpus.add(&specs).map_err(|e| py_err(py, e))?;
    Ok(specs.iter().map(Spec::id).collect())
}

/// corpus_entries(corpus) -> list of {"id", "spec", "status"} (status: "ready", "failed" or
/// None when not built yet).
#[pyfunction]
fn corpus_entries<'py>(py: Python<'py>, corpus: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let corpus = Corpus::open(&corpus).map_err(|e| py_err(py, e))?;
    let specs = corpus.specs().map_err(|e| py_err(py, e))?;
    let entries: Vec<serde_json::Value> = specs
        .iter()
        .map(|spec| {
            let id = spec.id();
            let status = corpus
                .manifest(&id)
                .map(|m| if m.is_ready() { "ready" } else { "failed" });
            serde_json::json!({"id": id, "spec": spec.to_string(), "status": status})
        })
        .collect();
    to_py(py, &entries)
}

/// corpus_build(corpus, *, only=None, jobs=0, timeout=180.0, retry_failed=False,
/// rebuild=False, sandbox=None, progress=None) -> dict
///
/// Builds the corpus's unfinished entries (only: these ids), as `frognano corpus build`
/// does: resumable, finished entries kept. Returns built, kept, ready, failed, unfinished,
/// seconds and the manifests of the entries this call finished. progress(id, message) sees
/// each step. Ctrl-C stops it; finished entries stay.
#[pyfunction]
#[pyo3(signature = (corpus, *, only=None, jobs=0, timeout=180.0, retry_failed=false, rebuild=false, sandbox=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn corpus_build<'py>(
    py: Python<'py>,
    corpus: PathBuf,
    only: Option<Vec<String>>,
    jobs: usize,
    timeout: f64,
    retry_failed: bool,
    rebuild: bool,
    sandbox: Option<PyRef<'py, PySandbox>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let corpus = open(py, &corpus)?;
    let sandbox = sandbox_of(py, sandbox)?;
    let cancel: CancelFlag = Arc::default();
    let options = BuildOptions {
        jobs,
        timeout_s: timeout,
        retry_failed,
        rebuild,
        only: only.unwrap_or_default(),
        cancel: Some(cancel.clone()),
    };
    let finished: Mutex<Vec<Manifest>> = Mutex::new(Vec::new());
    let events = |event: &BuildEvent<'_>| match event {
        BuildEvent::Finished { manifest } => lock(&finished).push((*manifest).clone()),
        BuildEvent::Step { id, message } => {
            if let Some(progress) = &progress {
                Python::attach(|py| {
                    // A failing progress callback must not stop the build.
                    let _ = progress.call1(py, (*id, *message));
                });
            }
        }
        _ => {}
    };
    let summary = run_interruptibly(py, &cancel, || corpus.build(&sandbox, &options, &events))?
        .map_err(|e| py_err(py, e))?;
    let manifests = std::mem::take(&mut *lock(&finished));
    let out = PyDict::new(py);
    out.set_item("built", summary.built)?;
    out.set_item("kept", summary.kept)?;
    out.set_item("ready", summary.ready)?;
    out.set_item("failed", summary.failed)?;
    out.set_item("unfinished", summary.unfinished)?;
    out.set_item("seconds", summary.seconds)?;
    out.set_item("manifests", to_py(py, &manifests)?)?;
    Ok(out.into_any())
}

/// corpus_summary(corpus, out=None) -> {"path", "entries"}
///
/// Writes the summary of the built entries (one JSON line per entry: status or failure
/// cause, test counts, suite time, synthesis yield, native agreement) to out, by default
/// summary.jsonl in the corpus directory, as `frognano corpus summary` does.
#[pyfunction]
#[pyo3(signature = (corpus, out=None))]
fn corpus_summary<'py>(
    py: Python<'py>,
    corpus: PathBuf,
    out: Option<PathBuf>,
) -> PyResult<Bound<'py, PyAny>> {
    let path = out.unwrap_or_else(|| corpus.join(frognano_corpus::SUMMARY_FILE));
    let corpus = open(py, &corpus)?;
    let entries = frognano_corpus::write_summary(&corpus, &path).map_err(|e| py_err(py, e))?;
    to_py(
        py,
        &serde_json::json!({"path": path.display().to_string(), "entries": entries}),
    )
}

/// read_corpus_summary(path) -> list of dicts, one per entry of a summary written by
/// corpus_summary (or `frognano corpus summary`): choose environments without building them.
#[pyfunction]
fn read_corpus_summary<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyAny>> {
    let manifests = frognano_corpus::read_summary(&path).map_err(|e| py_err(py, e))?;
    to_py(py, &manifests)
}

fn open(py: Python<'_>, path: &Path) -> PyResult<Corpus> {
    Corpus::open(path).map_err(|e| py_err(py, e))
}

/// Adds this module's functions to the native module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_functions!(m: corpus_add, corpus_entries, corpus_build, corpus_summary,
        read_corpus_summary);
    Ok(())
}
