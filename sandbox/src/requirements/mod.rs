//! Test requirements: where repositories declare them, and what a suite turned out to need.
//!
//! [`detect`] reads (never executes) the places real projects list what their tests need:
//! `pyproject.toml` (`[project]` dependencies, test-like extras and dependency groups, poetry,
//! pdm and hatch tables, embedded tox configuration), `setup.cfg`, `setup.py` (parsed, not
//! run), `tox.ini`, `noxfile.py` and test or development requirements files, and the pytest
//! plugins whose markers, fixtures or ini keys the tests use without declaring them. Each
//! requirement keeps the place it came from. The resolution loop of [`crate::Sandbox::prepare_repo`] then
//! adds distributions for modules the suite still fails to import ([`resolve`]); a
//! [`RequirementsReport`] tells the user what was found, added and left out, and why.

pub mod collection;
pub mod ini;
pub mod markers;
pub mod resolve;
mod scan;

mod files;
mod plugins;
mod pyproject;
mod setup_py;
mod tox;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::layers::normalise;

/// What the sandbox found, added and left out for a repository's test requirements.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequirementsReport {
    /// Every requirement detection found, with where it was declared.
    pub detected: Vec<DetectedRequirement>,
    /// Distributions the resolution loop added for modules the suite could not import.
    pub added: Vec<AddedRequirement>,
    /// Requirements that are not in the layer, and why (tooling, impure, not for this
    /// interpreter, the project itself).
    pub left_out: Vec<LeftOutRequirement>,
    /// Modules the suite imports that nothing could provide, and why.
    pub unresolved: Vec<UnresolvedModule>,
    /// Directories of the repository put on the import path because the suite imports a
    /// package that lives there (e.g. a `lib/` layout).
    #[serde(default)]
    pub import_roots: Vec<AddedImportRoot>,
    /// pytest arguments added because its default file patterns (`test_*.py`, `*_test.py`)
    /// found no tests: wider patterns for test files named otherwise (`tests.py`, `test.py`,
    /// `testfoo.py`), unittest modules of a tests package, or doctests in test files (see
    /// [`collection::collection_fallbacks`]).
    #[serde(default)]
    pub collection_args: Vec<String>,
}

/// A directory of the repository the resolution loop put on the import path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AddedImportRoot {
    /// The directory, relative to the repository root.
    pub path: String,
    /// The module found there.
    pub module: String,
    /// Who imports it.
    pub reason: String,
}

/// A requirement and the place that declares it (e.g. `tox.ini [testenv] deps`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DetectedRequirement {
    /// The PEP 508 requirement, as declared (poetry specs reduced to a name).
    pub requirement: String,
    /// Where it is declared.
    pub source: String,
}

/// A distribution added because the suite imports a module it provides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AddedRequirement {
    /// The distribution added to the layer.
    pub distribution: String,
    /// The top-level module the suite failed to import.
    pub module: String,
    /// Why, e.g. `tests/test_x.py imports dateutil`.
    pub reason: String,
}

/// A detected requirement that is not in the layer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LeftOutRequirement {
    /// The requirement as detected.
    pub requirement: String,
    /// Why it was left out.
    pub reason: String,
}

/// A module the suite imports that could not be provided.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnresolvedModule {
    /// The module name.
    pub module: String,
    /// Why it cannot be provided.
    pub reason: String,
}

/// What detection found in a repository.
#[derive(Debug, Clone, Default)]
pub struct Detection {
    /// Requirements in the order found, with their sources (unfiltered).
    pub found: Vec<DetectedRequirement>,
    /// Files skipped and why (malformed, unreadable, includes outside the repository).
    pub notes: Vec<String>,
    /// Normalised names the project itself goes by.
    pub own_names: Vec<String>,
    /// pytest arguments that go with what detection added: the default of an ini key that a
    /// plugin added undeclared warns about when unset (see `plugins`).
    pub pytest_args: Vec<String>,
}

