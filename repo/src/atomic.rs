//! Whole-file writes that never leave half a file behind.

use std::io::Write;
use std::path::Path;

use crate::{RepoError, Result};

/// Writes a file through a temporary sibling and a rename, so a crash never leaves half a file.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let context = || format!("write {}", path.display());
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(RepoError::io(context()))?;
    tmp.write_all(data).map_err(RepoError::io(context()))?;
    tmp.persist(path)
        .map_err(|e| RepoError::io(context())(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_replaces() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("f.json");
        write_atomically(&path, b"one").expect("write");
        write_atomically(&path, b"two").expect("replace");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
        let err = write_atomically(&dir.path().join("no/such/dir/f"), b"x").expect_err("no dir");
        assert_eq!(err.kind(), frognano_core::ErrorKind::NotFound);
    }
}
