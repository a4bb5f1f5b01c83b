//! Test runs: a repository's pytest suite on a fresh copy of it or in a given workspace.

use std::fs;
use std::path::Path;
use std::time::Instant;

use frognano_core::{RunOutcome, RunProfile, TestReport};

use super::guest::{GUEST_ENVIRONMENT, Mounts, Program};
use super::report::{build_report, read_results};
use super::shard::{Shard, ShardRun};
use super::{
    DEVNULL_FILE, GUEST_DEPS, GUEST_PYTEST, GUEST_TMP, GUEST_WORK, PreparedRepo, RESULTS_FILE,
    Sandbox, TestRequest, python_string_literal,
};
use crate::error::{Result, SandboxError};
use crate::{bytecode, layers, workspace};

const RUN_PYTEST: &str = include_str!("../guest/run_pytest.py");

impl Sandbox {
    /// Runs a repository's test suite on a fresh copy of it. The user's directory is not
    /// modified.
    pub fn run_tests(&self, repo: &Path, request: &TestRequest) -> Result<TestReport> {
        let prepared = self.prepare_repo(repo, &|_| {})?;
        self.run_tests_prepared(&prepared, request)
    }

    /// Runs a prepared repository's test suite on a fresh copy of it (see
    /// [`Sandbox::prepare_repo`]); the user's directory is not modified.
    ///
    /// With [`TestRequest::shards`] above 1 the selected tests are split over that many
    /// sandbox instances run at once, and their results merged in collection order.
    pub fn run_tests_prepared(
        &self,
        prepared: &PreparedRepo,
        request: &TestRequest,
    ) -> Result<TestReport> {
        if request.shards > 1 {
            return self.run_sharded(prepared, None, request);
        }
        self.runtime
            .block_on(self.run_prepared(prepared, request, None))
            .map(|run| run.report)
    }

    /// Runs the tests of an existing workspace in place (for environments that manage their
    /// own copy). The workspace is modified by the guest exactly as a test run would. A
    /// sharded request runs its first shard in `workspace` and the others in copies of it.
    pub fn run_tests_in_workspace(
        &self,
        prepared: &PreparedRepo,
        workspace: &Path,
        request: &TestRequest,
    ) -> Result<TestReport> {
        if request.shards > 1 {
            return self.run_sharded(prepared, Some(workspace), request);
        }
        self.runtime
            .block_on(self.run_in_workspace(prepared, workspace, request, None, Instant::now()))
            .map(|run| run.report)
    }

    /// One run (or one shard of a run) on a fresh copy of the prepared repository.
    pub(super) async fn run_prepared(
        &self,
        prepared: &PreparedRepo,
        request: &TestRequest,
        shard: Option<Shard>,
    ) -> Result<ShardRun> {
        let started = Instant::now();
        let work = tempfile::Builder::new()
            .prefix("frognano-work-")
            .tempdir()
            .map_err(SandboxError::io("create workspace"))?;
        workspace::copy_repo(&prepared.config.root, work.path())?;
        let mut run = self
            .run_in_workspace(prepared, work.path(), request, shard, started)
            .await?;
        let removing = Instant::now();
        drop(work);
        if let Some(profile) = &mut run.report.profile {
            profile.host_other_s += removing.elapsed().as_secs_f64();
        }
        Ok(run)
    }

