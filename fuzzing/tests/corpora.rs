//! Every fuzz target over its committed seed corpus, the inputs that once found a bug, and a
//! few thousand deterministic mutations of both: the targets keep compiling and the bugs the
//! fuzzer found stay fixed. The coverage-guided runs are `scripts/fuzz.sh`'s.

use std::path::{Path, PathBuf};

use frognano_fuzzing::{TARGETS, mutations, target};

/// Mutated inputs per target: seconds for each.
const MUTATIONS: usize = 1500;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn inputs(folder: &Path) -> Vec<Vec<u8>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter(|p| p.is_file())
        .map(|p| std::fs::read(p).expect("read an input"))
        .collect()
}

/// The Python files under `dir`, at any depth.
fn python_files(dir: &Path) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            found.extend(python_files(&path));
        } else if path.extension().is_some_and(|e| e == "py") {
            found.push(std::fs::read(&path).expect("read a Python file"));
        }
    }
    found
}

fn replay(name: &str) {
    let run = target(name).expect("a target");
    let mut seeds = inputs(&fuzz_dir().join("corpus").join(name));
    if name == "python_source" {
        // As scripts/fuzz.sh does: the bundled repositories seed the mutation engine.
        seeds.extend(python_files(&fuzz_dir().join("../examples/repos")));
    }
    assert!(!seeds.is_empty(), "fuzz/corpus/{name} holds no seeds");
    let regressions = inputs(&fuzz_dir().join("regressions").join(name));
    for input in seeds.iter().chain(&regressions) {
        run(input);
    }
    let all: Vec<Vec<u8>> = seeds.into_iter().chain(regressions).collect();
    for input in mutations(&all, MUTATIONS, name.len() as u64) {
        run(&input);
    }
}

#[test]
fn every_target_has_a_binary_and_a_seed_corpus() {
    for (name, _) in TARGETS {
        let binary = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(binary.is_file(), "{} is missing", binary.display());
        assert!(
            fuzz_dir().join("corpus").join(name).is_dir(),
            "no corpus for {name}"
        );
    }
}

#[test]
fn mutations_are_deterministic_and_vary() {
    let seeds = vec![b"view pkg/core.py".to_vec(), b"{\"a\": 1}".to_vec()];
    let a = mutations(&seeds, 200, 7);
    assert_eq!(a, mutations(&seeds, 200, 7));
    let distinct: std::collections::BTreeSet<&Vec<u8>> = a.iter().collect();
    assert!(
        distinct.len() > 150,
        "only {} distinct inputs",
        distinct.len()
    );
}

macro_rules! replay_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                replay(stringify!($name));
            }
        )*
    };
}

replay_tests!(
    action,
    patch,
    tasks,
    config,
    requirements,
    token_batch,
    serve_request,
    python_source,
    c_api,
);
