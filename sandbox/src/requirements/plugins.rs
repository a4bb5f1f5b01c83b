//! pytest plugins a suite uses without declaring them. Projects often list their test plugins
//! in a requirements file the sdist does not ship; their markers, fixtures and ini keys in the
//! tests and the pytest configuration still name the distribution. Without it, the suite's
//! async tests do not run, its `mocker` fixture is missing, and under `--strict-markers` or
//! `filterwarnings = error` an unknown marker stops collection.

use std::fs;
use std::path::Path;

use super::{Found, requirement_name};
use crate::layers::normalise;

/// Text in a test module or conftest that only a given plugin gives meaning to: the text, the
/// distribution, and what the text is. A fingerprint ending in `.` is an attribute use of a
/// fixture (`mocker.patch`); the others are whole names.
const FINGERPRINTS: &[(&str, &str, &str)] = &[
    (
        "pytest.mark.asyncio",
        "pytest-asyncio",
        "pytest-asyncio's marker",
    ),
    (
        "pytest_asyncio.",
        "pytest-asyncio",
        "pytest-asyncio's module",
    ),
    ("pytest.mark.anyio", "anyio", "anyio's pytest marker"),
    ("pytest.mark.trio", "pytest-trio", "pytest-trio's marker"),
    ("mocker.", "pytest-mock", "pytest-mock's mocker fixture"),
    (
        "freezer.",
        "pytest-freezer",
        "pytest-freezer's freezer fixture",
    ),
    (
        "httpx_mock.",
        "pytest-httpx",
        "pytest-httpx's httpx_mock fixture",
    ),
];

/// pytest ini keys that only a given plugin declares.
const INI_KEYS: &[(&str, &str)] = &[
    ("asyncio_mode", "pytest-asyncio"),
    ("asyncio_default_fixture_loop_scope", "pytest-asyncio"),
    ("trio_mode", "pytest-trio"),
];

/// Ini keys whose absence a plugin warns about (a deprecation warning, an error under
/// `filterwarnings = error`), with the value the plugin takes when unset. Where the layer gets
/// the plugin and the configuration leaves the key unset, that value is set explicitly: the
/// layer's version is the newest that fits (an undeclared plugin's, or one whose pin the layer
/// relaxed), not necessarily one that warned less.
const UNSET_WARNINGS: &[(&str, &str, &str)] = &[(
    "pytest-asyncio",
    "asyncio_default_fixture_loop_scope",
    "function",
)];

/// Files that hold pytest configuration.
const CONFIG_FILES: &[&str] = &[
    "pytest.ini",
    ".pytest.ini",
    "setup.cfg",
    "tox.ini",
    "pyproject.toml",
];

/// Adds the plugins the tests and the pytest configuration use but no declaration names.
pub(crate) fn collect(root: &Path, found: &mut Found) {
    let mut uses: Vec<(&str, String)> = Vec::new();
    let configs: Vec<(&str, String)> = CONFIG_FILES
        .iter()
        .filter_map(|name| Some((*name, fs::read_to_string(root.join(name)).ok()?)))
        .collect();
    let sets = |text: &str, key: &str| {
        text.lines().any(|line| {
            line.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
    };
    for (name, text) in &configs {
        for (key, distribution) in INI_KEYS {
            if sets(text, key) {
                uses.push((distribution, format!("{name} sets {key}")));
            }
        }
    }
    for (rel, text) in super::scan::read_sources(root, super::scan::test_sources(root)) {
        for (fingerprint, distribution, what) in FINGERPRINTS {
            if mentions(&text, fingerprint) {
                uses.push((distribution, format!("{rel} uses {what}")));
            }
        }
    }
    for (distribution, why) in uses {
        let declared = found
            .items
            .iter()
            .any(|d| normalise(&requirement_name(&d.requirement)) == normalise(distribution));
        if declared {
            continue;
        }
        found.add(distribution, &format!("undeclared test plugin: {why}"));
    }
    for (plugin, key, default) in UNSET_WARNINGS {
        let present = found
            .items
            .iter()
            .any(|d| normalise(&requirement_name(&d.requirement)) == *plugin);
        if present && !configs.iter().any(|(_, text)| sets(text, key)) {
            found
                .pytest_args
                .extend(["-o".to_string(), format!("{key}={default}")]);
        }
    }
}

/// Whether `text` uses `fingerprint` as a name of its own: not as the tail of a longer name
/// (`self.mocker.`), and, for a whole name, not as the head of one (`pytest.mark.asyncio_x`).
fn mentions(text: &str, fingerprint: &str) -> bool {
    let is_name_char = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(fingerprint).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + fingerprint.len()..].chars().next();
        !before.is_some_and(|c| is_name_char(c) || c == '.')
            && (fingerprint.ends_with('.') || !after.is_some_and(is_name_char))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_whole_names() {
        assert!(mentions(
            "@pytest.mark.asyncio\nasync def test_x():",
            "pytest.mark.asyncio"
        ));
        assert!(!mentions(
            "@pytest.mark.asyncio_cooperative",
            "pytest.mark.asyncio"
        ));
        assert!(mentions(
            "def test_x(mocker):\n    mocker.patch('a')",
            "mocker."
        ));
        assert!(!mentions("self.mocker.patch('a')", "mocker."));
        assert!(!mentions("unittest_mocker.patch('a')", "mocker."));
    }

    #[test]
    fn undeclared_plugins_are_found_and_declared_ones_are_not_repeated() {
        let dir = crate::testing::write_repo(&[
            ("setup.cfg", "[tool:pytest]\nasyncio_mode = auto\n"),
            (
                "tests/test_a.py",
                "import pytest\n\n@pytest.mark.asyncio\nasync def test_a(mocker):\n    \
                     mocker.patch('os.getcwd')\n",
            ),
            (
                "docs/test_doc.py",
                "def test_d(freezer):\n    freezer.move_to('2020')\n",
            ),
        ]);
        let mut found = Found::default();
        found.add("pytest-mock>=3", "tox.ini [testenv] deps");
        collect(dir.path(), &mut found);
        let names: Vec<(&str, &str)> = found
            .items
            .iter()
            .map(|d| (d.requirement.as_str(), d.source.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("pytest-mock>=3", "tox.ini [testenv] deps"),
                (
                    "pytest-asyncio",
                    "undeclared test plugin: setup.cfg sets asyncio_mode"
                ),
            ]
        );
        assert_eq!(
            found.pytest_args,
            ["-o", "asyncio_default_fixture_loop_scope=function"]
        );

        // Declared (its pin relaxed by the layer) and the key unset: the same default.
        let dir = tempfile::tempdir().expect("tmp");
        let mut found = Found::default();
        found.add("pytest-asyncio==0.24.0", "requirements/tests.txt");
        collect(dir.path(), &mut found);
        assert_eq!(found.items.len(), 1);
        assert_eq!(
            found.pytest_args,
            ["-o", "asyncio_default_fixture_loop_scope=function"]
        );
        // Set by the project: left alone.
        fs::write(
            dir.path().join("pytest.ini"),
            "[pytest]\nasyncio_default_fixture_loop_scope = session\n",
        )
        .expect("write");
        let mut found = Found::default();
        found.add("pytest-asyncio", "tox.ini [testenv] deps");
        collect(dir.path(), &mut found);
        assert!(found.pytest_args.is_empty());
    }
}
