//! A corpus on disk and its build: every spec becomes an entry with a manifest, in parallel,
//! resumably (a finished entry's manifest is written atomically and never redone), with a reason
//! for every entry that cannot serve.

use std::collections::{BTreeMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use frognano_core::{RunOutcome, TestOutcome, TestReport};
use frognano_sandbox::{CancelFlag, PreparedRepo, Sandbox, SandboxError, TestRequest};

use crate::fetch;
use crate::manifest::{
    ExcludedTest, Failure, FailureKind, MANIFEST_FORMAT, Manifest, Status, TestCounts,
};
use crate::spec::{Spec, parse_list};
use crate::workers::{is_cancelled, job_count, run_on_threads};
use crate::{CorpusError, Result};

/// The file listing a corpus's specs; its presence makes a directory a corpus.
pub const SPECS_FILE: &str = "specs.txt";
const MANIFESTS_DIR: &str = "manifests";
const REPOS_DIR: &str = "repos";

/// A corpus directory: `specs.txt` (one spec per line), `repos/<id>/` (the source trees) and
/// `manifests/<id>.json` (one per finished entry).
#[derive(Debug, Clone)]
pub struct Corpus {
    root: PathBuf,
}

/// Options of [`Corpus::build`].
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Entries built at once (0: the sandbox's worker count).
    pub jobs: usize,
    /// Wall-clock limit of one clean-suite run, in seconds (a repository's own `frognano.toml`
    /// timeout wins).
    pub timeout_s: f64,
    /// Build failed entries again (ready ones are kept).
    pub retry_failed: bool,
    /// Build every entry again.
    pub rebuild: bool,
    /// Build only these entry ids (empty: every spec of the corpus).
    pub only: Vec<String>,
    /// Set it to stop: entries in progress are abandoned, finished ones are kept.
    pub cancel: Option<CancelFlag>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            jobs: 0,
            timeout_s: 180.0,
            retry_failed: false,
            rebuild: false,
            only: Vec::new(),
            cancel: None,
        }
    }
}

/// What a build reports as it goes.
#[derive(Debug)]
pub enum BuildEvent<'a> {
    /// The plan: entries to build and entries already finished.
    Planned {
        /// Entries this build will make.
        to_build: usize,
        /// Entries kept from an earlier build.
        kept: usize,
    },
    /// An entry started.
    Started {
        /// Its id.
        id: &'a str,
    },
    /// A step of an entry (fetching, preparing requirements, running the suite).
    Step {
        /// Its id.
        id: &'a str,
        /// What it is doing.
        message: &'a str,
    },
    /// An entry finished; its manifest is on disk.
    Finished {
        /// Its manifest.
        manifest: &'a Manifest,
    },
}

/// What a build did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuildSummary {
    /// Entries built by this call.
    pub built: usize,
    /// Entries kept from earlier builds.
    pub kept: usize,
    /// Ready entries in the corpus after the build.
    pub ready: usize,
    /// Failed entries in the corpus after the build.
    pub failed: usize,
    /// Entries left unbuilt because the build was cancelled.
    pub unfinished: usize,
    /// Wall-clock seconds.
    pub seconds: f64,
}

impl Corpus {
    /// Opens an existing corpus.
    pub fn open(root: &Path) -> Result<Corpus> {
        if !root.join(SPECS_FILE).is_file() {
            return Err(CorpusError::Corpus {
                path: root.to_path_buf(),
                message: format!(
                    "not a corpus (no {SPECS_FILE}); create one with `frognano corpus add` or \
                     `frognano corpus build --from LIST`"
                ),
            });
        }
        Ok(Corpus {
            root: root.to_path_buf(),
        })
    }

