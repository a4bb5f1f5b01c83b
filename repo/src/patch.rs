//! Unified diffs over in-memory repository trees: apply a (multi-file, git-style or plain)
//! patch, reverse one, and write the diff between two trees.

use std::collections::BTreeMap;
use std::sync::Arc;

use diffy::patch_set::{FileOperation, ParseOptions, PatchKind, PatchSet};

use crate::{RepoError, Result};

/// A repository as relative path (forward slashes) -> file contents.
pub type FileTree = BTreeMap<String, Arc<Vec<u8>>>;

/// A tree of text files from (repository-relative path, contents) pairs.
pub fn text_tree(files: &[(&str, &str)]) -> FileTree {
    files
        .iter()
        .map(|(path, contents)| (path.to_string(), Arc::new(contents.as_bytes().to_vec())))
        .collect()
}

/// One file's change in a patch, with the repository-relative paths resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// The file is created.
    Create(String),
    /// The file is deleted.
    Delete(String),
    /// The file is modified (or renamed from `from` to `to`).
    Modify {
        /// Path before.
        from: String,
        /// Path after.
        to: String,
    },
}

impl FileChange {
    /// The path after the change (the deleted path for deletions).
    pub fn path(&self) -> &str {
        match self {
            FileChange::Create(p) | FileChange::Delete(p) => p,
            FileChange::Modify { to, .. } => to,
        }
    }
}

/// Strips git's `a/` / `b/` prefix and checks that the path stays inside the repository;
/// `.` components are dropped (`./pkg/./m.py` is `pkg/m.py`), so one file has one name.
fn clean_path(raw: &str, prefix: &str) -> Result<String> {
    let raw = raw.trim();
    let stripped = raw.strip_prefix(prefix).unwrap_or(raw);
    let parts: Vec<&str> = stripped.split('/').filter(|part| *part != ".").collect();
    if stripped.starts_with('/')
        || stripped.contains('\\')
        || parts.is_empty()
        || parts.iter().any(|part| *part == ".." || part.is_empty())
    {
        return Err(RepoError::Patch(format!(
            "path {raw:?} is not a relative path inside the repository"
        )));
    }
    Ok(parts.join("/"))
}

fn parse(patch: &str) -> Result<Vec<(FileChange, diffy::Patch<'_, str>)>> {
    let mut out = Vec::new();
    let options = if patch.lines().any(|l| l.starts_with("diff --git ")) {
        ParseOptions::gitdiff()
    } else {
        ParseOptions::unidiff()
    };
    for file in PatchSet::parse(patch, options) {
        let file = file.map_err(|e| RepoError::Patch(format!("cannot parse the diff: {e}")))?;
        // git diffs prefix both sides; plain `diff -u` output does not.
        let (a, b) = match file.operation() {
            FileOperation::Modify { original, modified } => {
                if original.starts_with("a/") && modified.starts_with("b/") {
                    ("a/", "b/")
                } else {
                    ("", "")
                }
            }
            _ => ("a/", "b/"),
        };
        let change = match file.operation() {
            FileOperation::Create(p) => FileChange::Create(clean_path(p, b)?),
            FileOperation::Delete(p) => FileChange::Delete(clean_path(p, a)?),
            FileOperation::Modify { original, modified } => FileChange::Modify {
                from: clean_path(original, a)?,
                to: clean_path(modified, b)?,
            },
            FileOperation::Rename { from, to } => FileChange::Modify {
                from: clean_path(from, a)?,
                to: clean_path(to, b)?,
            },
            FileOperation::Copy { .. } => {
                return Err(RepoError::Patch("copy operations are not supported".into()));
            }
        };
        let text = match file.into_patch() {
            PatchKind::Text(p) => p,
            PatchKind::Binary(_) => {
                return Err(RepoError::Patch(format!(
                    "{}: binary patches are not supported",
                    change.path()
                )));
            }
        };
        out.push((change, text));
    }
    Ok(out)
}

/// The files a patch touches, in patch order.
pub fn changed_files(patch: &str) -> Result<Vec<FileChange>> {
    Ok(parse(patch)?.into_iter().map(|(c, _)| c).collect())
}

