//! `frognano eval` and `frognano bench env`: run a policy over a task set in the environment.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use frognano_core::{Action, Task};
use frognano_env::{EnvConfig, EnvPool, RepoEnv, patch, repo, taskset};
use frognano_policy::OraclePolicy;
use frognano_policy::PolicySpec;
use frognano_repo::LineFile;
use frognano_sandbox::{Sandbox, workspace};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{ImageArgs, open_sandbox};

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// Task set (JSONL; FrogNano records or SWE-bench field names). Default: the bundled
    /// sample tasks.
    #[arg(long)]
    tasks: Option<PathBuf>,
    /// Policy: oracle, noop, random[:SEED], repair[:CHECKPOINT], onnx:MODEL (a model folder
    /// or a registry name such as smollm2-135m; greedy) or openai:URL@MODEL (a model behind an
    /// OpenAI-compatible server, e.g. openai:http://127.0.0.1:11434/v1@qwen2.5-coder:7b).
    #[arg(long, default_value = "oracle")]
    policy: String,
    /// Write one episode record per line here (trajectories, per-test grading).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Environments stepped in parallel (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Only the first N tasks.
    #[arg(long)]
    limit: Option<usize>,
    /// Steps per episode.
    #[arg(long, default_value_t = EnvConfig::default().max_steps)]
    max_steps: usize,
    /// Observation characters per episode.
    #[arg(long, default_value_t = EnvConfig::default().max_observation_chars)]
    max_observation_chars: usize,
    /// How a model policy (onnx: or openai:) samples its replies.
    #[command(flatten)]
    generation: crate::models::GenerationArgs,
    /// Episodes per task (useful with --temperature above 0).
    #[arg(long, default_value_t = 1)]
    samples: usize,
    /// System prompt of a model policy (default: the policy's).
    #[arg(long)]
    system_prompt: Option<String>,
    /// First observation: full (statement, repository map, tool grammar) or brief (the
    /// statement's first paragraph and one line on how to answer; for small models).
    #[arg(long, value_enum, default_value_t = FirstObservationArg::Full)]
    first_observation: FirstObservationArg,
    /// Print the evaluation report as one JSON object instead of the table (the summary that
    /// Python's `evaluate` and C's `frognano_evaluate` return).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    image: ImageArgs,
    #[command(flatten)]
    ray: crate::cluster::RayArgs,
}

/// `--first-observation`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstObservationArg {
    /// The statement, a repository map and the tool grammar.
    Full,
    /// The statement's first paragraph and one line on how to answer.
    Brief,
}

impl From<FirstObservationArg> for frognano_env::FirstObservation {
    fn from(arg: FirstObservationArg) -> Self {
        match arg {
            FirstObservationArg::Full => frognano_env::FirstObservation::Full,
            FirstObservationArg::Brief => frognano_env::FirstObservation::Brief,
        }
    }
}

pub(crate) fn workers(requested: Option<usize>) -> anyhow::Result<usize> {
    match requested {
        Some(0) => bail!("--workers must be at least 1"),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)),
    }
}

pub(crate) fn table(rows: &[(&str, String)]) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec!["metric", "value"]);
    for (name, value) in rows {
        table.add_row(vec![name.to_string(), value.clone()]);
    }
    table
}

