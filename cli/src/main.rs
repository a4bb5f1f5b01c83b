//! The `frognano` command: a thin front end over the library crates. It sets up the runtime,
//! runs a repository's tests in the sandbox, evaluates policies on task sets, synthesizes
//! tasks, trains the repair policy, runs local models (generation, the agent) and benchmarks
//! each part against its peer, with progress bars and tables; every feature it offers lives in
//! a library crate that Python and C reach too.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use frognano_core::{Limits, RunOutcome, TestReport};
use frognano_sandbox::{ImageKind, Sandbox, SandboxOptions, TestRequest};
use indicatif::{ProgressBar, ProgressStyle};

mod agent;
mod bench_learner;
mod bench_policy;
mod bench_sandbox;
mod bench_serve;
mod bench_soak;
mod bench_training;
mod cluster;
mod corpus;
mod eval;
mod models;
// Learning-curve charts of `frognano train`, `frognano bench curriculum` and `bench learning`.
mod plot;
mod serve;
mod synth;
mod train;

/// Exit status when the command itself failed (bad arguments, setup errors).
const EXIT_ERROR: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "frognano",
    version,
    about = "Train and run compact coding agents; run repositories' tests in WebAssembly sandboxes"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand, Debug)]
enum Commands {
    /// Fetch, verify and prepare every runtime asset (idempotent).
    Setup(SetupArgs),
    /// Run a repository's test suite in the sandbox.
    ///
    /// Exit status: 0 all selected tests passed, 1 some failed, 2 usage or setup error,
    /// 3 timeout, 4 memory cap reached, 5 no tests collected, 6 output cap reached,
    /// 7 the interpreter crashed.
    Test(TestArgs),
    /// Run a policy on every task of a task set and summarise (resolved rate, error recovery,
    /// steps, env steps/s); optionally write one episode record per line.
    Eval(eval::EvalArgs),
    /// Make validated bug-fix tasks from a repository whose tests pass: mutations found with
    /// a real parser, each checked against the repository's own tests in the sandbox.
    Synth(synth::SynthArgs),
    /// Real packages as environments: add registry pins, directories or sdists; build them
    /// (zero configuration, parallel, resumable); list, synthesize across, export a dataset.
    #[command(subcommand)]
    Corpus(corpus::CorpusCommand),
    /// Train the bundled repair policy with RL (the main job): tasks synthesized online at the
    /// frontier of learnability (or a static / easy-to-hard curriculum), groups of rollouts,
    /// group advantages, a learning-curve plot and a held-out evaluation.
    Train(train::TrainArgs),
    /// Local models: install the inference environment, fetch and convert models.
    #[command(subcommand)]
    Models(models::ModelsCommand),
    /// Let a local model fix a repository's failing tests in the sandbox; prints the diff.
    Agent(agent::AgentArgs),
    /// Generate text with a local model (batched, with per-token log-probs in --json).
    Generate(models::GenerateArgs),
    /// Serve a local model over an OpenAI-compatible HTTP API (chat and plain completions,
    /// streaming, log-probs, token ids; concurrent requests batched) until Ctrl-C.
    Serve(serve::ServeArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Args, Debug)]
struct ImageArgs {
    /// CPython image: python-3.15 (default, snapshot) or python-3.12.
    #[arg(long, default_value = "python-3.15")]
    image: String,
    /// Disable the pre-initialised interpreter snapshot (slower; for comparison).
    #[arg(long)]
    no_snapshot: bool,
    /// Give a repository with test requirements a snapshot with them imported (minutes to
    /// build once per requirements layer, about 300 MB of cache; saves each run their import).
    #[arg(long, conflicts_with = "no_snapshot")]
    layer_snapshot: bool,
}

impl ImageArgs {
    fn options(&self) -> anyhow::Result<SandboxOptions> {
        Ok(SandboxOptions {
            image: ImageKind::parse(&self.image)?,
            snapshot: !self.no_snapshot,
            layer_snapshots: self.layer_snapshot,
            ..SandboxOptions::default()
        })
    }
}

