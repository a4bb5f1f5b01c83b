//! `frognano bench sandbox`: the same suites natively and in the sandbox, side by side in one
//! run. With `--repo` (default: a bundled sample) one repository, many runs; with
//! `--packages` pinned registry packages (hash-checked sdists), each run natively, in one
//! sandbox instance and sharded over several, with where each run's time goes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use frognano_core::{RunOutcome, RunProfile, TestOutcome, TestReport};
use frognano_sandbox::native::{NativeRun, NativeSuite};
use frognano_sandbox::{PreparedRepo, Sandbox, TestRequest};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{ImageArgs, bundled, default_repo, median, open_sandbox};

#[derive(Args, Debug)]
pub struct BenchSandboxArgs {
    /// Repository to benchmark (default: the bundled sample repository).
    #[arg(long, conflicts_with = "packages")]
    repo: Option<PathBuf>,
    /// Benchmark real registry packages instead: a list of pinned specs (`NAME==VERSION
    /// --hash=sha256:HEX`), by default the bundled corpus/bench/packages.txt. Their sdists are
    /// fetched once, verified and cached.
    #[arg(long, value_name = "LIST")]
    #[allow(clippy::option_option)]
    packages: Option<Option<PathBuf>>,
    /// Measure the engine settings instead: the CPython 3.12 image compiled with the
    /// sandbox's wasmtime configuration and with variants of it (no epoch interruption,
    /// forced bounds checks, other Cranelift levels), the same workload timed under each.
    #[arg(long, conflicts_with_all = ["repo", "packages"])]
    engine: bool,
    /// Only these packages of the list (names, comma-separated).
    #[arg(long, value_delimiter = ',', requires = "packages")]
    only: Vec<String>,
    /// Timed runs of each side (after one warm-up each); default 10 for a repository, 3 for
    /// packages.
    #[arg(long)]
    runs: Option<usize>,
    /// Instances of the sharded runs (packages; default: the sandbox's worker count, at least 2).
    #[arg(long)]
    shards: Option<usize>,
    /// Host Python for the native runs (needs pytest).
    #[arg(long, default_value = "python3")]
    python: String,
    #[command(flatten)]
    image: ImageArgs,
}

pub fn bench(args: &BenchSandboxArgs) -> anyhow::Result<ExitCode> {
    if args.runs == Some(0) {
        bail!("--runs must be at least 1");
    }
    if args.engine {
        return bench_engine(args);
    }
    match &args.packages {
        Some(list) => bench_packages(args, list.as_deref()),
        None => bench_repo(args),
    }
}

/// The engine settings: each variant's median against the sandbox's configuration.
fn bench_engine(args: &BenchSandboxArgs) -> anyhow::Result<ExitCode> {
    let runs = args.runs.unwrap_or(5);
    let bar = ProgressBar::new_spinner();
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let probes =
        frognano_sandbox::probe::probe_engine(runs, &|msg| bar.set_message(msg.to_string()))?;
    bar.finish_and_clear();
    let baseline = probes
        .iter()
        .find(|p| p.sandbox_default)
        .map_or(f64::NAN, |p| p.median_s);
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "engine configuration",
        "workload median s",
        "vs sandbox",
        "compile s",
    ]);
    for probe in &probes {
        table.add_row([
            probe.name.to_string(),
            format!("{:.3}", probe.median_s),
            format!("{:.2}x", probe.median_s / baseline),
            format!("{:.1}", probe.compile_s),
        ]);
    }
    // The same workload natively, for scale.
    let mut native = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let status = std::process::Command::new(&args.python)
            .args(["-c", frognano_sandbox::probe::WORKLOAD])
            .stdout(std::process::Stdio::null())
            .status()
            .with_context(|| format!("run {}", args.python))?;
        if !status.success() {
            bail!("{} could not run the workload", args.python);
        }
        native.push(started.elapsed().as_secs_f64());
    }
    let native_median = median(&mut native);
    table.add_row([
        format!("native {} (reference)", args.python),
        format!("{native_median:.3}"),
        format!("{:.2}x", native_median / baseline),
        "-".to_string(),
    ]);
    println!("CPython 3.12 for WASI, the same Python workload, {runs} runs of each, alternating:");
    println!("{table}");
    Ok(ExitCode::SUCCESS)
}

