//! The `frognano` command as a user runs it.

use std::process::{Command, Output};

use frognano_sandbox::testing::{workspace_root as root, write_repo};

fn frognano(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_frognano"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run frognano")
}

/// Asserts that frognano exited with status 0 and returns what it printed on stdout.
fn assert_success(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `frognano test REPO --json EXTRA...`.
fn test_json(repo: &std::path::Path, extra: &[&str]) -> Output {
    let repo = repo.to_str().expect("utf-8");
    frognano(&[&["test", repo, "--json"], extra].concat())
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON object ({e}):\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

#[test]
fn test_json_reports_a_passing_sample_repo() {
    let output = frognano(&["test", "examples/repos/textkit", "--json"]);
    assert_success(&output);
    let report = json(&output);
    assert_eq!(report["outcome"], "passed");
    for key in [
        "passed",
        "failed",
        "errors",
        "skipped",
        "duration_s",
        "tests",
    ] {
        assert!(report.get(key).is_some(), "missing {key}");
    }
    let tests = report["tests"].as_array().expect("tests list");
    assert_eq!(
        tests.len() as u64,
        report["passed"].as_u64().expect("count")
    );
    assert!(
        tests.iter().all(|t| t["id"].is_string()
            && t["outcome"] == "passed"
            && t["duration_s"].is_number())
    );
}

#[test]
fn exit_codes_follow_outcomes() {
    let failing = write_repo(&[(
        "test_f.py",
        "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2\n",
    )]);
    let output = test_json(failing.path(), &[]);
    assert_eq!(output.status.code(), Some(1));
    let report = json(&output);
    assert_eq!(
        (report["passed"].as_u64(), report["failed"].as_u64()),
        (Some(1), Some(1))
    );

    let spinning = write_repo(&[(
        "test_s.py",
        "def test_spin():\n    while True:\n        pass\n",
    )]);
    let output = test_json(spinning.path(), &["--timeout", "1"]);
    assert_eq!(output.status.code(), Some(3));
    assert_eq!(json(&output)["outcome"], "timeout");

    let selected = test_json(failing.path(), &["--", "-k", "test_ok"]);
    assert_eq!(selected.status.code(), Some(0));
    assert_eq!(json(&selected)["tests"].as_array().map(Vec::len), Some(1));

    let empty = write_repo(&[("README.md", "no tests here\n")]);
    let output = test_json(empty.path(), &[]);
    assert_eq!(output.status.code(), Some(5));
    assert_eq!(json(&output)["outcome"], "no_tests");
}

#[test]
fn a_corpus_build_without_a_ready_entry_exits_non_zero() {
    let corpus = tempfile::tempdir().expect("tempdir");
    let corpus_dir = corpus.path().join("corpus");
    let corpus_arg = corpus_dir.to_str().expect("utf-8");
    // Adds a repository of `files` to the corpus; the repository lives as long as the result.
    let add = |files: &[(&str, &str)]| {
        let repo = write_repo(files);
        let path = repo.path().to_str().expect("utf-8");
        assert_success(&frognano(&["corpus", "add", corpus_arg, path]));
        repo
    };
    let _untested = add(&[("README.md", "no tests here\n")]);
    let output = frognano(&["corpus", "build", corpus_arg]);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("no entry of the corpus is ready"));
    // One ready entry beside the failed one: the build did useful work.
    let _tested = add(&[("test_ok.py", "def test_ok():\n    assert 1 + 1 == 2\n")]);
    assert_success(&frognano(&["corpus", "build", corpus_arg]));
}

#[test]
fn a_soak_writes_every_record_leaves_nothing_behind_and_repeats_its_verdicts() {
    // A private temporary directory: what the soak leaves there is its own.
    let temp = tempfile::tempdir().expect("tempdir");
    let soak = || {
        let output = Command::new(env!("CARGO_BIN_EXE_frognano"))
            .args([
                "bench",
                "soak",
                "--episodes",
                "12",
                "--max-steps",
                "3",
                "--json",
            ])
            .current_dir(root())
            .env("TMPDIR", temp.path())
            .output()
            .expect("run frognano");
        assert_success(&output);
        json(&output)
    };
    let first = soak();
    assert_eq!(first["episodes"], 12, "{first}");
    assert_eq!(first["records_written"], 12, "{first}");
    assert_eq!(first["temp_dirs_left"], 0, "{first}");
    let (start, end) = (&first["fds_start"], &first["fds_end"]);
    if let (Some(start), Some(end)) = (start.as_u64(), end.as_u64()) {
        assert!(end <= start, "file descriptors grew: {first}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(temp.path())
        .expect("read")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The random policy's actions depend on the episode only: the same verdicts again.
    let second = soak();
    assert_eq!(first["verdict_digest"], second["verdict_digest"]);
}

#[test]
fn bad_input_is_a_clear_error() {
    let output = frognano(&["test", "/definitely/not/here"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a directory"));

    let output = frognano(&["test", "examples/repos/textkit", "--timeout", "-1"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("timeout"));

    let broken = write_repo(&[("frognano.toml", "[test\nargs = 3\n")]);
    let output = frognano(&["test", broken.path().to_str().expect("utf-8")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("frognano.toml"));
}

#[test]
fn bench_prints_medians_and_ratio() {
    let output = frognano(&["bench", "sandbox", "--runs", "1"]);
    let stdout = assert_success(&output);
    assert!(stdout.contains("ratio sandbox/native:"), "{stdout}");
}

#[test]
fn eval_runs_the_oracle_and_writes_records() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("records.jsonl");
    let output = frognano(&[
        "eval",
        "--limit",
        "2",
        "--out",
        out.to_str().expect("utf-8 path"),
    ]);
    let stdout = assert_success(&output);
    assert!(stdout.contains("2 (100.0%)"), "{stdout}");
    assert!(stdout.contains("env steps/s"), "{stdout}");
    let records = std::fs::read_to_string(&out).expect("records");
    let lines: Vec<serde_json::Value> = records
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record per line"))
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["outcome"]["resolved"], true);
    assert!(lines[0]["steps"].as_array().is_some_and(|s| !s.is_empty()));
}

#[test]
fn eval_rejects_a_malformed_task_file_with_line_and_field() {
    let dir = write_repo(&[(
        "tasks.jsonl",
        "{\"id\": \"t\", \"repo\": {\"kind\": \"path\", \"path\": \".\"}, \"bug_patch\": 3}\n",
    )]);
    let tasks = dir.path().join("tasks.jsonl");
    let output = frognano(&["eval", "--tasks", tasks.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("tasks.jsonl:1: field `bug_patch`"),
        "{stderr}"
    );
    let output = frognano(&["eval", "--policy", "genius"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("unknown policy"));
}