#[derive(Args, Debug)]
struct SetupArgs {
    /// Prepare every image, not only the default one.
    #[arg(long)]
    all_images: bool,
    #[command(flatten)]
    image: ImageArgs,
}

#[derive(Args, Debug)]
struct TestArgs {
    /// The repository to test (never modified: tests run on a copy).
    repo: PathBuf,
    /// Print one JSON object with the report on stdout.
    #[arg(long)]
    json: bool,
    /// Time limit in seconds of the guest's own time: its CPU time and its sleeps, not its
    /// waits for a core.
    #[arg(long, allow_negative_numbers = true)]
    timeout: Option<f64>,
    /// Memory cap in MiB.
    #[arg(long)]
    memory_mb: Option<u64>,
    /// Output cap in bytes (stdout and stderr each).
    #[arg(long)]
    output_bytes: Option<usize>,
    /// Disk cap in MiB for the workspace plus /tmp (default 2048).
    #[arg(long)]
    disk_mb: Option<u64>,
    /// Record the lines of the repository each test executes (in `--json` output).
    #[arg(long)]
    coverage: bool,
    /// Split the tests over N sandbox instances run at once (results merged in collection
    /// order); helps a single run on idle cores.
    #[arg(short = 'j', long = "shards", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=frognano_sandbox::MAX_SHARDS as i64))]
    shards: u16,
    /// Print where the run's time went (workspace, instantiation, pytest start-up,
    /// collection, tests, per-test overhead, finish).
    #[arg(long)]
    profile: bool,
    #[command(flatten)]
    image: ImageArgs,
    /// Arguments passed to pytest (after `--`).
    #[arg(last = true)]
    pytest_args: Vec<String>,
}

#[derive(Subcommand, Debug)]
enum BenchCommand {
    /// Run the same suite natively (`python3 -m pytest`) and in the sandbox, alternating, and
    /// print the medians and the ratio sandbox/native; `--packages` does it for pinned registry
    /// packages, single-instance and sharded, with where the time goes.
    Sandbox(bench_sandbox::BenchSandboxArgs),
    /// Reset latency (vs copying the repository from disk), batched tool steps per second with
    /// an EnvPool (1 worker vs all), and whole oracle episodes.
    Env(eval::BenchEnvArgs),
    /// Validated tasks per minute, with impact-selected tests and with the whole suite per
    /// candidate (same seed, same run), against the 100/min target and SWE-smith's pace.
    Synth(synth::BenchSynthArgs),
    /// Frontier synthesis vs a static curriculum (and easy-to-hard): same policy
    /// initialisation and rollout budget, several seeds, completion on one held-out set.
    Curriculum(bench_training::BenchCurriculumArgs),
    /// A language model trained with the frontier and a static curriculum at equal rollouts
    /// over several seeds: held-out resolved before and after (per difficulty rung), valid
    /// commands, groups without signal, rollout and learner tokens/s, wall time, mean ± sd.
    Learning(bench_training::BenchLearningArgs),
    /// Local model generation speed and memory against onnxruntime-genai on the same model.
    Policy(bench_policy::BenchPolicyArgs),
    #[command(hide = true)]
    PolicyWorker(bench_policy::PolicyWorkerArgs),
    /// The language-model loop: rollout and learner tokens/s, hand-back seconds and the
    /// log-prob parity of the learner against ONNX Runtime.
    Learner(bench_learner::BenchLearnerArgs),
    /// `frognano serve` against llama.cpp's server (aggregate tok/s at 1, 4 and 8 clients,
    /// side by side) and the HTTP policy's own requests/s.
    Serve(bench_serve::BenchServeArgs),
    /// Thousands of episodes of a random, often hostile policy through the environment pool:
    /// resident memory, open file descriptors and temporary folders at the start and the end,
    /// records written, and a digest of the verdicts to compare runs (idle against loaded).
    Soak(bench_soak::BenchSoakArgs),
}

