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
