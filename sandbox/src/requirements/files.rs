//! Requirements files (`requirements-dev.txt`, `requirements/tests.in`, ...), with `-r`/`-c`
//! includes followed inside the repository.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::ini::strip_comment;
use super::{Found, is_test_word};

/// Directories searched for requirements files, besides the root.
const DIRS: &[&str] = &["requirements", "reqs", "ci", "tests", "test", ".ci"];

/// Files in `dir` (relative to `root`) whose names say they list test or development
/// requirements. Inside a `requirements`-like directory every name with a test-ish word counts;
/// at the root and in test directories the name must also mention requirements.
pub fn candidates(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in std::iter::once("").chain(DIRS.iter().copied()) {
        let Ok(entries) = fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .collect();
        names.sort();
        for name in names {
            let lower = name.to_ascii_lowercase();
            let Some(stem) = lower
                .strip_suffix(".txt")
                .or_else(|| lower.strip_suffix(".in"))
            else {
                continue;
            };
            let in_requirements_dir = matches!(dir, "requirements" | "reqs");
            let mentions_requirements = stem.contains("requirement") || stem.contains("reqs");
            let test_ish = stem
                .split(['-', '_', '.'])
                .any(|word| is_test_word(word) || word.starts_with("tests"));
            let accept = if in_requirements_dir {
                test_ish
            } else if matches!(dir, "tests" | "test") {
                mentions_requirements
            } else {
                mentions_requirements && test_ish
            };
            // A pinned `.txt` compiled from an `.in` beside it repeats it with every transitive
            // pin: the `.in` says what the project asked for.
            let compiled_from_in =
                lower.ends_with(".txt") && root.join(dir).join(format!("{stem}.in")).is_file();
            if accept && !compiled_from_in {
                out.push(Path::new(dir).join(&name));
            }
        }
    }
    out
}

/// Reads a requirements file (relative to `root`) and the files it includes, recording each
/// requirement with the file as its source (and `via`, the setting that named the file).
/// Includes outside the repository and missing files are skipped with a note; a file is read
/// once (`seen`), so include cycles end.
pub fn read(
    root: &Path,
    relative: &Path,
    via: Option<&str>,
    found: &mut Found,
    seen: &mut BTreeSet<PathBuf>,
) {
    let Some(clean) = clean_relative(relative) else {
        found.note(format!(
            "skipped {}: outside the repository",
            relative.display()
        ));
        return;
    };
    if !seen.insert(clean.clone()) {
        return;
    }
    let path = root.join(&clean);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) => {
            found.note(format!("skipped {}: {err}", clean.display()));
            return;
        }
    };
    let source = match via {
        Some(via) => format!("{} (via {via})", clean.display()),
        None => clean.display().to_string(),
    };
    let base = clean.parent().map(Path::to_path_buf).unwrap_or_default();
    for line in logical_lines(&text) {
        if let Some((include, constraint)) = include_target(&line) {
            // A constraints file only pins versions of what is required elsewhere.
            if !constraint {
                read(root, &base.join(include), via, found, seen);
            }
        } else if let Some(requirement) = requirement_line(&line) {
            found.add(requirement, &source);
        }
    }
}

/// Joins backslash continuations and strips comments.
fn logical_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut pending = String::new();
    for raw in text.lines() {
        let line = strip_comment(raw);
        if let Some(head) = line.trim_end().strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let done = std::mem::take(&mut pending);
        if !done.trim().is_empty() {
            lines.push(done.trim().to_string());
        }
    }
    if !pending.trim().is_empty() {
        lines.push(pending.trim().to_string());
    }
    lines
}

/// The file named by `-r x`, `-c x`, `--requirement=x`, `--constraint x` or `-rx`, and
/// whether it is a constraints file.
pub fn include_target(line: &str) -> Option<(String, bool)> {
    let line = line.trim();
    for flag in ["--requirement", "--constraint", "-r", "-c"] {
        if let Some(rest) = line.strip_prefix(flag) {
            let rest = rest.trim_start_matches('=').trim();
            if !(rest.is_empty() || flag.len() == 2 && rest.starts_with('-')) {
                return Some((rest.to_string(), flag.contains('c')));
            }
        }
    }
    None
}

/// The requirement a line names, or `None` for options, paths, URLs and editable installs.
pub fn requirement_line(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty()
        || line.starts_with('-')
        || line.starts_with('.')
        || line.starts_with('/')
        || line.starts_with('{')
        || line.contains("://")
        || line.contains(" @ ")
        || !line.starts_with(|c: char| c.is_ascii_alphanumeric())
    {
        return None;
    }
    // Hash options of pinned files (`--hash=sha256:...`) follow the requirement.
    let requirement = line.split(" --").next().unwrap_or(line).trim();
    Some(requirement.to_string())
}

/// `relative` with `.` removed and `..` applied, or `None` when it leaves the root.
pub fn clean_relative(relative: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn includes_are_followed_inside_the_repository_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fs::create_dir_all(root.join("requirements")).expect("mkdir");
        fs::write(
            root.join("requirements-dev.txt"),
            "-r requirements/tests.in\n-r ../../etc/passwd\n-c requirements/docs.txt\nblack  # formatter\n",
        )
        .expect("write");
        fs::write(
            root.join("requirements/tests.in"),
            "-r ../requirements-dev.txt\n--requirement=base.txt\nfreezegun>=1 \\\n  --hash=sha256:00\n-e .\nhttps://x/y.whl\n",
        )
        .expect("write");
        fs::write(root.join("requirements/base.txt"), "six\n").expect("write");
        fs::write(root.join("requirements/tests.txt"), "pinned==1\n").expect("write");
        fs::write(root.join("requirements/docs.txt"), "sphinx\n").expect("write");
        fs::write(root.join("requirements.txt"), "runtime\n").expect("write");
        assert_eq!(
            candidates(root),
            vec![
                PathBuf::from("requirements-dev.txt"),
                PathBuf::from("requirements/tests.in")
            ]
        );
        let mut found = Found::default();
        let mut seen = BTreeSet::new();
        read(
            root,
            Path::new("requirements-dev.txt"),
            None,
            &mut found,
            &mut seen,
        );
        let got: Vec<(String, String)> = found
            .items
            .iter()
            .map(|d| (d.requirement.clone(), d.source.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("six".to_string(), "requirements/base.txt".to_string()),
                (
                    "freezegun>=1".to_string(),
                    "requirements/tests.in".to_string()
                ),
                ("black".to_string(), "requirements-dev.txt".to_string()),
            ]
        );
        assert!(
            found.notes.iter().any(|n| n.contains("outside")),
            "{:?}",
            found.notes
        );
    }
}