/// Output piped into a reader that stops early (`frognano eval | head`) ends the process
/// quietly, as for other command-line tools, instead of a panic on the next `println!`.
/// Rust ignores SIGPIPE by default; restore the default action.
fn exit_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread exists; setting a signal's
    // disposition to its default is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    exit_quietly_on_closed_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Commands::Setup(args) => setup(&args),
        Commands::Test(args) => test(&args),
        Commands::Eval(args) => eval::eval(&args),
        Commands::Bench(BenchCommand::Sandbox(args)) => bench_sandbox::bench(&args),
        Commands::Bench(BenchCommand::Env(args)) => eval::bench_env(&args),
        Commands::Synth(args) => synth::synth(&args),
        Commands::Corpus(command) => corpus::corpus(&command),
        Commands::Bench(BenchCommand::Synth(args)) => synth::bench_synth(&args),
        Commands::Train(args) => train::train(&args),
        Commands::Models(command) => models::models(&command),
        Commands::Generate(args) => models::generate_command(&args),
        Commands::Serve(args) => serve::serve(&args),
        Commands::Agent(args) => agent::agent(&args),
        Commands::Bench(BenchCommand::Curriculum(args)) => bench_training::bench_curriculum(&args),
        Commands::Bench(BenchCommand::Learning(args)) => bench_training::bench_learning(&args),
        Commands::Bench(BenchCommand::Policy(args)) => bench_policy::bench_policy(&args),
        Commands::Bench(BenchCommand::PolicyWorker(args)) => bench_policy::worker(&args),
        Commands::Bench(BenchCommand::Learner(args)) => bench_learner::bench(&args),
        Commands::Bench(BenchCommand::Serve(args)) => bench_serve::bench(&args),
        Commands::Bench(BenchCommand::Soak(args)) => bench_soak::bench_soak(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// A spinner that shows each setup step; steps that finish are printed above it.
struct Steps {
    bar: ProgressBar,
    quiet: bool,
}

impl Steps {
    fn new(quiet: bool) -> Self {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new_spinner()
        };
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Steps { bar, quiet }
    }

    fn step(&self, message: &str) {
        if self.bar.is_hidden() {
            // Not a terminal (CI, a pipe): plain lines instead of a spinner.
            if !self.quiet {
                eprintln!("  {message}");
            }
        } else {
            self.bar.println(format!("  {message}"));
        }
        self.bar.set_message(message.to_string());
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn open_sandbox(options: SandboxOptions, quiet: bool) -> anyhow::Result<Sandbox> {
    let steps = Steps::new(quiet);
    let sandbox = Sandbox::new(options, &|msg| steps.step(msg));
    steps.finish();
    Ok(sandbox?)
}

fn setup(args: &SetupArgs) -> anyhow::Result<ExitCode> {
    let base = args.image.options()?;
    let images: Vec<ImageKind> = if args.all_images {
        ImageKind::ALL.to_vec()
    } else {
        vec![base.image]
    };
    for image in images {
        println!("preparing {image}");
        let started = Instant::now();
        let sandbox = open_sandbox(
            SandboxOptions {
                image,
                ..base.clone()
            },
            false,
        )?;
        let check = sandbox.run_python(
            "import sys; print(sys.version.split()[0])",
            Limits::default(),
        )?;
        if check.exit_code != Some(0) {
            bail!(
                "{image} does not start: {:?} {}",
                check.detail,
                check.stderr
            );
        }
        println!(
            "{image} ready in {:.1} s: CPython {} under wasmtime, snapshot {}",
            started.elapsed().as_secs_f64(),
            check.stdout.trim(),
            if sandbox.uses_snapshot() { "on" } else { "off" }
        );
    }
    println!("cache: {}", frognano_sandbox::assets::cache_dir().display());
    Ok(ExitCode::SUCCESS)
}

fn exit_code_for(outcome: RunOutcome) -> u8 {
    match outcome {
        RunOutcome::Passed => 0,
        RunOutcome::Failed => 1,
        RunOutcome::Timeout => 3,
        RunOutcome::MemoryExceeded => 4,
        RunOutcome::NoTests => 5,
        RunOutcome::OutputExceeded => 6,
        RunOutcome::Crashed => 7,
    }
}

fn test(args: &TestArgs) -> anyhow::Result<ExitCode> {
    if !args.repo.is_dir() {
        bail!("{}: not a directory", args.repo.display());
    }
    let mut options = args.image.options()?;
    if let Some(disk_mb) = args.disk_mb {
        options.disk_mb = disk_mb;
    }
    let sandbox = open_sandbox(options, args.json)?;
    let prepared = sandbox.prepare_repo(&args.repo, &|msg| {
        if !args.json {
            eprintln!("  {msg}");
        }
    })?;
    let limits =
        if args.timeout.is_some() || args.memory_mb.is_some() || args.output_bytes.is_some() {
            let mut limits = prepared.config.limits();
            if let Some(t) = args.timeout {
                limits.timeout_s = t;
            }
            if let Some(m) = args.memory_mb {
                limits.memory_mb = m;
            }
            if let Some(o) = args.output_bytes {
                limits.output_bytes = o;
            }
            limits.validate()?;
            Some(limits)
        } else {
            None
        };
    let request = TestRequest {
        pytest_args: args.pytest_args.clone(),
        limits,
        cancel: None,
        coverage: args.coverage,
        shards: usize::from(args.shards),
    };
    let report = sandbox.run_tests_prepared(&prepared, &request)?;
    if args.json {
        println!("{}", report_json(&report));
    } else {
        print_report(&report);
        if args.profile
            && let Some(profile) = &report.profile
        {
            print_profile(profile);
        }
    }
    Ok(ExitCode::from(exit_code_for(report.outcome)))
}

fn report_json(report: &TestReport) -> serde_json::Value {
    let tests: Vec<serde_json::Value> = report
        .tests
        .iter()
        .map(|t| {
            let mut value =
                serde_json::json!({"id": t.id, "outcome": t.outcome, "duration_s": t.duration_s});
            if let Some(message) = &t.message {
                value["message"] = serde_json::Value::String(message.clone());
            }
            if let Some(platform) = &t.platform {
                value["platform"] = serde_json::Value::String(platform.clone());
            }
            value
        })
        .collect();
    let mut value = serde_json::json!({
        "outcome": report.outcome,
        "passed": report.passed,
        "failed": report.failed,
        "errors": report.errors,
        "skipped": report.skipped,
        "xfailed": report.xfailed,
        "xpassed": report.xpassed,
        "duration_s": report.duration_s,
        "exit_code": report.exit_code,
        "detail": report.detail,
        "platform_failures": report.platform_failures(),
        "tests": tests,
    });
    if let Some(coverage) = &report.coverage {
        value["coverage"] = serde_json::to_value(coverage).unwrap_or_default();
    }
    if let Some(profile) = &report.profile {
        value["profile"] = serde_json::to_value(profile).unwrap_or_default();
    }
    value
}

/// The phases of a run as a table: seconds and share of the run.
fn print_profile(profile: &frognano_core::RunProfile) {
    let total: f64 = profile.phases().iter().map(|(_, s)| s).sum();
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header(["phase", "seconds", "share"]);
    for (name, seconds) in profile.phases() {
        table.add_row([
            name.to_string(),
            format!("{seconds:.3}"),
            format!("{:.0}%", 100.0 * seconds / total.max(f64::EPSILON)),
        ]);
    }
    table.add_row([
        "total".to_string(),
        format!("{total:.3}"),
        "100%".to_string(),
    ]);
    println!("{table}");
    println!(
        "{} tests, {:.2} ms of per-test overhead per test{}",
        profile.tests,
        1000.0 * profile.overhead_per_test_s(),
        if profile.shards > 1 {
            format!(
                "; {} shards (phases of the one that finished last)",
                profile.shards
            )
        } else {
            String::new()
        }
    );
}

fn print_report(report: &TestReport) {
    for test in report.tests.iter().filter(|t| !t.outcome.is_ok()) {
        match &test.platform {
            Some(cause) => println!(
                "{} {} (needs {cause})",
                test.outcome.as_str().to_uppercase(),
                test.id
            ),
            None => println!("{} {}", test.outcome.as_str().to_uppercase(), test.id),
        }
        if let Some(message) = &test.message {
            for line in message
                .lines()
                .filter(|l| !l.trim().is_empty())
                .rev()
                .take(3)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                println!("    {line}");
            }
        }
    }
    if report.outcome != RunOutcome::Passed {
        // What the guest printed explains collection and usage errors pytest could not
        // attribute to a test.
        for (name, text) in [("stdout", &report.stdout), ("stderr", &report.stderr)] {
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if !lines.is_empty() && (report.tests.is_empty() || name == "stderr") {
                println!("--- guest {name} (last lines)");
                for line in &lines[lines.len().saturating_sub(15)..] {
                    println!("{line}");
                }
            }
        }
    }
    if let Some(detail) = &report.detail {
        println!("{}: {detail}", report.outcome.as_str());
    }
    // "24 failed (9 sockets, 3 os.umask, 12 other)": how many failed for want of a feature
    // the platform lacks, by feature.
    let breakdown = |outcome: frognano_core::TestOutcome, total: usize| {
        let mut causes: std::collections::BTreeMap<&str, usize> = Default::default();
        for test in report.tests.iter().filter(|t| t.outcome == outcome) {
            if let Some(cause) = &test.platform {
                *causes.entry(cause.as_str()).or_default() += 1;
            }
        }
        let labelled: usize = causes.values().sum();
        if labelled == 0 {
            return String::new();
        }
        let mut causes: Vec<(&str, usize)> = causes.into_iter().collect();
        causes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut parts: Vec<String> = causes.iter().map(|(c, n)| format!("{n} {c}")).collect();
        if total > labelled {
            parts.push(format!("{} other", total - labelled));
        }
        format!(" ({})", parts.join(", "))
    };
    println!(
        "{}: {} passed, {} failed{}, {} errors{}, {} skipped, {} xfailed, {} xpassed in {:.2} s",
        report.outcome.as_str(),
        report.passed,
        report.failed,
        breakdown(frognano_core::TestOutcome::Failed, report.failed),
        report.errors,
        breakdown(frognano_core::TestOutcome::Error, report.errors),
        report.skipped,
        report.xfailed,
        report.xpassed,
        report.duration_s
    );
    let platform: usize = report.platform_failures().values().sum();
    if platform > 0 {
        println!(
            "{platform} of the failing tests need features WebAssembly (WASI) does not provide: \
             deselect them in frognano.toml [test] deselect, or leave them (synthesis excludes \
             them automatically)"
        );
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A bundled example, found from the current directory or from the source tree.
fn bundled(relative: &str, hint: &str) -> anyhow::Result<PathBuf> {
    [
        PathBuf::from(relative),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(relative),
    ]
    .into_iter()
    .find(|p| p.exists())
    .with_context(|| format!("the bundled {relative} was not found; {hint}"))
}

fn default_repo() -> anyhow::Result<PathBuf> {
    bundled("examples/repos/tinyparse", "pass --repo DIR")
}

fn default_tasks() -> anyhow::Result<PathBuf> {
    bundled("examples/tasks/sample.jsonl", "pass --tasks FILE")
}
