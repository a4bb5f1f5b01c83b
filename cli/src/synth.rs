//! `frognano synth` and `frognano bench synth`: validated bug-fix tasks from a repository.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use frognano_core::Task;
use frognano_env::taskset;
use frognano_sandbox::Sandbox;
use frognano_synth::{CombineScope, SynthConfig, SynthStats, Synthesizer};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{ImageArgs, open_sandbox};

#[derive(Args, Debug)]
pub struct SynthArgs {
    /// The repository (a directory, or a .zip/.tar.gz bundle) whose test suite passes.
    repo: Option<PathBuf>,
    /// Number of tasks to make.
    #[arg(short = 'n', long, default_value_t = 20)]
    count: usize,
    /// Where to write the tasks (JSONL, read by `frognano eval`).
    #[arg(short = 'o', long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    bugs: BugArgs,
    /// Parallel validations (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Stop after trying this many candidates.
    #[arg(long)]
    max_candidates: Option<usize>,
    /// Accept a candidate after one run (skip the reproduction run).
    #[arg(long)]
    no_reproduce: bool,
    /// Run the whole suite for every candidate instead of the tests that can see it.
    #[arg(long)]
    full_suite: bool,
    /// List the mutation operators and exit.
    #[arg(long)]
    list_operators: bool,
    /// With --ray: syntheses run side by side on the cluster (default: one per worker), with
    /// seeds SEED, SEED+1, ...; their tasks are merged without duplicates. One shard gives the
    /// tasks of a single-machine run with the same seed.
    #[arg(long, requires = "address")]
    shards: Option<usize>,
    #[command(flatten)]
    image: ImageArgs,
    #[command(flatten)]
    ray: crate::cluster::RayArgs,
}

/// What the bugs of synthesized tasks look like: shared by `frognano synth` and
/// `frognano corpus synth`.
#[derive(Args, Debug)]
pub struct BugArgs {
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Mutation operators to use, comma-separated (default: all; see --list-operators).
    #[arg(long, value_delimiter = ',')]
    operators: Vec<String>,
    /// Tasks carry 1 to K bugs, spread evenly.
    #[arg(long, default_value_t = 1)]
    max_bugs: usize,
    /// Where the bugs of a multi-bug task lie: function, file or repo.
    #[arg(long, default_value = "file")]
    scope: String,
    /// Hint levels of the problem statements, comma-separated, drawn per task: 0 module only,
    /// 1 + failing test names, 2 + assertion messages, 3 + function and tracebacks, 4 + the file
    /// and the buggy code.
    #[arg(long, value_delimiter = ',', default_value = "2")]
    hint_levels: Vec<u8>,
}

impl BugArgs {
    /// A synthesis configuration with these settings (the rest default).
    pub fn config(&self) -> anyhow::Result<SynthConfig> {
        Ok(SynthConfig {
            seed: self.seed,
            operators: self
                .operators
                .iter()
                .map(|o| o.trim().to_string())
                .collect(),
            max_bugs: self.max_bugs,
            scope: CombineScope::parse(&self.scope)?,
            hint_levels: self.hint_levels.clone(),
            ..SynthConfig::default()
        })
    }
}

pub(crate) fn progress_bar(len: usize, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} {what} [{{elapsed}}<{{eta}}] {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn config_of(args: &SynthArgs) -> anyhow::Result<SynthConfig> {
    let config = SynthConfig {
        workers: match args.workers {
            Some(0) => bail!("--workers must be at least 1"),
            Some(n) => n,
            None => 0,
        },
        reproduce: !args.no_reproduce,
        select_tests: !args.full_suite,
        max_candidates: args.max_candidates.unwrap_or(0),
        ..args.bugs.config()?
    };
    config.validate()?;
    Ok(config)
}

fn list_operators() {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "operator",
        "family",
        "what it does",
        "symptom (hint level 5)",
    ]);
    for op in frognano_synth::operators() {
        table.add_row(vec![op.name, op.origin, op.description, op.symptom]);
    }
    println!("{table}");
}

