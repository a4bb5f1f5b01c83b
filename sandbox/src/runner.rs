//! The test runner a project declares: projects whose suites run with `python -m unittest`
//! are collected as unittest would collect them.
//!
//! The sandbox runs every suite with pytest. pytest also collects a unittest project's
//! `TestCase` classes, but its own collection goes further: any class named `Test*` and any
//! function named `test*` in `test_*.py` files. In a unittest suite those are helpers (a
//! `TestSuite` class with a constructor, a `test_data(path)` function), and pytest warns about
//! them or errors on their missing fixtures; under the warning filters such projects set
//! (`warnings.simplefilter("error")`), one warning stops the whole collection. When a project
//! declares unittest as its runner (tox, nox or make commands) and has no pytest
//! configuration of its own, the sandbox collects only `TestCase` classes from the files
//! unittest's discovery pattern names.

use std::fs;
use std::path::Path;

/// A project whose declared runner is unittest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnittestRunner {
    /// Where it is declared, e.g. `tox.ini`.
    pub source: String,
    /// The discovery pattern (`-p`; unittest's default `test*.py`).
    pub pattern: String,
}

impl UnittestRunner {
    /// The pytest options that collect as unittest would: `TestCase` classes (pytest's
    /// unittest support collects them whatever their name) in files matching the pattern;
    /// no plain test functions or other classes.
    pub fn pytest_args(&self) -> Vec<String> {
        [
            format!("python_files={}", self.pattern),
            "python_classes=".to_string(),
            "python_functions=".to_string(),
        ]
        .into_iter()
        .flat_map(|option| ["-o".to_string(), option])
        .collect()
    }
}

/// Files that declare how a project's tests are run, in the order they are read.
const RUNNER_FILES: &[&str] = &["tox.ini", "noxfile.py", "Makefile", "makefile"];

/// The unittest runner `root` declares, if any: a command running `-m unittest` in tox.ini,
/// noxfile.py or a makefile, in a project where no command runs pytest and pytest has no
/// configuration (`pytest.ini`, `[tool.pytest.ini_options]`, `[tool:pytest]`, tox.ini's
/// `[pytest]`, a root `conftest.py`).
pub fn declared_unittest(root: &Path) -> Option<UnittestRunner> {
    if configures_pytest(root) {
        return None;
    }
    let mut found = None;
    for name in RUNNER_FILES {
        let Ok(text) = fs::read_to_string(root.join(name)) else {
            continue;
        };
        let commands = command_lines(&text);
        if commands.iter().any(|line| runs_pytest(line)) {
            return None;
        }
        if found.is_none()
            && let Some(line) = commands.iter().find(|line| runs_unittest(line))
        {
            found = Some(UnittestRunner {
                source: (*name).to_string(),
                pattern: discovery_pattern(line).unwrap_or_else(|| "test*.py".to_string()),
            });
        }
    }
    found
}

fn configures_pytest(root: &Path) -> bool {
    let read = |name: &str| fs::read_to_string(root.join(name)).unwrap_or_default();
    root.join("pytest.ini").is_file()
        || root.join("conftest.py").is_file()
        || read("pyproject.toml").contains("[tool.pytest")
        || read("setup.cfg").contains("[tool:pytest]")
        || read("tox.ini").lines().any(|l| l.trim() == "[pytest]")
}

/// The lines of a runner file that may run tests: all but comments.
fn command_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

fn words(line: &str) -> Vec<&str> {
    line.split(|c: char| c.is_whitespace() || matches!(c, ',' | '"' | '\'' | '(' | ')' | '='))
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether a line runs pytest: `pytest` in command position (first, after `-m`, after a
/// `commands =` key or nox's `session.run(`), not as a dependency (`deps = pytest`).
fn runs_pytest(line: &str) -> bool {
    let words = words(line);
    words.iter().enumerate().any(|(i, word)| {
        let pytest = matches!(*word, "pytest" | "py.test") || word.ends_with("/pytest");
        pytest
            && (i == 0
                || matches!(words[i - 1], "-m" | "commands" | "session.run" | "exec")
                || words[i - 1].ends_with("python}"))
    })
}

fn runs_unittest(line: &str) -> bool {
    words(line)
        .windows(2)
        .any(|pair| pair[0] == "-m" && pair[1] == "unittest")
}

/// `-p PATTERN` / `--pattern PATTERN` of a `unittest discover` command.
fn discovery_pattern(line: &str) -> Option<String> {
    let words = words(line);
    words
        .windows(2)
        .find(|pair| matches!(pair[0], "-p" | "--pattern"))
        .map(|pair| pair[1].to_string())
        .filter(|p| p.ends_with(".py") && !p.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, text) in files {
            fs::write(dir.path().join(path), text).expect("write");
        }
        dir
    }

    #[test]
    fn unittest_commands_are_the_declared_runner_unless_pytest_is_configured() {
        let tox = "[tox]\nenvlist = py3\n\n[testenv]\ndeps = pyyaml\ncommands =\n    \
                   coverage run --source=pkg -m unittest discover {toxinidir}/tests\n";
        let found = declared_unittest(repo(&[("tox.ini", tox)]).path()).expect("unittest");
        assert_eq!(found.source, "tox.ini");
        assert_eq!(found.pattern, "test*.py");
        assert_eq!(
            found.pytest_args(),
            [
                "-o",
                "python_files=test*.py",
                "-o",
                "python_classes=",
                "-o",
                "python_functions="
            ]
        );

        let nox = "import nox\n\n@nox.session\ndef tests(session):\n    \
                   session.run(\"python\", \"-m\", \"unittest\", \"discover\", \"-p\", \"*_test.py\")\n";
        let found = declared_unittest(repo(&[("noxfile.py", nox)]).path()).expect("unittest");
        assert_eq!(
            (found.source.as_str(), found.pattern.as_str()),
            ("noxfile.py", "*_test.py")
        );

        let make = "test:\n\tpython -m unittest -v\n";
        assert!(declared_unittest(repo(&[("Makefile", make)]).path()).is_some());

        // pytest configured or run anywhere: a pytest project.
        for files in [
            vec![("tox.ini", tox), ("conftest.py", "")],
            vec![
                ("tox.ini", tox),
                ("pyproject.toml", "[tool.pytest.ini_options]\n"),
            ],
            vec![
                ("tox.ini", tox),
                ("setup.cfg", "[tool:pytest]\naddopts = -q\n"),
            ],
            vec![(
                "tox.ini",
                "[testenv]\ncommands = python -m unittest\n\n[pytest]\n",
            )],
            vec![("tox.ini", tox), ("Makefile", "test:\n\tpytest tests\n")],
            vec![("tox.ini", "[testenv]\ncommands = pytest {posargs}\n")],
            vec![(
                "noxfile.py",
                "session.run(\"pytest\")\nsession.run(\"python\", \"-m\", \"unittest\")\n",
            )],
            vec![],
        ] {
            assert_eq!(declared_unittest(repo(&files).path()), None, "{files:?}");
        }
        // pytest as a dependency does not make a pytest project.
        let deps = "[testenv]\ndeps = pytest\ncommands = python -m unittest\n";
        assert!(declared_unittest(repo(&[("tox.ini", deps)]).path()).is_some());
        // A commented-out command declares nothing.
        let commented = "[testenv]\ncommands =\n#   python -m unittest\n";
        assert_eq!(
            declared_unittest(repo(&[("tox.ini", commented)]).path()),
            None
        );
    }
}
