//! A repository's test configuration: `frognano.toml`, or what its metadata says.
//!
//! ```toml
//! # frognano.toml at the repository root (every key optional)
//! [test]
//! requirements = ["mock", "freezegun"]   # pure-Python test requirements (replaces detection)
//! skip-requirements = ["pytest-cov"]     # detected requirements to leave out
//! args = ["-o", "addopts="]              # extra pytest arguments
//! ignore = ["tests/test_threads.py"]     # paths pytest should not collect
//! deselect = ["tests/test_x.py::test_y"] # node ids to deselect
//! python-path = ["lib"]                  # extra import roots, relative to the repo
//! timeout = 120                          # seconds
//! memory-mb = 1024
//! ```
//!
//! Without a `[test] requirements` list, requirements are detected from `pyproject.toml`
//! (`[project] dependencies`, the `test`/`tests`/`testing` extras and dependency groups) and
//! from common requirements files (`requirements-test.txt`, `test-requirements.txt`,
//! `requirements/test.txt`, `tests/requirements.txt`).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Result, SandboxError};
use crate::layers;

/// The `[test]` table of `frognano.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TestSection {
    /// Pure-Python test requirements; when present, detection is skipped.
    pub requirements: Option<Vec<String>>,
    /// Requirements to drop from the detected ones (by distribution name).
    #[serde(default)]
    pub skip_requirements: Vec<String>,
    /// Extra pytest arguments, placed before the caller's.
    #[serde(default)]
    pub args: Vec<String>,
    /// Paths pytest should not collect (`--ignore`).
    #[serde(default)]
    pub ignore: Vec<String>,
    /// Node ids to deselect (`--deselect`).
    #[serde(default)]
    pub deselect: Vec<String>,
    /// Extra import roots relative to the repository.
    #[serde(default)]
    pub python_path: Vec<String>,
    /// Wall-clock limit in seconds.
    pub timeout: Option<f64>,
    /// Memory cap in MiB.
    pub memory_mb: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    test: TestSection,
}

/// Everything the sandbox needs to know about a repository before running its tests.
#[derive(Debug, Clone)]
pub struct RepoConfig {
    /// The repository root on the host.
    pub root: PathBuf,
    /// The `[test]` section (defaults when there is no `frognano.toml`).
    pub test: TestSection,
    /// Requirements to provide in a read-only layer.
    pub requirements: Vec<String>,
    /// True when `requirements` came from detection rather than `frognano.toml`.
    pub requirements_detected: bool,
    /// Import roots relative to the repository (always includes `.`; `src` for src layouts).
    pub import_roots: Vec<String>,
    /// The project's distribution name and version, when `pyproject.toml` states them.
    pub distribution: Option<(String, String)>,
}

/// Name of the optional configuration file at a repository root.
pub const CONFIG_FILE: &str = "frognano.toml";

impl RepoConfig {
    /// Reads a repository's configuration. Fails on a missing directory or malformed files.
    pub fn load(root: &Path) -> Result<Self> {
        if !root.is_dir() {
            return Err(SandboxError::Repo {
                path: root.to_path_buf(),
                message: "not a directory".into(),
            });
        }
        let config_path = root.join(CONFIG_FILE);
        let file: ConfigFile = if config_path.is_file() {
            let text = read_text(&config_path)?;
            toml::from_str(&text).map_err(|e| SandboxError::Config {
                path: config_path.clone(),
                message: e.to_string(),
            })?
        } else {
            ConfigFile::default()
        };
        let test = file.test;
        let pyproject = load_pyproject(root)?;
        let distribution = pyproject.as_ref().and_then(|p| {
            let project = p.get("project")?;
            let name = project.get("name")?.as_str()?;
            let version = project.get("version")?.as_str()?;
            Some((name.to_string(), version.to_string()))
        });
        let (requirements, detected) = match &test.requirements {
            Some(list) => (list.clone(), false),
            None => (
                detect_requirements(root, pyproject.as_ref(), distribution.as_ref())?,
                true,
            ),
        };
        let skip: Vec<String> = test
            .skip_requirements
            .iter()
            .map(|s| layers::normalise(s))
            .collect();
        let requirements = requirements
            .into_iter()
            .filter(|r| {
                let name = layers::normalise(&requirement_name(r));
                !name.is_empty()
                    && !skip.contains(&name)
                    && !layers::provided_by_pytest_layer(&name)
            })
            .collect();
        let mut import_roots = vec![".".to_string()];
        if root.join("src").is_dir() {
            import_roots.push("src".to_string());
        }
        for extra in &test.python_path {
            let clean = Path::new(extra);
            if clean.is_absolute()
                || clean
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                return Err(SandboxError::Config {
                    path: config_path,
                    message: format!(
                        "python-path entry {extra:?} must be relative and inside the repository"
                    ),
                });
            }
            import_roots.push(extra.clone());
        }
        if let Some(t) = test.timeout
            && !(t.is_finite() && t > 0.0)
        {
            return Err(SandboxError::Config {
                path: config_path,
                message: format!("timeout must be a positive number of seconds, got {t}"),
            });
        }
        Ok(RepoConfig {
            root: root.to_path_buf(),
            test,
            requirements,
            requirements_detected: detected,
            import_roots,
            distribution,
        })
    }
}

impl RepoConfig {
    /// The default limits with the repository's `timeout` and `memory-mb` applied.
    pub fn limits(&self) -> frognano_core::Limits {
        let mut limits = frognano_core::Limits::default();
        if let Some(t) = self.test.timeout {
            limits.timeout_s = t;
        }
        if let Some(m) = self.test.memory_mb {
            limits.memory_mb = m;
        }
        limits
    }
}

