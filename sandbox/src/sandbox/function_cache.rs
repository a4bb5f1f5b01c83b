//! Cranelift's incremental compilation cache, kept on disk: each compiled function is stored
//! under a hash of its code and the target ISA, and a later compilation of an identical function
//! loads it instead of compiling it again.
//!
//! The interpreter module and every snapshot taken of it (the pytest snapshot, a requirement
//! layer's snapshot) share their functions and differ in their data, so only the first of them
//! pays for Cranelift: the module instrumented for snapshotting and the snapshot itself are
//! otherwise two full compilations of the same code. Entries are written to a temporary file and
//! renamed into place, so concurrent compilations in several processes never read a partial one.

use std::borrow::Cow;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::CacheStore;

use crate::assets;

/// The folder of the cache, inside the compiled-module cache; one per wasmtime version, so an
/// upgrade starts a new one and removes the old.
fn cache_folder(compiled: &Path) -> PathBuf {
    compiled.join(format!("functions-{}", super::engine::wasmtime_version()))
}

/// Compiled functions on disk, as Cranelift's incremental cache (see the module docs).
#[derive(Debug)]
pub(crate) struct FunctionCache {
    dir: PathBuf,
}

impl FunctionCache {
    /// The cache under `compiled` (the compiled-module cache), created if missing; folders of
    /// other wasmtime versions are removed. None when the folder cannot be created: compilation
    /// then runs without a cache.
    pub(crate) fn open(compiled: &Path) -> Option<Self> {
        let dir = cache_folder(compiled);
        assets::ensure_dir(&dir).ok()?;
        if let Ok(entries) = fs::read_dir(compiled) {
            for entry in entries.flatten() {
                let path = entry.path();
                let stale = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("functions-"))
                    && path != dir
                    && path.is_dir();
                if stale {
                    // Best effort: another process may be using it.
                    let _ = fs::remove_dir_all(&path);
                }
            }
        }
        Some(FunctionCache { dir })
    }

    /// `xx/yyyy...`: the key's hex digits, fanned out over 256 folders.
    fn entry_path(&self, key: &[u8]) -> PathBuf {
        let name = hex::encode(key);
        let (fan, rest) = name.split_at(name.len().min(2));
        self.dir.join(fan).join(rest)
    }
}

impl CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        // A missing or unreadable entry is a miss; Cranelift also treats an entry it cannot
        // decode (another Cranelift version, a damaged file) as a miss and compiles.
        fs::read(self.entry_path(key)).ok().map(Cow::Owned)
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let path = self.entry_path(key);
        let Some(folder) = path.parent() else {
            return false;
        };
        if fs::create_dir_all(folder).is_err() {
            return false;
        }
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(folder) else {
            return false;
        };
        tmp.write_all(&value).is_ok() && tmp.persist(&path).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_misses_are_none() {
        let compiled = tempfile::tempdir().expect("dir");
        let cache = FunctionCache::open(compiled.path()).expect("cache");
        assert!(cache.get(&[1, 2, 3]).is_none());
        assert!(cache.insert(&[1, 2, 3], b"code".to_vec()));
        assert_eq!(cache.get(&[1, 2, 3]).as_deref(), Some(&b"code"[..]));
        // Inserting again replaces the entry.
        assert!(cache.insert(&[1, 2, 3], b"other".to_vec()));
        assert_eq!(cache.get(&[1, 2, 3]).as_deref(), Some(&b"other"[..]));
        assert!(cache.get(&[1, 2, 4]).is_none());
    }

    #[test]
    fn folders_of_other_versions_are_removed() {
        let compiled = tempfile::tempdir().expect("dir");
        let old = compiled.path().join("functions-0.0.1");
        fs::create_dir_all(old.join("ab")).expect("old cache");
        let module = compiled.path().join("pytest-0123.cwasm");
        fs::write(&module, b"module").expect("module");
        let cache = FunctionCache::open(compiled.path()).expect("cache");
        assert!(!old.exists());
        assert!(module.is_file(), "compiled modules are left alone");
        assert!(cache.dir.is_dir());
    }
}
