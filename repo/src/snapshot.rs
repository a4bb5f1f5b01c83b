//! Clean repositories held in memory, so that an episode's workspace is materialised by
//! writing files rather than by walking and copying a directory tree.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use frognano_core::RepoSource;
use frognano_sandbox::{PreparedRepo, Sandbox, workspace};
use sha2::{Digest, Sha256};

use crate::patch::FileTree;
use crate::{RepoError, Result};

/// Files larger than this are left out of the in-memory copy (data blobs, not sources).
const MAX_FILE_BYTES: u64 = 16 << 20;

/// A clean repository: its files, content hash and sandbox preparation.
#[derive(Debug)]
pub struct CleanRepo {
    /// The directory the files were read from (for bundles: where the bundle was unpacked).
    pub root: PathBuf,
    /// Every regular file, by relative path.
    pub files: FileTree,
    /// [`content_hash`] of `files`.
    pub content_hash: String,
    /// The sandbox's preparation (configuration, requirements layer, bytecode cache).
    pub prepared: PreparedRepo,
}

/// sha256 over the sorted (path, contents) pairs of a tree: the `content_hash` of task records.
pub fn content_hash(files: &FileTree) -> String {
    let mut hasher = Sha256::new();
    for (path, data) in files {
        hasher.update(path.as_bytes());
        hasher.update([0]);
        hasher.update((data.len() as u64).to_le_bytes());
        hasher.update(data.as_slice());
    }
    hex::encode(hasher.finalize())
}

/// Reads every regular file of a repository (skipping VCS data, virtualenvs, caches and
/// symlinks) into memory.
pub fn read_tree(root: &Path) -> Result<FileTree> {
    let mut files = FileTree::new();
    for entry in workspace::walk_repo(root) {
        let entry = entry.map_err(|e| RepoError::NotFound {
            path: root.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        if !entry.file_type().is_file() {
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if size > MAX_FILE_BYTES {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else {
            continue;
        };
        let rel = rel.replace('\\', "/");
        if rel.ends_with(".pyc") {
            continue;
        }
        let data = fs::read(entry.path())
            .map_err(RepoError::io(format!("read {}", entry.path().display())))?;
        files.insert(rel, Arc::new(data));
    }
    Ok(files)
}

/// Size and modification time of every file written into a workspace, to tell later whether
/// anything else changed it.
pub type Manifest = HashMap<String, (u64, Option<std::time::SystemTime>)>;

fn stamp(path: &Path) -> Option<(u64, Option<std::time::SystemTime>)> {
    let meta = fs::symlink_metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()))
}

fn write_file(dest: &Path, path: &str, data: &[u8], manifest: &mut Manifest) -> Result<()> {
    let full = dest.join(path);
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent)
            .map_err(RepoError::io(format!("create {}", parent.display())))?;
    }
    fs::write(&full, data).map_err(RepoError::io(format!("write {path}")))?;
    if let Some(s) = stamp(&full) {
        manifest.insert(path.to_string(), s);
    }
    Ok(())
}

