//! `frognano train` with a language model (`examples/train/llm_smoke.toml`: the tiny model,
//! the real PyTorch learner, ONNX Runtime rollouts in real sandboxes): the learner's loss in
//! every iteration's metrics, and a run killed mid-iteration that resumes from its last
//! checkpoint with identical weights.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use frognano_sandbox::testing::workspace_root as root;

/// The smoke configuration with `iterations` iterations, written into `dir`.
fn config(dir: &Path, iterations: usize) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join("examples/train/llm_smoke.toml"))
        .expect("read llm_smoke.toml");
    let repos = root().join("examples/repos/textkit");
    let text = text
        .replace(
            "repos = [\"../repos/textkit\"]",
            &format!("repos = [{:?}]", repos.display().to_string()),
        )
        .replace("iterations = 2", &format!("iterations = {iterations}"));
    assert!(text.contains(&format!("iterations = {iterations}")));
    let path = dir.join(format!("llm-{iterations}.toml"));
    std::fs::write(&path, text).expect("write config");
    path
}

fn train(config: &Path, out: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_frognano"));
    command
        .args(["train", "--config"])
        .arg(config)
        .arg("-o")
        .arg(out)
        .current_dir(root());
    command
}

fn run_to_the_end(config: &Path, out: &Path) {
    let output = train(config, out).output().expect("run frognano train");
    assert!(
        output.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

fn metrics(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("metrics.jsonl"))
        .expect("metrics.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn weights_of_update(out: &Path, update: usize) -> Vec<u8> {
    std::fs::read(
        out.join("model/weights")
            .join(format!("update-{update:05}"))
            .join("model.onnx.data"),
    )
    .expect("the weights of the update")
}

#[test]
fn a_language_model_trains_reports_its_loss_and_resumes_after_a_kill() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("run");
    // One iteration to the end: metrics with the learner's loss, weights of update 1.
    run_to_the_end(&config(dir.path(), 1), &out);
    let lines = metrics(&out);
    assert_eq!(lines.len(), 1);
    for line in &lines {
        let learner = &line["extra"]["learner"];
        assert!(learner["loss"].is_number(), "no loss in {line}");
        assert!(learner["handback_s"].is_number(), "no hand-back in {line}");
        assert!(learner["learner_tokens_per_s"].is_number(), "{line}");
    }
    let checkpointed = weights_of_update(&out, 1);

    // Resumed with more iterations, and killed once the next update has begun.
    let mut child = train(&config(dir.path(), 3), &out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start frognano train");
    let next_batch = out.join("model/batches/batch-00001.safetensors");
    let deadline = Instant::now() + Duration::from_secs(600);
    while !next_batch.exists() {
        assert!(
            child.try_wait().expect("poll").is_none(),
            "the run ended before its second update"
        );
        assert!(
            Instant::now() < deadline,
            "no second update within 10 minutes"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");

    // Resuming restores the checkpoint's weights exactly (no iteration left to run).
    run_to_the_end(&config(dir.path(), 1), &out);
    assert!(
        weights_of_update(&out, 1) == checkpointed,
        "the resumed weights differ from the checkpoint's"
    );
    assert_eq!(metrics(&out).len(), 1, "the killed iteration left metrics");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json"),
    )
    .expect("report JSON");
    assert_eq!(report["policy"]["updates"], 1);
    assert!(
        report["weights"]
            .as_str()
            .is_some_and(|w| w.ends_with("update-00001"))
    );

    // And it trains on from there.
    run_to_the_end(&config(dir.path(), 2), &out);
    let lines = metrics(&out);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["iteration"], 1);
    assert!(lines[1]["extra"]["learner"]["loss"].is_number());
}