pub fn eval(args: &EvalArgs) -> anyhow::Result<ExitCode> {
    let path = match &args.tasks {
        Some(p) => p.clone(),
        None => crate::default_tasks()?,
    };
    let mut tasks = taskset::load_tasks(&path)?;
    if let Some(limit) = args.limit {
        tasks.truncate(limit);
    }
    if tasks.is_empty() {
        bail!("{}: no tasks", path.display());
    }
    if args.samples == 0 {
        bail!("--samples must be at least 1");
    }
    if args.samples > 1 {
        tasks = tasks
            .iter()
            .flat_map(|t| std::iter::repeat_n(t.clone(), args.samples))
            .collect();
    }
    let spec: PolicySpec = args.policy.parse()?;
    if args.ray.address.is_some() {
        let report = eval_on_cluster(args, &tasks)?;
        return print_report(args, tasks.len(), &report);
    }
    let generation = args.generation.options(384);
    let mut policy = match &spec {
        PolicySpec::Onnx { model } | PolicySpec::Http { model, .. } => {
            crate::models::with_spinner(model, |progress| {
                spec.build_with(
                    &tasks,
                    progress,
                    Some(&generation),
                    args.system_prompt.as_deref(),
                )
            })?
        }
        _ => spec.build(&tasks, &|_| {})?,
    };
    let config = EnvConfig {
        max_steps: args.max_steps,
        max_observation_chars: args.max_observation_chars,
        first_observation: args.first_observation.into(),
        ..EnvConfig::default()
    };
    config.validate()?;
    let workers = workers(args.workers)?;
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let mut pool = EnvPool::for_tasks(sandbox, tasks.len(), workers, config)?;
    let mut out = args.out.as_deref().map(LineFile::create).transpose()?;
    let bar = ProgressBar::new(tasks.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} episodes [{elapsed}<{eta}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut write_error = None;
    let mut resolved = 0usize;
    let (report, _records) = frognano_env::evaluate(
        &mut pool,
        policy.as_mut(),
        &tasks,
        |record| {
            if let Some(out) = out.as_mut()
                && write_error.is_none()
                && let Err(e) = write_record(out, record)
            {
                write_error = Some(e);
            }
            resolved += usize::from(record.outcome.resolved);
            bar.set_message(format!("{resolved} resolved"));
            bar.inc(1);
        },
        |failed| {
            bar.println(format!("task {}: {}", failed.task_id, failed.error));
            bar.inc(1);
        },
    )?;
    bar.finish_and_clear();
    if let Some(e) = write_error {
        bail!("writing episode records: {e}");
    }
    print_report(args, tasks.len(), &report)
}

/// The evaluation on a Ray cluster: episodes stream back in task order, the records go to
/// `--out` as they come, and the report is made from them as a local run's is.
fn eval_on_cluster(args: &EvalArgs, tasks: &[Task]) -> anyhow::Result<frognano_env::EvalReport> {
    if !args.generation.is_default()
        || args.max_observation_chars != EnvConfig::default().max_observation_chars
        || args.system_prompt.is_some()
        || args.first_observation != FirstObservationArg::Full
    {
        bail!(
            "--ray runs with the default model settings and observation budget: leave out \
             --temperature, --top-k, --top-p, --max-new-tokens, --seed, --stop, --system-prompt, \
             --first-observation and --max-observation-chars, or evaluate without --ray"
        );
    }
    let mut out = args.out.as_deref().map(LineFile::create).transpose()?;
    let request = serde_json::json!({
        "tasks": tasks,
        "policy": args.policy,
        "max_steps": args.max_steps,
        "envs_per_actor": args.workers,
    });
    let bar = crate::cluster::bar("episodes");
    let mut records = Vec::new();
    let mut failed = Vec::new();
    let (mut wall_s, mut workers) = (0.0, 0);
    crate::cluster::run(&args.ray, "eval", request, Some(&bar), |event| {
        match event["event"].as_str() {
            Some("record") => {
                let record: frognano_env::EpisodeRecord =
                    serde_json::from_value(event["record"].clone())
                        .context("an episode record from the cluster")?;
                if let Some(out) = out.as_mut() {
                    write_record(out, &record)?;
                }
                records.push(record);
            }
            Some("failed") => {
                let task = serde_json::from_value::<frognano_env::FailedTask>(event.clone())
                    .context("a failed task from the cluster")?;
                bar.println(format!("task {}: {}", task.task_id, task.error));
                failed.push(task);
            }
            Some("done") => {
                wall_s = event["wall_s"].as_f64().unwrap_or(0.0);
                workers = event["workers"].as_u64().unwrap_or(0) as usize;
                crate::cluster::report_deaths(event);
            }
            _ => {}
        }
        Ok(())
    })?;
    let steps = records.iter().map(|r| r.steps.len()).sum();
    Ok(frognano_env::EvalReport::from_records(
        &records, failed, steps, wall_s, workers,
    ))
}

/// Appends one episode record to a JSONL file, so an interrupted run keeps every finished
/// episode.
fn write_record(out: &mut LineFile, record: &frognano_env::EpisodeRecord) -> anyhow::Result<()> {
    // One whole line: a killed run or a full disk never leaves a torn record.
    out.write_line(&serde_json::to_string(record)?)?;
    Ok(())
}

/// Prints an evaluation report (table or JSON) and gives the exit code.
fn print_report(
    args: &EvalArgs,
    task_count: usize,
    report: &frognano_env::EvalReport,
) -> anyhow::Result<ExitCode> {
    if args.json {
        println!("{}", serde_json::to_string(report)?);
        return Ok(exit_code(report));
    }
    let summary = &report.summary;
    println!(
        "{}",
        table(&[
            ("policy", args.policy.clone()),
            ("tasks", task_count.to_string()),
            ("episodes", summary.episodes.to_string()),
            (
                "resolved",
                format!(
                    "{} ({:.1}%)",
                    summary.resolved,
                    100.0 * summary.resolved_rate
                )
            ),
            (
                "error recovery",
                format!(
                    "{} of {} episodes that met a failure ({:.1}%)",
                    summary.recovered,
                    summary.met_failure,
                    100.0 * summary.recovery_rate
                )
            ),
            (
                "valid commands",
                format!(
                    "{} of {} actions ({:.1}%)",
                    summary.valid_actions,
                    summary.actions,
                    100.0 * summary.valid_command_rate
                )
            ),
            ("mean steps", format!("{:.2}", summary.mean_steps)),
            (
                "prompt tokens",
                if summary.prompt_tokens == 0 {
                    "not recorded by this policy".to_string()
                } else {
                    format!(
                        "{:.0} per step, {:.0} per episode ({:.1} generated per step)",
                        summary.mean_prompt_tokens_per_step,
                        summary.mean_prompt_tokens_per_episode,
                        summary.mean_generated_tokens_per_step
                    )
                }
            ),
            ("tool errors", summary.tool_errors.to_string()),
            ("agent test runs", summary.test_runs.to_string()),
            ("truncated by budget", summary.truncated.to_string()),
            (
                "tasks that failed to reset",
                report.failed_tasks.len().to_string()
            ),
            (
                "episodes the policy failed",
                match &summary.first_policy_error {
                    Some(error) => format!("{} (first: {error})", summary.failed_episodes),
                    None => summary.failed_episodes.to_string(),
                }
            ),
            ("env steps/s", format!("{:.1}", report.steps_per_s)),
            ("mean reset", format!("{:.2} ms", report.mean_reset_ms)),
            (
                "wall",
                format!("{:.1} s ({} workers)", report.wall_s, report.workers)
            ),
        ])
    );
    if let Some(path) = &args.out {
        println!("episode records: {}", path.display());
    }
    Ok(exit_code(report))
}

/// 0 when every task ran, 1 when some could not be reset or the policy failed some episodes.
fn exit_code(report: &frognano_env::EvalReport) -> ExitCode {
    if report.all_ran() && report.summary.failed_episodes == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[derive(Args, Debug)]
pub struct BenchEnvArgs {
    /// Task set (default: the bundled sample tasks).
    #[arg(long)]
    tasks: Option<PathBuf>,
    /// Environments in the pool (default: one per core).
    #[arg(long)]
    envs: Option<usize>,
    /// Timed resets per task.
    #[arg(long, default_value_t = 20)]
    resets: usize,
    /// Rounds of batched cheap tool steps (one step per environment per round).
    #[arg(long, default_value_t = 200)]
    rounds: usize,
    #[command(flatten)]
    image: ImageArgs,
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() as f64 - 1.0) * p).round() as usize]
}

