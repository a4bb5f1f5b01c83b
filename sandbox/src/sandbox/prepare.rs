//! Preparing a repository: its configuration, its requirements layer and its bytecode cache.

use std::path::{Path, PathBuf};

use frognano_core::Limits;

use super::guest::LayerAccess;
use super::{GUEST_WORK, Sandbox, python_string_literal};
use crate::assets::{self, Progress};
use crate::bytecode;
use crate::config::RepoConfig;
use crate::error::{Result, SandboxError};
use crate::layers;
use crate::workspace;

const COMPILE_BYTECODE: &str = include_str!("../guest/compile_bytecode.py");

/// A repository ready to run: its configuration and requirements layer.
#[derive(Debug, Clone)]
pub struct PreparedRepo {
    /// The repository's configuration.
    pub config: RepoConfig,
    /// Its requirements layer, if it has requirements.
    pub deps_layer: Option<PathBuf>,
    /// Its bytecode cache, overlaid into each workspace before a run.
    pub bytecode: Option<PathBuf>,
}

impl Sandbox {
    /// Reads a repository's configuration and builds its requirements layer (cached).
    pub fn prepare_repo(&self, repo: &Path, progress: Progress<'_>) -> Result<PreparedRepo> {
        let config = RepoConfig::load(repo)?;
        let deps_layer = if config.requirements.is_empty() {
            None
        } else {
            let layer = self.requirements_layer(&config, progress)?;
            self.compile_layer_bytecode(LayerAccess::DepsWritable(&layer), progress)?;
            Some(layer)
        };
        let bytecode = self.repo_bytecode(&config.root, progress)?;
        Ok(PreparedRepo {
            config,
            deps_layer,
            bytecode,
        })
    }

    /// The bytecode cache of a clean repository, built on first use (see [`crate::bytecode`]).
    /// A repository that does not compile cleanly simply gets no cache.
    fn repo_bytecode(&self, root: &Path, progress: Progress<'_>) -> Result<Option<PathBuf>> {
        let layer_name = self
            .pytest_layer
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let salt = format!(
            "{}-{}-{}",
            self.image.module_sha256,
            layer_name,
            assets::sha256_bytes(COMPILE_BYTECODE.as_bytes())
        );
        let key = bytecode::source_key(root, &salt)?;
        let dir = assets::cache_dir()
            .join("bytecode")
            .join(self.image.kind.name())
            .join(&key[..32]);
        if bytecode::is_complete(&dir) {
            return Ok(Some(dir));
        }
        progress("compiling the repository to bytecode (one time per repository version)");
        let work = tempfile::Builder::new()
            .prefix("frognano-compile-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        workspace::copy_repo(root, work.path())?;
        let config =
            serde_json::json!({"root": GUEST_WORK, "patterns": ["test_*.py", "*_test.py"]});
        let source = COMPILE_BYTECODE.replace(
            "__FROGNANO_CONFIG__",
            &python_string_literal(&config.to_string()),
        );
        let limits = Limits {
            timeout_s: 600.0,
            ..Limits::default()
        };
        let run =
            self.run_python_with(&source, LayerAccess::ReadOnly, Some(work.path()), limits)?;
        if run.exit_code != Some(0) {
            progress(&format!(
                "bytecode compilation skipped: {}",
                run.detail.as_deref().unwrap_or(run.stderr.trim())
            ));
            return Ok(None);
        }
        bytecode::harvest(work.path(), &dir)?;
        Ok(Some(dir))
    }

    fn requirements_layer(&self, config: &RepoConfig, progress: Progress<'_>) -> Result<PathBuf> {
        let version = self.image.kind.python_version();
        match layers::prepare_requirements_layer(&config.requirements, version, progress) {
            Ok(dir) => Ok(dir),
            Err(err) if config.requirements_detected => {
                // Detected requirements are a guess: keep those that resolve to pure wheels.
                let usable: Vec<String> = config
                    .requirements
                    .iter()
                    .filter(|r| {
                        layers::prepare_requirements_layer(
                            std::slice::from_ref(*r),
                            version,
                            &|_| {},
                        )
                        .is_ok()
                    })
                    .cloned()
                    .collect();
                progress(&format!(
                    "some detected requirements are not pure Python and were left out: {err}"
                ));
                layers::prepare_requirements_layer(&usable, version, progress)
            }
            Err(err) => Err(err),
        }
    }
}