fn read_text(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(SandboxError::io(format!("read {}", path.display())))
}

fn load_pyproject(root: &Path) -> Result<Option<toml::Table>> {
    let path = root.join("pyproject.toml");
    if !path.is_file() {
        return Ok(None);
    }
    let text = read_text(&path)?;
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| SandboxError::Config {
            path,
            message: e.to_string(),
        })
}

/// Development tools that test extras often list but a test run never needs (or that cannot
/// work without processes and threads). Left out of detected requirements; the pytest plugin
/// accepts and ignores the command-line options of the pytest plugins among them.
const TOOLING: &[&str] = &[
    "tox",
    "nox",
    "pre-commit",
    "virtualenv",
    "mypy",
    "pyright",
    "ruff",
    "black",
    "flake8",
    "pylint",
    "isort",
    "twine",
    "build",
    "towncrier",
    "codecov",
    "coveralls",
    "coverage",
    "pytest-cov",
    "pytest-xdist",
    "pytest-timeout",
    "pytest-benchmark",
    "wheel",
    "setuptools",
    "setuptools-scm",
    "hatchling",
    "flit-core",
    "pip",
];

fn is_tooling(name: &str) -> bool {
    let name = layers::normalise(name);
    TOOLING.contains(&name.as_str()) || name.starts_with("sphinx") || name.starts_with("types-")
}

const TEST_EXTRAS: &[&str] = &["test", "tests", "testing"];
const REQUIREMENT_FILES: &[&str] = &[
    "requirements-test.txt",
    "requirements_test.txt",
    "test-requirements.txt",
    "test_requirements.txt",
    "requirements-tests.txt",
    "requirements/test.txt",
    "requirements/tests.txt",
    "tests/requirements.txt",
];

fn detect_requirements(
    root: &Path,
    pyproject: Option<&toml::Table>,
    distribution: Option<&(String, String)>,
) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let strings = |value: Option<&toml::Value>| -> Vec<String> {
        value
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    if let Some(py) = pyproject {
        let project = py.get("project");
        found.extend(strings(project.and_then(|p| p.get("dependencies"))));
        let extras = project.and_then(|p| p.get("optional-dependencies"));
        let groups = py.get("dependency-groups");
        for key in TEST_EXTRAS {
            found.extend(strings(extras.and_then(|e| e.get(*key))));
            found.extend(strings(groups.and_then(|g| g.get(*key))));
        }
    }
    for file in REQUIREMENT_FILES {
        let path = root.join(file);
        if path.is_file() {
            found.extend(parse_requirements_file(&read_text(&path)?));
        }
    }
    let own = distribution.map(|(name, _)| layers::normalise(name));
    found.retain(|r| {
        let name = requirement_name(r);
        Some(layers::normalise(&name)) != own && !is_tooling(&name)
    });
    found.sort();
    found.dedup();
    Ok(found)
}

/// The lines of a requirements file that name packages (options, includes, paths and URLs
/// are left out).
pub fn parse_requirements_file(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split(" #").next().unwrap_or("").trim())
        .filter(|line| {
            !line.is_empty()
                && !line.starts_with('#')
                && !line.starts_with('-')
                && !line.starts_with('.')
                && !line.starts_with('/')
                && !line.contains("://")
        })
        .map(str::to_string)
        .collect()
}

/// The distribution name at the start of a PEP 508 requirement string.
pub fn requirement_name(requirement: &str) -> String {
    requirement
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirement_names() {
        assert_eq!(requirement_name("mock>=4; python_version<'3.8'"), "mock");
        assert_eq!(
            requirement_name("python-dateutil[extra]==2.9"),
            "python-dateutil"
        );
        assert_eq!(
            parse_requirements_file("# c\n-r base.txt\nsix\nfreezegun>=1 # why\n./local\n"),
            vec!["six".to_string(), "freezegun>=1".to_string()]
        );
    }

    #[test]
    fn detection_from_pyproject_and_config_override() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join("pyproject.toml"),
            "[project]\nname='demo'\nversion='1.0'\ndependencies=['six']\n\
             [project.optional-dependencies]\ntest=['pytest>=7','mock','demo[extra]','tox','pytest-cov']\n",
        )
        .expect("write");
        fs::create_dir(dir.path().join("src")).expect("mkdir");
        let config = RepoConfig::load(dir.path()).expect("load");
        assert_eq!(
            config.requirements,
            vec!["mock".to_string(), "six".to_string()]
        );
        assert!(config.requirements_detected);
        assert_eq!(
            config.import_roots,
            vec![".".to_string(), "src".to_string()]
        );
        assert_eq!(config.distribution, Some(("demo".into(), "1.0".into())));

        fs::write(
            dir.path().join(CONFIG_FILE),
            "[test]\nrequirements=['freezegun']\nargs=['-o','addopts=']\n",
        )
        .expect("write");
        let config = RepoConfig::load(dir.path()).expect("load");
        assert_eq!(config.requirements, vec!["freezegun".to_string()]);
        assert_eq!(
            config.test.args,
            vec!["-o".to_string(), "addopts=".to_string()]
        );
    }

    #[test]
    fn malformed_config_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(CONFIG_FILE), "[test]\nrequirments=['x']\n").expect("write");
        let err = RepoConfig::load(dir.path()).expect_err("unknown key");
        assert!(err.to_string().contains("requirments"), "{err}");
        fs::write(
            dir.path().join(CONFIG_FILE),
            "[test]\npython-path=['../etc']\n",
        )
        .expect("write");
        assert!(RepoConfig::load(dir.path()).is_err());
        assert!(RepoConfig::load(&dir.path().join("missing")).is_err());
    }
}