/// Turns a workspace that held `previous` (as recorded in `manifest`, with the tools having
/// written `dirty`) into `next`, rewriting only what differs: files whose expected contents
/// change, files the tools wrote, files whose size or modification time no longer match the
/// manifest, files and directories that should not be there. Much cheaper than writing a whole
/// tree when consecutive episodes share a repository. Returns the new manifest.
pub fn sync(
    dest: &Path,
    manifest: &Manifest,
    previous: &FileTree,
    next: &FileTree,
    dirty: &std::collections::BTreeSet<String>,
) -> Result<Manifest> {
    let mut needed_dirs = std::collections::HashSet::new();
    for path in next.keys() {
        let mut rest = path.as_str();
        while let Some((dir, _)) = rest.rsplit_once('/') {
            if !needed_dirs.insert(dir.to_string()) {
                break;
            }
            rest = dir;
        }
    }
    let mut fresh = Manifest::new();
    let mut present = std::collections::HashSet::new();
    let mut walker = walkdir::WalkDir::new(dest)
        .min_depth(1)
        .follow_links(false)
        .into_iter();
    while let Some(entry) = walker.next() {
        let entry = entry.map_err(|e| RepoError::NotFound {
            path: dest.to_path_buf(),
            message: format!("cannot read workspace: {e}"),
        })?;
        let Some(rel) = entry
            .path()
            .strip_prefix(dest)
            .ok()
            .and_then(|r| r.to_str())
            .map(|r| r.replace('\\', "/"))
        else {
            let _ = fs::remove_file(entry.path());
            continue;
        };
        if entry.file_type().is_dir() {
            if !needed_dirs.contains(&rel) {
                fs::remove_dir_all(entry.path()).map_err(RepoError::io(format!("remove {rel}")))?;
                walker.skip_current_dir();
            }
            continue;
        }
        let unchanged = entry.file_type().is_file()
            && !dirty.contains(&rel)
            && manifest
                .get(&rel)
                .is_some_and(|m| Some(*m) == stamp(entry.path()))
            && match (previous.get(&rel), next.get(&rel)) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
                _ => false,
            };
        if unchanged {
            if let Some(m) = manifest.get(&rel) {
                fresh.insert(rel.clone(), *m);
            }
            present.insert(rel);
            continue;
        }
        fs::remove_file(entry.path()).map_err(RepoError::io(format!("remove {rel}")))?;
    }
    for (path, data) in next {
        if !present.contains(path) {
            write_file(dest, path, data, &mut fresh)?;
        }
    }
    Ok(fresh)
}

/// Writes a tree into an empty directory and returns its manifest.
pub fn materialise_tracked(files: &FileTree, dest: &Path) -> Result<Manifest> {
    let mut manifest = Manifest::new();
    for (path, data) in files {
        write_file(dest, path, data, &mut manifest)?;
    }
    Ok(manifest)
}

/// Writes a tree into an empty directory.
pub fn materialise(files: &FileTree, dest: &Path) -> Result<()> {
    let mut made: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (path, data) in files {
        if let Some((dir, _)) = path.rsplit_once('/')
            && made.insert(dir)
        {
            fs::create_dir_all(dest.join(dir)).map_err(RepoError::io(format!("create {dir}")))?;
        }
        fs::write(dest.join(path), data.as_slice())
            .map_err(RepoError::io(format!("write {path}")))?;
    }
    Ok(())
}

/// Clean repositories by source, loaded once and shared by every environment of a pool.
#[derive(Debug)]
pub struct RepoCache {
    sandbox: Arc<Sandbox>,
    entries: Mutex<HashMap<PathBuf, Arc<CleanRepo>>>,
    bundles: PathBuf,
}

impl RepoCache {
    /// An empty cache whose bundles unpack under the sandbox's cache directory.
    pub fn new(sandbox: Arc<Sandbox>) -> Self {
        RepoCache {
            sandbox,
            entries: Mutex::new(HashMap::new()),
            bundles: frognano_sandbox::assets::cache_dir().join("bundles"),
        }
    }

    /// The sandbox the repositories are prepared for.
    pub fn sandbox(&self) -> &Arc<Sandbox> {
        &self.sandbox
    }

    /// The clean repository of `source`, loading it on first use and checking its content
    /// hash when the source records one.
    pub fn get(&self, source: &RepoSource) -> Result<Arc<CleanRepo>> {
        let key = source.path().to_path_buf();
        // A panic elsewhere cannot leave the map half-updated: entries are inserted whole.
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let repo = match entries.get(&key) {
            Some(repo) => repo.clone(),
            None => {
                let repo = Arc::new(self.load(source)?);
                entries.insert(key, repo.clone());
                repo
            }
        };
        if let Some(expected) = source.content_hash()
            && expected != repo.content_hash
        {
            return Err(RepoError::NotFound {
                path: source.path().to_path_buf(),
                message: format!(
                    "content hash {} differs from the task's {expected}: the repository changed \
                     since the task was made",
                    repo.content_hash
                ),
            });
        }
        Ok(repo)
    }

