//! Faults on the writers: a process killed (SIGKILL) while it rewrites FrogNano's files leaves
//! each file whole, old or new; a full disk is a clear error that keeps what was written.
//! Every file FrogNano writes goes through one of the writers exercised here:
//! `write_atomically` (checkpoints, training metrics, task sets, corpus manifests and exports,
//! reports, plots), `save_tasks` (task files), `TokenBatch::save` (token batches for learners)
//! and `LineFile` (the streams of episode records of `frognano eval --out` and `frognano bench
//! soak`, where a kill can cut only the line being written, which the next open cuts off).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use frognano_core::{Task, TokenBatch};
use frognano_env::taskset::{load_tasks, save_tasks};
use frognano_repo::{LineFile, write_atomically};

const CHILD_ENV: &str = "FROGNANO_WRITER_FAULT_DIR";

fn sample_tasks() -> Vec<Task> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/tasks/sample.jsonl");
    load_tasks(&path).expect("the sample tasks")
}

fn sample_batch() -> TokenBatch {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus/token_batch/two-steps.safetensors");
    TokenBatch::load(&path).expect("a token batch")
}

/// Version `k` of each file; large enough that a kill often lands inside a write.
fn write_version(dir: &Path, k: usize, tasks: &mut [Task], batch: &mut TokenBatch) {
    let pad = "x".repeat(256 * 1024);
    let json = format!("{{\"version\": {k}, \"pad\": \"{pad}\"}}");
    write_atomically(&dir.join("checkpoint.json"), json.as_bytes()).expect("checkpoint");
    for task in tasks.iter_mut() {
        task.problem_statement = format!("version {k}: {pad}");
    }
    save_tasks(&dir.join("tasks.jsonl"), tasks).expect("tasks");
    batch.iteration = k;
    batch.save(&dir.join("batch.safetensors")).expect("batch");
    LineFile::append(&dir.join("records.jsonl"))
        .and_then(|mut f| f.write_line(&json))
        .expect("records");
}

/// Each file is absent (not written yet) or whole.
fn check_whole(dir: &Path) {
    let checkpoint = dir.join("checkpoint.json");
    if checkpoint.exists() {
        let text = std::fs::read(&checkpoint).expect("read");
        serde_json::from_slice::<serde_json::Value>(&text).expect("a whole checkpoint");
    }
    let tasks = dir.join("tasks.jsonl");
    if tasks.exists() {
        assert_eq!(load_tasks(&tasks).expect("a whole task file").len(), 3);
    }
    let batch = dir.join("batch.safetensors");
    if batch.exists() {
        TokenBatch::load(&batch).expect("a whole token batch");
    }
    let records = dir.join("records.jsonl");
    if records.exists() {
        let text = std::fs::read_to_string(&records).expect("read");
        let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        for line in whole.lines() {
            serde_json::from_str::<serde_json::Value>(line).expect("a whole record");
        }
        // Only the line being written can be cut; opening the stream again cuts it off.
        drop(LineFile::append(&records).expect("reopen the stream"));
        assert_eq!(std::fs::read_to_string(&records).expect("read"), whole);
    }
}

/// The writer the parent kills: rewrites every file in a loop (runs only when started by
/// `a_killed_writer_leaves_every_file_whole`).
#[test]
fn writer_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let mut tasks = sample_tasks();
    tasks.truncate(3);
    let mut batch = sample_batch();
    for k in 0.. {
        write_version(&dir, k, &mut tasks, &mut batch);
    }
}

#[test]
fn a_killed_writer_leaves_every_file_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let me = std::env::current_exe().expect("the test binary");
    let mut kills = 0;
    for round in 0..24u64 {
        let mut child = Command::new(&me)
            .args(["--exact", "writer_child", "--test-threads=1", "--nocapture"])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the writer");
        // Kill at spread-out moments: before the first write, inside writes, between them.
        std::thread::sleep(Duration::from_millis(40 + (round * 37) % 400));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        kills += 1;
        check_whole(dir.path());
    }
    assert!(
        dir.path().join("checkpoint.json").exists(),
        "the writer never wrote"
    );
    assert_eq!(kills, 24);
}

