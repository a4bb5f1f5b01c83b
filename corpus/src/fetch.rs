//! Getting an entry's source tree: registry sdists downloaded once into a cache keyed by their
//! sha256 (verified against the pin), local sdists and directories copied, all unpacked
//! safely into the corpus.

use std::fs;
use std::path::{Path, PathBuf};

use frognano_sandbox::{assets, workspace};

use crate::manifest::{Failure, FailureKind};
use crate::spec::Spec;

/// Where an entry's tree came from.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// sha256 of the sdist it was unpacked from (none for a directory).
    pub sdist_sha256: Option<String>,
}

/// Most bytes an unpacked source tree may hold (a guard against archive bombs).
const MAX_TREE_BYTES: u64 = 512 << 20;
/// Most files an unpacked source tree may hold.
const MAX_TREE_FILES: usize = 100_000;

/// Downloads (or finds in the cache) the sdist of a registry spec and checks its sha256.
/// `python_version` is the Python the tests will run on: a release that requires a newer
/// Python than the host's pip runs on is still the one to fetch.
pub fn registry_sdist(
    name: &str,
    version: &str,
    sha256: Option<&str>,
    python_version: &str,
) -> Result<(PathBuf, String), Failure> {
    let cache = assets::cache_dir().join("sdists");
    if let Some(sha) = sha256
        && let Some(file) = cached_sdist(&cache.join(sha))
    {
        return Ok((file, sha.to_string()));
    }
    let fail = |kind: FailureKind, message: String| Failure { kind, message };
    assets::ensure_dir(&cache).map_err(|e| fail(FailureKind::Fetch, e.to_string()))?;
    let download = tempfile::Builder::new()
        .prefix(".download-")
        .tempdir_in(&cache)
        .map_err(|e| {
            fail(
                FailureKind::Fetch,
                format!("create a download directory: {e}"),
            )
        })?;
    assets::pip_download(
        download.path(),
        &[
            "--no-deps".into(),
            "--python-version".into(),
            python_version.to_string(),
            // Only the package itself must come as source: its build backend may be a wheel
            // (a backend built from source can need a compiler, e.g. uv_build needs Rust).
            "--no-binary".into(),
            name.to_string(),
            format!("{name}=={version}"),
        ],
    )
    .map_err(|e| {
        fail(
            FailureKind::Fetch,
            format!(
                "{e}\n(is {name}=={version} published with a source distribution? FrogNano runs a \
                 package's tests from its sdist)"
            ),
        )
    })?;
    let Some(file) = cached_sdist(download.path()) else {
        return Err(fail(
            FailureKind::Fetch,
            format!("pip reported success but left no sdist of {name}=={version}"),
        ));
    };
    let actual = assets::sha256_file(&file).map_err(|e| fail(FailureKind::Fetch, e.to_string()))?;
    if let Some(expected) = sha256
        && expected != actual
    {
        return Err(fail(
            FailureKind::HashMismatch,
            format!(
                "the sdist of {name}=={version} has sha256 {actual}, not the pinned {expected}: \
                 the file differs from the one the list was made from; check the pin"
            ),
        ));
    }
    let dest_dir = cache.join(&actual);
    let file_name = file.file_name().map(|n| n.to_owned()).unwrap_or_default();
    let dest = dest_dir.join(&file_name);
    if !dest.is_file() {
        assets::ensure_dir(&dest_dir).map_err(|e| fail(FailureKind::Fetch, e.to_string()))?;
        // Same filesystem: a rename, atomic, so a concurrent build sees the whole file or none.
        fs::rename(&file, &dest)
            .map_err(|e| fail(FailureKind::Fetch, format!("cache the sdist: {e}")))?;
    }
    Ok((dest, actual))
}

fn cached_sdist(dir: &Path) -> Option<PathBuf> {
    let entries = fs::read_dir(dir).ok()?;
    entries.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| {
        let name = p.to_string_lossy().to_ascii_lowercase();
        p.is_file()
            && [".tar.gz", ".tgz", ".tar", ".zip"]
                .iter()
                .any(|s| name.ends_with(s))
    })
}

/// Puts the entry's source tree at `dest` (which must not exist): unpacked from its sdist, or
/// copied from its directory, for tests that run on `python_version`. Returns where the files
/// came from.
pub fn materialise(spec: &Spec, dest: &Path, python_version: &str) -> Result<Fetched, Failure> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let fail = |kind: FailureKind, message: String| Failure { kind, message };
    fs::create_dir_all(parent)
        .map_err(|e| fail(FailureKind::Io, format!("create {}: {e}", parent.display())))?;
    let staging = tempfile::Builder::new()
        .prefix(".staging-")
        .tempdir_in(parent)
        .map_err(|e| fail(FailureKind::Io, format!("create a staging directory: {e}")))?;
    let (fetched, root) = match spec {
        Spec::Registry {
            name,
            version,
            sha256,
        } => {
            let (file, sha) = registry_sdist(name, version, sha256.as_deref(), python_version)?;
            let root = unpack(&file, staging.path())?;
            (
                Fetched {
                    sdist_sha256: Some(sha),
                },
                root,
            )
        }
        Spec::Sdist(file) => {
            let sha =
                assets::sha256_file(file).map_err(|e| fail(FailureKind::Fetch, e.to_string()))?;
            let root = unpack(file, staging.path())?;
            (
                Fetched {
                    sdist_sha256: Some(sha),
                },
                root,
            )
        }
        Spec::Directory(dir) => {
            let tree = staging.path().join("tree");
            fs::create_dir_all(&tree)
                .map_err(|e| fail(FailureKind::Io, format!("create {}: {e}", tree.display())))?;
            workspace::copy_repo(dir, &tree)
                .map_err(|e| fail(FailureKind::Fetch, format!("copy {}: {e}", dir.display())))?;
            (Fetched { sdist_sha256: None }, tree)
        }
    };
    check_size(&root)?;
    fs::rename(&root, dest)
        .map_err(|e| fail(FailureKind::Io, format!("move the tree into place: {e}")))?;
    Ok(fetched)
}

fn unpack(file: &Path, into: &Path) -> Result<PathBuf, Failure> {
    let dir = into.join("unpacked");
    fs::create_dir_all(&dir).map_err(|e| Failure {
        kind: FailureKind::Io,
        message: format!("create {}: {e}", dir.display()),
    })?;
    let root = frognano_repo::unpack_archive(file, &dir).map_err(|e| Failure {
        kind: FailureKind::MalformedSdist,
        message: format!("{e} (the sdist is damaged or not an archive)"),
    })?;
    if root == dir
        && fs::read_dir(&dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(true)
    {
        return Err(Failure {
            kind: FailureKind::MalformedSdist,
            message: format!("{} is an empty archive", file.display()),
        });
    }
    Ok(root)
}

fn check_size(root: &Path) -> Result<(), Failure> {
    let mut bytes = 0u64;
    let mut files = 0usize;
    for entry in walkdir::WalkDir::new(root).follow_links(false) {
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_file() {
            files += 1;
            bytes += entry.metadata().map(|m| m.len()).unwrap_or(0);
        }
        if bytes > MAX_TREE_BYTES || files > MAX_TREE_FILES {
            return Err(Failure {
                kind: FailureKind::MalformedSdist,
                message: format!(
                    "the unpacked tree exceeds {} MiB or {MAX_TREE_FILES} files: not a source \
                     distribution FrogNano takes",
                    MAX_TREE_BYTES >> 20
                ),
            });
        }
    }
    Ok(())
}