    fn load(&self, source: &RepoSource) -> Result<CleanRepo> {
        let root = match source {
            RepoSource::Path { path, .. } => {
                if !path.is_dir() {
                    return Err(RepoError::NotFound {
                        path: path.clone(),
                        message: "not a directory".into(),
                    });
                }
                path.clone()
            }
            RepoSource::Bundle { path, .. } => unpack_bundle(&self.bundles, path)?,
        };
        let files = read_tree(&root)?;
        if files.is_empty() {
            return Err(RepoError::NotFound {
                path: root,
                message: "holds no files".into(),
            });
        }
        let content_hash = content_hash(&files);
        let prepared = self.sandbox.prepare_repo(&root, &|_| {})?;
        Ok(CleanRepo {
            root,
            files,
            content_hash,
            prepared,
        })
    }
}

/// The directory holding a source's clean repository (bundles are unpacked into the cache).
pub fn source_root(source: &RepoSource) -> Result<PathBuf> {
    match source {
        RepoSource::Path { path, .. } => Ok(path.clone()),
        RepoSource::Bundle { path, .. } => {
            unpack_bundle(&frognano_sandbox::assets::cache_dir().join("bundles"), path)
        }
    }
}

/// Unpacks a `.zip` / `.tar.gz` / `.tgz` / `.tar` bundle once under `bundles` (keyed by the
/// archive's sha256) and returns the repository root inside it (a single top-level directory
/// is descended into).
fn unpack_bundle(bundles: &Path, archive: &Path) -> Result<PathBuf> {
    let bad = |message: String| RepoError::NotFound {
        path: archive.to_path_buf(),
        message,
    };
    let mut data = Vec::new();
    fs::File::open(archive)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(|e| bad(format!("cannot read bundle: {e}")))?;
    let digest = hex::encode(Sha256::digest(&data));
    let dest = bundles.join(&digest[..32]);
    if !dest.is_dir() {
        fs::create_dir_all(bundles)
            .map_err(RepoError::io(format!("create {}", bundles.display())))?;
        let staging = tempfile::Builder::new()
            .prefix(".unpack-")
            .tempdir_in(bundles)
            .map_err(RepoError::io("create bundle staging directory"))?;
        unpack_archive_bytes(archive, &data, staging.path())?;
        let staged = staging.keep();
        if fs::rename(&staged, &dest).is_err() {
            // Another process unpacked it first.
            let _ = fs::remove_dir_all(&staged);
        }
    }
    archive_root(&dest)
}

/// Unpacks a `.zip` / `.tar.gz` / `.tgz` / `.tar` archive (a bundle or a source distribution)
/// into the existing directory `dest` and returns the tree's root inside it (a single
/// top-level directory is descended into). Entries whose names would land outside `dest` are
/// refused; an archive that is not one of these formats, or is damaged, is an error naming it.
pub fn unpack_archive(archive: &Path, dest: &Path) -> Result<PathBuf> {
    let mut data = Vec::new();
    fs::File::open(archive)
        .and_then(|mut f| f.read_to_end(&mut data))
        .map_err(|e| RepoError::NotFound {
            path: archive.to_path_buf(),
            message: format!("cannot read archive: {e}"),
        })?;
    unpack_archive_bytes(archive, &data, dest)?;
    archive_root(dest)
}

fn unpack_archive_bytes(archive: &Path, data: &[u8], dest: &Path) -> Result<()> {
    let bad = |message: String| RepoError::NotFound {
        path: archive.to_path_buf(),
        message,
    };
    let name = archive.to_string_lossy().to_lowercase();
    if name.ends_with(".zip") {
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(data))
            .map_err(|e| bad(format!("not a zip archive: {e}")))?;
        // `extract` refuses entries whose names climb out of the destination.
        zip.extract(dest)
            .map_err(|e| bad(format!("cannot unpack: {e}")))?;
    } else if name.ends_with(".tar.gz") || name.ends_with(".tgz") || name.ends_with(".tar") {
        let reader: Box<dyn Read> = if name.ends_with(".tar") {
            Box::new(std::io::Cursor::new(data))
        } else {
            Box::new(flate2::read::GzDecoder::new(std::io::Cursor::new(data)))
        };
        // `unpack` refuses entries that would land outside the destination.
        tar::Archive::new(reader)
            .unpack(dest)
            .map_err(|e| bad(format!("cannot unpack: {e}")))?;
    } else {
        return Err(bad(
            "unknown archive format: use .zip, .tar.gz, .tgz or .tar".into(),
        ));
    }
    Ok(())
}