/// A small tmpfs mounted for the test, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(kib: usize) -> Option<SmallDisk> {
        let dir = tempfile::tempdir().expect("temp dir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        mounted.then_some(SmallDisk { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

fn is_disk_full(message: &str) -> bool {
    message.contains("No space left on device")
}

#[test]
fn a_full_disk_is_a_clear_error_and_keeps_what_was_written() {
    let Some(disk) = SmallDisk::mount(512) else {
        eprintln!("skipped: mounting a small tmpfs needs root here");
        return;
    };
    let dir = disk.path();
    let mut tasks = sample_tasks();
    tasks.truncate(3);
    let mut batch = sample_batch();
    // A first, small version of every file.
    write_atomically(&dir.join("checkpoint.json"), b"{\"version\": 0}").expect("checkpoint");
    save_tasks(&dir.join("tasks.jsonl"), &tasks).expect("tasks");
    batch.save(&dir.join("batch.safetensors")).expect("batch");
    let mut records = LineFile::create(&dir.join("records.jsonl")).expect("metrics");
    records.write_line("{\"version\": 0}").expect("first line");
    let before: Vec<(String, Vec<u8>)> = [
        "checkpoint.json",
        "tasks.jsonl",
        "batch.safetensors",
        "records.jsonl",
    ]
    .iter()
    .map(|name| {
        (
            name.to_string(),
            std::fs::read(dir.join(name)).expect("read"),
        )
    })
    .collect();
    // Fill the disk, leaving a few KiB.
    let filler = dir.join("filler");
    let mut size = 0usize;
    let chunk = vec![0u8; 16 * 1024];
    while std::fs::write(&filler, vec![0u8; size + chunk.len()]).is_ok() {
        size += chunk.len();
    }
    std::fs::write(&filler, vec![0u8; size]).expect("the filler");

    let big = format!("{{\"version\": 1, \"pad\": \"{}\"}}", "x".repeat(64 * 1024));
    let err = write_atomically(&dir.join("checkpoint.json"), big.as_bytes())
        .expect_err("no room for a checkpoint");
    assert!(is_disk_full(&err.to_string()), "{err}");
    assert!(err.to_string().contains("checkpoint.json"), "{err}");
    for task in tasks.iter_mut() {
        task.problem_statement = big.clone();
    }
    let err = save_tasks(&dir.join("tasks.jsonl"), &tasks).expect_err("no room for tasks");
    assert!(is_disk_full(&err.to_string()), "{err}");
    batch.task_ids = vec![big.clone(); batch.task_ids.len()];
    let err = batch
        .save(&dir.join("batch.safetensors"))
        .expect_err("no room for a batch");
    assert!(is_disk_full(&err.to_string()), "{err}");
    let err = records.write_line(&big).expect_err("no room for a line");
    assert!(is_disk_full(&err.to_string()), "{err}");

    // Nothing written before was lost or torn, and no temporary file was left.
    for (name, bytes) in &before {
        assert_eq!(
            &std::fs::read(dir.join(name)).expect("read"),
            bytes,
            "{name} changed"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "batch.safetensors",
            "checkpoint.json",
            "filler",
            "records.jsonl",
            "tasks.jsonl"
        ]
    );
    // Once there is room again, the same writers go on.
    std::fs::remove_file(&filler).expect("free the disk");
    records
        .write_line("{\"version\": 2}")
        .expect("a line after the disk was freed");
    write_atomically(&dir.join("checkpoint.json"), big.as_bytes()).expect("a checkpoint");
    assert_eq!(
        std::fs::read_to_string(dir.join("records.jsonl")).expect("read"),
        "{\"version\": 0}\n{\"version\": 2}\n"
    );
}
