//! Hugging Face checkpoints on the tiny model: its fp32 folder doubles as a checkpoint
//! (model.safetensors), converting that checkpoint back gives a model with the same logits, and
//! checkpoints the converter cannot take are refused with an error that says why.

use std::path::Path;

use frognano_llm::{
    DecoderModel, InferenceError, ModelOptions, TextCodec, assets, convert_checkpoint,
};

fn progress(message: &str) {
    eprintln!("checkpoint: {message}");
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "logit counts differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn full_logits(dir: &Path, ids: &[u32]) -> Vec<f32> {
    let mut model = DecoderModel::load(dir, &ModelOptions::default()).expect("load model");
    model.full_logits(ids).expect("full logits")
}

#[test]
fn the_fp32_folder_round_trips_through_a_checkpoint() {
    let dir = tempfile::tempdir().expect("temp dir");
    let tiny = dir.path().join("tiny");
    assets::make_tiny_model(&tiny, 0, &progress).expect("tiny model");
    let checkpoint = tiny.join("fp32");
    assert!(
        checkpoint.join("model.safetensors").is_file(),
        "the fp32 folder carries its weights as a checkpoint"
    );

    let out = dir.path().join("from-hf");
    let summary =
        convert_checkpoint(&checkpoint, &out, &["fp32", "int4"], &progress).expect("convert");
    assert_eq!(summary["command"], "from-hf", "{summary}");
    assert!(out.join("fp32").join("model.safetensors").is_file());

    let codec = TextCodec::load(&out.join("fp32")).expect("tokenizer copied");
    let mut ids = codec
        .encode("def add(a, b):\n    return a + b\n")
        .expect("encode");
    ids.extend([1, 7, 300, 42, 2, 5]);

    let original = full_logits(&checkpoint, &ids);
    let converted = full_logits(&out.join("fp32"), &ids);
    let diff = max_abs_diff(&original, &converted);
    assert!(diff <= 1e-4, "fp32 round trip: max |diff| {diff}");

    let int4 = full_logits(&out.join("int4"), &ids);
    assert_eq!(int4.len(), original.len());
    assert!(int4.iter().all(|l| l.is_finite()), "int4 logits are finite");
}

/// A checkpoint folder with the tiny model's tokenizer, the given config.json and a
/// model.safetensors holding only `model.norm.weight` (64 float32 ones).
fn partial_checkpoint(dir: &Path, config: &str) -> std::path::PathBuf {
    let folder = dir.join("partial");
    std::fs::create_dir_all(&folder).expect("create folder");
    std::fs::write(folder.join("config.json"), config).expect("write config");
    std::fs::write(folder.join("tokenizer.json"), "{}").expect("write tokenizer");
    std::fs::write(folder.join("tokenizer_config.json"), "{}").expect("write tokenizer config");
    let mut header =
        r#"{"model.norm.weight":{"dtype":"F32","shape":[64],"data_offsets":[0,256]}}"#.to_string();
    while !header.len().is_multiple_of(8) {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    for _ in 0..64 {
        bytes.extend(1.0f32.to_le_bytes());
    }
    std::fs::write(folder.join("model.safetensors"), bytes).expect("write safetensors");
    folder
}

fn refused(checkpoint: &Path, out: &Path) -> String {
    let err = convert_checkpoint(checkpoint, out, &["fp32"], &progress).expect_err("refused");
    assert!(
        matches!(err, InferenceError::Model { .. }),
        "a model error, not {err:?}"
    );
    let message = err.to_string();
    assert!(
        !message.contains("Traceback"),
        "one clear line, not a traceback: {message}"
    );
    message
}

#[test]
fn a_bad_checkpoint_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");

    let message = refused(&dir.path().join("missing"), &out);
    assert!(message.contains("not a folder"), "{message}");

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("create folder");
    let message = refused(&empty, &out);
    assert!(message.contains("no config.json"), "{message}");

    let gpt2 = partial_checkpoint(
        dir.path(),
        r#"{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}"#,
    );
    let message = refused(&gpt2, &out);
    assert!(
        message.contains("unsupported architecture 'gpt2'"),
        "{message}"
    );

    let llama = partial_checkpoint(
        dir.path(),
        r#"{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128,
            "vocab_size": 448, "tie_word_embeddings": true}"#,
    );
    let message = refused(&llama, &out);
    assert!(
        message.contains("missing tensor 'model.embed_tokens.weight'"),
        "{message}"
    );
    assert!(!out.join("fp32").exists(), "nothing is left behind");
}