/// Runs a synthesizer for `count` tasks with a progress bar.
fn synthesize(
    sandbox: Arc<Sandbox>,
    repo: &Path,
    config: SynthConfig,
    count: usize,
    label: &str,
) -> anyhow::Result<(Vec<Task>, Synthesizer)> {
    let spinner = ProgressBar::new_spinner();
    spinner.set_message(format!(
        "{label}: intake of {} (clean suite twice, coverage)",
        repo.display()
    ));
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    let synth = Synthesizer::new(sandbox, repo, config);
    spinner.finish_and_clear();
    let mut synth = synth?;
    let intake = synth.intake();
    eprintln!(
        "{label}: {} tests pass reliably ({} failing, {} flaky, {} skipped, {} order-dependent \
         excluded); clean suite {:.2} s; {} mutation sites reached by tests",
        intake.passing.len(),
        intake.failing.len(),
        intake.flaky.len(),
        intake.skipped.len(),
        intake.order_dependent.len(),
        intake.suite_seconds,
        synth.sites_per_operator().values().sum::<usize>()
    );
    let bar = progress_bar(count, "tasks");
    bar.set_message(label.to_string());
    let tasks = synth.generate(count, &|p| {
        bar.set_position(p.valid as u64);
        bar.set_message(format!("{label}: {} candidates tried", p.tried));
    });
    bar.finish_and_clear();
    Ok((tasks?, synth))
}

fn stats_table(stats: &SynthStats) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "operator",
        "sites",
        "unreached",
        "tried",
        "valid",
        "yield",
        "rejected (why)",
    ]);
    let mut totals = (0, 0, 0, 0);
    for (name, op) in &stats.by_operator {
        totals.0 += op.sites;
        totals.1 += op.unreached;
        totals.2 += op.tried;
        totals.3 += op.valid;
        let why = op
            .rejected
            .iter()
            .map(|(reason, n)| format!("{reason} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        table.add_row(vec![
            name.clone(),
            op.sites.to_string(),
            op.unreached.to_string(),
            op.tried.to_string(),
            op.valid.to_string(),
            if op.tried == 0 {
                "-".into()
            } else {
                format!("{:.0}%", 100.0 * op.yield_rate())
            },
            why,
        ]);
    }
    table.add_row(vec![
        "total".to_string(),
        totals.0.to_string(),
        totals.1.to_string(),
        totals.2.to_string(),
        totals.3.to_string(),
        if totals.2 == 0 {
            "-".into()
        } else {
            format!("{:.0}%", 100.0 * totals.3 as f64 / totals.2 as f64)
        },
        String::new(),
    ]);
    table
}

/// Task records name their repository relative to the task file when both lie under one
/// top-level directory (a project moved as a whole keeps working); otherwise absolutely.
fn relative_sources(tasks: &mut [Task], out: &Path) {
    let Some(dir) = out
        .parent()
        .map(|d| {
            if d.as_os_str().is_empty() {
                Path::new(".")
            } else {
                d
            }
        })
        .and_then(|d| std::path::absolute(d).ok())
    else {
        return;
    };
    for task in tasks {
        let Ok(absolute) = std::path::absolute(task.repo.path()) else {
            continue;
        };
        let top = |p: &Path| p.components().take(2).collect::<PathBuf>();
        let path = if top(&absolute) == top(&dir) {
            pathdiff::diff_paths(&absolute, &dir).unwrap_or(absolute)
        } else {
            absolute
        };
        task.repo = task.repo.with_path(path);
    }
}

