//! Per-repository bytecode caches.
//!
//! Compiling a repository's modules (and pytest's assertion rewriting of its test modules) is
//! about half of a small suite's run time in the sandbox. Each clean repository is compiled
//! once, in a guest run that only parses and compiles (no repository code runs), to checked-hash
//! `.pyc` files (validated by source content, not by mtime). The result is cached on the host
//! under a key of the repository's Python sources, and overlaid into each run's workspace. A
//! file changed since (an agent's edit) no longer matches its hash and is compiled afresh;
//! nothing a guest writes is ever harvested back into the cache.

use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use walkdir::WalkDir;

use crate::error::{Result, SandboxError};
use crate::workspace::walk_repo;

/// Name of the marker written when a cache directory is complete.
const COMPLETE: &str = ".complete";

/// A key over every `.py` file of the repository (path and contents) plus `salt` (image and
/// pytest versions).
pub fn source_key(repo: &Path, salt: &str) -> Result<String> {
    let mut files: Vec<PathBuf> = walk_repo(repo)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "py"))
        .map(|e| e.into_path())
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    hasher.update(salt.as_bytes());
    for file in &files {
        let relative = file.strip_prefix(repo).unwrap_or(file);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        let contents =
            fs::read(file).map_err(SandboxError::io(format!("read {}", file.display())))?;
        hasher.update((contents.len() as u64).to_le_bytes());
        hasher.update(&contents);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Whether a cache directory is complete.
pub fn is_complete(dir: &Path) -> bool {
    dir.join(COMPLETE).is_file()
}

/// Moves every `__pycache__/*.pyc` of `compiled` (a workspace the compile run wrote into) into a
/// fresh cache directory at `dir`.
pub fn harvest(compiled: &Path, dir: &Path) -> Result<()> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(SandboxError::io(format!("create {}", parent.display())))?;
    let staging = tempfile::Builder::new()
        .prefix(".bytecode-")
        .tempdir_in(parent)
        .map_err(SandboxError::io("create bytecode staging"))?;
    for entry in WalkDir::new(compiled)
        .follow_links(false)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        let path = entry.path();
        let in_pycache = path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "__pycache__");
        if !(entry.file_type().is_file()
            && in_pycache
            && path.extension().is_some_and(|x| x == "pyc"))
        {
            continue;
        }
        let relative = path.strip_prefix(compiled).unwrap_or(path);
        let target = staging.path().join(relative);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(SandboxError::io("create bytecode directory"))?;
        }
        fs::copy(path, &target).map_err(SandboxError::io("store bytecode"))?;
    }
    fs::write(staging.path().join(COMPLETE), b"")
        .map_err(SandboxError::io("mark bytecode complete"))?;
    Ok(crate::assets::land_cache_dir(staging, dir)?)
}

/// Copies the cached `.pyc` files into `workspace`. Writes go through a capability handle, so
/// a symlink a guest planted in the workspace cannot redirect them out of it; a file that
/// cannot be placed is skipped (the guest then compiles that module itself).
pub fn overlay(cache: &Path, workspace: &Path) -> Result<usize> {
    let dir = cap_std::fs::Dir::open_ambient_dir(workspace, cap_std::ambient_authority())
        .map_err(SandboxError::io(format!("open {}", workspace.display())))?;
    let mut placed = 0;
    for entry in WalkDir::new(cache)
        .follow_links(false)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        if !entry.file_type().is_file() || entry.file_name() == COMPLETE {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(cache) else {
            continue;
        };
        let Some(source_dir) = relative.parent().and_then(Path::parent) else {
            continue;
        };
        if !dir.is_dir(source_dir) && !source_dir.as_os_str().is_empty() {
            continue;
        }
        let Ok(bytes) = fs::read(entry.path()) else {
            continue;
        };
        if let Some(parent) = relative.parent()
            && dir.create_dir_all(parent).is_ok()
            && dir.write(relative, bytes).is_ok()
        {
            placed += 1;
        }
    }
    Ok(placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_follows_python_sources_only() {
        let repo = tempfile::tempdir().expect("tempdir");
        fs::write(repo.path().join("a.py"), "x = 1\n").expect("write");
        fs::write(repo.path().join("README.md"), "hi\n").expect("write");
        let first = source_key(repo.path(), "salt").expect("key");
        fs::write(repo.path().join("README.md"), "changed\n").expect("write");
        assert_eq!(first, source_key(repo.path(), "salt").expect("key"));
        fs::write(repo.path().join("a.py"), "x = 2\n").expect("write");
        assert_ne!(first, source_key(repo.path(), "salt").expect("key"));
        assert_ne!(
            source_key(repo.path(), "salt").expect("key"),
            source_key(repo.path(), "other").expect("key")
        );
    }

    #[test]
    fn overlay_does_not_follow_planted_symlinks() {
        let cache = tempfile::tempdir().expect("tempdir");
        let work = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(cache.path().join("pkg/__pycache__")).expect("mkdir");
        fs::write(
            cache.path().join("pkg/__pycache__/m.cpython-315.pyc"),
            b"pyc",
        )
        .expect("write");
        fs::create_dir_all(work.path().join("pkg")).expect("mkdir");
        std::os::unix::fs::symlink(outside.path(), work.path().join("pkg/__pycache__"))
            .expect("link");
        overlay(cache.path(), work.path()).expect("overlay");
        assert_eq!(
            fs::read_dir(outside.path()).expect("list").count(),
            0,
            "wrote through the symlink"
        );
    }
}
