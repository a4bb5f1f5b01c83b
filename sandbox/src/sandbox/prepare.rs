//! Preparing a repository: its configuration, its requirements layer (with the resolution
//! loop that adds what the suite turns out to import) and its bytecode cache.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use frognano_core::{Limits, RunOutcome, TestReport};
use serde::{Deserialize, Serialize};

use super::guest::LayerAccess;
use super::{GUEST_WORK, Sandbox, TestRequest, python_string_literal};
use crate::assets::{self, Progress};
use crate::bytecode;
use crate::config::RepoConfig;
use crate::error::{Result, SandboxError};
use crate::layers;
use crate::requirements::collection;
use crate::requirements::resolve::{self, Plan};
use crate::requirements::{
    AddedImportRoot, AddedRequirement, LeftOutRequirement, RequirementsReport, UnresolvedModule,
    requirement_name,
};
use crate::workspace;

const COMPILE_BYTECODE: &str = include_str!("../guest/compile_bytecode.py");

/// Collection passes of the resolution loop, at most (each may add several distributions).
const RESOLUTION_ROUNDS: usize = 8;
/// Modules found only by the scan of the test sources (imports inside functions) that the
/// resolution loop tries to provide, at most, per repository.
const UNPLACED_IMPORTS_TRIED: usize = 8;
/// Wall-clock cap of one collection pass, in seconds.
const COLLECTION_TIMEOUT_S: f64 = 60.0;
/// Bumped when the resolution logic changes, so that cached results are recomputed.
const RESOLUTION_VERSION: &str = "resolution-22";

/// A repository ready to run: its configuration and requirements layer.
#[derive(Debug, Clone)]
pub struct PreparedRepo {
    /// The repository's configuration (`requirements` is the final list in the layer).
    pub config: RepoConfig,
    /// Its requirements layer, if it has requirements.
    pub deps_layer: Option<PathBuf>,
    /// Its bytecode cache, overlaid into each workspace before a run.
    pub bytecode: Option<PathBuf>,
    /// What was detected, added and left out, and why (empty when `frognano.toml` lists the
    /// requirements).
    pub requirements_report: RequirementsReport,
}

impl PreparedRepo {
    /// The repository's own pytest arguments: `[test] args`, then its ignored paths and
    /// deselected tests. Sandboxed runs put them after FrogNano's base options; a native run
    /// of the same suite takes them as they are.
    pub fn pytest_args(&self) -> Vec<String> {
        let test = &self.config.test;
        let mut args = test.args.clone();
        args.extend(test.ignore.iter().map(|i| format!("--ignore={i}")));
        args.extend(test.deselect.iter().map(|d| format!("--deselect={d}")));
        args
    }

    /// What a native run of the suite puts on `PYTHONPATH`: the import roots (relative to
    /// the repository) and the requirements layer (absolute).
    pub fn native_python_path(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.config.import_roots.iter().map(PathBuf::from).collect();
        paths.extend(self.deps_layer.clone());
        paths
    }
}

/// The cached outcome of the resolution loop for one repository version.
#[derive(Debug, Serialize, Deserialize)]
struct Resolved {
    requirements: Vec<String>,
    report: RequirementsReport,
}

impl Resolved {
    /// Puts the import roots the loop found on `config`'s path, and its collection arguments
    /// into `config`'s pytest arguments.
    fn apply_roots(&self, config: &mut RepoConfig) {
        for root in &self.report.import_roots {
            if !config.import_roots.contains(&root.path) {
                config.import_roots.push(root.path.clone());
            }
        }
        config
            .test
            .args
            .extend(self.report.collection_args.iter().cloned());
    }
}

impl Sandbox {
    /// Reads a repository's configuration and builds its requirements layer and bytecode
    /// cache (both cached). With detected requirements, a collection pass then finds modules
    /// the suite still cannot import and adds the distributions that provide them (once per
    /// repository version; see [`RequirementsReport`]).
    ///
    /// With [`crate::SandboxOptions::layer_snapshots`], a repository with requirements also
    /// gets a snapshot with them imported (built once per layer, then cached).
    pub fn prepare_repo(&self, repo: &Path, progress: Progress<'_>) -> Result<PreparedRepo> {
        let prepared = self.prepare_layers(repo, progress)?;
        if self.layer_snapshots
            && let Some(layer) = &prepared.deps_layer
        {
            // Keyed by layer: repositories with identical requirements share the snapshot of
            // the first one prepared.
            let modules = resolve::layer_modules_imported(&prepared.config.root, layer);
            self.ensure_layer_snapshot(layer, &modules, progress)?;
        }
        Ok(prepared)
    }

