//! Targets over files a user or a repository supplies: task sets (FrogNano's records and
//! SWE-bench's), training and corpus configurations, a repository's requirement sources and
//! `frognano.toml`, and token batch files.

use std::fs;

use frognano_core::TokenBatch;
use frognano_env::taskset::{load_tasks, save_tasks};
use frognano_sandbox::RepoConfig;
use frognano_train::TrainConfig;

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().expect("scratch folder")
}

/// A JSONL task set: read as `frognano eval --tasks` reads one; what is read must survive a
/// write and a second read unchanged.
pub fn tasks(data: &[u8]) {
    let dir = scratch();
    let path = dir.path().join("tasks.jsonl");
    fs::write(&path, data).expect("task file");
    let Ok(tasks) = load_tasks(&path) else {
        return;
    };
    let copy = dir.path().join("copy.jsonl");
    save_tasks(&copy, &tasks).expect("write the tasks read");
    let again = load_tasks(&copy).expect("read the tasks written");
    assert!(
        again == tasks,
        "a task set changed through a write and a read"
    );
}

/// Configuration text: a training configuration as TOML (`frognano train --config`) and as
/// JSON (the C and Python option objects), and a corpus list (`frognano corpus build`).
pub fn config(data: &[u8]) {
    let dir = scratch();
    let path = dir.path().join("train.toml");
    fs::write(&path, data).expect("config file");
    let _ = TrainConfig::from_file(&path);
    if let Ok(value) = serde_json::from_slice(data)
        && let Ok(config) = TrainConfig::from_json(value)
    {
        let _ = config.validate();
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = frognano_corpus::parse_list(text, dir.path(), "fuzz.txt");
    }
}

/// The files a repository's requirements and test settings are read from, in the order the
/// input gives them, separated by NUL bytes.
const REPOSITORY_FILES: &[&str] = &[
    "frognano.toml",
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "requirements.txt",
    "requirements/test.txt",
    "noxfile.py",
    "pytest.ini",
];

/// A repository's own setup files (`frognano.toml`, pyproject, setup.cfg and setup.py literals,
/// tox and nox, requirement files with their includes): read as the sandbox reads them before
/// a build.
pub fn requirements(data: &[u8]) {
    let dir = scratch();
    let root = dir.path().join("repo");
    fs::create_dir_all(root.join("requirements")).expect("repository folder");
    fs::create_dir_all(root.join("tests")).expect("repository folder");
    fs::write(root.join("tests/test_x.py"), "import pkg\n").expect("test file");
    for (name, contents) in REPOSITORY_FILES.iter().zip(data.split(|&b| b == 0)) {
        fs::write(root.join(name), contents).expect("repository file");
    }
    fs::write(dir.path().join("outside.txt"), "outside\n").expect("outside file");
    let _ = RepoConfig::load(&root);
    let pyproject = fs::read_to_string(root.join("pyproject.toml"))
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok());
    let _ = frognano_sandbox::requirements::detect(&root, pyproject.as_ref());
    for name in ["requirements.txt", "setup.cfg", "tox.ini"] {
        if let Ok(text) = fs::read_to_string(root.join(name)) {
            let _ = frognano_sandbox::requirements::ini::Ini::parse(&text);
            let _ = frognano_sandbox::config::parse_requirements_file(&text);
        }
    }
    assert_eq!(
        fs::read_to_string(dir.path().join("outside.txt"))
            .ok()
            .as_deref(),
        Some("outside\n")
    );
}

/// A token batch file (safetensors): read as the learner reads one; what is read must write
/// back to bytes that read as the same batch.
pub fn token_batch(data: &[u8]) {
    let Ok(batch) = TokenBatch::from_safetensors(data) else {
        return;
    };
    let bytes = batch
        .to_safetensors()
        .expect("a batch that was read can be written");
    let again = TokenBatch::from_safetensors(&bytes).expect("a written batch reads back");
    assert!(
        again == batch,
        "a token batch changed through a write and a read"
    );
}
