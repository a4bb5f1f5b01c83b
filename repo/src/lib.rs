//! Repositories for FrogNano: what a task's code is and how it changes.
//!
//! `frognano-repo` holds a repository the way the rest of FrogNano works on it: a
//! [`FileTree`] (relative path to contents) read once into memory, so that a workspace is
//! materialised by writing files rather than by walking and copying a directory. [`snapshot`]
//! reads clean repositories from directories or `.zip` / `.tar.gz` bundles, hashes them, keeps
//! them in a [`RepoCache`] shared by many environments (each prepared once for the sandbox) and
//! syncs a workspace from one tree to the next rewriting only what differs. [`patch`] parses,
//! applies and reverses unified diffs (git-style or plain) over trees and writes the diff
//! between two trees. [`write_atomically`] writes task sets, caches and checkpoints so that a
//! crash never leaves half a file. Errors are [`RepoError`]s.
//!
//! ```
//! use std::sync::Arc;
//! use frognano_repo::{FileTree, patch};
//!
//! let before: FileTree = [("m.py".to_string(), Arc::new(b"x = 1\n".to_vec()))].into();
//! let mut after = before.clone();
//! after.insert("m.py".into(), Arc::new(b"x = 2\n".to_vec()));
//! let diff = patch::diff_trees(&before, &after, 3);
//! let mut tree = before.clone();
//! patch::apply(&mut tree, &diff)?;
//! assert_eq!(tree, after);
//! # Ok::<(), frognano_repo::RepoError>(())
//! ```

mod atomic;
mod error;
pub mod patch;
pub mod snapshot;

pub use atomic::{LineFile, write_atomically};
pub use error::{RepoError, Result};
pub use patch::{FileChange, FileTree, diff_trees};
pub use snapshot::{
    CleanRepo, RepoCache, content_hash, materialise, read_tree, source_root, unpack_archive,
};
