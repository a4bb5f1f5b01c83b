//! How to collect a suite that pytest's default patterns find nothing in: the repository's
//! Python files as the scans for test files see them, and the collection fallbacks tried in
//! turn (wider file patterns, unittest modules named otherwise, doctests).

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Whether the repository has Python files that look like tests but that pytest's default
/// `python_files` patterns (`test_*.py`, `*_test.py`) do not match: `test.py`, `tests.py`,
/// `testfoo.py`, `footests.py` (documentation and examples aside).
pub fn has_unmatched_test_files(root: &Path) -> bool {
    crate::workspace::walk_repo(root)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .any(|e| {
            let Some(name) = e.file_name().to_str() else {
                return false;
            };
            let Some(stem) = name.strip_suffix(".py") else {
                return false;
            };
            let in_docs = e.path().strip_prefix(root).ok().is_some_and(|rel| {
                rel.components()
                    .any(|c| matches!(c.as_os_str().to_str(), Some("docs" | "doc" | "examples")))
            });
            let default = stem.starts_with("test_") || stem.ends_with("_test");
            !in_docs && !default && (stem.starts_with("test") || stem.ends_with("tests"))
        })
}

/// The `python_files` patterns that also collect the files [`has_unmatched_test_files`] finds.
pub const WIDER_TEST_FILES: &str = "python_files=test_*.py *_test.py test*.py *tests.py";

/// A way to collect a suite in which pytest's default patterns found no tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionFallback {
    /// Extra pytest arguments: ini options and flags, never paths, so that runs of selected
    /// test ids stay selective.
    pub args: Vec<String>,
    /// What it does, for progress messages.
    pub note: String,
}

/// Ways to collect a suite that pytest's default patterns found nothing in, to try in order:
///
/// 1. test files named `test.py`, `tests.py`, `testfoo.py`, `footests.py`: wider
///    `python_files` patterns ([`WIDER_TEST_FILES`]);
/// 2. unittest modules named otherwise inside a `test`/`tests`/`testing` package (a suite
///    run as `python -m unittest pkg.tests`): those modules by name, from those directories
///    (`testpaths`);
/// 3. test files whose tests are doctests: those files with `--doctest-modules`.
///
/// Documentation and examples are left aside; paths with whitespace are skipped (ini values
/// are split on it).
pub fn collection_fallbacks(root: &Path) -> Vec<CollectionFallback> {
    let mut unittest_names: BTreeSet<String> = BTreeSet::new();
    let mut unittest_dirs: BTreeSet<String> = BTreeSet::new();
    let mut doctest_files: BTreeSet<String> = BTreeSet::new();
    let slashed = |path: &Path| path.to_string_lossy().replace('\\', "/");
    for file in python_files(root) {
        let (rel, stem, in_test_dir) = (&file.rel, file.stem.as_str(), file.in_test_dir);
        if slashed(rel).contains(char::is_whitespace) || matches!(stem, "conftest" | "setup") {
            continue;
        }
        let test_named =
            stem.starts_with("test") || stem.ends_with("tests") || stem.ends_with("_test");
        if !in_test_dir && !test_named {
            continue;
        }
        let Ok(text) = fs::read_to_string(&file.path) else {
            continue;
        };
        let default_pattern = stem.starts_with("test_") || stem.ends_with("_test");
        if in_test_dir && !default_pattern && !stem.starts_with('_') && defines_test_case(&text) {
            unittest_names.insert(format!("{stem}.py"));
            if let Some(parent) = rel.parent() {
                unittest_dirs.insert(slashed(parent));
            }
        }
        if text
            .lines()
            .any(|line| line.trim_start().starts_with(">>> "))
        {
            doctest_files.insert(slashed(rel));
        }
    }
    let joined = |set: BTreeSet<String>| set.into_iter().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    if has_unmatched_test_files(root) {
        out.push(CollectionFallback {
            args: vec!["-o".into(), WIDER_TEST_FILES.into()],
            note: "pytest found no test_*.py files: collecting test*.py and *tests.py too".into(),
        });
    }
    if !unittest_names.is_empty() {
        let (dirs, names) = (joined(unittest_dirs), joined(unittest_names));
        out.push(CollectionFallback {
            args: vec![
                "-o".into(),
                format!("python_files={names}"),
                "-o".into(),
                format!("testpaths={dirs}"),
            ],
            note: format!(
                "the unittest modules in {dirs} are not named test_*.py: collecting their \
                 TestCase classes ({names})"
            ),
        });
    }
    if !doctest_files.is_empty() {
        let files = joined(doctest_files);
        out.push(CollectionFallback {
            args: vec![
                "--doctest-modules".into(),
                "-o".into(),
                format!("testpaths={files}"),
            ],
            note: format!("the test files hold doctests: collecting them ({files})"),
        });
    }
    out
}

