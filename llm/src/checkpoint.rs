//! Hugging Face checkpoints to ONNX model folders.
//!
//! A Hugging Face checkpoint folder (`config.json`, `model.safetensors` or a sharded
//! `model.safetensors.index.json`, `tokenizer.json`, `tokenizer_config.json`; llama, qwen2 or
//! mistral decoders with bf16, fp16 or fp32 weights) is converted by the embedded converter's
//! `from-hf` into the same model folders a GGUF conversion writes: `out/fp32` (which also holds
//! `model.safetensors`, so it is a checkpoint again) and `out/int4` (weights re-rounded to 4 bits
//! by onnxruntime's quantizer). The fp32 folder of any converted model is such a checkpoint, so
//! the two directions round-trip.

use std::path::Path;

use crate::assets::{self, Progress};
use crate::error::{InferenceError, Result};

/// Precisions a checkpoint converts to.
pub const CHECKPOINT_PRECISIONS: &[&str] = &["fp32", "int4"];

/// The converter's own one-line error (`[frognano_models] error: ...`), if the failure holds one.
fn converter_error(message: &str) -> Option<&str> {
    message
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix("[frognano_models] error: "))
}

/// Converts the Hugging Face checkpoint folder `checkpoint` into one model folder per precision
/// under `out` (`out/fp32`, `out/int4`; `precisions` is a non-empty subset of
/// [`CHECKPOINT_PRECISIONS`]) and returns the converter's summary (`folders` maps each precision
/// to its folder). Each folder is loadable with [`crate::DecoderModel`] and
/// [`crate::TextCodec`]. A checkpoint the converter refuses (an unsupported architecture, a
/// missing tensor or tokenizer file, a shape that does not match its config) is an
/// [`InferenceError::Model`] naming the checkpoint and the reason.
pub fn convert_checkpoint(
    checkpoint: &Path,
    out: &Path,
    precisions: &[&str],
    progress: Progress<'_>,
) -> Result<serde_json::Value> {
    if precisions.is_empty()
        || precisions
            .iter()
            .any(|p| !CHECKPOINT_PRECISIONS.contains(p))
    {
        return Err(InferenceError::InvalidRequest(format!(
            "precisions must be a non-empty subset of {} (got {precisions:?})",
            CHECKPOINT_PRECISIONS.join(", ")
        )));
    }
    if !checkpoint.is_dir() {
        return Err(InferenceError::model(
            checkpoint,
            "not a folder (a Hugging Face checkpoint is a folder with config.json)",
        ));
    }
    if !checkpoint.join("config.json").is_file() {
        return Err(InferenceError::model(
            checkpoint,
            "no config.json: not a Hugging Face checkpoint folder",
        ));
    }
    let args = vec![
        "from-hf".to_string(),
        "--checkpoint".into(),
        checkpoint.display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "--precisions".into(),
        precisions.join(","),
    ];
    let summary = assets::run_converter(&args, progress).map_err(|err| match err {
        InferenceError::Setup(message) => match converter_error(&message) {
            Some(reason) => InferenceError::model(
                checkpoint,
                format!("cannot convert the checkpoint: {reason}"),
            ),
            None => InferenceError::Setup(message),
        },
        other => other,
    })?;
    for precision in precisions {
        let folder = out.join(precision);
        if !folder.join("model.onnx").is_file() {
            return Err(InferenceError::model(
                &folder,
                "the converter finished but wrote no model.onnx here",
            ));
        }
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_converter_error_line_is_picked_out_of_its_output() {
        let message = "frognano_models-abc.py from-hf failed (exit status: 2):\n\
                       [frognano_models] reading x\n\
                       [frognano_models] error: missing tensor 'model.norm.weight'";
        assert_eq!(
            converter_error(message),
            Some("missing tensor 'model.norm.weight'")
        );
        assert_eq!(converter_error("pip install failed: no network"), None);
    }

    #[test]
    fn unknown_or_no_precisions_are_invalid_requests() {
        let dir = Path::new(".");
        for precisions in [&[][..], &["fp16"][..]] {
            let err = convert_checkpoint(dir, dir, precisions, &|_| {}).expect_err("refused");
            assert!(
                matches!(err, InferenceError::InvalidRequest(_)),
                "{precisions:?}: {err}"
            );
        }
    }
}