/// One repository: medians of alternating native and sandboxed runs, then batch throughput.
fn bench_repo(args: &BenchSandboxArgs) -> anyhow::Result<ExitCode> {
    let runs = args.runs.unwrap_or(10);
    let repo = match &args.repo {
        Some(repo) => repo.clone(),
        None => default_repo()?,
    };
    let sandbox = open_sandbox(args.image.options()?, false)?;
    let prepared = sandbox.prepare_repo(&repo, &|msg| eprintln!("  {msg}"))?;
    let native = native_suite(&repo, &prepared, &args.python)?;
    let run_sandbox = || -> anyhow::Result<(f64, TestReport)> {
        let started = Instant::now();
        let report = sandbox.run_tests_prepared(&prepared, &TestRequest::default())?;
        Ok((started.elapsed().as_secs_f64(), report))
    };
    run_native(&native, "the native run")?;
    let (_, report) = run_sandbox()?;
    println!(
        "repository: {} ({} tests; image {}, snapshot {})",
        repo.display(),
        report.tests.len(),
        sandbox.image(),
        if sandbox.uses_snapshot() { "on" } else { "off" }
    );
    let bar = ProgressBar::new(runs as u64 * 2);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut native_s = Vec::with_capacity(runs);
    let mut sandboxed = Vec::with_capacity(runs);
    for _ in 0..runs {
        native_s.push(run_native(&native, "the native run")?.seconds);
        bar.inc(1);
        let (seconds, report) = run_sandbox()?;
        if report.outcome != RunOutcome::Passed {
            bar.finish_and_clear();
            bail!(
                "the sandboxed run did not pass: {:?} {:?}",
                report.outcome,
                report.detail
            );
        }
        sandboxed.push(seconds);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let native_median = median(&mut native_s);
    let sandbox_median = median(&mut sandboxed);
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "", "median s", "min s", "max s"
    );
    println!(
        "{:<28} {:>10.3} {:>10.3} {:>10.3}",
        format!("native {}", args.python),
        native_median,
        native_s[0],
        native_s[native_s.len() - 1]
    );
    println!(
        "{:<28} {:>10.3} {:>10.3} {:>10.3}",
        format!("sandbox {}", sandbox.image()),
        sandbox_median,
        sandboxed[0],
        sandboxed[sandboxed.len() - 1]
    );
    println!(
        "ratio sandbox/native: {:.2}",
        sandbox_median / native_median
    );
    // Throughput with every worker busy: the same suite many times through the batched API.
    let batch = sandbox.workers() * 3;
    let jobs: Vec<_> = (0..batch)
        .map(|_| (repo.clone(), TestRequest::default()))
        .collect();
    let started = Instant::now();
    let reports = sandbox.run_tests_many(&jobs);
    let elapsed = started.elapsed().as_secs_f64();
    let passed = reports
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.outcome == RunOutcome::Passed))
        .count();
    println!(
        "parallel: {batch} runs on {} workers in {elapsed:.2} s = {:.1} runs/s ({:.2}x the serial rate; {passed}/{batch} passed)",
        sandbox.workers(),
        batch as f64 / elapsed,
        (batch as f64 / elapsed) * sandbox_median
    );
    Ok(ExitCode::SUCCESS)
}

/// A native suite for timed runs (see [`NativeSuite`]): the repository's pytest arguments and,
/// on `PYTHONPATH`, its import roots and requirements layer.
fn native_suite(repo: &Path, prepared: &PreparedRepo, python: &str) -> anyhow::Result<NativeSuite> {
    NativeSuite::new(
        repo,
        &prepared.native_python_path(),
        &prepared.pytest_args(),
        python,
    )
    .map_err(|e| anyhow::anyhow!("{}: {e}", repo.display()))
}

/// One timed native run: its results, or why pytest ran no suite.
fn run_native(suite: &NativeSuite, what: &str) -> anyhow::Result<NativeRun> {
    suite
        .run(NATIVE_TIMEOUT_S)
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))
}

/// Longest a native run may take.
const NATIVE_TIMEOUT_S: f64 = 1800.0;

/// One package's figures.
struct PackageResult {
    name: String,
    tests: usize,
    passed: usize,
    native_s: f64,
    single_s: f64,
    sharded_s: f64,
    sandbox_profile: Option<RunProfile>,
    native_profile: Option<RunProfile>,
    sharded_differences: usize,
}

