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
//! A project whose declared runner is `python -m unittest` is collected as unittest would
//! (see [`crate::runner`]).
//!
//! Without a `[test] requirements` list, requirements are detected (see
//! [`crate::requirements::detect`]): `pyproject.toml` (`[project]` dependencies, test-like
//! extras and dependency groups, poetry, pdm and hatch tables, embedded tox configuration),
//! `setup.cfg`, `setup.py` (parsed, never run), `tox.ini`, `noxfile.py` and test or development
//! requirements files. Development tools, the project itself and requirements whose markers
//! exclude the sandbox's interpreter are left out, each with a reason.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::entry_points;
use crate::error::{Result, SandboxError};
use crate::layers;
use crate::requirements::{self, DetectedRequirement, LeftOutRequirement, markers};
use crate::runner::{self, UnittestRunner};

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
    /// The project's distribution name and version, when `pyproject.toml` (or an sdist's
    /// `PKG-INFO`) states them.
    pub distribution: Option<(String, String)>,
    /// The project's own pytest plugins (`pytest11` entry points: name, `module[:object]`),
    /// loaded in its runs as if it were installed (see [`crate::entry_points`]).
    pub pytest_plugins: Vec<(String, String)>,
    /// Every requirement detection found, with its source (empty when `frognano.toml` lists
    /// the requirements).
    pub detected: Vec<DetectedRequirement>,
    /// Detected requirements not in `requirements`, with the reason.
    pub left_out: Vec<LeftOutRequirement>,
    /// Files detection skipped, and why (malformed or unreadable).
    pub notes: Vec<String>,
    /// The project runs its tests with unittest (see [`crate::runner`]): they are collected as
    /// unittest would (its options are in `test.args`). None when `args` choose the
    /// collection patterns themselves.
    pub unittest_runner: Option<UnittestRunner>,
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
        let mut test = file.test;
        // A unittest project is collected as unittest would, unless its frognano.toml chooses
        // the collection patterns itself.
        let chooses_patterns = test.args.iter().any(|a| {
            ["python_files", "python_classes", "python_functions"]
                .iter()
                .any(|option| a.contains(option))
        });
        let unittest_runner = runner::declared_unittest(root).filter(|_| !chooses_patterns);
        if let Some(runner) = &unittest_runner {
            test.args.extend(runner.pytest_args());
        }
        let pyproject = load_pyproject(root)?;
        let distribution = pyproject
            .as_ref()
            .and_then(|p| {
                let project = p.get("project")?;
                let name = project.get("name")?.as_str()?;
                let version = project.get("version")?.as_str()?;
                Some((name.to_string(), version.to_string()))
            })
            .or_else(|| entry_points::pkg_info_distribution(root));
        let pytest_plugins = entry_points::pytest_plugins(root, pyproject.as_ref());
        let skip: Vec<String> = test
            .skip_requirements
            .iter()
            .map(|s| layers::normalise(s))
            .collect();
        let (requirements, was_detected, detected, left_out, notes) = match &test.requirements {
            Some(list) => {
                let requirements = list
                    .iter()
                    .filter(|r| {
                        let name = layers::normalise(&requirement_name(r));
                        !name.is_empty()
                            && !skip.contains(&name)
                            && !layers::provided_by_pytest_layer(&name)
                    })
                    .cloned()
                    .collect();
                (requirements, false, Vec::new(), Vec::new(), Vec::new())
            }
            None => {
                let detection = requirements::detect(root, pyproject.as_ref());
                test.args.extend(detection.pytest_args.iter().cloned());
                let (requirements, left_out) = select_requirements(&detection, &skip);
                (
                    requirements,
                    true,
                    detection.found,
                    left_out,
                    detection.notes,
                )
            }
        };
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
            requirements_detected: was_detected,
            import_roots,
            distribution,
            pytest_plugins,
            detected,
            left_out,
            notes,
            unittest_runner,
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
    // Lint and packaging checks run as pytest plugins (the jaraco family's among them): no
    // test needs them, and their dependency trees often have no pure-Python solution.
    "pytest-checkdocs",
    "pytest-enabler",
    "pytest-ruff",
    "pytest-mypy",
    "pytest-black",
    "pytest-flake8",
    "pytest-isort",
    "pytest-pylint",
    "pytest-perf",
    "wheel",
    "setuptools",
    "setuptools-scm",
    "hatchling",
    "flit-core",
    "pip",
    "pip-tools",
    "uv",
    "autopep8",
    "docformatter",
    "pydocstyle",
    "pycodestyle",
    "pyflakes",
    "doc8",
    "restructuredtext-lint",
    "astroid",
    "bandit",
    "check-manifest",
    "pyroma",
    "safety",
    "interrogate",
    "blacken-docs",
    "pyupgrade",
    "yapf",
    "covdefaults",
    "pytest-runner",
    "pytest-mypy-plugins",
    "pytest-sugar",
    "pytest-codspeed",
    "furo",
    "myst-parser",
    "readme-renderer",
    "ipython",
    "ipdb",
    "pdbpp",
    "pre-commit-uv",
];