    /// [`Sandbox::prepare_repo`] without the layer snapshot.
    fn prepare_layers(&self, repo: &Path, progress: Progress<'_>) -> Result<PreparedRepo> {
        let mut config = RepoConfig::load(repo)?;
        if let Some(runner) = &config.unittest_runner {
            progress(&format!(
                "{} runs the tests with unittest: collecting TestCase classes from {} files, as \
                 unittest does",
                runner.source, runner.pattern
            ));
        }
        let bytecode = self.repo_bytecode(&config.root, progress)?;
        if !config.requirements_detected {
            let deps_layer = if config.requirements.is_empty() {
                None
            } else {
                let stubs = layers::prepare_carried_stubs(&self.image)?;
                let target = layers::LayerTarget {
                    python_version: self.image.kind.python_version(),
                    carried_stubs: stubs.as_deref(),
                };
                let layer =
                    layers::prepare_requirements_layer(&config.requirements, target, progress)?;
                self.compile_layer_bytecode(LayerAccess::DepsWritable(&layer), progress)?;
                Some(layer)
            };
            return Ok(PreparedRepo {
                config,
                deps_layer,
                bytecode,
                requirements_report: RequirementsReport::default(),
            });
        }
        for note in &config.notes {
            progress(&format!("requirements detection: {note}"));
        }
        let cache = self.resolution_cache_file(&config)?;
        if let Some(resolved) = fs::read(&cache)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Resolved>(&bytes).ok())
        {
            resolved.apply_roots(&mut config);
            config.requirements = resolved.requirements;
            let deps_layer = self.detected_layer(&mut config, &mut Vec::new(), progress)?;
            return Ok(PreparedRepo {
                config,
                deps_layer,
                bytecode,
                requirements_report: resolved.report,
            });
        }
        let mut report = RequirementsReport {
            detected: config.detected.clone(),
            left_out: config.left_out.clone(),
            ..RequirementsReport::default()
        };
        let mut dropped = Vec::new();
        let mut deps_layer = self.detected_layer(&mut config, &mut dropped, progress)?;
        report.left_out.extend(dropped);
        let complete = self.resolve_imports(
            &mut config,
            &mut deps_layer,
            bytecode.as_ref(),
            &mut report,
            progress,
        )?;
        let resolved = Resolved {
            requirements: config.requirements.clone(),
            report,
        };
        if complete {
            write_cache(&cache, &resolved)?;
        }
        Ok(PreparedRepo {
            config,
            deps_layer,
            bytecode,
            requirements_report: resolved.report,
        })
    }

    /// The layer of `config.requirements`, leaving out (into `dropped`, and from the list)
    /// those that have no pure-Python wheels.
    fn detected_layer(
        &self,
        config: &mut RepoConfig,
        dropped: &mut Vec<LeftOutRequirement>,
        progress: Progress<'_>,
    ) -> Result<Option<PathBuf>> {
        if config.requirements.is_empty() {
            return Ok(None);
        }
        let stubs = layers::prepare_carried_stubs(&self.image)?;
        let target = layers::LayerTarget {
            python_version: self.image.kind.python_version(),
            carried_stubs: stubs.as_deref(),
        };
        let (layer, left_out) =
            layers::prepare_requirements_layer_lenient(&config.requirements, target, progress)?;
        let carried = self.image.carried_distributions();
        let from_the_image = |name: &str, version: &str| {
            format!(
                "taken from the interpreter image, which carries {name} {version} compiled in \
                 with its standard library; the tests import that copy"
            )
        };
        // Requirements pip resolved to the image's stubs: satisfied, and not in the layer.
        let taken_from_image: Vec<(String, String)> = config
            .requirements
            .iter()
            .filter_map(|requirement| {
                let name = layers::normalise(&requirement_name(requirement));
                let version = carried.get(&name)?;
                (!layers::layer_provides(&layer, &name))
                    .then(|| (requirement.clone(), from_the_image(&name, version)))
            })
            .collect();
        for (requirement, mut reason) in left_out.into_iter().chain(taken_from_image) {
            let name = layers::normalise(&requirement_name(&requirement));
            if let Some(version) = carried.get(&name) {
                // numpy, pandas, lxml, ...: no pure-Python wheel, but the image's own copy.
                reason = from_the_image(&name, version);
            }
            progress(&format!("left out {requirement}: {reason}"));
            config.requirements.retain(|r| *r != requirement);
            dropped.push(LeftOutRequirement {
                requirement,
                reason,
            });
        }
        if config.requirements.is_empty() {
            return Ok(None);
        }
        self.compile_layer_bytecode(LayerAccess::DepsWritable(&layer), progress)?;
        Ok(Some(layer))
    }

    /// The resolution loop: collect the suite, find the modules it cannot import, add the
    /// distributions that provide them, rebuild the layer, and again, for a few rounds. False
    /// when a collection pass hit a limit (the result is then not cached).
    fn resolve_imports(
        &self,
        config: &mut RepoConfig,
        deps_layer: &mut Option<PathBuf>,
        bytecode: Option<&PathBuf>,
        report: &mut RequirementsReport,
        progress: Progress<'_>,
    ) -> Result<bool> {
        let own = resolve::own_modules(&config.root);
        if resolve::imports_resolve_statically(
            &config.root,
            &config.import_roots,
            deps_layer.as_deref(),
        ) {
            // Nothing a collection pass could add (a second or so per repository saved).
            return Ok(true);
        }
        let version = self.image.kind.python_version();
        let mut attempted: BTreeSet<String> = BTreeSet::new();
        progress("checking the test suite's imports (one time per repository version)");
        // Where pytest's default patterns find nothing, the ways to collect such a suite.
        let mut fallbacks = collection::collection_fallbacks(&config.root).into_iter();
        for _ in 0..RESOLUTION_ROUNDS {
            let prepared = PreparedRepo {
                config: config.clone(),
                deps_layer: deps_layer.clone(),
                bytecode: bytecode.cloned(),
                requirements_report: RequirementsReport::default(),
            };
            let limits = config.limits();
            let request = TestRequest {
                pytest_args: vec!["--collect-only".into(), "-q".into()],
                limits: Some(Limits {
                    timeout_s: limits.timeout_s.min(COLLECTION_TIMEOUT_S),
                    ..limits
                }),
                ..TestRequest::default()
            };
            let run = self.run_tests_prepared(&prepared, &request)?;
            if !matches!(
                run.outcome,
                RunOutcome::Passed | RunOutcome::Failed | RunOutcome::NoTests
            ) {
                // A collection that hit a limit or crashed says nothing reliable.
                progress(&format!(
                    "the collection pass ended as {}: requirements stay as detected",
                    run.outcome.as_str()
                ));
                return Ok(false);
            }
            // pytest's status 5: nothing collected (a collect-only pass that found tests also
            // has no test records, and status 0).
            if run.outcome == RunOutcome::NoTests && run.exit_code == Some(5) {
                // Replace the last fallback's arguments (appended last) with the next one's.
                let keep = config.test.args.len() - report.collection_args.len();
                config.test.args.truncate(keep);
                report.collection_args.clear();
                if let Some(fallback) = fallbacks.next() {
                    progress(&fallback.note);
                    config.test.args.extend(fallback.args.iter().cloned());
                    report.collection_args = fallback.args;
                    continue;
                }
            }
            let mut added_now = false;
            let mut this_round: BTreeSet<String> = BTreeSet::new();
            let missing_now = resolve::missing_modules(&run);
            // What an earlier round could not provide and this pass no longer misses came
            // with a later addition.
            report
                .unresolved
                .retain(|u| missing_now.iter().any(|m| m.module == u.module));
            for missing in missing_now {
                let top = missing.top_level().to_string();
                // A namespace package's portions come from different distributions
                // (`opentelemetry._logs`, `opentelemetry.sdk`): each is tried on its own.
                let key = match missing.module.split('.').nth(1) {
                    Some(portion) if self.is_namespace(config, deps_layer.as_deref(), &top) => {
                        format!("{top}.{portion}")
                    }
                    _ => top.clone(),
                };
                if !this_round.insert(key.clone()) {
                    continue;
                }
                if !attempted.insert(key) {
                    let still = report.added.iter().position(|a| a.module == missing.module);
                    if let Some(index) = still {
                        let added = report.added.remove(index);
                        config.requirements.retain(|r| *r != added.distribution);
                        report.unresolved.push(UnresolvedModule {
                            module: missing.module.clone(),
                            reason: format!(
                                "still missing after adding {}: it does not provide {} here",
                                added.distribution, missing.module
                            ),
                        });
                    }
                    continue;
                }
                if own.contains(&top)
                    && let Some(dir) =
                        resolve::import_root_for(&config.root, &top, &config.import_roots)
                {
                    let why = format!("{} imports {}", missing.importer, missing.module);
                    progress(&format!("put {dir}/ on the import path ({why})"));
                    config.import_roots.push(dir.clone());
                    report.import_roots.push(AddedImportRoot {
                        path: dir,
                        module: top.clone(),
                        reason: why,
                    });
                    added_now = true;
                    continue;
                }
                let names = resolve::import_names(progress)?;
                let holds = |module: &str| {
                    config
                        .import_roots
                        .iter()
                        .any(|dir| resolve::holds_module(&config.root.join(dir), module))
                };
                let plan = if holds(&missing.module) {
                    // The repository has it: importing it failed on something it imports.
                    Plan::Unresolvable(format!(
                        "{} is the repository's own ({} cannot import it)",
                        missing.module, missing.importer
                    ))
                } else if own.contains(&top) && !holds(&top) {
                    // Only a module inside one of the repository's packages bears the name
                    // (`azure/core/tracing/opentelemetry.py`): the missing one is another's.
                    let mut others = own.clone();
                    others.remove(&top);
                    resolve::plan(&missing, &others, names)
                } else {
                    resolve::plan(&missing, &own, names)
                };
                let reason = match plan {
                    Plan::Unresolvable(reason) => Err(reason),
                    Plan::Try(candidates) => {
                        self.find_distribution(&candidates, &top, config, version)?
                    }
                };
                match reason {
                    Ok(distribution) => {
                        add_requirement(config, report, distribution, &missing, progress);
                        added_now = true;
                    }
                    Err(reason) => {
                        progress(&format!("cannot provide {}: {reason}", missing.module));
                        report.unresolved.push(UnresolvedModule {
                            module: missing.module.clone(),
                            reason,
                        });
                    }
                }
            }
            added_now |=
                self.add_missing_distributions(&run, config, report, &mut attempted, progress)?;
            if !added_now {
                added_now = self.add_unplaced_imports(
                    config,
                    deps_layer.as_deref(),
                    &own,
                    report,
                    &mut attempted,
                    progress,
                )?;
            }
            if !added_now {
                break;
            }
            config.requirements.sort();
            config.requirements.dedup();
            let mut dropped = Vec::new();
            *deps_layer = self.detected_layer(config, &mut dropped, progress)?;
            for left in dropped {
                match report
                    .added
                    .iter()
                    .position(|a| a.distribution == left.requirement)
                {
                    Some(index) => {
                        let added = report.added.remove(index);
                        report.unresolved.push(UnresolvedModule {
                            module: added.module,
                            reason: format!(
                                "{} needs packages with no pure-Python wheel: {}",
                                added.distribution, left.reason
                            ),
                        });
                    }
                    None => report.left_out.push(left),
                }
            }
        }
        Ok(true)
    }

    /// Whether `top` is a namespace package here: a folder without `__init__.py` (or with one
    /// that extends a shared namespace) in the requirements layer or under one of the
    /// repository's import roots.
    fn is_namespace(&self, config: &RepoConfig, layer: Option<&Path>, top: &str) -> bool {
        let roots = config.import_roots.iter().map(|dir| config.root.join(dir));
        layer
            .map(Path::to_path_buf)
            .into_iter()
            .chain(roots)
            .map(|base| base.join(top))
            .any(|dir| dir.is_dir() && !resolve::is_regular_package(&dir))
    }

    /// Imports inside functions fail only when a test runs, so collection never shows them
    /// missing: the scan of the test sources does ([`resolve::unplaced_imports`]). Each such
    /// module is tried once, quietly (it may be an optional import the tests guard), and added
    /// where a pure-Python wheel provides it; true when one was added.
    fn add_unplaced_imports(
        &self,
        config: &mut RepoConfig,
        layer: Option<&Path>,
        own: &BTreeSet<String>,
        report: &mut RequirementsReport,
        attempted: &mut BTreeSet<String>,
        progress: Progress<'_>,
    ) -> Result<bool> {
        let image = self.image.top_level_modules();
        let version = self.image.kind.python_version();
        let mut added = false;
        // Each is a download: a bounded number per repository.
        for missing in resolve::unplaced_imports(&config.root, own, layer, &image)
            .into_iter()
            .take(UNPLACED_IMPORTS_TRIED)
        {
            let top = missing.top_level().to_string();
            if !attempted.insert(top.clone()) {
                continue;
            }
            let names = resolve::import_names(progress)?;
            let Plan::Try(candidates) = resolve::plan(&missing, own, names) else {
                continue;
            };
            if let Ok(distribution) = self.find_distribution(&candidates, &top, config, version)? {
                add_requirement(config, report, distribution, &missing, progress);
                added = true;
            }
        }
        Ok(added)
    }

    /// Adds each distribution whose metadata the collection pass asked for and did not find
    /// (a conftest that reads a dependency's version) where it has a pure-Python wheel; true
    /// when one was added. Each is tried once (`attempted`).
    fn add_missing_distributions(
        &self,
        run: &TestReport,
        config: &mut RepoConfig,
        report: &mut RequirementsReport,
        attempted: &mut BTreeSet<String>,
        progress: Progress<'_>,
    ) -> Result<bool> {
        let version = self.image.kind.python_version();
        let mut added = false;
        for missing in resolve::missing_distributions(run) {
            let name = layers::normalise(&missing.module);
            let is_own = config
                .distribution
                .as_ref()
                .is_some_and(|(own, _)| layers::normalise(own) == name);
            let present = config
                .requirements
                .iter()
                .any(|r| layers::normalise(&requirement_name(r)) == name);
            if is_own || present || !attempted.insert(format!("metadata of {name}")) {
                continue;
            }
            let why = format!(
                "{} asks for the metadata of {}",
                missing.importer, missing.module
            );
            let download = tempfile::Builder::new()
                .prefix("frognano-resolve-")
                .tempdir()
                .map_err(SandboxError::io("create download directory"))?;
            if layers::download_pure_wheel(&missing.module, version, download.path())?.is_some() {
                progress(&format!("added {} ({why})", missing.module));
                config.requirements.push(missing.module.clone());
                report.added.push(AddedRequirement {
                    distribution: missing.module.clone(),
                    module: missing.module.clone(),
                    reason: why,
                });
                added = true;
            } else {
                report.unresolved.push(UnresolvedModule {
                    module: missing.module.clone(),
                    reason: format!(
                        "{} has no pure-Python wheel for Python {version} ({why})",
                        missing.module
                    ),
                });
            }
        }
        Ok(added)
    }

    /// The first candidate distribution with a pure-Python wheel that provides `module`, or
    /// why there is none.
    fn find_distribution(
        &self,
        candidates: &[String],
        module: &str,
        config: &RepoConfig,
        version: &str,
    ) -> Result<std::result::Result<String, String>> {
        let present: Vec<String> = config
            .requirements
            .iter()
            .map(|r| layers::normalise(&requirement_name(r)))
            .collect();
        let mut no_wheel = Vec::new();
        let mut wrong = Vec::new();
        let own = config
            .distribution
            .as_ref()
            .map(|(name, _)| layers::normalise(name));
        for candidate in candidates {
            if own.as_deref() == Some(layers::normalise(candidate).as_str()) {
                // The registry's copy of the project itself would stand in for the source
                // under test (its mutations would then change nothing the tests import).
                wrong.push(candidate.clone());
                continue;
            }
            if present.contains(&layers::normalise(candidate)) {
                // Already in the layer, and the module is still missing.
                wrong.push(candidate.clone());
                continue;
            }
            let download = tempfile::Builder::new()
                .prefix("frognano-resolve-")
                .tempdir()
                .map_err(SandboxError::io("create download directory"))?;
            match layers::download_pure_wheel(candidate, version, download.path())? {
                Some(wheel) if resolve::wheel_provides(&wheel, module) => {
                    return Ok(Ok(candidate.clone()));
                }
                Some(_) => wrong.push(candidate.clone()),
                None => no_wheel.push(candidate.clone()),
            }
        }
        let mut reason = format!("no pure-Python wheel provides {module}");
        if !no_wheel.is_empty() {
            reason.push_str(&format!(
                " ({} has no pure-Python wheel for Python {version}, or does not exist)",
                no_wheel.join(", ")
            ));
        }
        if !wrong.is_empty() {
            reason.push_str(&format!(" ({} does not provide it)", wrong.join(", ")));
        }
        Ok(Err(reason))
    }

    /// Where the resolution loop's result for this repository version is cached: keyed by
    /// the repository's Python sources, its requirements and import roots, and the image.
    fn resolution_cache_file(&self, config: &RepoConfig) -> Result<PathBuf> {
        let layer_name = self
            .pytest_layer
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let salt = serde_json::json!({
            "version": RESOLUTION_VERSION,
            "image": self.image.module_sha256,
            "pytest": layer_name,
            "requirements": config.requirements,
            "detected": config.detected,
            "roots": config.import_roots,
            "args": config.test.args,
            "ignore": config.test.ignore,
        })
        .to_string();
        let key = bytecode::source_key(&config.root, &salt)?;
        Ok(assets::cache_dir()
            .join("requirements")
            .join(self.image.kind.name())
            .join(format!("{}.json", &key[..32])))
    }

    /// The bytecode cache of a clean repository, built on first use (see [`crate::bytecode`]).
    /// A repository that does not compile cleanly simply gets no cache.
    fn repo_bytecode(&self, root: &Path, progress: Progress<'_>) -> Result<Option<PathBuf>> {
        let layer_name = self
            .pytest_layer
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let salt = format!(
            "{}-{}-{}",
            self.image.module_sha256,
            layer_name,
            assets::sha256_bytes(COMPILE_BYTECODE.as_bytes())
        );
        let key = bytecode::source_key(root, &salt)?;
        let dir = assets::cache_dir()
            .join("bytecode")
            .join(self.image.kind.name())
            .join(&key[..32]);
        if bytecode::is_complete(&dir) {
            return Ok(Some(dir));
        }
        progress("compiling the repository to bytecode (one time per repository version)");
        let work = tempfile::Builder::new()
            .prefix("frognano-compile-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        workspace::copy_repo(root, work.path())?;
        let config =
            serde_json::json!({"root": GUEST_WORK, "patterns": ["test_*.py", "*_test.py"]});
        let source = COMPILE_BYTECODE.replace(
            "__FROGNANO_CONFIG__",
            &python_string_literal(&config.to_string()),
        );
        let limits = Limits {
            timeout_s: 600.0,
            ..Limits::default()
        };
        let run =
            self.run_python_with(&source, LayerAccess::ReadOnly, Some(work.path()), limits)?;
        if run.exit_code != Some(0) {
            progress(&format!(
                "bytecode compilation skipped: {}",
                run.detail.as_deref().unwrap_or(run.stderr.trim())
            ));
            return Ok(None);
        }
        bytecode::harvest(work.path(), &dir)?;
        Ok(Some(dir))
    }
}

fn write_cache(path: &Path, resolved: &Resolved) -> Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    assets::ensure_dir(parent)?;
    let bytes = serde_json::to_vec_pretty(resolved)
        .map_err(|e| SandboxError::io("encode requirements cache")(std::io::Error::other(e)))?;
    let mut tmp = tempfile::NamedTempFile::new_in(parent)
        .map_err(SandboxError::io("create requirements cache"))?;
    std::io::Write::write_all(&mut tmp, &bytes)
        .map_err(SandboxError::io("write requirements cache"))?;
    tmp.persist(path)
        .map_err(|e| SandboxError::io("store requirements cache")(e.error))?;
    Ok(())
}

/// Adds `distribution` to the requirements for the module `missing` names, and reports it.
fn add_requirement(
    config: &mut RepoConfig,
    report: &mut RequirementsReport,
    distribution: String,
    missing: &resolve::MissingModule,
    progress: Progress<'_>,
) {
    let why = format!("{} imports {}", missing.importer, missing.module);
    progress(&format!("added {distribution} ({why})"));
    config.requirements.push(distribution.clone());
    report.added.push(AddedRequirement {
        distribution,
        module: missing.module.clone(),
        reason: why,
    });
}