/// Pinned registry packages: native, single-instance and sharded runs, alternating.
fn bench_packages(args: &BenchSandboxArgs, list: Option<&Path>) -> anyhow::Result<ExitCode> {
    let runs = args.runs.unwrap_or(3);
    let list = match list {
        Some(list) => list.to_path_buf(),
        None => bundled(
            "corpus/bench/packages.txt",
            "pass --packages LIST (pinned specs, one per line)",
        )?,
    };
    let text =
        std::fs::read_to_string(&list).with_context(|| format!("read {}", list.display()))?;
    let base = list.parent().unwrap_or(Path::new("."));
    let mut specs = frognano_corpus::parse_list(&text, base, &list.display().to_string())?;
    if !args.only.is_empty() {
        let wanted: Vec<String> = args
            .only
            .iter()
            .map(|n| frognano_corpus::normalise(n))
            .collect();
        specs.retain(|s| {
            s.package()
                .is_some_and(|p| wanted.contains(&frognano_corpus::normalise(p)))
        });
        if specs.is_empty() {
            bail!("none of {:?} is in {}", args.only, list.display());
        }
    }
    let sandbox = open_sandbox(args.image.options()?, false)?;
    let shards = args.shards.unwrap_or(sandbox.workers()).max(2);
    if shards > frognano_sandbox::MAX_SHARDS {
        bail!("--shards must be at most {}", frognano_sandbox::MAX_SHARDS);
    }
    let trees = frognano_sandbox::assets::cache_dir().join("bench-packages");
    println!(
        "{} packages from {}; {runs} timed runs of each side after a warm-up; sharded over {shards} instances; {} cores",
        specs.len(),
        list.display(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut results = Vec::new();
    for spec in &specs {
        let name = spec.id();
        let tree = trees.join(&name);
        if !tree.is_dir() {
            eprintln!("  {name}: fetching and unpacking the sdist (hash-checked, cached)");
            frognano_corpus::materialise(spec, &tree, sandbox.image().python_version())
                .map_err(|f| anyhow::anyhow!("{name}: {}", f.message))?;
        }
        let prepared = sandbox.prepare_repo(&tree, &|msg| eprintln!("  {name}: {msg}"))?;
        results.push(bench_package(
            &sandbox, &prepared, &tree, &name, args, runs, shards,
        )?);
    }
    print_package_table(&results, shards, &args.python);
    print_profile_table(&results);
    Ok(ExitCode::SUCCESS)
}

fn bench_package(
    sandbox: &Sandbox,
    prepared: &PreparedRepo,
    tree: &Path,
    name: &str,
    args: &BenchSandboxArgs,
    runs: usize,
    shards: usize,
) -> anyhow::Result<PackageResult> {
    let native = native_suite(tree, prepared, &args.python)?;
    let single_request = TestRequest::default();
    let sharded_request = TestRequest {
        shards,
        ..TestRequest::default()
    };
    let timed = |request: &TestRequest| -> anyhow::Result<(f64, TestReport)> {
        let started = Instant::now();
        let report = sandbox.run_tests_prepared(prepared, request)?;
        let seconds = started.elapsed().as_secs_f64();
        if !matches!(report.outcome, RunOutcome::Passed | RunOutcome::Failed) {
            bail!(
                "{name}: the sandboxed run ended as {}: {}",
                report.outcome.as_str(),
                report.detail.as_deref().unwrap_or("")
            );
        }
        Ok((seconds, report))
    };
    // Warm-up (native bytecode written, sandbox caches filled), and sharded outcomes against
    // single-instance ones.
    run_native(&native, name)?;
    let (_, single) = timed(&single_request)?;
    let (_, sharded) = timed(&sharded_request)?;
    let outcomes = |report: &TestReport| -> BTreeMap<String, TestOutcome> {
        report
            .tests
            .iter()
            .map(|t| (t.id.clone(), t.outcome))
            .collect()
    };
    let (single_outcomes, sharded_outcomes) = (outcomes(&single), outcomes(&sharded));
    let sharded_differences = single_outcomes
        .iter()
        .filter(|(id, outcome)| sharded_outcomes.get(*id) != Some(outcome))
        .count()
        + sharded_outcomes
            .keys()
            .filter(|id| !single_outcomes.contains_key(*id))
            .count();
    let bar = ProgressBar::new(runs as u64 * 3);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} runs {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(name.to_string());
    let (mut native_s, mut single_s, mut sharded_s) = (Vec::new(), Vec::new(), Vec::new());
    let mut profiles: Vec<(f64, RunProfile)> = Vec::new();
    let mut native_profiles: Vec<(f64, RunProfile)> = Vec::new();
    for _ in 0..runs {
        let run = run_native(&native, name)?;
        native_s.push(run.seconds);
        native_profiles.push((run.seconds, run.profile));
        bar.inc(1);
        let (seconds, report) = timed(&single_request)?;
        single_s.push(seconds);
        if let Some(profile) = report.profile {
            profiles.push((seconds, profile));
        }
        bar.inc(1);
        sharded_s.push(timed(&sharded_request)?.0);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let single_median = median(&mut single_s);
    let native_median = median(&mut native_s);
    let result = PackageResult {
        name: name.to_string(),
        tests: single.tests.len(),
        passed: single.passed,
        native_s: native_median,
        single_s: single_median,
        sharded_s: median(&mut sharded_s),
        sandbox_profile: closest_to(&profiles, single_median),
        native_profile: closest_to(&native_profiles, native_median),
        sharded_differences,
    };
    eprintln!(
        "  {name}: native {:.2} s, sandbox {:.2} s ({:.2}x), sharded {:.2} s ({:.2}x)",
        result.native_s,
        result.single_s,
        result.single_s / result.native_s,
        result.sharded_s,
        result.sharded_s / result.native_s
    );
    Ok(result)
}

/// The profile of the run whose time is closest to `seconds` (the median run's).
fn closest_to(profiles: &[(f64, RunProfile)], seconds: f64) -> Option<RunProfile> {
    profiles
        .iter()
        .min_by(|a, b| (a.0 - seconds).abs().total_cmp(&(b.0 - seconds).abs()))
        .map(|(_, p)| *p)
}

fn print_package_table(results: &[PackageResult], shards: usize, python: &str) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "package".to_string(),
        "tests (passed)".to_string(),
        format!("native {python} s"),
        "sandbox s".to_string(),
        "ratio".to_string(),
        format!("sharded x{shards} s"),
        "ratio".to_string(),
        "sharded = single".to_string(),
    ]);
    for r in results {
        table.add_row([
            r.name.clone(),
            format!("{} ({})", r.tests, r.passed),
            format!("{:.3}", r.native_s),
            format!("{:.3}", r.single_s),
            format!("{:.2}", r.single_s / r.native_s),
            format!("{:.3}", r.sharded_s),
            format!("{:.2}", r.sharded_s / r.native_s),
            if r.sharded_differences == 0 {
                "yes".to_string()
            } else {
                format!("{} tests differ", r.sharded_differences)
            },
        ]);
    }
    println!("{table}");
    let single_met = results.iter().filter(|r| r.single_s <= r.native_s).count();
    let long: Vec<&PackageResult> = results.iter().filter(|r| r.native_s > 2.0).collect();
    let sharded_met = long
        .iter()
        .filter(|r| r.sharded_s <= 0.6 * r.native_s)
        .count();
    println!(
        "single instance at or below native: {single_met} of {}; sharded at or below 0.6x on suites over 2 s natively: {sharded_met} of {}",
        results.len(),
        long.len()
    );
}

fn print_profile_table(results: &[PackageResult]) {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let mut header = vec!["package".to_string(), "run".to_string()];
    header.extend(
        RunProfile::default()
            .phases()
            .iter()
            .map(|(name, _)| name.to_string()),
    );
    header.push("overhead/test".to_string());
    table.set_header(header);
    for r in results {
        let rows = [("native", r.native_profile), ("sandbox", r.sandbox_profile)];
        for (run, profile) in rows {
            let Some(profile) = profile else { continue };
            let mut row = vec![r.name.clone(), run.to_string()];
            row.extend(profile.phases().iter().map(|(_, s)| format!("{s:.3}")));
            row.push(format!("{:.2} ms", 1000.0 * profile.overhead_per_test_s()));
            table.add_row(row);
        }
    }
    println!(
        "where the time goes (seconds; native start-up includes the interpreter and pytest's import):"
    );
    println!("{table}");
}