/// Requirements being collected, with notes about skipped files.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub items: Vec<DetectedRequirement>,
    pub notes: Vec<String>,
    pub own_names: Vec<String>,
    pub pytest_args: Vec<String>,
}

impl Found {
    pub fn add(&mut self, requirement: impl Into<String>, source: &str) {
        let requirement = requirement.into().trim().to_string();
        if requirement.is_empty() || self.items.iter().any(|d| d.requirement == requirement) {
            return;
        }
        self.items.push(DetectedRequirement {
            requirement,
            source: source.to_string(),
        });
    }

    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// The text of the file `name` under `root`: `None` when there is no such file, and with a
    /// note when it exists but cannot be read.
    pub fn read_file(&mut self, root: &Path, name: &str) -> Option<String> {
        let path = root.join(name);
        if !path.is_file() {
            return None;
        }
        match fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(err) => {
                self.note(format!("skipped {name}: {err}"));
                None
            }
        }
    }

    pub fn own_name(&mut self, name: &str) {
        let name = normalise(name);
        if !name.is_empty() && !self.own_names.contains(&name) {
            self.own_names.push(name);
        }
    }

    fn is_own(&self, name: &str) -> bool {
        self.own_names.contains(&normalise(name))
    }
}

/// Distributions whose presence in an extra or group marks it as a test one.
const TEST_TOOLS: &[&str] = &[
    "pytest",
    "hypothesis",
    "mock",
    "nose",
    "nose2",
    "freezegun",
    "time-machine",
    "responses",
    "requests-mock",
    "respx",
    "pyfakefs",
    "testfixtures",
    "pretend",
    "flexmock",
    "parameterized",
    "ddt",
    "syrupy",
    "inline-snapshot",
    "webtest",
    "factory-boy",
    "faker",
    "testpath",
    "trustme",
];

/// Names of extras, groups and environments that hold what tests need.
const TEST_GROUP_NAMES: &[&str] = &[
    "test",
    "tests",
    "testing",
    "dev",
    "develop",
    "development",
    "all",
    "full",
    "unit",
    "unittest",
    "unittests",
    "check",
    "ci",
];

/// Whether a word of a file, extra or environment name says "tests" (or development).
pub(crate) fn is_test_word(word: &str) -> bool {
    TEST_GROUP_NAMES.contains(&word) || word.starts_with("test") || word.starts_with("unit")
}

/// Whether a requirement names a test tool (pytest, its plugins, hypothesis, mock, ...).
pub fn is_test_tool(requirement: &str) -> bool {
    let name = normalise(&requirement_name(requirement));
    name.starts_with("pytest") || TEST_TOOLS.contains(&name.as_str())
}

/// The distribution name at the start of a PEP 508 requirement string.
pub fn requirement_name(requirement: &str) -> String {
    requirement
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect()
}

/// The extras of `name[a,b]>=1`, if any.
fn requirement_extras(requirement: &str) -> Vec<String> {
    let (head, _) = markers::split_marker(requirement);
    let Some(open) = head.find('[') else {
        return Vec::new();
    };
    let Some(close) = head[open..].find(']') else {
        return Vec::new();
    };
    head[open + 1..open + close]
        .split(',')
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

/// One entry of an extra or group.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    /// A requirement string.
    Requirement(String),
    /// `{include-group = "x"}` of a dependency group.
    Include(String),
}

/// Named lists of requirements (extras, dependency groups, poetry groups), all from one table.
#[derive(Debug, Default)]
pub(crate) struct Groups {
    /// The table, as it appears in source names (`pyproject.toml [dependency-groups]`).
    pub table: String,
    /// Group name and entries, in file order.
    pub groups: Vec<(String, Vec<Item>)>,
}

impl Groups {
    pub fn new(table: impl Into<String>) -> Self {
        Groups {
            table: table.into(),
            groups: Vec::new(),
        }
    }

