//! Token batches for Python learners: a TrainingBatch dict as the flat arrays of
//! `frognano_core::TokenBatch`, and their safetensors file. The numpy arrays are made in
//! `frognano/__init__.py` from the raw little-endian buffers returned here, so the native
//! module does not link numpy.

use std::path::PathBuf;

use frognano_core::{TokenBatch, TrainingBatch};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::convert::{from_py_json, parse};
use crate::errors::py_err;
use crate::policy::normalise_batch;

fn token_batch_of(py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<TokenBatch> {
    let batch: TrainingBatch = parse(
        py,
        "training batch",
        normalise_batch(from_py_json(py, batch)?),
    )?;
    TokenBatch::from_batch(&batch).map_err(|e| py_err(py, e))
}

/// {name: (dtype, bytes)} plus "metadata": the arrays of a token batch as raw buffers.
fn raw<'py>(py: Python<'py>, tokens: &TokenBatch) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let i64s = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let arrays: Vec<(&str, &str, Vec<u8>)> = vec![
        ("prompt_ids", "<i8", i64s(&tokens.prompt_ids)),
        ("prompt_offsets", "<i8", i64s(&tokens.prompt_offsets)),
        ("completion_ids", "<i8", i64s(&tokens.completion_ids)),
        (
            "completion_offsets",
            "<i8",
            i64s(&tokens.completion_offsets),
        ),
        ("rollout_logprobs", "<f4", f32s(&tokens.rollout_logprobs)),
        ("loss_mask", "u1", tokens.loss_mask.clone()),
        ("temperatures", "<f4", f32s(&tokens.temperatures)),
        ("top_k", "<i8", i64s(&tokens.top_k)),
        ("top_p", "<f4", f32s(&tokens.top_p)),
        ("length_limited", "u1", tokens.length_limited.clone()),
        ("step_trajectory", "<i8", i64s(&tokens.step_trajectory)),
        ("step_advantages", "<f4", f32s(&tokens.step_advantages)),
        ("advantages", "<f4", f32s(&tokens.advantages)),
        ("rewards", "<f4", f32s(&tokens.rewards)),
        ("truncated", "u1", tokens.truncated.clone()),
        ("resolved", "u1", tokens.resolved.clone()),
        ("groups", "<i8", i64s(&tokens.groups)),
    ];
    for (name, dtype, bytes) in arrays {
        out.set_item(name, (dtype, PyBytes::new(py, &bytes)))?;
    }
    let metadata = PyDict::new(py);
    metadata.set_item("format", frognano_core::TOKEN_BATCH_FORMAT)?;
    metadata.set_item("version", frognano_core::TOKEN_BATCH_VERSION.to_string())?;
    metadata.set_item("iteration", tokens.iteration.to_string())?;
    metadata.set_item("estimator", &tokens.estimator)?;
    metadata.set_item("group_size", tokens.group_size.to_string())?;
    metadata.set_item(
        "task_ids",
        serde_json::to_string(&tokens.task_ids).unwrap_or_else(|_| "[]".into()),
    )?;
    out.set_item("metadata", metadata)?;
    Ok(out)
}

/// The raw arrays of a TrainingBatch dict's model steps (see frognano.token_batch).
#[pyfunction]
fn _token_batch_raw<'py>(
    py: Python<'py>,
    batch: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let tokens = token_batch_of(py, &batch)?;
    raw(py, &tokens)
}

/// The raw arrays of a token batch file (see frognano.load_token_batch).
#[pyfunction]
fn _load_token_batch_raw(py: Python<'_>, path: PathBuf) -> PyResult<Bound<'_, PyDict>> {
    let tokens = py
        .detach(|| TokenBatch::load(&path))
        .map_err(|e| py_err(py, e))?;
    raw(py, &tokens)
}

/// save_token_batch(batch, path) -> None
///
/// Writes the model steps of a TrainingBatch dict (what GrpoTrainer hands a learner; its
/// last_batch) as a token batch file: a safetensors file of flat arrays, with the prompt ids
/// each reply was generated from, the generated ids, their rollout log-probs and loss mask,
/// and the advantages (the format frognano.torch_learner reads; see token_batch). A batch a
/// token learner cannot use (a model step without prompt ids, log-probs or a loss mask of
/// another length than its tokens, a non-finite advantage) raises InvalidArgumentError.
#[pyfunction]
fn save_token_batch(py: Python<'_>, batch: Bound<'_, PyAny>, path: PathBuf) -> PyResult<()> {
    let tokens = token_batch_of(py, &batch)?;
    py.detach(|| tokens.save(&path)).map_err(|e| py_err(py, e))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    add_functions!(m: _token_batch_raw, _load_token_batch_raw, save_token_batch);
    Ok(())
}
