//! Per-run copies of a repository: the user's directory is never touched.

use std::fs;
use std::path::Path;

use walkdir::WalkDir;

use crate::error::{Result, SandboxError};

/// Directory names never copied into a workspace (VCS data, virtualenvs, host bytecode caches).
pub const SKIPPED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "node_modules",
];

/// Walks a repository without following links and without entering [`SKIPPED_DIRS`].
pub fn walk_repo(root: &Path) -> impl Iterator<Item = walkdir::Result<walkdir::DirEntry>> {
    WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0
                || !(e.file_type().is_dir()
                    && e.file_name()
                        .to_str()
                        .is_some_and(|n| SKIPPED_DIRS.contains(&n)))
        })
}

/// Copies `src` into the existing empty directory `dest`, keeping modification times.
///
/// Symlinks are never followed. A link that stays inside the repository is copied as a link;
/// one that points out of it (absolute, or climbing out with `..`) is left out, because the
/// guest could never follow it and it would only turn into a permission error during test
/// collection. Returns the number of files copied.
pub fn copy_repo(src: &Path, dest: &Path) -> Result<usize> {
    let mut files = 0;
    for entry in walk_repo(src) {
        let entry = entry.map_err(|e| SandboxError::Repo {
            path: src.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        let relative = entry
            .path()
            .strip_prefix(src)
            .map_err(|e| SandboxError::Repo {
                path: src.to_path_buf(),
                message: e.to_string(),
            })?;
        if relative.as_os_str().is_empty() {
            continue;
        }
        let target = dest.join(relative);
        let kind = entry.file_type();
        if kind.is_dir() {
            fs::create_dir_all(&target)
                .map_err(SandboxError::io(format!("create {}", target.display())))?;
        } else if kind.is_symlink() {
            let link = fs::read_link(entry.path()).map_err(SandboxError::io(format!(
                "read link {}",
                entry.path().display()
            )))?;
            if stays_inside(relative, &link) {
                std::os::unix::fs::symlink(&link, &target)
                    .map_err(SandboxError::io(format!("link {}", target.display())))?;
            }
        } else if kind.is_file() {
            fs::copy(entry.path(), &target)
                .map_err(SandboxError::io(format!("copy {}", entry.path().display())))?;
            // Keep the source's mtime: bytecode caches are validated against it.
            if let Some(modified) = entry.metadata().ok().and_then(|m| m.modified().ok()) {
                let _ = fs::File::options()
                    .write(true)
                    .open(&target)
                    .and_then(|f| f.set_modified(modified));
            }
            files += 1;
        }
    }
    Ok(files)
}

/// Whether a relative symlink at `link_path` (relative to the repository root) resolves, lexically,
/// to a path inside the repository.
fn stays_inside(link_path: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: usize = link_path
        .parent()
        .map(|p| p.components().count())
        .unwrap_or(0);
    for component in target.components() {
        match component {
            std::path::Component::ParentDir => {
                if depth == 0 {
                    return false;
                }
                depth -= 1;
            }
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            _ => return false,
        }
    }
    true
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
        std::os::unix::fs::symlink("../../outside", src.path().join("pkg/climb")).expect("link");
        std::os::unix::fs::symlink("a.py", src.path().join("pkg/alias.py")).expect("link");
        let files = copy_repo(src.path(), dest.path()).expect("copy");
        assert_eq!(files, 1);
        assert_eq!(
            fs::read_to_string(dest.path().join("pkg/a.py")).expect("read"),
            "x = 1\n"
        );
        let mtime = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).expect("mtime");
        assert_eq!(
            mtime(&src.path().join("pkg/a.py")),
            mtime(&dest.path().join("pkg/a.py"))
        );
        assert!(!dest.path().join("pkg/__pycache__").exists());
        assert!(!dest.path().join(".git").exists());
        assert!(
            fs::symlink_metadata(dest.path().join("pkg/evil")).is_err(),
            "absolute link copied"
        );
        assert!(
            fs::symlink_metadata(dest.path().join("pkg/climb")).is_err(),
            "escaping link copied"
        );
        let alias =
            fs::symlink_metadata(dest.path().join("pkg/alias.py")).expect("inside link kept");
        assert!(alias.file_type().is_symlink());
    }
}