/// The tree's root in an unpacked archive: single top-level directories are descended into.
fn archive_root(dest: &Path) -> Result<PathBuf> {
    let mut root = dest.to_path_buf();
    loop {
        let entries: Vec<_> = fs::read_dir(&root)
            .map_err(RepoError::io(format!("read {}", root.display())))?
            .filter_map(|e| e.ok())
            .collect();
        match entries.as_slice() {
            [only] if only.file_type().is_ok_and(|t| t.is_dir()) => root = only.path(),
            _ => break,
        }
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_hash_depends_on_paths_and_contents() {
        let a: FileTree = [("x.py".to_string(), Arc::new(b"1".to_vec()))].into();
        let b: FileTree = [("y.py".to_string(), Arc::new(b"1".to_vec()))].into();
        let c: FileTree = [("x.py".to_string(), Arc::new(b"2".to_vec()))].into();
        assert_ne!(content_hash(&a), content_hash(&b));
        assert_ne!(content_hash(&a), content_hash(&c));
        assert_eq!(content_hash(&a), content_hash(&a.clone()));
    }

    #[test]
    fn read_and_materialise_round_trip() {
        let src = tempfile::tempdir().expect("tmp");
        fs::create_dir_all(src.path().join("pkg/sub")).expect("mkdir");
        fs::write(src.path().join("pkg/sub/m.py"), "x = 1\n").expect("write");
        fs::write(src.path().join("top.txt"), "t").expect("write");
        fs::create_dir_all(src.path().join(".git")).expect("mkdir");
        fs::write(src.path().join(".git/HEAD"), "ref").expect("write");
        let tree = read_tree(src.path()).expect("read");
        assert_eq!(
            tree.keys().collect::<Vec<_>>(),
            vec!["pkg/sub/m.py", "top.txt"]
        );
        let dest = tempfile::tempdir().expect("tmp");
        materialise(&tree, dest.path()).expect("write");
        assert_eq!(read_tree(dest.path()).expect("read"), tree);
    }

    #[test]
    fn sync_rewrites_only_what_changed_and_removes_strays() {
        let tree = crate::patch::text_tree;
        let first = tree(&[("a/x.py", "1"), ("a/y.py", "2"), ("b.py", "3")]);
        let dest = tempfile::tempdir().expect("tmp");
        let manifest = materialise_tracked(&first, dest.path()).expect("write");
        // The agent edits a file (tracked), something else edits another (untracked), and
        // strays appear.
        fs::write(dest.path().join("a/x.py"), "edited").expect("write");
        fs::write(dest.path().join("b.py"), "changed behind our back").expect("write");
        fs::create_dir_all(dest.path().join("junk/deep")).expect("mkdir");
        fs::write(dest.path().join("junk/deep/z"), "z").expect("write");
        fs::write(dest.path().join("a/new.py"), "n").expect("write");
        let next = tree(&[
            ("a/x.py", "1"),
            ("a/y.py", "2"),
            ("b.py", "3"),
            ("c/d.py", "4"),
        ]);
        let dirty = ["a/x.py".to_string()].into_iter().collect();
        let manifest = sync(dest.path(), &manifest, &first, &next, &dirty).expect("sync");
        assert_eq!(read_tree(dest.path()).expect("read"), next);
        assert!(!dest.path().join("junk").exists());
        assert_eq!(manifest.len(), next.len());
        let last = tree(&[("b.py", "3")]);
        sync(dest.path(), &manifest, &next, &last, &Default::default()).expect("sync");
        assert_eq!(read_tree(dest.path()).expect("read"), last);
        assert!(!dest.path().join("a").exists());
    }
}
