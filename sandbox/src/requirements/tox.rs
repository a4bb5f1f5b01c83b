//! tox configuration (`tox.ini`, `[testenv]` sections of `setup.cfg`, `legacy_tox_ini` in
//! `pyproject.toml`): the `deps` of the environments that run tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::ini::{Ini, list_items};
use super::{Found, include_target, is_test_word, read_included, requirement_line};

/// Whether a tox environment name says it runs the tests (`py311`, `pypy3`, `test-django`,
/// `unit`), as opposed to `lint`, `docs` or `type`, or environments of Pythons older than 3.8
/// (`py27`, `py33`), whose pins do not suit the sandbox's interpreter.
pub fn is_test_env(name: &str) -> bool {
    let old_python = name.split(['-', '_']).any(|factor| {
        let digits = factor.strip_prefix("py").unwrap_or("");
        let mut chars = digits.chars();
        match (chars.next(), chars.as_str()) {
            (Some('2'), _) => true,
            (Some('3'), minor) => minor.parse::<u32>().is_ok_and(|m| m < 8),
            _ => false,
        }
    });
    !old_python
        && name.split(['-', '_']).any(|factor| {
            let factor = factor.to_ascii_lowercase();
            factor.starts_with("py") && factor[2..].chars().all(|c| c.is_ascii_digit() || c == '.')
                || factor.starts_with("pypy")
                || is_test_word(&factor)
        })
}

/// Adds the `deps` of `[testenv]` and of each test environment of `ini` (named `label` in
/// sources), following `-r` includes inside the repository.
pub fn collect(
    root: &Path,
    ini: &Ini,
    label: &str,
    found: &mut Found,
    seen: &mut BTreeSet<PathBuf>,
) {
    let mut sections: Vec<&str> = Vec::new();
    if ini.get("testenv", "deps").is_some() {
        sections.push("testenv");
    }
    for section in ini.sections() {
        if let Some(env) = section.strip_prefix("testenv:")
            && is_test_env(env.trim())
            && !sections.contains(&section)
        {
            sections.push(section);
        }
    }
    for section in sections {
        let Some(raw) = ini.get(section, "deps") else {
            continue;
        };
        let source = format!("{label} [{section}] deps");
        let value = substitute(ini, raw, 0);
        for line in list_items(&value) {
            let line = strip_factors(&line);
            if let Some((target, constraint)) = include_target(line) {
                if constraint {
                    continue;
                }
                let path = target
                    .replace("{toxinidir}/", "")
                    .replace("{toxinidir}", ".");
                if !path.contains('{') {
                    read_included(root, &path, &source, found, seen);
                }
            } else if !line.contains('{')
                && let Some(requirement) = requirement_line(line)
            {
                found.add(requirement, &source);
            }
        }
    }
}

/// Replaces `{[section]key}` references with that key's value (nested up to a small depth).
fn substitute(ini: &Ini, value: &str, depth: usize) -> String {
    if depth > 5 || !value.contains("{[") {
        return value.to_string();
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("{[") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let parsed = after.find("]").and_then(|close| {
            let section = &after[..close];
            let tail = &after[close + 1..];
            let end = tail.find('}')?;
            Some((section, &tail[..end], &tail[end + 1..]))
        });
        match parsed {
            Some((section, key, tail)) => {
                if let Some(inner) = ini.get(section.trim(), key.trim()) {
                    out.push_str(&substitute(ini, inner, depth + 1));
                }
                rest = tail;
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// `py38,py39: foo` and `!py38: foo` both mean `foo` in some environment: keep `foo`.
fn strip_factors(line: &str) -> &str {
    if let Some((prefix, rest)) = line.split_once(':')
        && !prefix.is_empty()
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '!' | ',' | '-' | '_' | '.' | ' '))
        && !rest.starts_with("//")
        && !prefix.trim().contains(' ')
    {
        return rest.trim();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deps_with_factors_includes_and_substitutions() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("requirements-test.txt"),
            "freezegun\n-r ../outside.txt\n",
        )
        .expect("write");
        let ini = Ini::parse(
            "[tox]\nenvlist = py38,lint\n[base]\ndeps =\n    toolz\n    six\n\
             [testenv]\ndeps =\n    pytest\n    py38: mock\n    !py38: attrs>=20\n    \
             -r{toxinidir}/requirements-test.txt\n    {[base]deps}\n    {posargs}\n\
             [testenv:lint]\ndeps = flake8\n[testenv:py3-unit]\ndeps = responses # http\n",
        )
        .expect("parse");
        let mut found = Found::default();
        let mut seen = BTreeSet::new();
        collect(dir.path(), &ini, "tox.ini", &mut found, &mut seen);
        let got: Vec<(String, String)> = found
            .items
            .iter()
            .map(|d| (d.requirement.clone(), d.source.clone()))
            .collect();
        let env = "tox.ini [testenv] deps".to_string();
        assert_eq!(
            got,
            vec![
                ("pytest".into(), env.clone()),
                ("mock".into(), env.clone()),
                ("attrs>=20".into(), env.clone()),
                (
                    "freezegun".into(),
                    "requirements-test.txt (via tox.ini [testenv] deps)".into()
                ),
                ("toolz".into(), env.clone()),
                ("six".into(), env),
                ("responses".into(), "tox.ini [testenv:py3-unit] deps".into()),
            ]
        );
        assert!(found.notes.iter().any(|n| n.contains("outside")));
    }

    #[test]
    fn environment_names() {
        for name in [
            "py38",
            "py3",
            "pypy3",
            "py311-django42",
            "test",
            "unit-fast",
            "tests",
        ] {
            assert!(is_test_env(name), "{name}");
        }
        for name in [
            "lint",
            "docs",
            "type",
            "mypy",
            "pre-commit",
            "build",
            "pyright",
            "py33",
            "py27-django",
        ] {
            assert!(!is_test_env(name), "{name}");
        }
    }
}