    /// One run (or one shard of a run) in `work`; `started` is when the run began (before
    /// the workspace was made), for the profile.
    pub(super) async fn run_in_workspace(
        &self,
        prepared: &PreparedRepo,
        work: &Path,
        request: &TestRequest,
        shard: Option<Shard>,
        started: Instant,
    ) -> Result<ShardRun> {
        let config = &prepared.config;
        let limits = request.limits.unwrap_or_else(|| config.limits());
        limits
            .validate()
            .map_err(|e| SandboxError::InvalidOption(e.to_string()))?;
        if let Some(shard) = shard
            && (shard.count == 0 || shard.index >= shard.count)
        {
            return Err(SandboxError::InvalidOption(format!(
                "shard {} of {} does not exist",
                shard.index, shard.count
            )));
        }
        if let Some(cache) = &prepared.bytecode {
            // Best effort: without it the guest compiles the modules itself.
            let _ = bytecode::overlay(cache, work);
        }
        let tmp = tempfile::Builder::new()
            .prefix("frognano-tmp-")
            .tempdir()
            .map_err(SandboxError::io("create tmp"))?;
        fs::write(tmp.path().join(DEVNULL_FILE), b"")
            .map_err(SandboxError::io("create devnull"))?;
        let mut sys_path: Vec<String> = config
            .import_roots
            .iter()
            .map(|r| {
                if r == "." {
                    GUEST_WORK.to_string()
                } else {
                    format!("{GUEST_WORK}/{r}")
                }
            })
            .collect();
        if prepared.deps_layer.is_some() {
            sys_path.push(GUEST_DEPS.to_string());
        }
        // A plugin package needs its metadata even where no version is stated.
        let distribution = config.distribution.clone().or_else(|| {
            (!config.pytest_plugins.is_empty()).then(|| ("project".to_string(), "0".to_string()))
        });
        if let Some((name, version)) = &distribution {
            // Tests often ask importlib.metadata for the project's own version.
            let site = tmp.path().join(".frognano-site");
            let info = site.join(format!("{}-{}.dist-info", name.replace('-', "_"), version));
            fs::create_dir_all(&info).map_err(SandboxError::io("create dist-info"))?;
            fs::write(
                info.join("METADATA"),
                format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"),
            )
            .map_err(SandboxError::io("write dist-info"))?;
            if !config.pytest_plugins.is_empty() {
                // A pytest plugin package's tests expect its plugin loaded, as an install
                // would (pytester's sessions included).
                fs::write(
                    info.join("entry_points.txt"),
                    crate::entry_points::entry_points_txt(&config.pytest_plugins),
                )
                .map_err(SandboxError::io("write dist-info"))?;
            }
            sys_path.push(format!("{GUEST_TMP}/.frognano-site"));
        }
        let mut args = base_pytest_args();
        args.extend(prepared.pytest_args());
        args.extend(request.pytest_args.iter().cloned());
        let mut env: serde_json::Map<String, serde_json::Value> = GUEST_ENVIRONMENT
            .iter()
            .map(|(key, value)| (key.to_string(), (*value).into()))
            .collect();
        if prepared.deps_layer.is_none() && config.pytest_plugins.is_empty() {
            // Only a requirements layer or the project itself can hold pytest plugins that
            // register through entry points; without either, skip the scan of every
            // distribution on the path (tens of ms).
            env.insert("PYTEST_DISABLE_PLUGIN_AUTOLOAD".into(), "1".into());
        }
        let run_config = serde_json::json!({
            "sys_path": sys_path,
            "env": env,
            "cwd": GUEST_WORK,
            "devnull": format!("{GUEST_TMP}/{DEVNULL_FILE}"),
            "args": args,
            "plugin": layers::PLUGIN_MODULE,
            // What the guest's sysconfig calls site-packages: requirements, then pytest.
            "site_packages": [GUEST_DEPS, GUEST_PYTEST],
            "results": format!("{GUEST_TMP}/{RESULTS_FILE}"),
            "coverage": request.coverage.then_some(GUEST_WORK),
            "shard": shard.map(|s| [s.index, s.count]),
        });
        let source = RUN_PYTEST.replace(
            "__FROGNANO_CONFIG__",
            &python_string_literal(&run_config.to_string()),
        );
        let mounts = Mounts {
            pytest: &self.pytest_layer,
            pytest_writable: false,
            deps: prepared.deps_layer.as_deref().unwrap_or(&self.empty_layer),
            deps_writable: false,
            tmp: tmp.path(),
            work,
        };
        let program = if self.snapshot {
            Program::Turn(&source)
        } else {
            let mut argv = vec!["python".to_string(), "-c".to_string(), source.clone()];
            argv.extend(args.iter().cloned());
            Program::Command(argv)
        };
        let workspace_s = started.elapsed().as_secs_f64();
        let template = self.template_for(prepared.deps_layer.as_deref());
        let run = self
            .run_guest(
                &template,
                &mounts,
                &program,
                &limits,
                request.cancel.as_ref(),
            )
            .await?;
        let results = read_results(tmp.path())?;
        drop(tmp);
        let mut profile = RunProfile {
            workspace_s,
            instantiate_s: run.instantiate.as_secs_f64(),
            tests: results.records.len(),
            shards: shard.map_or(1, |s| s.count),
            ..RunProfile::default()
        };
        if let Some(marks) = &results.marks {
            marks.fill(
                &mut profile,
                results.records.iter().map(|r| r.duration_s).sum(),
            );
        }
        let mut report = build_report(results.records, results.exit_code, run);
        report.coverage = results.coverage;
        if report.outcome == RunOutcome::Crashed && results.tests_finished {
            // The crash came after the run loop (a finalizer, interpreter shutdown): every
            // verdict stands.
            report.outcome = report.outcome_from_counts();
            report.detail = Some(format!(
                "every test finished; the interpreter then crashed ({}), which changes no \
                 test's verdict",
                report.detail.as_deref().unwrap_or("no detail")
            ));
        }
        if !matches!(
            report.outcome,
            RunOutcome::Passed | RunOutcome::Failed | RunOutcome::NoTests
        ) {
            report.interrupted = results.interrupted;
        }
        profile.attribute_rest_to_host(started.elapsed().as_secs_f64());
        report.profile = Some(profile);
        Ok(ShardRun {
            report,
            positions: results.positions,
        })
    }
}

/// pytest options every guest session needs: no cache or faulthandler plugins (no `os.dup`,
/// nothing to keep between runs), `sys`-level capture, and log and temp paths in `/tmp`.
pub(super) fn base_pytest_args() -> Vec<String> {
    vec![
        "-p".into(),
        "no:cacheprovider".into(),
        "-p".into(),
        "no:faulthandler".into(),
        "--capture=sys".into(),
        "--color=no".into(),
        "-o".into(),
        format!("log_file={GUEST_TMP}/.pytest.log"),
        format!("--basetemp={GUEST_TMP}/pytest"),
    ]
}