fn is_tooling(name: &str) -> bool {
    let name = layers::normalise(name);
    TOOLING.contains(&name.as_str())
        || ["sphinx", "types-", "flake8-", "mkdocs", "tox-", "coverage-"]
            .iter()
            .any(|prefix| name.starts_with(prefix))
}

/// Whether a detection source lists the project's run-time dependencies (rather than test or
/// development extras).
fn is_runtime_source(source: &str) -> bool {
    [
        "[project] dependencies",
        "install_requires",
        "[tool.poetry.dependencies]",
    ]
    .iter()
    .any(|suffix| source.ends_with(suffix))
}

/// The requirements to fetch from what detection found, and those left out with a reason:
/// development tools, the project itself, what the pytest layer provides, `skip-requirements`,
/// and requirements whose markers exclude the sandbox's interpreter. One requirement per
/// distribution is kept (an unpinned one when there is a choice), in detection order.
fn select_requirements(
    detection: &requirements::Detection,
    skip: &[String],
) -> (Vec<String>, Vec<LeftOutRequirement>) {
    let mut kept: Vec<String> = Vec::new();
    let mut left_out = Vec::new();
    let mut leave = |requirement: &str, reason: &str| {
        if !left_out
            .iter()
            .any(|l: &LeftOutRequirement| l.requirement == requirement)
        {
            left_out.push(LeftOutRequirement {
                requirement: requirement.to_string(),
                reason: reason.to_string(),
            });
        }
    };
    // A tool the project's own code imports at run time (hatch-vcs depends on hatchling) is
    // a dependency, not tooling: the tests import it through the project.
    let runtime: BTreeSet<String> = detection
        .found
        .iter()
        .filter(|found| is_runtime_source(&found.source))
        .map(|found| layers::normalise(&requirement_name(&found.requirement)))
        .collect();
    for found in &detection.found {
        let requirement = found.requirement.as_str();
        let name = layers::normalise(&requirement_name(requirement));
        let (_, marker) = markers::split_marker(requirement);
        if name.is_empty() {
            leave(requirement, "not a requirement pip can fetch by name");
        } else if detection.own_names.contains(&name) {
            leave(
                requirement,
                "the project itself (its source is the workspace)",
            );
        } else if layers::provided_by_pytest_layer(&name) {
            leave(requirement, "provided by the sandbox's pytest layer");
        } else if skip.contains(&name) {
            leave(requirement, "listed in [test] skip-requirements");
        } else if is_tooling(&name) && !runtime.contains(&name) {
            leave(
                requirement,
                "a development tool that test runs do not need (or that needs processes)",
            );
        } else if let Some(reason) = requirements::resolve::cannot_run_in_wasi(&name) {
            leave(requirement, reason);
        } else if marker.is_some_and(markers::excludes_all_targets) {
            leave(
                requirement,
                "its environment marker excludes the sandbox's interpreter",
            );
        } else if let Some(at) = kept
            .iter()
            .position(|k| layers::normalise(&requirement_name(k)) == name)
        {
            // Prefer a requirement without an exact pin: old pins rarely suit new Pythons.
            if kept[at].contains("==") && !requirement.contains("==") {
                kept[at] = requirement.to_string();
            }
        } else {
            kept.push(requirement.to_string());
        }
    }
    kept.sort();
    (kept, left_out)
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
    requirements::requirement_name(requirement)
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