    /// Adds every requirement of each test-like group (by name or because it lists a test
    /// tool), expanding references to the project's own extras and included groups.
    pub fn collect(&self, found: &mut Found) {
        for (name, items) in &self.groups {
            let by_name = normalise(name).split('-').next().is_some_and(is_test_word)
                || is_test_word(&normalise(name));
            let lists_tool = items
                .iter()
                .any(|i| matches!(i, Item::Requirement(r) if is_test_tool(r)));
            if by_name || lists_tool {
                let mut seen = BTreeSet::new();
                self.expand(name, found, &mut seen);
            }
        }
    }

    pub fn expand(&self, name: &str, found: &mut Found, seen: &mut BTreeSet<String>) {
        if !seen.insert(normalise(name)) {
            return;
        }
        let Some((actual, items)) = self
            .groups
            .iter()
            .find(|(g, _)| normalise(g) == normalise(name))
        else {
            return;
        };
        let source = if self.table.contains("{}") {
            self.table.replace("{}", actual)
        } else {
            format!("{} {actual}", self.table)
        };
        for item in items {
            match item {
                Item::Include(group) => self.expand(group, found, seen),
                Item::Requirement(r) if found.is_own(&requirement_name(r)) => {
                    for extra in requirement_extras(r) {
                        self.expand(&extra, found, seen);
                    }
                }
                Item::Requirement(r) => found.add(r.clone(), &source),
            }
        }
    }
}

/// Finds a repository's declared requirements. Malformed `setup.cfg`, `tox.ini`, `setup.py` or
/// `noxfile.py` files are skipped with a note; `pyproject` is the already parsed
/// `pyproject.toml`.
pub fn detect(root: &Path, pyproject: Option<&toml::Table>) -> Detection {
    let mut found = Found::default();
    let setup_cfg = read_ini(root, "setup.cfg", &mut found);
    // The project's own names first: self-references in extras depend on them.
    if let Some(py) = pyproject {
        pyproject::own_names(py, &mut found);
    }
    if let Some(cfg) = &setup_cfg
        && let Some(name) = cfg.get("metadata", "name")
    {
        found.own_name(name);
    }
    let setup_py = setup_py::SetupPy::read(root, &mut found);
    if let Some(setup) = &setup_py
        && let Some(name) = &setup.name
    {
        found.own_name(name);
    }
    let mut seen_files = BTreeSet::new();
    if let Some(py) = pyproject {
        pyproject::collect(root, py, &mut found, &mut seen_files);
    }
    if let Some(cfg) = &setup_cfg {
        collect_setup_cfg(cfg, &mut found);
        tox::collect(root, cfg, "setup.cfg", &mut found, &mut seen_files);
    }
    if let Some(setup) = &setup_py {
        setup.collect(&mut found);
    }
    if let Some(tox_ini) = read_ini(root, "tox.ini", &mut found) {
        tox::collect(root, &tox_ini, "tox.ini", &mut found, &mut seen_files);
    }
    setup_py::collect_noxfile(root, &mut found, &mut seen_files);
    for file in files::candidates(root) {
        files::read(root, &file, None, &mut found, &mut seen_files);
    }
    plugins::collect(root, &mut found);
    Detection {
        found: found.items,
        notes: found.notes,
        own_names: found.own_names,
        pytest_args: found.pytest_args,
    }
}

fn read_ini(root: &Path, name: &str, found: &mut Found) -> Option<ini::Ini> {
    let text = found.read_file(root, name)?;
    match ini::Ini::parse(&text) {
        Ok(ini) => Some(ini),
        Err(err) => {
            found.note(format!("skipped {name}: not a valid INI file ({err})"));
            None
        }
    }
}