/// The naive way to materialise a task: copy the clean repository from disk, then patch it.
fn reset_from_disk(task: &Task, dest: &Path) -> anyhow::Result<()> {
    workspace::copy_repo(task.repo.path(), dest)?;
    let mut touched = repo::read_tree(dest)?;
    let before = touched.clone();
    patch::apply(&mut touched, &task.bug_patch)?;
    for (path, data) in &touched {
        if before.get(path) != Some(data) {
            std::fs::write(dest.join(path), data.as_slice())?;
        }
    }
    Ok(())
}

pub fn bench_env(args: &BenchEnvArgs) -> anyhow::Result<ExitCode> {
    let path = match &args.tasks {
        Some(p) => p.clone(),
        None => crate::default_tasks()?,
    };
    let tasks = taskset::load_tasks(&path)?;
    if tasks.is_empty() || args.resets == 0 || args.rounds == 0 {
        bail!("need tasks, --resets >= 1 and --rounds >= 1");
    }
    let envs = workers(args.envs)?;
    let sandbox: Arc<Sandbox> = Arc::new(open_sandbox(args.image.options()?, false)?);

    // 1. Reset latency, side by side with copying the repository from disk and patching it.
    let mut env = RepoEnv::new(sandbox.clone(), EnvConfig::default())?;
    for task in &tasks {
        env.reset_task(task)?; // loads the repository cache
    }
    // Both sides pay for removing the previous episode's workspace, as a reset does.
    let (mut ours, mut naive) = (Vec::new(), Vec::new());
    let mut previous = tempfile::tempdir()?;
    for _ in 0..args.resets {
        for task in &tasks {
            let started = Instant::now();
            env.reset_task(task)?;
            ours.push(started.elapsed().as_secs_f64() * 1e3);
            let started = Instant::now();
            drop(previous);
            previous = tempfile::tempdir()?;
            reset_from_disk(task, previous.path())?;
            naive.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    let (ours_med, naive_med) = (median(&mut ours), median(&mut naive));
    let ours_p95 = percentile(&mut ours, 0.95);

    // 2. Cheap tool steps per second through the pool, 1 worker vs all.
    let cheap_actions = |task: &Task| -> Vec<Action> {
        let file = patch::changed_files(&task.bug_patch)
            .ok()
            .and_then(|f| f.first().map(|c| c.path().to_string()))
            .unwrap_or_else(|| ".".into());
        [
            "ls".to_string(),
            format!("view {file} 1-60"),
            "search \"def [a-z_]+\\(\"".to_string(),
            format!("search return {file}"),
        ]
        .into_iter()
        .map(|text| Action::Text { text })
        .collect()
    };
    let config = EnvConfig {
        max_steps: args.rounds + 10,
        max_observation_chars: usize::MAX / 2,
        ..EnvConfig::default()
    };
    let mut throughput = Vec::new();
    for workers in [1, envs] {
        let mut pool = EnvPool::new(sandbox.clone(), envs, workers, config)?;
        let batch: Vec<Task> = tasks.iter().cycle().take(envs).cloned().collect();
        for r in pool.reset(&batch) {
            r?;
        }
        let actions: Vec<Vec<Action>> = batch.iter().map(cheap_actions).collect();
        let started = Instant::now();
        let mut steps = 0;
        for round in 0..args.rounds {
            let step: Vec<Action> = actions.iter().map(|a| a[round % a.len()].clone()).collect();
            for result in pool.step(&step) {
                result?;
                steps += 1;
            }
        }
        throughput.push(steps as f64 / started.elapsed().as_secs_f64());
    }

    // 3. Whole episodes (tests run by the agent, grading) with the oracle.
    let mut pool = EnvPool::new(sandbox.clone(), envs, envs, EnvConfig::default())?;
    let mut oracle = OraclePolicy::new(&tasks);
    let mut resolved = 0;
    let stats = pool.rollout(
        &mut oracle,
        &tasks,
        |r| resolved += usize::from(r.outcome.resolved),
        |t, e| eprintln!("task {}: {e}", t.id),
    )?;
    println!(
        "{}",
        table(&[
            ("tasks", format!("{} from {}", tasks.len(), path.display())),
            (
                "reset (reused workspace + in-memory repo)",
                format!("median {ours_med:.2} ms, p95 {ours_p95:.2} ms")
            ),
            (
                "reset (copy from disk + bug, peer)",
                format!("median {naive_med:.2} ms")
            ),
            (
                "reset speed-up vs peer",
                format!("{:.2}x", naive_med / ours_med)
            ),
            (
                "cheap tool steps/s, 1 worker",
                format!("{:.0}", throughput[0])
            ),
            (
                &format!("cheap tool steps/s, {envs} workers"),
                format!(
                    "{:.0} ({:.2}x)",
                    throughput[1],
                    throughput[1] / throughput[0]
                )
            ),
            (
                "oracle episodes (tests + grading)",
                format!(
                    "{} episodes, {resolved} resolved, {} steps, {:.1} steps/s, {:.2} episodes/s",
                    stats.episodes,
                    stats.steps,
                    stats.steps_per_s(),
                    stats.episodes as f64 / stats.wall_s
                )
            ),
        ])
    );
    Ok(ExitCode::SUCCESS)
}
