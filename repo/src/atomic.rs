//! Writes that never leave half a file behind: whole files through a temporary sibling and a
//! rename ([`write_atomically`]), and JSONL files one whole line at a time ([`LineFile`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{RepoError, Result};

/// Writes a file through a temporary sibling and a rename, so a crash never leaves half a file:
/// a process killed at any moment leaves the old file or the new one, and a failed write (a full
/// disk) leaves the old one and no temporary file. The data reach the disk before the rename,
/// so a power loss does not leave an empty file either.
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let context = || format!("write {}", path.display());
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(RepoError::io(context()))?;
    tmp.write_all(data).map_err(RepoError::io(context()))?;
    tmp.as_file().sync_all().map_err(RepoError::io(context()))?;
    tmp.persist(path)
        .map_err(|e| RepoError::io(context())(e.error))?;
    Ok(())
}

/// A JSONL file that only ever holds whole lines: each line goes out in one write, and a write
/// that fails part-way (a full disk) is cut back to the line before, so a reader never meets a
/// torn record and a later line can still be written once there is room.
#[derive(Debug)]
pub struct LineFile {
    file: File,
    path: PathBuf,
    len: u64,
}

impl LineFile {
    /// Creates (or empties) the file at `path`.
    pub fn create(path: &Path) -> Result<Self> {
        File::create(path).map_err(RepoError::io(format!("create {}", path.display())))?;
        // Reopened to append: after a failed write is cut back, the next one must land at the
        // new end, not at the old write position (which would leave a hole of zeros).
        Self::append(path)
    }

    /// Opens the file at `path` to append to it, creating it when missing. A torn last line
    /// (a writer killed inside a long write) is cut off first.
    pub fn append(path: &Path) -> Result<Self> {
        let context = || format!("open {}", path.display());
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(RepoError::io(context()))?;
        let len = whole_lines_len(&file).map_err(RepoError::io(context()))?;
        if len < file.metadata().map_err(RepoError::io(context()))?.len() {
            file.set_len(len).map_err(RepoError::io(context()))?;
        }
        Ok(LineFile {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// Appends `line` (which must not hold a newline) and a newline.
    pub fn write_line(&mut self, line: &str) -> Result<()> {
        let mut data = Vec::with_capacity(line.len() + 1);
        data.extend_from_slice(line.as_bytes());
        data.push(b'\n');
        if let Err(err) = self.file.write_all(&data) {
            // Whatever part of the line went out is cut off again.
            let _ = self.file.set_len(self.len);
            return Err(RepoError::io(format!("write {}", self.path.display()))(err));
        }
        self.len += data.len() as u64;
        Ok(())
    }
}

/// The length of `file` up to and including its last newline (0 when it has none).
fn whole_lines_len(file: &File) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut reader = file;
    let mut end = file.metadata()?.len();
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let part = &mut chunk[..(end - start) as usize];
        reader.seek(SeekFrom::Start(start))?;
        reader.read_exact(part)?;
        if let Some(i) = part.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
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

    #[test]
    fn line_files_append_whole_lines() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("m.jsonl");
        LineFile::create(&path)
            .expect("create")
            .write_line("{\"a\":1}")
            .expect("line");
        let mut again = LineFile::append(&path).expect("append");
        again.write_line("{\"b\":2}").expect("line");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        // A line torn by a killed writer is cut off when the file is opened again.
        std::fs::write(&path, "{\"a\":1}\n{\"b\":").expect("torn");
        LineFile::append(&path)
            .expect("append")
            .write_line("{\"c\":3}")
            .expect("line");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "{\"a\":1}\n{\"c\":3}\n"
        );
    }
}