fn collect_setup_cfg(cfg: &ini::Ini, found: &mut Found) {
    for key in ["install_requires", "tests_require"] {
        if let Some(value) = cfg.get("options", key) {
            for item in ini::list_items(value) {
                found.add(item, &format!("setup.cfg [options] {key}"));
            }
        }
    }
    let mut groups = Groups::new("setup.cfg [options.extras_require]");
    for (name, value) in cfg.keys("options.extras_require") {
        let items = ini::list_items(value)
            .into_iter()
            .flat_map(|line| {
                // A one-line value may list several requirements separated by commas.
                if line.contains(',') && !line.contains(';') && !line.contains('[') {
                    line.split(',').map(|s| s.trim().to_string()).collect()
                } else {
                    vec![line]
                }
            })
            .filter(|s| !s.is_empty())
            .map(Item::Requirement)
            .collect();
        groups.groups.push((name.to_string(), items));
    }
    groups.collect(found);
}

/// Requirements files that a tox or nox configuration names, read through [`files::read`].
pub(crate) fn read_included(
    root: &Path,
    relative: &str,
    via: &str,
    found: &mut Found,
    seen: &mut BTreeSet<PathBuf>,
) {
    files::read(root, Path::new(relative), Some(via), found, seen);
}

pub(crate) use files::{include_target, requirement_line};

/// Each requirement with its source, in order: what the detectors' tests compare.
#[cfg(test)]
pub(crate) fn requirement_sources(found: &[DetectedRequirement]) -> Vec<(String, String)> {
    found
        .iter()
        .map(|d| (d.requirement.clone(), d.source.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(detection: &Detection) -> Vec<(String, String)> {
        requirement_sources(&detection.found)
    }

    #[test]
    fn setup_cfg_extras_by_name_and_by_tool_with_self_references() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join("setup.cfg"),
            "[metadata]\nname = demo\n[options]\ninstall_requires =\n    six\n\
             tests_require = nose2\n[options.extras_require]\nspeed = ujson\n\
             checks =\n    pytest\n    toolz\n    demo[speed]\ndocs = sphinx\n",
        )
        .expect("write");
        let detection = detect(dir.path(), None);
        assert_eq!(
            pairs(&detection),
            vec![
                ("six".into(), "setup.cfg [options] install_requires".into()),
                ("nose2".into(), "setup.cfg [options] tests_require".into()),
                (
                    "pytest".into(),
                    "setup.cfg [options.extras_require] checks".into()
                ),
                (
                    "toolz".into(),
                    "setup.cfg [options.extras_require] checks".into()
                ),
                (
                    "ujson".into(),
                    "setup.cfg [options.extras_require] speed".into()
                ),
            ]
        );
        assert_eq!(detection.own_names, vec!["demo".to_string()]);
    }

    #[test]
    fn malformed_side_files_are_skipped_with_a_note() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("setup.cfg"), "install_requires = six\n").expect("write");
        fs::write(dir.path().join("tox.ini"), "[testenv\ndeps = x\n").expect("write");
        fs::write(dir.path().join("setup.py"), "setup(tests_require=[\n").expect("write");
        fs::write(dir.path().join("requirements-test.txt"), "freezegun\n").expect("write");
        let detection = detect(dir.path(), None);
        assert_eq!(
            pairs(&detection),
            vec![("freezegun".into(), "requirements-test.txt".into())]
        );
        assert!(
            detection.notes.iter().any(|n| n.contains("setup.cfg"))
                && detection.notes.iter().any(|n| n.contains("tox.ini")),
            "{:?}",
            detection.notes
        );
    }

    #[test]
    fn names_and_extras() {
        assert_eq!(requirement_name("mock>=4; python_version<'3.8'"), "mock");
        assert_eq!(
            requirement_extras("demo[test, extra]>=1; python_version>'3'"),
            vec!["test".to_string(), "extra".to_string()]
        );
        assert!(is_test_tool("pytest-mock>=3"));
        assert!(is_test_tool("Hypothesis"));
        assert!(!is_test_tool("requests"));
    }
}
