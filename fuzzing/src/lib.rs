//! FrogNano's fuzz targets: one function per kind of untrusted input FrogNano parses (model
//! actions and the file tools they drive, unified diffs, task files with SWE-bench records,
//! configuration files, every requirement source of a repository, token batch files, request
//! bodies of `frognano serve`, Python sources fed to the mutation engine) and one for the C
//! entry points. Each takes arbitrary bytes and panics only on a bug: a crash, a broken
//! invariant (a round trip that does not return its input, a file tool touching a path outside
//! its workspace), never on input it rightly rejects.
//!
//! The coverage-guided runs are libFuzzer's, through cargo-fuzz: `fuzz/` holds one thin binary
//! per target, the seed corpora (`fuzz/corpus/<target>/`) and every input that once found a bug
//! (`fuzz/regressions/<target>/`); `scripts/fuzz.sh` runs them for a given time. The test suite
//! replays both folders through these functions and a few thousand deterministic mutations of
//! them ([`mutations`]), so the targets keep compiling and the fixed bugs stay fixed.

mod c_api;
mod files;
mod serve;
mod text;

pub use c_api::c_api;
pub use files::{config, requirements, tasks, token_batch};
pub use serve::serve_request;
pub use text::{action, patch, python_source};

/// The tiny random test model's fp32 folder (made once, cached), for the targets that need a
/// tokenizer or a model.
fn tiny_model_dir() -> &'static std::path::Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        frognano_llm::assets::tiny_model(&|_| {})
            .expect("the tiny model")
            .join("fp32")
    })
}

/// A fuzz target: arbitrary bytes in, a panic only on a bug.
pub type Target = fn(&[u8]);

/// Every target by the name of its folders under `fuzz/`.
pub const TARGETS: &[(&str, Target)] = &[
    ("action", action),
    ("patch", patch),
    ("tasks", tasks),
    ("config", config),
    ("requirements", requirements),
    ("token_batch", token_batch),
    ("serve_request", serve_request),
    ("python_source", python_source),
    ("c_api", c_api),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// `count` deterministic mutations of `seeds` (byte flips, insertions, deletions, splices of two
/// seeds, repeated runs), from `seed`: a cheap, reproducible stand-in for a fuzzer's mutator
/// where a coverage-guided run is too slow (the test suite).
pub fn mutations(seeds: &[Vec<u8>], count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut state = seed ^ 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64*: enough spread for choosing edits.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let empty = Vec::new();
    (0..count)
        .map(|_| {
            let pick = |r: u64| seeds.get(r as usize % seeds.len().max(1)).unwrap_or(&empty);
            let mut input = pick(next()).clone();
            for _ in 0..1 + next() % 4 {
                let at = |r: u64, len: usize| r as usize % (len + 1);
                match next() % 6 {
                    0 if !input.is_empty() => {
                        let i = at(next(), input.len() - 1);
                        input[i] ^= 1 << (next() % 8);
                    }
                    1 => {
                        let i = at(next(), input.len());
                        input.insert(i, next() as u8);
                    }
                    2 if !input.is_empty() => {
                        let i = at(next(), input.len() - 1);
                        let n = (next() as usize % 16).min(input.len() - i);
                        input.drain(i..i + n);
                    }
                    3 => {
                        let other = pick(next());
                        let from = at(next(), other.len());
                        let to = from + at(next(), other.len() - from);
                        let i = at(next(), input.len());
                        input.splice(i..i, other[from..to].iter().copied());
                    }
                    4 if !input.is_empty() => {
                        let i = at(next(), input.len() - 1);
                        let n = (next() as usize % 8).min(input.len() - i);
                        let run: Vec<u8> = input[i..i + n].to_vec();
                        for _ in 0..next() % 8 {
                            input.splice(i..i, run.iter().copied());
                        }
                    }
                    _ => {
                        let i = at(next(), input.len());
                        let special: &[u8] = match next() % 6 {
                            0 => b"\0",
                            1 => b"\xff\xfe",
                            2 => b"\n",
                            3 => b"\"",
                            4 => b"../",
                            _ => b"99999999999999999999",
                        };
                        input.splice(i..i, special.iter().copied());
                    }
                }
            }
            input
        })
        .collect()
}