/// Applies `patch` to `tree` in place; returns the paths it wrote or removed. On error the tree
/// is left unchanged.
pub fn apply(tree: &mut FileTree, patch: &str) -> Result<Vec<String>> {
    // An empty diff changes nothing (a task over a repository already in its buggy state).
    if patch.trim().is_empty() {
        return Ok(Vec::new());
    }
    let files = parse(patch)?;
    if files.is_empty() && !patch.trim().is_empty() {
        return Err(RepoError::Patch("no file changes found in the diff".into()));
    }
    let mut staged = tree.clone();
    let mut touched = Vec::new();
    for (change, hunks) in files {
        match &change {
            FileChange::Create(path) => {
                if staged.contains_key(path) {
                    return Err(RepoError::Patch(format!(
                        "{path}: created but already exists"
                    )));
                }
                let content = diffy::apply("", &hunks)
                    .map_err(|e| RepoError::Patch(format!("{path}: {e}")))?;
                staged.insert(path.clone(), Arc::new(content.into_bytes()));
            }
            FileChange::Delete(path) => {
                if staged.remove(path).is_none() {
                    return Err(RepoError::Patch(format!(
                        "{path}: deleted but does not exist"
                    )));
                }
            }
            FileChange::Modify { from, to } => {
                let Some(old) = staged.get(from) else {
                    return Err(RepoError::Patch(format!("{from}: no such file")));
                };
                let old = std::str::from_utf8(old)
                    .map_err(|_| RepoError::Patch(format!("{from}: not a UTF-8 text file")))?;
                let new = diffy::apply(old, &hunks)
                    .map_err(|e| RepoError::Patch(format!("{from}: does not apply: {e}")))?;
                if from != to {
                    staged.remove(from);
                    touched.push(from.clone());
                }
                staged.insert(to.clone(), Arc::new(new.into_bytes()));
            }
        }
        touched.push(change.path().to_string());
    }
    *tree = staged;
    Ok(touched)
}

/// The reverse of `patch` (undoes it), as git-style text.
pub fn reverse(patch: &str) -> Result<String> {
    let mut out = String::new();
    for (change, hunks) in parse(patch)? {
        let (old, new) = match &change {
            FileChange::Create(p) => (None, Some(p.as_str())),
            FileChange::Delete(p) => (Some(p.as_str()), None),
            FileChange::Modify { from, to } => (Some(from.as_str()), Some(to.as_str())),
        };
        let reversed = hunks.reverse();
        write_file_diff(&mut out, new, old, &reversed);
    }
    Ok(out)
}

