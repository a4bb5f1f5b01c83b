//! `pyproject.toml`: PEP 621 metadata, dependency groups, poetry, pdm and hatch tables, and
//! tox configuration embedded as `[tool.tox] legacy_tox_ini`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use toml::{Table, Value};

use super::{Found, Groups, Item, ini, is_test_word, tox};

const FILE: &str = "pyproject.toml";

/// Records the names the project goes by.
pub fn own_names(py: &Table, found: &mut Found) {
    for path in [&["project", "name"][..], &["tool", "poetry", "name"][..]] {
        if let Some(name) = lookup(py, path).and_then(Value::as_str) {
            found.own_name(name);
        }
    }
}

fn lookup<'a>(table: &'a Table, path: &[&str]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    let mut value = table.get(*first)?;
    for key in rest {
        value = value.as_table()?.get(*key)?;
    }
    Some(value)
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Adds every requirement `pyproject.toml` declares for running the tests.
pub fn collect(root: &Path, py: &Table, found: &mut Found, seen: &mut BTreeSet<PathBuf>) {
    for r in strings(lookup(py, &["project", "dependencies"])) {
        found.add(r, "pyproject.toml [project] dependencies");
    }
    let extras = optional_dependencies(py);
    extras.collect(found);
    if let Some(table) = lookup(py, &["dependency-groups"]).and_then(Value::as_table) {
        let mut groups = Groups::new(format!("{FILE} [dependency-groups]"));
        for (name, value) in table {
            let items = value
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| match v {
                            Value::String(s) => Some(Item::Requirement(s.clone())),
                            Value::Table(t) => t
                                .get("include-group")
                                .and_then(Value::as_str)
                                .map(|g| Item::Include(g.to_string())),
                            _ => None,
                        })
                        .collect()
                })
                .unwrap_or_default();
            groups.groups.push((name.clone(), items));
        }
        groups.collect(found);
    }
    collect_poetry(py, found);
    if let Some(table) = lookup(py, &["tool", "pdm", "dev-dependencies"]).and_then(Value::as_table)
    {
        let mut groups = Groups::new(format!("{FILE} [tool.pdm.dev-dependencies]"));
        for (name, value) in table {
            let items = strings(Some(value))
                .into_iter()
                .filter(|r| r.starts_with(|c: char| c.is_ascii_alphanumeric()))
                .map(Item::Requirement)
                .collect();
            groups.groups.push((name.clone(), items));
        }
        groups.collect(found);
    }
    if let Some(envs) = lookup(py, &["tool", "hatch", "envs"]).and_then(Value::as_table) {
        for (env, value) in envs {
            let Some(table) = value.as_table() else {
                continue;
            };
            if !(env == "default" || env.split(['-', '_']).any(is_test_word)) {
                continue;
            }
            for key in ["dependencies", "extra-dependencies"] {
                for r in strings(table.get(key)) {
                    found.add(r, &format!("{FILE} [tool.hatch.envs.{env}] {key}"));
                }
            }
            // `features` installs the project's own extras.
            for feature in strings(table.get("features")) {
                extras.expand(&feature, found, &mut BTreeSet::new());
            }
        }
    }
    if let Some(text) = lookup(py, &["tool", "tox", "legacy_tox_ini"]).and_then(Value::as_str) {
        match ini::Ini::parse(text) {
            Ok(embedded) => tox::collect(
                root,
                &embedded,
                "pyproject.toml [tool.tox] legacy_tox_ini",
                found,
                seen,
            ),
            Err(err) => found.note(format!(
                "skipped pyproject.toml [tool.tox] legacy_tox_ini: not valid INI ({err})"
            )),
        }
    }
}

fn optional_dependencies(py: &Table) -> Groups {
    let mut groups = Groups::new(format!("{FILE} [project.optional-dependencies]"));
    if let Some(table) = lookup(py, &["project", "optional-dependencies"]).and_then(Value::as_table)
    {
        for (name, value) in table {
            let items = strings(Some(value))
                .into_iter()
                .map(Item::Requirement)
                .collect();
            groups.groups.push((name.clone(), items));
        }
    }
    groups
}

fn collect_poetry(py: &Table, found: &mut Found) {
    let Some(poetry) = lookup(py, &["tool", "poetry"]).and_then(Value::as_table) else {
        return;
    };
    if let Some(deps) = poetry.get("dependencies").and_then(Value::as_table) {
        for (name, spec) in deps {
            if name == "python" || is_optional(spec) {
                continue;
            }
            if let Some(r) = poetry_requirement(name, spec) {
                found.add(r, &format!("{FILE} [tool.poetry.dependencies]"));
            }
        }
    }
    if let Some(deps) = poetry.get("dev-dependencies").and_then(Value::as_table) {
        for (name, spec) in deps {
            if let Some(r) = poetry_requirement(name, spec) {
                found.add(r, &format!("{FILE} [tool.poetry.dev-dependencies]"));
            }
        }
    }
    if let Some(groups_table) = poetry.get("group").and_then(Value::as_table) {
        let mut groups = Groups::new(format!("{FILE} [tool.poetry.group.{{}}.dependencies]"));
        for (group, value) in groups_table {
            let items = value
                .get("dependencies")
                .and_then(Value::as_table)
                .map(|deps| {
                    deps.iter()
                        .filter(|(name, _)| *name != "python")
                        .filter_map(|(name, spec)| poetry_requirement(name, spec))
                        .map(Item::Requirement)
                        .collect()
                })
                .unwrap_or_default();
            groups.groups.push((group.clone(), items));
        }
        groups.collect(found);
    }
}

