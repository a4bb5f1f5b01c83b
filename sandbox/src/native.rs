//! Native pytest runs, for comparisons with the sandbox: the same suite, requirement layer,
//! arguments and results plugin, run by a host interpreter.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use frognano_core::{RunProfile, TestOutcome};

use crate::profile::GuestMarks;
use crate::{layers, workspace};

/// A native run's results: per-test outcomes, its wall-clock time (the whole process) and
/// where that time went.
#[derive(Debug, Clone)]
pub struct NativeRun {
    /// Node id -> outcome.
    pub outcomes: BTreeMap<String, TestOutcome>,
    /// Wall-clock seconds of the whole `python -m pytest` process.
    pub seconds: f64,
    /// The phases of the run, as for a sandboxed one; `startup_s` is everything before
    /// collection (interpreter start, pytest's import, plugins, conftests).
    pub profile: RunProfile,
}

/// Runs pytest natively with `python` on a copy of `repo` (never modified), with FrogNano's
/// plugin recording per-test outcomes: node id -> outcome. `extra_paths` go first on
/// PYTHONPATH (relative ones inside the copy: import roots; absolute ones: requirement layers);
/// `PYTHONHASHSEED` is fixed so that parametrize ids over sets are stable. An error says why no
/// outcome could be read (pytest missing, a run past `timeout_s`).
pub fn native_outcomes(
    repo: &Path,
    extra_paths: &[PathBuf],
    args: &[String],
    python: &str,
    timeout_s: f64,
) -> std::result::Result<BTreeMap<String, TestOutcome>, String> {
    native_run(repo, extra_paths, args, python, timeout_s).map(|run| run.outcomes)
}

/// [`native_outcomes`], with the run's time and profile.
pub fn native_run(
    repo: &Path,
    extra_paths: &[PathBuf],
    args: &[String],
    python: &str,
    timeout_s: f64,
) -> std::result::Result<NativeRun, String> {
    NativeSuite::new(repo, extra_paths, args, python)?.run(timeout_s)
}

/// A suite set up for repeated native runs: its own copy of the repository (whose bytecode
/// cache CPython keeps between runs, as the sandbox keeps its own), FrogNano's results plugin,
/// and the arguments and `PYTHONPATH` of [`native_outcomes`]. Each run is a whole
/// `python -m pytest` process, timed.
#[derive(Debug)]
pub struct NativeSuite {
    work: tempfile::TempDir,
    plugin: tempfile::TempDir,
    python: String,
    args: Vec<String>,
    python_path: std::ffi::OsString,
}

impl NativeSuite {
    /// Copies `repo` and writes the plugin; see [`native_outcomes`] for the arguments.
    pub fn new(
        repo: &Path,
        extra_paths: &[PathBuf],
        args: &[String],
        python: &str,
    ) -> std::result::Result<Self, String> {
        let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
        let work = tempfile::tempdir().map_err(|e| io("create a workspace", e))?;
        workspace::copy_repo(repo, work.path()).map_err(|e| e.to_string())?;
        let plugin = tempfile::tempdir().map_err(|e| io("create a plugin directory", e))?;
        std::fs::write(
            plugin.path().join(format!("{}.py", layers::PLUGIN_MODULE)),
            layers::PLUGIN_SOURCE,
        )
        .map_err(|e| io("write the plugin", e))?;
        std::fs::write(
            plugin
                .path()
                .join(format!("{}.py", layers::PYTEST_COMPAT_MODULE)),
            layers::PYTEST_COMPAT_SOURCE,
        )
        .map_err(|e| io("write the plugin's adaptations", e))?;
        let mut python_path = vec![plugin.path().to_path_buf()];
        python_path.extend(extra_paths.iter().map(|p| {
            if p.is_absolute() {
                p.clone()
            } else {
                work.path().join(p)
            }
        }));
        let python_path = std::env::join_paths(python_path).map_err(|e| e.to_string())?;
        Ok(NativeSuite {
            work,
            plugin,
            python: python.to_string(),
            args: args.to_vec(),
            python_path,
        })
    }

    /// One run of the suite, cut off after `timeout_s`.
    pub fn run(&self, timeout_s: f64) -> std::result::Result<NativeRun, String> {
        let io = |what: &str, e: std::io::Error| format!("{what}: {e}");
        let python = &self.python;
        let results = self.plugin.path().join("results.jsonl");
        // The plugin appends: a previous run's results must not count.
        let _ = std::fs::remove_file(&results);
        let started = Instant::now();
        let mut child = Command::new(python)
            .args([
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                layers::PLUGIN_MODULE,
            ])
            .args(&self.args)
            .current_dir(self.work.path())
            .env("PYTHONPATH", &self.python_path)
            .env("FROGNANO_RESULTS", &results)
            .env("PYTHONHASHSEED", "0")
            .env_remove("PYTHONDONTWRITEBYTECODE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| io(&format!("run {python} -m pytest"), e))?;
        let deadline = started + Duration::from_secs_f64(timeout_s);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("the native run did not finish in {timeout_s} s"));
                }
                Err(e) => return Err(io("wait for pytest", e)),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let text = std::fs::read_to_string(&results).map_err(|_| {
            format!("native pytest wrote no results (is pytest installed for {python}, and does the package support its version?)")
        })?;
        Ok(parse_results(&text, seconds))
    }
}

/// The plugin's JSONL results of a native run that took `seconds`.
fn parse_results(text: &str, seconds: f64) -> NativeRun {
    let mut outcomes = BTreeMap::new();
    let mut marks = None;
    let mut tests_s = 0.0;
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(profile) = value.get("profile") {
            marks = serde_json::from_value::<GuestMarks>(profile.clone()).ok();
            continue;
        }
        tests_s += value
            .get("duration_s")
            .and_then(|d| d.as_f64())
            .unwrap_or(0.0);
        if let (Some(id), Some(outcome)) = (
            value.get("id").and_then(|i| i.as_str()),
            value.get("outcome"),
        ) && let Ok(outcome) = serde_json::from_value::<TestOutcome>(outcome.clone())
        {
            outcomes.insert(id.to_string(), outcome);
        }
    }
    let mut profile = RunProfile {
        tests: outcomes.len(),
        shards: 1,
        ..RunProfile::default()
    };
    if let Some(marks) = marks {
        marks.fill(&mut profile, tests_s);
    }
    // The plugin starts its clock when pytest configures it: what came before (interpreter
    // start, pytest's import) is start-up too.
    let measured: f64 = profile.phases().iter().map(|(_, s)| s).sum::<f64>() - profile.startup_s;
    profile.startup_s = (seconds - measured).max(0.0);
    NativeRun {
        outcomes,
        seconds,
        profile,
    }
}