/// `prefix` + `path` as git writes it in a diff: in double quotes with C escapes when the path
/// holds a control character, a double quote or a backslash (otherwise a parser must refuse
/// it: such a name cannot stand unquoted in a header line).
fn git_path(prefix: &str, path: &str) -> String {
    let needs_quoting = |b: u8| b < 0x20 || b == 0x7f || b == b'"' || b == b'\\';
    if !path.bytes().any(needs_quoting) {
        return format!("{prefix}{path}");
    }
    let mut quoted = format!("\"{prefix}");
    for c in path.chars() {
        match c {
            '\u{7}' => quoted.push_str("\\a"),
            '\u{8}' => quoted.push_str("\\b"),
            '\t' => quoted.push_str("\\t"),
            '\n' => quoted.push_str("\\n"),
            '\u{b}' => quoted.push_str("\\v"),
            '\u{c}' => quoted.push_str("\\f"),
            '\r' => quoted.push_str("\\r"),
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            c if c.is_ascii() && needs_quoting(c as u8) => {
                quoted.push_str(&format!("\\{:03o}", c as u8));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

fn write_file_diff(
    out: &mut String,
    old: Option<&str>,
    new: Option<&str>,
    patch: &diffy::Patch<'_, str>,
) {
    let a = old.map_or("/dev/null".to_string(), |p| git_path("a/", p));
    let b = new.map_or("/dev/null".to_string(), |p| git_path("b/", p));
    let shown_a = git_path("a/", old.or(new).unwrap_or_default());
    let shown_b = git_path("b/", new.or(old).unwrap_or_default());
    out.push_str(&format!("diff --git {shown_a} {shown_b}\n"));
    if old.is_none() {
        out.push_str("new file mode 100644\n");
    } else if new.is_none() {
        out.push_str("deleted file mode 100644\n");
    }
    out.push_str(&format!("--- {a}\n+++ {b}\n"));
    let body = patch.to_string();
    // diffy writes its own `---`/`+++` header lines first; keep only the hunks.
    let hunks = body
        .find("\n@@")
        .map(|i| &body[i + 1..])
        .unwrap_or_else(|| if body.starts_with("@@") { &body } else { "" });
    out.push_str(hunks);
    if !out.ends_with('\n') {
        out.push('\n');
    }
}

/// The git-style diff that turns `before` into `after` (text files only; a binary file that
/// differs is named in a comment line), with `context` lines around each change.
pub fn diff_trees(before: &FileTree, after: &FileTree, context: usize) -> String {
    let mut out = String::new();
    let mut options = diffy::DiffOptions::new();
    options.set_context_len(context);
    let paths: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for path in paths {
        let old = before.get(path);
        let new = after.get(path);
        if old == new {
            continue;
        }
        let old_text = old.map(|b| std::str::from_utf8(b));
        let new_text = new.map(|b| std::str::from_utf8(b));
        match (old_text, new_text) {
            (Some(Err(_)), _) | (_, Some(Err(_))) => {
                out.push_str(&format!("# binary file {path} differs\n"));
            }
            (old_text, new_text) => {
                let old_text = old_text.and_then(|r| r.ok());
                let new_text = new_text.and_then(|r| r.ok());
                let patch = options.create_patch(old_text.unwrap_or(""), new_text.unwrap_or(""));
                write_file_diff(
                    &mut out,
                    old.map(|_| path.as_str()),
                    new.map(|_| path.as_str()),
                    &patch,
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::text_tree as tree;
    use super::*;

    #[test]
    fn diff_apply_reverse_round_trip() {
        let before = tree(&[
            (
                "pkg/a.py",
                "def f(x):\n    return x + 1\n\n\ndef g():\n    return 2\n",
            ),
            ("pkg/gone.py", "X = 1\n"),
        ]);
        let after = tree(&[
            (
                "pkg/a.py",
                "def f(x):\n    return x - 1\n\n\ndef g():\n    return 2\n",
            ),
            ("pkg/new.py", "Y = 2\nZ = 3\n"),
        ]);
        let diff = diff_trees(&before, &after, 3);
        assert!(diff.contains("--- a/pkg/a.py"), "{diff}");
        assert!(diff.contains("+++ /dev/null"), "{diff}");
        let mut patched = before.clone();
        let touched = apply(&mut patched, &diff).expect("applies");
        assert_eq!(patched, after);
        assert_eq!(touched.len(), 3);
        let mut restored = after.clone();
        apply(&mut restored, &reverse(&diff).expect("reverses")).expect("reverse applies");
        assert_eq!(restored, before);
    }

    #[test]
    fn paths_with_control_characters_and_quotes_round_trip() {
        // Found by the fuzzer: a patch may name such a file (git quotes it); the diff of the
        // trees must quote it too, or it cannot be read back.
        let before = text_tree(&[("pkg/util.py", "X = 1\n")]);
        let mut after = before.clone();
        for name in [
            "pkg/a\u{1}\u{8}b c.py",
            "pkg/say \"hi\".py",
            "pkg/tab\there.py",
            "pkg/é\u{7f}.py",
        ] {
            after.insert(name.to_string(), b"Y = 2\n".to_vec().into());
        }
        let diff = diff_trees(&before, &after, 3);
        assert!(diff.contains("\"b/pkg/a\\001\\bb c.py\""), "{diff}");
        let mut again = before.clone();
        apply(&mut again, &diff).expect("the diff applies");
        assert_eq!(again, after);
        let names: Vec<String> = changed_files(&diff)
            .expect("parsed")
            .iter()
            .map(|c| c.path().to_string())
            .collect();
        assert_eq!(names.len(), 4, "{names:?}");
    }

    #[test]
    fn dot_components_name_one_file() {
        // Found by the fuzzer: `b/././m.py` was kept as `./m.py`, a second name for `m.py`.
        let mut tree = text_tree(&[]);
        let patch = "diff --git a/./pkg/./m.py b/./pkg/./m.py\nnew file mode 100644\n\
                     --- /dev/null\n+++ b/././pkg/./m.py\n@@ -0,0 +1 @@\n+X = 1\n";
        assert_eq!(apply(&mut tree, patch).expect("applies"), ["pkg/m.py"]);
        assert!(tree.contains_key("pkg/m.py"));
        let diff = diff_trees(&text_tree(&[]), &tree, 3);
        let mut again = text_tree(&[]);
        apply(&mut again, &diff).expect("the diff applies");
        assert_eq!(again, tree);
    }

    #[test]
    fn plain_unified_diffs_apply() {
        let mut t = tree(&[("m.py", "a\nb\nc\n")]);
        let diff = "--- m.py\n+++ m.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n";
        apply(&mut t, diff).expect("applies");
        assert_eq!(t["m.py"].as_slice(), b"a\nB\nc\n");
    }

    #[test]
    fn escaping_and_mismatched_patches_are_refused_without_change() {
        let original = tree(&[("m.py", "a\nb\nc\n")]);
        let mut t = original.clone();
        let escape = "--- a/../etc/passwd\n+++ b/../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n";
        let err = apply(&mut t, escape).expect_err("refused");
        assert!(err.to_string().contains("inside the repository"), "{err}");
        let wrong = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n a\n-x\n+y\n c\n";
        assert!(apply(&mut t, wrong).is_err());
        let missing = "--- a/n.py\n+++ b/n.py\n@@ -1 +1 @@\n-a\n+b\n";
        assert!(
            apply(&mut t, missing)
                .expect_err("refused")
                .to_string()
                .contains("no such file")
        );
        assert_eq!(t, original);
        assert!(apply(&mut t, "this is not a diff").is_err());
    }
}
