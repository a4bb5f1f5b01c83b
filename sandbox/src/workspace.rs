//! Per-run copies of a repository: the user's directory is never touched.

use std::fs;
use std::path::Path;

use walkdir::WalkDir;

use crate::error::{Result, SandboxError};

/// Directory names never copied into a workspace (VCS data, virtualenvs, host bytecode caches).
pub const SKIPPED_DIRS: &[&str] = &[
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", ".pytest_cache",
    ".mypy_cache", ".ruff_cache", "node_modules",
];

/// Copies `src` into the existing empty directory `dest`. Symlinks are copied as links, never
/// followed, so a link pointing out of the repository cannot pull host files in; the guest
/// cannot follow it out either. Returns the number of files copied.
pub fn copy_repo(src: &Path, dest: &Path) -> Result<usize> {
    let mut files = 0;
    let walker = WalkDir::new(src).follow_links(false).into_iter().filter_entry(|e| {
        e.depth() == 0
            || !(e.file_type().is_dir() && e.file_name().to_str().is_some_and(|n| SKIPPED_DIRS.contains(&n)))
    });
    for entry in walker {
        let entry = entry.map_err(|e| SandboxError::Repo {
            path: src.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        let relative = entry.path().strip_prefix(src).map_err(|e| SandboxError::Repo {
            path: src.to_path_buf(),
            message: e.to_string(),
        })?;
        if relative.as_os_str().is_empty() {
            continue;
        }
        let target = dest.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&target).map_err(SandboxError::io(format!("create {}", target.display())))?;
        } else if kind.is_symlink() {
            let link = fs::read_link(entry.path()).map_err(SandboxError::io(format!("read link {}", entry.path().display())))?;
            std::os::unix::fs::symlink(&link, &target).map_err(SandboxError::io(format!("link {}", target.display())))?;
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).map_err(SandboxError::io(format!("copy {}", entry.path().display())))?;
            files += 1;
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_skips_caches_and_keeps_links_as_links() {
        let src = tempfile::tempdir().expect("tempdir");
        let dest = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(src.path().join("pkg/__pycache__")).expect("mkdir");
        fs::create_dir_all(src.path().join(".git")).expect("mkdir");
        fs::write(src.path().join("pkg/a.py"), "x = 1\n").expect("write");
        fs::write(src.path().join("pkg/__pycache__/a.pyc"), "junk").expect("write");
        fs::write(src.path().join(".git/HEAD"), "ref").expect("write");
        std::os::unix::fs::symlink("/etc/passwd", src.path().join("pkg/evil")).expect("link");
        let files = copy_repo(src.path(), dest.path()).expect("copy");
        assert_eq!(files, 1);
        assert_eq!(fs::read_to_string(dest.path().join("pkg/a.py")).expect("read"), "x = 1\n");
        assert!(!dest.path().join("pkg/__pycache__").exists());
        assert!(!dest.path().join(".git").exists());
        let link = dest.path().join("pkg/evil");
        assert!(fs::symlink_metadata(&link).expect("meta").file_type().is_symlink());
    }
}