    /// Opens a corpus, creating the directory and an empty spec list if needed.
    pub fn create(root: &Path) -> Result<Corpus> {
        fs::create_dir_all(root).map_err(CorpusError::io(format!("create {}", root.display())))?;
        let specs = root.join(SPECS_FILE);
        if !specs.is_file() {
            frognano_env::taskset::write_atomically(
                &specs,
                b"# FrogNano corpus: one package spec per line (NAME==VERSION --hash=sha256:HEX, a \
                  directory or an sdist file)\n",
            )?;
        }
        Ok(Corpus {
            root: root.to_path_buf(),
        })
    }

    /// True when `path` is a corpus directory.
    pub fn is_corpus(path: &Path) -> bool {
        path.join(SPECS_FILE).is_file()
    }

    /// The corpus directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The specs of the corpus, in list order.
    pub fn specs(&self) -> Result<Vec<Spec>> {
        let path = self.root.join(SPECS_FILE);
        let text = fs::read_to_string(&path)
            .map_err(CorpusError::io(format!("read {}", path.display())))?;
        parse_list(&text, &self.root, &path.display().to_string())
    }

    /// Adds specs to the list (those already listed, by entry id, are left as they are);
    /// returns how many were new. A spec whose id is listed with a different pin is an error.
    pub fn add(&self, specs: &[Spec]) -> Result<usize> {
        let existing = self.specs()?;
        let mut lines = Vec::new();
        for spec in specs {
            match existing.iter().find(|s| s.id() == spec.id()) {
                Some(same) if same == spec => {}
                Some(other) if !pin_conflicts(other, spec) => {}
                Some(other) => {
                    return Err(CorpusError::Spec {
                        origin: spec.to_string(),
                        message: format!(
                            "the corpus already lists {} as `{other}`; edit {SPECS_FILE} to change it",
                            spec.id()
                        ),
                    });
                }
                None => {
                    if !lines.iter().any(|l: &String| *l == spec.to_string()) {
                        lines.push(spec.to_string());
                    }
                }
            }
        }
        if lines.is_empty() {
            return Ok(0);
        }
        let path = self.root.join(SPECS_FILE);
        let mut text = fs::read_to_string(&path)
            .map_err(CorpusError::io(format!("read {}", path.display())))?;
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        for line in &lines {
            text.push_str(line);
            text.push('\n');
        }
        frognano_repo::write_atomically(&path, text.as_bytes()).map_err(|e| {
            CorpusError::Corpus {
                path: path.clone(),
                message: e.to_string(),
            }
        })?;
        Ok(lines.len())
    }

    /// The source tree of entry `id`.
    pub fn repo_dir(&self, id: &str) -> PathBuf {
        self.root.join(REPOS_DIR).join(id)
    }

    fn manifest_path(&self, id: &str) -> PathBuf {
        self.root.join(MANIFESTS_DIR).join(format!("{id}.json"))
    }

    /// The manifest of entry `id`, if it finished (a manifest that cannot be read counts as
    /// unfinished: the entry is built again).
    pub fn manifest(&self, id: &str) -> Option<Manifest> {
        let text = fs::read_to_string(self.manifest_path(id)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Every finished entry's manifest, in spec order.
    pub fn manifests(&self) -> Result<Vec<Manifest>> {
        Ok(self
            .specs()?
            .iter()
            .filter_map(|s| self.manifest(&s.id()))
            .collect())
    }

    /// Writes an entry's manifest atomically.
    pub fn write_manifest(&self, manifest: &Manifest) -> Result<()> {
        let path = self.manifest_path(&manifest.id);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)
                .map_err(CorpusError::io(format!("create {}", dir.display())))?;
        }
        let text = serde_json::to_vec_pretty(manifest).map_err(|e| CorpusError::Corpus {
            path: path.clone(),
            message: e.to_string(),
        })?;
        frognano_repo::write_atomically(&path, &text).map_err(|e| CorpusError::Corpus {
            path,
            message: e.to_string(),
        })
    }