/// `frognano synth --ray`: shards of the synthesis on a Ray cluster's workers.
fn synth_on_cluster(
    args: &SynthArgs,
    repo: &Path,
    config: &SynthConfig,
) -> anyhow::Result<ExitCode> {
    if args.shards == Some(0) {
        bail!("--shards must be at least 1");
    }
    let repo = std::path::absolute(repo).with_context(|| format!("{}", repo.display()))?;
    let request = serde_json::json!({
        "repo": repo,
        "n": args.count,
        "seed": config.seed,
        "shards": args.shards,
        "options": {
            "operators": (!config.operators.is_empty()).then_some(&config.operators),
            "max_bugs": config.max_bugs,
            "scope": args.bugs.scope,
            "hint_levels": config.hint_levels,
            "reproduce": config.reproduce,
            "select_tests": config.select_tests,
            "max_candidates": (config.max_candidates > 0).then_some(config.max_candidates),
        },
    });
    let bar = crate::cluster::bar("shards");
    let mut tasks: Vec<Task> = Vec::new();
    let mut stats = serde_json::Value::Null;
    crate::cluster::run(&args.ray, "synth", request, Some(&bar), |event| {
        if event["event"] == "done" {
            tasks =
                serde_json::from_value(event["tasks"].clone()).context("tasks from the cluster")?;
            stats = event["stats"].clone();
            crate::cluster::report_deaths(event);
        }
        Ok(())
    })?;
    let number = |key: &str| stats[key].as_f64().unwrap_or(0.0);
    let mut summary = Table::new();
    summary.load_preset(UTF8_FULL_CONDENSED);
    summary.set_header(vec!["metric", "value"]);
    for (name, value) in [
        ("tasks", format!("{} of {} asked", tasks.len(), args.count)),
        ("shards", format!("{}", number("shards"))),
        ("candidates tried", format!("{}", number("candidates"))),
        ("duplicates skipped", format!("{}", number("duplicates"))),
        ("validation runs", format!("{}", number("validation_runs"))),
        ("worker time", format!("{:.1} s", number("elapsed_s"))),
    ] {
        summary.add_row(vec![name.to_string(), value]);
    }
    println!("{summary}");
    if let Some(failed) = stats["failed_shards"].as_array()
        && !failed.is_empty()
    {
        for reason in failed {
            eprintln!("a shard failed: {}", reason.as_str().unwrap_or("?"));
        }
    }
    if let Some(out) = &args.out {
        relative_sources(&mut tasks, out);
        taskset::save_tasks(out, &tasks).with_context(|| format!("write {}", out.display()))?;
        println!("tasks: {}", out.display());
    }
    Ok(if tasks.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

pub fn synth(args: &SynthArgs) -> anyhow::Result<ExitCode> {
    if args.list_operators {
        list_operators();
        return Ok(ExitCode::SUCCESS);
    }
    let Some(repo) = &args.repo else {
        bail!("name the repository: frognano synth REPO_DIR -n N -o TASKS.jsonl");
    };
    if args.count == 0 {
        bail!("-n must be at least 1");
    }
    let config = config_of(args)?;
    if args.ray.address.is_some() {
        return synth_on_cluster(args, repo, &config);
    }
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let (mut tasks, synth) = synthesize(sandbox, repo, config, args.count, "synth")?;
    let stats = synth.stats();
    println!("{}", stats_table(stats));
    let mut summary = Table::new();
    summary.load_preset(UTF8_FULL_CONDENSED);
    summary.set_header(vec!["metric", "value"]);
    for (name, value) in [
        ("tasks", format!("{} of {} asked", tasks.len(), args.count)),
        ("candidates tried", stats.candidates.to_string()),
        ("duplicates skipped", stats.duplicates.to_string()),
        ("validation runs", stats.validation_runs.to_string()),
        (
            "runs by test selection",
            stats
                .by_selection
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "tests per run (mean)",
            format!(
                "{:.1} of {} passing",
                stats.tests_run as f64 / stats.validation_runs.max(1) as f64,
                synth.intake().passing.len()
            ),
        ),
        ("generation time", format!("{:.1} s", stats.elapsed_s)),
        ("tasks/minute", format!("{:.1}", stats.tasks_per_minute())),
    ] {
        summary.add_row(vec![name.to_string(), value]);
    }
    println!("{summary}");
    if let Some(out) = &args.out {
        relative_sources(&mut tasks, out);
        taskset::save_tasks(out, &tasks).with_context(|| format!("write {}", out.display()))?;
        println!("tasks: {}", out.display());
    }
    if tasks.len() < args.count {
        eprintln!(
            "made {} of {} tasks: the repository ran out of candidates (try more operators, \
             --max-bugs or another seed)",
            tasks.len(),
            args.count
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct BenchSynthArgs {
    /// Repository (default: the bundled textkit sample).
    #[arg(long)]
    repo: Option<PathBuf>,
    /// Tasks each side makes.
    #[arg(short = 'n', long, default_value_t = 100)]
    count: usize,
    /// Seed (the same for both sides).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Skip the naive side (whole suite per candidate, no coverage pre-filter).
    #[arg(long)]
    no_peer: bool,
    #[command(flatten)]
    image: ImageArgs,
}

/// SWE-smith's stated pace: 100 task instances per repository in 10 minutes.
const SWE_SMITH_TASKS_PER_MINUTE: f64 = 10.0;
/// The target of this benchmark on a 2-core machine.
const TARGET_TASKS_PER_MINUTE: f64 = 100.0;

pub fn bench_synth(args: &BenchSynthArgs) -> anyhow::Result<ExitCode> {
    let repo = match &args.repo {
        Some(repo) => repo.clone(),
        None => crate::bundled("examples/repos/textkit", "pass --repo DIR")?,
    };
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let base = SynthConfig {
        seed: args.seed,
        ..SynthConfig::default()
    };
    // Warm the intake cache so both sides start from the same state.
    drop(Synthesizer::new(sandbox.clone(), &repo, base.clone())?);
    let (ours, fast) = synthesize(sandbox.clone(), &repo, base.clone(), args.count, "frognano")?;
    let fast_stats = fast.stats().clone();
    let mut rows = vec![(
        "frognano (impact-selected tests)".to_string(),
        ours.len(),
        fast_stats.clone(),
    )];
    if !args.no_peer {
        let naive = SynthConfig {
            select_tests: false,
            skip_unreached: false,
            ..base
        };
        let (theirs, slow) = synthesize(sandbox, &repo, naive, args.count, "naive")?;
        rows.push((
            "naive (whole suite per candidate)".to_string(),
            theirs.len(),
            slow.stats().clone(),
        ));
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "validation",
        "tasks",
        "candidates",
        "runs",
        "tests/run",
        "time",
        "tasks/min",
    ]);
    for (name, tasks, stats) in &rows {
        table.add_row(vec![
            name.clone(),
            tasks.to_string(),
            stats.candidates.to_string(),
            stats.validation_runs.to_string(),
            format!(
                "{:.1}",
                stats.tests_run as f64 / stats.validation_runs.max(1) as f64
            ),
            format!("{:.1} s", stats.elapsed_s),
            format!("{:.1}", stats.tasks_per_minute()),
        ]);
    }
    println!("{table}");
    let pace = fast_stats.tasks_per_minute();
    println!(
        "validated tasks/minute: {pace:.1} on {} cores ({:.2}x the {TARGET_TASKS_PER_MINUTE:.0}/min \
         target; {:.1}x SWE-smith's stated {SWE_SMITH_TASKS_PER_MINUTE:.0}/min)",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2),
        pace / TARGET_TASKS_PER_MINUTE,
        pace / SWE_SMITH_TASKS_PER_MINUTE
    );
    if let Some((_, _, naive)) = rows.get(1) {
        let theirs = naive.tasks_per_minute();
        if theirs > 0.0 {
            println!(
                "speed-up over whole-suite validation, same seed, same run: {:.2}x",
                pace / theirs
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
