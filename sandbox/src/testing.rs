//! Support for the integration tests of this crate and the crates built on it (the `testing`
//! feature): one shared sandbox, the workspace's sample data and pinned third-party packages.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use crate::{Sandbox, SandboxOptions, assets};

/// One sandbox per test binary: setup is cached on disk, but building it twice at once
/// would only waste time.
pub fn shared_sandbox() -> Arc<Sandbox> {
    static SANDBOX: OnceLock<Arc<Sandbox>> = OnceLock::new();
    SANDBOX
        .get_or_init(|| {
            Arc::new(
                Sandbox::new(SandboxOptions::default(), &|msg| eprintln!("setup: {msg}"))
                    .expect("sandbox setup"),
            )
        })
        .clone()
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Writes `files` (relative path, contents) under a new temporary directory.
pub fn write_repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, contents) in files {
        let full = dir.path().join(path);
        std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
        std::fs::write(full, contents).expect("write");
    }
    dir
}

/// A third-party package from the package registry, pinned by version and sha256.
#[derive(Debug, Clone, Copy)]
pub struct PinnedSdist {
    /// The distribution name.
    pub name: &'static str,
    /// The pinned version.
    pub version: &'static str,
    /// The sha256 of its sdist.
    pub sha256: &'static str,
    /// `frognano.toml` written into the unpacked sdist, as a user would.
    pub config: Option<&'static str>,
}

/// Real packages whose own test suites run in the sandbox.
pub const PINNED_SDISTS: &[PinnedSdist] = &[
    PinnedSdist {
        name: "isodate",
        version: "0.7.2",
        sha256: "4cd1aa0f43ca76f4a6c6c0292a85f40b35ec2e43e315b59f06e6d32171a953e6",
        config: None,
    },
    PinnedSdist {
        name: "semver",
        version: "3.1.2",
        sha256: "bea193552413194252d33ff26ce0962b76669bd1c6fb17e8e203ac37f072feaf",
        config: None,
    },
    PinnedSdist {
        name: "schema",
        version: "0.7.8",
        sha256: "e86cc08edd6fe6e2522648f4e47e3a31920a76e82cce8937535422e310862ab5",
        config: Some("[test]\nrequirements = [\"mock\"]\n"),
    },
];

impl PinnedSdist {
    /// Downloads (once, into the cache) and unpacks the sdist into `dest`; returns the
    /// unpacked source tree.
    pub fn unpack(&self, dest: &Path) -> PathBuf {
        let file = assets::fetch_sdist(self.name, self.version, self.sha256).expect("pinned sdist");
        let status = Command::new("tar")
            .arg("xzf")
            .arg(&file)
            .arg("-C")
            .arg(dest)
            .status()
            .expect("tar");
        assert!(status.success());
        let root = dest.join(format!("{}-{}", self.name, self.version));
        if let Some(config) = self.config {
            std::fs::write(root.join("frognano.toml"), config).expect("write config");
        }
        root
    }
}

/// Real packages that declare their test requirements in the places detection reads
/// (`tox.ini`, `setup.cfg`, `setup.py`, requirements files, dependency groups, poetry tables).
pub const REQUIREMENT_SOURCE_SDISTS: &[PinnedSdist] = &[
    // tox.ini `deps = -rrequirements-dev.txt`; setup.cfg `install_requires`.
    PinnedSdist {
        name: "python-dateutil",
        version: "2.8.2",
        sha256: "0123cacc1627ae19ddf3c27a5de5bd67ee4586fbdd6440d9748f8abb483d3e86",
        config: None,
    },
    // setup.cfg `[options.extras_require] tests` (freezegun, which its suite imports).
    PinnedSdist {
        name: "humanize",
        version: "3.14.0",
        sha256: "60dd8c952b1df1ad83f0903844dec50a34ba7a04eea22a6b14204ffb62dbb0a4",
        config: None,
    },
    // setup.py: an `EXTRAS_REQUIRE` dict with `dev = tests + lint + [...]`.
    PinnedSdist {
        name: "marshmallow",
        version: "3.20.1",
        sha256: "5d2371bbe42000f2b3fb5eaa065224df7d8f8597bc19a1bbfa5bfe7fba8da889",
        config: None,
    },
    // setup.py `tests_require=['nose2', 'coverage']`.
    PinnedSdist {
        name: "xmltodict",
        version: "0.13.0",
        sha256: "341595a488e3e01a85a9d8911d8912fd922ede5fecc4dce437eb4b6c8d037e56",
        config: None,
    },
    // requirements-tests39.in (and the pinned .txt that tox.ini names).
    PinnedSdist {
        name: "wcwidth",
        version: "0.2.13",
        sha256: "72ea0c06399eb286d978fdedb6923a9eb47e1c486ce63e9b4e64fc18303972b5",
        config: None,
    },
    // pyproject.toml `[dependency-groups] dev`.
    PinnedSdist {
        name: "iniconfig",
        version: "2.3.1",
        sha256: "67f4b9c50da0dedf52af349e7749a80a9057a5031199791b906c3bb3ae878960",
        config: None,
    },
    // pyproject.toml `[tool.poetry.dependencies]` and `[tool.poetry.group.dev.dependencies]`.
    PinnedSdist {
        name: "cleo",
        version: "2.1.0",
        sha256: "0b2c880b5d13660a7ea651001fb4acb527696c01f15c9ee650f377aa543fd523",
        config: None,
    },
    // pyproject.toml `[tool.poetry.dev-dependencies]`.
    PinnedSdist {
        name: "tomlkit",
        version: "0.13.2",
        sha256: "fff5fe59a87295b278abd31bec92c15d9bc4a06885ab12bcea52c71119392e79",
        config: None,
    },
    // pyproject.toml `[project.optional-dependencies]` with `dev = ["attrs[tests]", ...]`.
    PinnedSdist {
        name: "attrs",
        version: "25.3.0",
        sha256: "75d7cefc7fb576747b2c81b4442d4d4a1ce0900973527c011d1030fd3bf4af1b",
        config: None,
    },
    // pyproject.toml extras `dev` and `testing`.
    PinnedSdist {
        name: "pluggy",
        version: "1.6.0",
        sha256: "7dcc130b76258d33b90f61b658791dede3486c3e6bfb003ee5c9bfb396dd22f3",
        config: None,
    },
];

/// The pinned sdist named `name` among [`PINNED_SDISTS`] and [`REQUIREMENT_SOURCE_SDISTS`].
pub fn pinned_sdist(name: &str) -> PinnedSdist {
    *PINNED_SDISTS
        .iter()
        .chain(REQUIREMENT_SOURCE_SDISTS)
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no pinned sdist {name}"))
}

/// Threads that keep every core busy until dropped: the load of a training job's rollouts and
/// learner beside its test runs, for tests that verdicts do not depend on it.
#[derive(Debug)]
pub struct Saturation {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Saturation {
    /// `per_core` busy threads per core.
    pub fn start(per_core: usize) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores * per_core)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect();
        Saturation { stop, threads }
    }
}

impl Drop for Saturation {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}