    /// The source trees of the ready entries, in spec order: what trainers and synthesizers
    /// take as repositories.
    pub fn ready_repos(&self) -> Result<Vec<PathBuf>> {
        Ok(self
            .manifests()?
            .into_iter()
            .filter(Manifest::is_ready)
            .filter_map(|m| m.repo.map(|r| self.root.join(r)))
            .filter(|p| p.is_dir())
            .collect())
    }

    /// Builds every unfinished entry (see [`BuildOptions`]): fetches and unpacks its source,
    /// prepares its requirement layer, runs its clean suite once and writes its manifest.
    pub fn build(
        &self,
        sandbox: &Arc<Sandbox>,
        options: &BuildOptions,
        events: &(dyn Fn(&BuildEvent<'_>) + Sync),
    ) -> Result<BuildSummary> {
        if !(options.timeout_s.is_finite() && options.timeout_s > 0.0) {
            return Err(CorpusError::InvalidOption(format!(
                "timeout must be a positive number of seconds, not {}",
                options.timeout_s
            )));
        }
        let started = Instant::now();
        let specs = self.specs()?;
        for id in &options.only {
            if !specs.iter().any(|s| s.id() == *id) {
                return Err(CorpusError::InvalidOption(format!(
                    "{id} is not an entry of the corpus"
                )));
            }
        }
        let mut queue = VecDeque::new();
        let mut kept = 0;
        for spec in specs {
            let id = spec.id();
            if !options.only.is_empty() && !options.only.contains(&id) {
                continue;
            }
            let done = self.manifest(&id).is_some_and(|m| {
                m.format == MANIFEST_FORMAT
                    && m.spec == spec.to_string()
                    && (m.is_ready() || !options.retry_failed)
            });
            if done && !options.rebuild {
                kept += 1;
            } else {
                queue.push_back(spec);
            }
        }
        events(&BuildEvent::Planned {
            to_build: queue.len(),
            kept,
        });
        let total = queue.len();
        let queue = Mutex::new(queue);
        let built = std::sync::atomic::AtomicUsize::new(0);
        let failure: Mutex<Option<CorpusError>> = Mutex::new(None);
        let jobs = job_count(options.jobs, sandbox, total);
        run_on_threads(jobs, || {
            loop {
                if is_cancelled(options.cancel.as_ref())
                    || failure.lock().map(|f| f.is_some()).unwrap_or(true)
                {
                    return;
                }
                let Some(spec) = queue.lock().ok().and_then(|mut q| q.pop_front()) else {
                    return;
                };
                let id = spec.id();
                events(&BuildEvent::Started { id: &id });
                let step = |message: &str| events(&BuildEvent::Step { id: &id, message });
                match self.build_entry(sandbox, &spec, options, &step) {
                    Ok(Some(manifest)) => match self.write_manifest(&manifest) {
                        Ok(()) => {
                            built.fetch_add(1, Ordering::SeqCst);
                            events(&BuildEvent::Finished {
                                manifest: &manifest,
                            });
                        }
                        Err(err) => {
                            if let Ok(mut f) = failure.lock() {
                                f.get_or_insert(err);
                            }
                        }
                    },
                    // Cancelled: no manifest, so the next build does it again.
                    Ok(None) => {}
                    Err(err) => {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(err);
                        }
                    }
                }
            }
        });
        if let Some(err) = failure.into_inner().ok().flatten() {
            return Err(err);
        }
        let built = built.into_inner();
        let manifests = self.manifests()?;
        let in_scope = |m: &&Manifest| options.only.is_empty() || options.only.contains(&m.id);
        Ok(BuildSummary {
            built,
            kept,
            ready: manifests
                .iter()
                .filter(in_scope)
                .filter(|m| m.is_ready())
                .count(),
            failed: manifests
                .iter()
                .filter(in_scope)
                .filter(|m| !m.is_ready())
                .count(),
            unfinished: total - built,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    /// Builds one entry; `Ok(None)` when it was cancelled part way.
    fn build_entry(
        &self,
        sandbox: &Arc<Sandbox>,
        spec: &Spec,
        options: &BuildOptions,
        step: &(dyn Fn(&str) + Sync),
    ) -> Result<Option<Manifest>> {
        let started = Instant::now();
        let id = spec.id();
        let mut manifest = Manifest::failed(
            &id,
            &spec.to_string(),
            Failure {
                kind: FailureKind::Sandbox,
                message: String::new(),
            },
        );
        if let Spec::Registry { name, version, .. } = spec {
            manifest.package = Some(name.clone());
            manifest.version = Some(version.clone());
        }
        let repo = self.repo_dir(&id);
        if repo.exists() {
            // A tree from an earlier, unfinished or superseded build.
            fs::remove_dir_all(&repo)
                .map_err(CorpusError::io(format!("remove {}", repo.display())))?;
        }
        step("fetching");
        let finish = |mut manifest: Manifest, failure: Option<Failure>| {
            manifest.status = if failure.is_some() {
                Status::Failed
            } else {
                Status::Ready
            };
            manifest.failure = failure;
            manifest.build_seconds = started.elapsed().as_secs_f64();
            Ok(Some(manifest))
        };
        match fetch::materialise(spec, &repo, sandbox.image().python_version()) {
            Ok(fetched) => manifest.sdist_sha256 = fetched.sdist_sha256,
            Err(failure) => return finish(manifest, Some(failure)),
        }
        manifest.repo = Some(format!("{REPOS_DIR}/{id}"));
        if let Some(failure) = no_tests(&repo) {
            return finish(manifest, Some(failure));
        }
        if is_cancelled(options.cancel.as_ref()) {
            return Ok(None);
        }
        step("preparing the requirement layer");
        let prepared = match sandbox.prepare_repo(&repo, &|m| step(m)) {
            Ok(prepared) => prepared,
            Err(SandboxError::Cancelled) => return Ok(None),
            Err(err) => return finish(manifest, Some(prepare_failure(&err))),
        };
        if manifest.package.is_none()
            && let Some((name, version)) = &prepared.config.distribution
        {
            manifest.package = Some(name.clone());
            manifest.version = Some(version.clone());
        }
        manifest.requirements = requirements_json(&prepared);
        manifest.layer = prepared
            .deps_layer
            .as_ref()
            .and_then(|l| l.file_name())
            .map(|n| n.to_string_lossy().into_owned());
        step("running the clean suite");
        let mut limits = prepared.config.limits();
        if prepared.config.test.timeout.is_none() {
            limits.timeout_s = options.timeout_s;
        }
        // As grading runs: a test module that cannot import here (it needs a feature or a
        // compiled distribution WebAssembly lacks) errors alone, labelled with the cause, and
        // is excluded; it does not stop the collection of every other module.
        let mut request = TestRequest {
            limits: Some(limits),
            cancel: options.cancel.clone(),
            pytest_args: frognano_sandbox::clean_suite_args(),
            ..TestRequest::default()
        };
        // A test that crashes the interpreter or reaches a limit stops the whole suite: it is
        // deselected and the suite runs again (a few times at most, a timeout once), and the
        // entry's frognano.toml keeps the deselection for every later run of the entry.
        let can_configure = !repo.join(CONFIG_FILE).exists();
        let mut deselected: Vec<ExcludedTest> = Vec::new();
        let mut first: Option<TestReport> = None;
        let report = loop {
            let report = match sandbox.run_tests_prepared(&prepared, &request) {
                Ok(report) => report,
                Err(SandboxError::Cancelled) => return Ok(None),
                Err(err) => return finish(manifest, Some(prepare_failure(&err))),
            };
            if is_cancelled(options.cancel.as_ref()) {
                return Ok(None);
            }
            let timed_out_before = deselected.iter().any(|d| d.reason.contains("time limit"));
            let retry = can_configure
                && deselected.len() < MAX_DESELECTED
                && !(report.outcome == RunOutcome::Timeout && timed_out_before);
            match (retry, stopping_test(&report)) {
                (true, Some(excluded)) => {
                    step(&format!(
                        "deselecting {} ({}) and running the suite again",
                        excluded.id, excluded.reason
                    ));
                    request
                        .pytest_args
                        .push(format!("--deselect={}", excluded.id));
                    deselected.push(excluded);
                    first.get_or_insert(report);
                }
                _ => break report,
            }
        };
        let mut failure = suite_failure(&report, &prepared, &repo);
        let report = match first {
            // Deselecting did not make the entry ready: it fails for what stopped it first.
            Some(first) if failure.is_some() => {
                failure = suite_failure(&first, &prepared, &repo);
                deselected.clear();
                first
            }
            _ => report,
        };
        if !deselected.is_empty() {
            write_deselection(&repo, &deselected)?;
        }
        manifest.suite_seconds = Some(report.duration_s);
        manifest.tests = counts(&report);
        manifest.excluded = excluded(&report);
        manifest.excluded.extend(deselected);
        manifest.excluded_by_reason = by_reason(&manifest.excluded);
        finish(manifest, failure)
    }
}

/// Tests deselected at most from one entry's clean suite because they stopped it.
const MAX_DESELECTED: usize = 3;

/// The entry configuration file the build writes only where the sdist has none.
const CONFIG_FILE: &str = "frognano.toml";

/// The test that stopped `report`'s run early, with why, if a test did.
fn stopping_test(report: &TestReport) -> Option<ExcludedTest> {
    let why = match report.outcome {
        RunOutcome::Crashed => "deselected: it crashed the interpreter",
        RunOutcome::Timeout => "deselected: the suite reached its time limit in it",
        RunOutcome::MemoryExceeded => "deselected: it reached the memory cap",
        RunOutcome::OutputExceeded => "deselected: it reached the output cap",
        _ => return None,
    };
    Some(ExcludedTest {
        id: report.interrupted.clone()?,
        reason: why.to_string(),
    })
}

/// Writes the entry's `frognano.toml` with `[test] deselect` (detection still finds its
/// requirements), so that environments and synthesis on the entry leave those tests out too.
fn write_deselection(repo: &Path, deselected: &[ExcludedTest]) -> Result<()> {
    let ids: Vec<String> = deselected
        .iter()
        .map(|d| serde_json::Value::String(d.id.clone()).to_string())
        .collect();
    let text = format!(
        "# Written by `frognano corpus build`: these tests stopped the clean suite.\n\
         [test]\ndeselect = [{}]\n",
        ids.join(", ")
    );
    fs::write(repo.join(CONFIG_FILE), text).map_err(CorpusError::io(format!("write {CONFIG_FILE}")))
}

/// Two specs of one id conflict when both pin a hash and the hashes differ, or they name
/// different sources.
fn pin_conflicts(listed: &Spec, new: &Spec) -> bool {
    match (listed, new) {
        (
            Spec::Registry {
                version: v1,
                sha256: s1,
                ..
            },
            Spec::Registry {
                version: v2,
                sha256: s2,
                ..
            },
        ) => v1 != v2 || (s1.is_some() && s2.is_some() && s1 != s2),
        (a, b) => a != b,
    }
}

fn requirements_json(prepared: &PreparedRepo) -> serde_json::Value {
    let mut value = serde_json::to_value(&prepared.requirements_report).unwrap_or_default();
    value["layer"] = serde_json::json!(prepared.config.requirements);
    value["from_config"] = serde_json::json!(!prepared.config.requirements_detected);
    value
}

/// Whether the tree holds anything that looks like tests: a Python file named `test*.py`,
/// `*_test.py` or `*tests.py`, or any Python file under a `test`/`tests`/`testing` directory
/// (projects configure other `python_files` patterns; pytest has the last word).
fn no_tests(repo: &Path) -> Option<Failure> {
    let found = frognano_sandbox::workspace::walk_repo(repo)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .any(|e| {
            let name = e.file_name().to_string_lossy();
            if !name.ends_with(".py") {
                return false;
            }
            let in_tests_dir = e
                .path()
                .strip_prefix(repo)
                .ok()
                .and_then(|rel| rel.parent())
                .is_some_and(|dir| {
                    dir.components().any(|c| {
                        matches!(c.as_os_str().to_str(), Some("test" | "tests" | "testing"))
                    })
                });
            name.starts_with("test")
                || name.ends_with("_test.py")
                || name.ends_with("tests.py")
                || in_tests_dir
        });
    (!found).then(|| Failure {
        kind: FailureKind::NoTests,
        message: "the source holds no test files (no test*.py, *_test.py or tests/ directory)"
            .into(),
    })
}

fn prepare_failure(err: &SandboxError) -> Failure {
    let kind = match err {
        SandboxError::Config { .. } => FailureKind::Config,
        SandboxError::Requirements { .. } => FailureKind::Requirements,
        SandboxError::Repo { .. } => FailureKind::MalformedSdist,
        SandboxError::Io { .. } => FailureKind::Io,
        _ => FailureKind::Sandbox,
    };
    Failure {
        kind,
        message: err.to_string(),
    }
}

fn counts(report: &TestReport) -> TestCounts {
    TestCounts {
        collected: report.tests.len(),
        passed: report.passed,
        failed: report.failed,
        errors: report.errors,
        skipped: report.skipped,
        xfailed: report.xfailed,
        xpassed: report.xpassed,
    }
}

fn excluded(report: &TestReport) -> Vec<ExcludedTest> {
    report
        .tests
        .iter()
        .filter(|t| t.outcome != TestOutcome::Passed)
        .map(|t| ExcludedTest {
            id: t.id.clone(),
            reason: match &t.platform {
                Some(cause) => format!("platform: {cause}"),
                None => t.outcome.as_str().to_string(),
            },
        })
        .collect()
}

fn by_reason(excluded: &[ExcludedTest]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for test in excluded {
        *counts.entry(test.reason.clone()).or_insert(0) += 1;
    }
    counts
}

/// Why a clean run leaves the entry unusable, if it does.
fn suite_failure(report: &TestReport, prepared: &PreparedRepo, repo: &Path) -> Option<Failure> {
    let detail = report.detail.clone().unwrap_or_default();
    let failure = match report.outcome {
        RunOutcome::Timeout => Failure {
            kind: FailureKind::Timeout,
            message: format!(
                "the clean suite did not finish ({detail}); {} tests had finished",
                report.tests.len()
            ),
        },
        RunOutcome::MemoryExceeded => Failure {
            kind: FailureKind::Memory,
            message: detail,
        },
        RunOutcome::OutputExceeded => Failure {
            kind: FailureKind::Output,
            message: detail,
        },
        RunOutcome::Crashed => Failure {
            kind: FailureKind::Crash,
            message: format!("{detail}{}", stderr_tail(report)),
        },
        RunOutcome::NoTests => Failure {
            kind: FailureKind::Collection,
            message: format!(
                "pytest collected no tests{}",
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {detail}")
                }
            ),
        },
        RunOutcome::Passed | RunOutcome::Failed if report.passed > 0 => return None,
        RunOutcome::Passed | RunOutcome::Failed => no_passing(report, prepared),
    };
    let extensions = extension_sources(repo);
    if !extensions.is_empty() && !matches!(failure.kind, FailureKind::Timeout | FailureKind::Output)
    {
        return Some(Failure {
            kind: FailureKind::CExtension,
            message: format!(
                "the package builds compiled extensions ({}), which cannot run in WebAssembly, and \
                 its suite does not run without them: {}",
                extensions.join(", "),
                failure.message
            ),
        });
    }
    Some(failure)
}

fn stderr_tail(report: &TestReport) -> String {
    let lines: Vec<&str> = report
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!("\n{}", lines[lines.len().saturating_sub(5)..].join("\n"))
}

/// No test passed: missing modules first (the usual cause), then pytest's own verdict, then
/// the first failure.
fn no_passing(report: &TestReport, prepared: &PreparedRepo) -> Failure {
    let unresolved = &prepared.requirements_report.unresolved;
    if !unresolved.is_empty() {
        let list: Vec<String> = unresolved
            .iter()
            .map(|u| format!("{} ({})", u.module, u.reason))
            .collect();
        return Failure {
            kind: FailureKind::Requirements,
            message: format!(
                "the tests import modules no pure-Python wheel provides: {}",
                list.join("; ")
            ),
        };
    }
    if let Some(module) = report
        .tests
        .iter()
        .filter_map(|t| t.message.as_deref())
        .chain(std::iter::once(report.stderr.as_str()))
        .find_map(missing_module)
    {
        let top = module.split('.').next().unwrap_or(&module);
        if let Some(reason) = frognano_sandbox::requirements::resolve::unavailable_module(top) {
            return Failure {
                kind: FailureKind::NoPassingTests,
                message: format!(
                    "the tests import `{module}`: {reason}; a platform limit, not a missing \
                     requirement"
                ),
            };
        }
        // A declared requirement of the module's name that the layer had to leave out (no
        // pure-Python wheel, an sdist-only release) says more than "no requirement provides".
        let left_out = prepared.requirements_report.left_out.iter().find(|l| {
            frognano_sandbox::layers::normalise(&frognano_sandbox::requirements::requirement_name(
                &l.requirement,
            )) == frognano_sandbox::layers::normalise(top)
        });
        let message = match left_out {
            Some(left) => format!(
                "the tests import `{module}`, whose requirement `{}` was left out: {}",
                left.requirement, left.reason
            ),
            None => format!(
                "the tests import `{module}`, which no requirement provides; name its \
                 distribution in frognano.toml [test] requirements"
            ),
        };
        return Failure {
            kind: FailureKind::Requirements,
            message,
        };
    }
    let platform = report.platform_failures();
    if report.tests.is_empty() {
        return Failure {
            kind: FailureKind::Collection,
            message: report
                .detail
                .clone()
                .unwrap_or_else(|| format!("pytest reported no tests{}", stderr_tail(report))),
        };
    }
    let first = report
        .tests
        .iter()
        .find_map(|t| t.message.as_deref().map(|m| (t.id.as_str(), m)))
        .map(|(id, m)| {
            let last = frognano_core::lines::last_nonblank(m).unwrap_or("");
            format!("; first: {id}: {}", last.trim())
        })
        .unwrap_or_default();
    let platform_note = if platform.is_empty() {
        String::new()
    } else {
        let parts: Vec<String> = platform.iter().map(|(k, v)| format!("{v} {k}")).collect();
        format!(" ({} need features WebAssembly lacks)", parts.join(", "))
    };
    Failure {
        kind: FailureKind::NoPassingTests,
        message: format!(
            "{} tests ran and none passed: {} failed, {} errors, {} skipped{platform_note}{first}",
            report.tests.len(),
            report.failed,
            report.errors,
            report.skipped
        ),
    }
}

/// The module of a `ModuleNotFoundError: No module named 'x'` in a failure text.
fn missing_module(text: &str) -> Option<String> {
    let at = text.find("No module named ")?;
    let rest = &text[at + "No module named ".len()..];
    let name: String = rest
        .trim_start_matches(['\'', '"'])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.'))
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Compiled-extension sources of the package (tests and docs aside), at most a few names.
fn extension_sources(repo: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in frognano_sandbox::workspace::walk_repo(repo).filter_map(|e| e.ok()) {
        if !entry.file_type().is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().to_string();
        let is_source = [".c", ".cc", ".cpp", ".pyx", ".rs"]
            .iter()
            .any(|s| name.ends_with(s));
        let rel = entry.path().strip_prefix(repo).unwrap_or(entry.path());
        let in_tests = rel.components().any(|c| {
            let c = c.as_os_str().to_string_lossy();
            c.starts_with("test") || c == "docs" || c == "benchmarks" || c == "examples"
        });
        if is_source && !in_tests {
            found.push(rel.display().to_string());
            if found.len() == 3 {
                break;
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_modules_are_read_from_failure_texts() {
        assert_eq!(
            missing_module("E   ModuleNotFoundError: No module named 'dateutil'").as_deref(),
            Some("dateutil")
        );
        assert_eq!(
            missing_module("ImportError: No module named yaml.constructor").as_deref(),
            Some("yaml.constructor")
        );
        assert_eq!(missing_module("AssertionError: 1 != 2"), None);
    }

    #[test]
    fn a_missing_module_whose_requirement_was_left_out_says_why() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut prepared = PreparedRepo {
            config: frognano_sandbox::RepoConfig::load(dir.path()).expect("config"),
            deps_layer: None,
            bytecode: None,
            requirements_report: Default::default(),
        };
        let mut record = frognano_core::TestRecord::new("tests/test_a.py", TestOutcome::Error);
        record.message = Some("E   ModuleNotFoundError: No module named 'pymeeus'".into());
        let report = TestReport::from_records(vec![record], 0.1);
        assert!(
            no_passing(&report, &prepared)
                .message
                .contains("which no requirement provides")
        );
        prepared.requirements_report.left_out.push(
            frognano_sandbox::requirements::LeftOutRequirement {
                requirement: "PyMeeus>=0.3.13, <=1".into(),
                reason: "no pure-Python wheel for Python 3.15".into(),
            },
        );
        let failure = no_passing(&report, &prepared);
        assert_eq!(failure.kind, FailureKind::Requirements);
        // A standard-library module the platform lacks is a platform limit.
        let mut record = frognano_core::TestRecord::new("tests/test_b.py", TestOutcome::Error);
        record.message = Some("E   ModuleNotFoundError: No module named '_multiprocessing'".into());
        let platform = no_passing(&TestReport::from_records(vec![record], 0.1), &prepared);
        assert_eq!(platform.kind, FailureKind::NoPassingTests);
        assert!(
            platform.message.contains("platform limit"),
            "{}",
            platform.message
        );
        assert_eq!(
            failure.message,
            "the tests import `pymeeus`, whose requirement `PyMeeus>=0.3.13, <=1` was left out: \
             no pure-Python wheel for Python 3.15"
        );
    }

    #[test]
    fn specs_are_added_once_and_conflicting_pins_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let corpus = Corpus::create(dir.path()).expect("create");
        let base = dir.path();
        let six = Spec::parse("six==1.17.0", base, "a").expect("spec");
        assert_eq!(corpus.add(&[six.clone(), six.clone()]).expect("add"), 1);
        assert_eq!(corpus.add(std::slice::from_ref(&six)).expect("add"), 0);
        let other = Spec::parse("six==1.16.0", base, "a").expect("spec");
        assert_eq!(
            corpus.add(&[other]).expect("a new version is a new entry"),
            1
        );
        let sha = "ff70335d468e7eb6ec65b95b99d3a2836546063f63acc5171de367e834932a81";
        let pinned =
            Spec::parse(&format!("six==1.17.0 --hash=sha256:{sha}"), base, "a").expect("spec");
        assert_eq!(corpus.add(&[pinned]).expect("a pin of a listed spec"), 0);
        assert_eq!(corpus.specs().expect("specs").len(), 2);
        assert!(Corpus::open(&dir.path().join("missing")).is_err());
    }
}