fn is_optional(spec: &Value) -> bool {
    spec.get("optional")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A poetry dependency as a PEP 508-ish requirement: `name`, `name[extras]` or `name<spec>`.
/// Caret and tilde specs become the bare name (pip picks a version for the target); path,
/// git and URL dependencies are left out.
pub fn poetry_requirement(name: &str, spec: &Value) -> Option<String> {
    let (version, extras) = match spec {
        Value::String(v) => (Some(v.as_str()), Vec::new()),
        Value::Table(t) => {
            if ["path", "git", "url", "file"]
                .iter()
                .any(|k| t.contains_key(*k))
            {
                return None;
            }
            (
                t.get("version").and_then(Value::as_str),
                strings(t.get("extras")),
            )
        }
        // Several specs for different Pythons: any will do, pip picks the version.
        Value::Array(list) => {
            let first = poetry_requirement(name, list.first()?)?;
            let bare = first
                .split(['<', '>', '=', '!', '~'])
                .next()
                .unwrap_or(&first)
                .to_string();
            return Some(bare);
        }
        _ => return None,
    };
    let mut out = name.to_string();
    if !extras.is_empty() {
        out.push_str(&format!("[{}]", extras.join(",")));
    }
    let version = version.map(str::trim).unwrap_or("*");
    if version == "*" || version.is_empty() || version.starts_with('^') {
        return Some(out);
    }
    if version.starts_with('~') && !version.starts_with("~=") {
        return Some(out);
    }
    if version.starts_with(['<', '>', '=', '!', '~']) {
        out.push_str(&version.replace(' ', ""));
    } else if version.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        out.push_str("==");
        out.push_str(version);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(found: &Found) -> Vec<(String, String)> {
        crate::requirements::requirement_sources(&found.items)
    }

    fn run(text: &str) -> Found {
        let py: Table = toml::from_str(text).expect("toml");
        let mut found = Found::default();
        own_names(&py, &mut found);
        let dir = tempfile::tempdir().expect("tempdir");
        collect(dir.path(), &py, &mut found, &mut BTreeSet::new());
        found
    }

    #[test]
    fn extras_groups_and_self_references() {
        let found = run(r#"
[project]
name = "Demo"
dependencies = ["six"]
[project.optional-dependencies]
speed = ["ujson"]
checks = ["hypothesis", "demo[speed]"]
docs = ["sphinx"]
all = ["demo[checks]"]
[dependency-groups]
lint = ["ruff"]
dev = [{include-group = "unit"}, "toolz"]
unit = ["freezegun"]
"#);
        let extras = "pyproject.toml [project.optional-dependencies]";
        assert_eq!(
            pairs(&found),
            vec![
                ("six".into(), "pyproject.toml [project] dependencies".into()),
                ("hypothesis".into(), format!("{extras} checks")),
                ("ujson".into(), format!("{extras} speed")),
                (
                    "freezegun".into(),
                    "pyproject.toml [dependency-groups] unit".into()
                ),
                (
                    "toolz".into(),
                    "pyproject.toml [dependency-groups] dev".into()
                ),
            ]
        );
    }

    #[test]
    fn poetry_pdm_hatch_and_embedded_tox() {
        let found = run(r#"
[tool.poetry]
name = "demo"
[tool.poetry.dependencies]
python = "^3.8"
attrs = "^23.1"
rich = { version = ">=13", extras = ["jupyter"] }
local = { path = "../local" }
opt = { version = "*", optional = true }
[tool.poetry.dev-dependencies]
PyYAML = "6.0.1"
[tool.poetry.group.test.dependencies]
pytest-mock = [{ version = "^3.8", python = ">=3.8" }, { version = "^3.0", python = "<3.8" }]
[tool.poetry.group.docs.dependencies]
sphinx = "*"
[tool.pdm.dev-dependencies]
test = ["responses>=0.20", "-e file:///${PROJECT_ROOT}/sub"]
[tool.hatch.envs.default]
dependencies = ["toolz"]
[tool.hatch.envs.lint]
dependencies = ["black"]
[tool.tox]
legacy_tox_ini = """
[testenv]
deps = mock
"""
"#);
        assert_eq!(
            pairs(&found),
            vec![
                (
                    "attrs".into(),
                    "pyproject.toml [tool.poetry.dependencies]".into()
                ),
                (
                    "rich[jupyter]>=13".into(),
                    "pyproject.toml [tool.poetry.dependencies]".into()
                ),
                (
                    "PyYAML==6.0.1".into(),
                    "pyproject.toml [tool.poetry.dev-dependencies]".into()
                ),
                (
                    "pytest-mock".into(),
                    "pyproject.toml [tool.poetry.group.test.dependencies]".into()
                ),
                (
                    "responses>=0.20".into(),
                    "pyproject.toml [tool.pdm.dev-dependencies] test".into()
                ),
                (
                    "toolz".into(),
                    "pyproject.toml [tool.hatch.envs.default] dependencies".into()
                ),
                (
                    "mock".into(),
                    "pyproject.toml [tool.tox] legacy_tox_ini [testenv] deps".into()
                ),
            ]
        );
    }
}
