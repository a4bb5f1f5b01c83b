//! Plain Python runs: source in a fresh sandbox (with an empty or a given workspace), and the
//! one-time compilation of a layer's bytecode.

use std::fs;
use std::path::Path;

use frognano_core::Limits;

use super::guest::{GuestRun, LayerAccess, Mounts, Program};
use super::{GUEST_DEPS, GUEST_PYTEST, GUEST_WORK, Sandbox};
use crate::assets::Progress;
use crate::error::{Result, SandboxError};

impl Sandbox {
    /// Compiles a layer's bytecode with the guest's own interpreter, once per image (a `.pyc`
    /// must match the guest's magic number). Snapshot images compile the pytest layer while
    /// the snapshot is taken.
    pub(super) fn compile_layer_bytecode(
        &self,
        access: LayerAccess<'_>,
        progress: Progress<'_>,
    ) -> Result<()> {
        let (host, guest) = match access {
            LayerAccess::PytestWritable => (self.pytest_layer.as_path(), GUEST_PYTEST),
            LayerAccess::DepsWritable(dir) => (dir, GUEST_DEPS),
            LayerAccess::ReadOnly => return Ok(()),
        };
        let marker = host.join(format!(".compiled-{}", self.image.kind));
        if marker.is_file() {
            return Ok(());
        }
        progress(&format!("compiling {guest} to guest bytecode (one time)"));
        let source = format!("import compileall; compileall.compile_dir({guest:?}, quiet=1)");
        let limits = Limits {
            timeout_s: 600.0,
            ..Limits::default()
        };
        let run = self.run_python_with(&source, access, None, limits)?;
        if run.exit_code != Some(0) {
            return Err(SandboxError::Runtime(format!(
                "compiling {guest} failed: {:?} {}",
                run.detail, run.stderr
            )));
        }
        fs::write(&marker, b"").map_err(SandboxError::io("mark layer compiled"))?;
        Ok(())
    }

    /// Runs Python source in a fresh sandbox with an empty workspace; returns the raw run.
    pub fn run_python(&self, source: &str, limits: Limits) -> Result<GuestRun> {
        self.run_python_with(source, LayerAccess::ReadOnly, None, limits)
    }

    /// Runs Python source in a fresh sandbox whose `/work` (also the working directory) is
    /// `workspace`; the guest may modify it. Returns the raw run.
    pub fn run_python_in(
        &self,
        workspace: &Path,
        source: &str,
        limits: Limits,
    ) -> Result<GuestRun> {
        if !workspace.is_dir() {
            return Err(SandboxError::Repo {
                path: workspace.to_path_buf(),
                message: "not a directory".into(),
            });
        }
        let source = format!("import os; os.chdir({GUEST_WORK:?})\n{source}");
        self.run_python_with(&source, LayerAccess::ReadOnly, Some(workspace), limits)
    }

    pub(super) fn run_python_with(
        &self,
        source: &str,
        access: LayerAccess<'_>,
        workspace: Option<&Path>,
        limits: Limits,
    ) -> Result<GuestRun> {
        limits
            .validate()
            .map_err(|e| SandboxError::InvalidOption(e.to_string()))?;
        let tmp = tempfile::Builder::new()
            .prefix("frognano-tmp-")
            .tempdir()
            .map_err(SandboxError::io("create tmp"))?;
        let empty_work = tempfile::Builder::new()
            .prefix("frognano-work-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        let work = workspace.unwrap_or(empty_work.path());
        let mounts = Mounts {
            pytest: &self.pytest_layer,
            pytest_writable: matches!(access, LayerAccess::PytestWritable),
            deps: match access {
                LayerAccess::DepsWritable(dir) => dir,
                _ => &self.empty_layer,
            },
            deps_writable: matches!(access, LayerAccess::DepsWritable(_)),
            tmp: tmp.path(),
            work,
        };
        let program = if self.snapshot {
            Program::Turn(source)
        } else {
            Program::Command(vec!["python".into(), "-c".into(), source.into()])
        };
        self.runtime
            .block_on(self.run_guest(&self.pre, &mounts, &program, &limits, None))
    }
}