/// A Python file of the repository, as the scans for test files see it.
pub(crate) struct PythonFile {
    /// Its path.
    pub path: std::path::PathBuf,
    /// Its path relative to the repository.
    pub rel: std::path::PathBuf,
    /// Its name without `.py`.
    pub stem: String,
    /// Whether it sits in a `test`, `tests` or `testing` directory.
    pub in_test_dir: bool,
}

/// The repository's Python files outside `docs`, `doc` and `examples` directories.
pub(crate) fn python_files(root: &Path) -> Vec<PythonFile> {
    crate::workspace::walk_repo(root)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|entry| {
            let stem = entry.file_name().to_str()?.strip_suffix(".py")?.to_string();
            let rel = entry.path().strip_prefix(root).ok()?.to_path_buf();
            let dirs: Vec<String> = rel
                .parent()
                .map(|p| {
                    p.components()
                        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if dirs
                .iter()
                .any(|d| matches!(d.as_str(), "docs" | "doc" | "examples"))
            {
                return None;
            }
            let in_test_dir = dirs
                .iter()
                .any(|d| matches!(d.as_str(), "test" | "tests" | "testing"));
            Some(PythonFile {
                path: entry.path().to_path_buf(),
                rel,
                stem,
                in_test_dir,
            })
        })
        .collect()
}

/// Whether a module's text defines a unittest `TestCase` subclass (a line-by-line scan).
fn defines_test_case(text: &str) -> bool {
    text.lines().any(|line| {
        line.strip_prefix("class ")
            .and_then(|rest| rest.split_once('('))
            .is_some_and(|(_, bases)| bases.contains("TestCase"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository of empty files.
    fn tree(files: &[&str]) -> tempfile::TempDir {
        let empty: Vec<(&str, &str)> = files.iter().map(|file| (*file, "")).collect();
        crate::testing::write_repo(&empty)
    }

    #[test]
    fn test_files_pytest_would_not_collect_are_noticed() {
        assert!(has_unmatched_test_files(tree(&["pkg/tests.py"]).path()));
        assert!(has_unmatched_test_files(tree(&["test.py"]).path()));
        assert!(!has_unmatched_test_files(
            tree(&["tests/test_a.py", "a_test.py"]).path()
        ));
        assert!(!has_unmatched_test_files(
            tree(&["docs/tests.py", "pkg/core.py"]).path()
        ));
    }

    #[test]
    fn suites_pytest_finds_nothing_in_get_fallbacks_in_order() {
        let dir = tree(&["docs/tests.py", "pkg/core.py"]);
        assert_eq!(collection_fallbacks(dir.path()), vec![]);

        // `python -m unittest pkg.tests`: modules named for what they test.
        let dir = tree(&[
            "pkg/__init__.py",
            "pkg/tests/__init__.py",
            "pkg/tests/__main__.py",
            "pkg/tests/helpers.py",
        ]);
        let tests = dir.path().join("pkg/tests");
        let case = "import unittest\n\nclass CoreTest(unittest.TestCase):\n    pass\n";
        for file in ["core.py", "_private.py", "conftest.py"] {
            fs::write(tests.join(file), case).expect("write");
        }
        let fallbacks = collection_fallbacks(dir.path());
        assert_eq!(fallbacks.len(), 1, "{fallbacks:?}");
        assert_eq!(
            fallbacks[0].args,
            ["-o", "python_files=core.py", "-o", "testpaths=pkg/tests"]
        );

        // Doctests in a test file named otherwise than pytest's default: the wider patterns
        // first, then the doctests.
        let dir = tree(&["art/__init__.py", "art/tests/__init__.py", "docs/x.py"]);
        let doctest = "\"\"\"\n>>> 1 + 1\n2\n\"\"\"\n";
        fs::write(dir.path().join("art/tests/test.py"), doctest).expect("write");
        fs::write(dir.path().join("docs/x.py"), doctest).expect("write");
        let fallbacks = collection_fallbacks(dir.path());
        assert_eq!(fallbacks.len(), 2, "{fallbacks:?}");
        assert_eq!(fallbacks[0].args, ["-o", WIDER_TEST_FILES]);
        assert_eq!(
            fallbacks[1].args,
            ["--doctest-modules", "-o", "testpaths=art/tests/test.py"]
        );
    }
}
