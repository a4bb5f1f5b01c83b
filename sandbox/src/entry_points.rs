//! The project's own pytest plugins. A pytest plugin package registers itself through a
//! `pytest11` entry point when it is installed, and its tests rely on that: its fixtures,
//! options and hooks, also inside the sessions `pytester` starts. The sandbox does not install
//! the project, so its entry points are read from where the source declares them
//! (`pyproject.toml`, `setup.cfg`, or the `entry_points.txt` of an sdist's `.egg-info`) and the
//! guest gets them as the metadata of the installed project.

use std::fs;
use std::path::Path;

use crate::requirements::ini::Ini;

/// The entry-point group pytest loads plugins from.
pub const PYTEST_GROUP: &str = "pytest11";

/// The project's `pytest11` entry points (`name`, `module[:object]`), from the first place
/// that declares any: `[project.entry-points.pytest11]`, `setup.cfg`'s
/// `[options.entry_points]`, then an `.egg-info/entry_points.txt` at the root or under `src/`.
pub fn pytest_plugins(root: &Path, pyproject: Option<&toml::Table>) -> Vec<(String, String)> {
    let from_pyproject: Vec<(String, String)> = pyproject
        .and_then(|p| {
            p.get("project")?
                .get("entry-points")?
                .get(PYTEST_GROUP)?
                .as_table()
        })
        .map(|table| {
            table
                .iter()
                .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    if !from_pyproject.is_empty() {
        return from_pyproject;
    }
    if let Some(setup_cfg) = read_ini(&root.join("setup.cfg"))
        && let Some(value) = setup_cfg.get("options.entry_points", PYTEST_GROUP)
    {
        let found: Vec<(String, String)> = value.lines().filter_map(entry).collect();
        if !found.is_empty() {
            return found;
        }
    }
    for dir in [root.to_path_buf(), root.join("src")] {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut infos: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "egg-info") && p.is_dir())
            .collect();
        infos.sort();
        for info in infos {
            if let Some(ini) = read_ini(&info.join("entry_points.txt")) {
                let found: Vec<(String, String)> = ini
                    .keys(PYTEST_GROUP)
                    .into_iter()
                    .map(|(name, value)| (name.to_string(), value.trim().to_string()))
                    .collect();
                if !found.is_empty() {
                    return found;
                }
            }
        }
    }
    Vec::new()
}

/// The name and version an sdist's `PKG-INFO` states.
pub fn pkg_info_distribution(root: &Path) -> Option<(String, String)> {
    let text = fs::read_to_string(root.join("PKG-INFO")).ok()?;
    // The headers end at the first blank line (the description follows).
    let headers = text.split("\n\n").next().unwrap_or_default();
    let field = |key: &str| {
        headers.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim().eq_ignore_ascii_case(key)).then(|| v.trim().to_string())
        })
    };
    let (name, version) = (field("Name")?, field("Version")?);
    (!name.is_empty() && !version.is_empty()).then_some((name, version))
}

/// The `entry_points.txt` of an installed distribution with these `pytest11` entry points.
pub fn entry_points_txt(plugins: &[(String, String)]) -> String {
    let mut text = format!("[{PYTEST_GROUP}]\n");
    for (name, value) in plugins {
        text.push_str(&format!("{name} = {value}\n"));
    }
    text
}

fn read_ini(path: &Path) -> Option<Ini> {
    Ini::parse(&fs::read_to_string(path).ok()?).ok()
}

/// `name = module:object` from one line of a setup.cfg value.
fn entry(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once('=')?;
    let (name, value) = (name.trim(), value.trim());
    (!name.is_empty() && !value.is_empty()).then(|| (name.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugin_packages_entry_points_are_found_where_its_source_declares_them() {
        let pair = |n: &str, v: &str| vec![(n.to_string(), v.to_string())];
        let dir = tempfile::tempdir().expect("tmp");
        let text = "[project]\nname = 'p'\n\n[project.entry-points.pytest11]\n\
                    datadir = 'pytest_datadir.plugin'\n";
        let pyproject: toml::Table = toml::from_str(text).expect("toml");
        assert_eq!(
            pytest_plugins(dir.path(), Some(&pyproject)),
            pair("datadir", "pytest_datadir.plugin")
        );

        let dir = crate::testing::write_repo(&[(
            "setup.cfg",
            "[options.entry_points]\npytest11 =\n    icdiff = pytest_icdiff\n",
        )]);
        assert_eq!(
            pytest_plugins(dir.path(), None),
            pair("icdiff", "pytest_icdiff")
        );

        let dir = crate::testing::write_repo(&[
            (
                "src/p.egg-info/entry_points.txt",
                "[console_scripts]\np = p:main\n\n[pytest11]\nassume = pytest_assume.plugin\n",
            ),
            (
                "PKG-INFO",
                "Metadata-Version: 2.1\nName: pytest-assume\nVersion: 2.4.3\n\nName: not this\n",
            ),
        ]);
        assert_eq!(
            pytest_plugins(dir.path(), None),
            pair("assume", "pytest_assume.plugin")
        );
        assert_eq!(
            pkg_info_distribution(dir.path()),
            Some(("pytest-assume".into(), "2.4.3".into()))
        );
        assert_eq!(
            entry_points_txt(&pair("assume", "pytest_assume.plugin")),
            "[pytest11]\nassume = pytest_assume.plugin\n"
        );

        let dir = tempfile::tempdir().expect("tmp");
        assert!(pytest_plugins(dir.path(), None).is_empty());
        assert_eq!(pkg_info_distribution(dir.path()), None);
    }
}
