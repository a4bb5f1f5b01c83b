//! Run Python repositories' test suites inside WebAssembly (WASI) sandboxes.
//!
//! `frognano-sandbox` embeds wasmtime and a CPython interpreter compiled for WASI. A run sees
//! only a fresh copy of the repository (`/work`), a scratch directory (`/tmp`) and read-only
//! layers (the stdlib, pytest, the repository's pure-Python test requirements): no other host
//! files, no network, no host environment. Wall-clock time, memory and output are capped and
//! each limit is reported as a distinct [`frognano_core::RunOutcome`], never as a crash or hang
//! of the host. Runs are fast because the module is compiled once and cached, instances come
//! from a pre-linked template, and (with the default image) every run starts from a memory
//! snapshot of an interpreter that has already imported pytest.
//!
//! ```no_run
//! use frognano_sandbox::{Sandbox, SandboxOptions, TestRequest};
//! let sandbox = Sandbox::new(SandboxOptions::default(), &|msg| eprintln!("{msg}"))?;
//! let report = sandbox.run_tests("examples/repos/textkit".as_ref(), &TestRequest::default())?;
//! println!("{} passed, {} failed", report.passed, report.failed);
//! # Ok::<(), frognano_sandbox::SandboxError>(())
//! ```

pub mod assets;
pub mod built_wheels;
pub mod bytecode;
pub mod config;
pub mod entry_points;
mod error;
pub mod image;
pub mod layers;
pub mod native;
pub mod probe;
mod profile;
pub mod requirements;
pub mod runner;
mod sandbox;
#[cfg(feature = "testing")]
pub mod testing;
pub mod workspace;

pub use config::RepoConfig;
pub use error::{Result, SandboxError};
pub use image::{ImageFiles, ImageKind};
pub use requirements::{
    AddedImportRoot, AddedRequirement, DetectedRequirement, LeftOutRequirement, RequirementsReport,
    UnresolvedModule,
};
pub use sandbox::{
    CancelFlag, GUEST_DEPS, GUEST_PYTEST, GUEST_TMP, GUEST_WORK, GuestRun, MAX_SHARDS,
    PreparedRepo, Sandbox, SandboxOptions, TestRequest, clean_suite_args, grading_args,
};

/// Prepares every asset for the given image (fetch, verify, compile, snapshot) and reports
/// progress. Idempotent: a second call finds everything cached.
pub fn setup(options: SandboxOptions, progress: assets::Progress<'_>) -> Result<Sandbox> {
    Sandbox::new(options, progress)
}

#[cfg(test)]
pub(crate) mod test_zip {
    use std::path::Path;

    /// Writes a zip at `path` holding `members` (name, bytes).
    pub(crate) fn write_zip(path: &Path, members: &[(&str, &[u8])]) {
        use std::io::Write;
        let mut zip = zip::ZipWriter::new(std::fs::File::create(path).expect("create zip"));
        for (name, bytes) in members {
            zip.start_file(*name, zip::write::SimpleFileOptions::default())
                .expect("start member");
            zip.write_all(bytes).expect("write member");
        }
        zip.finish().expect("finish zip");
    }
}
