//! `frognano bench soak`: thousands of episodes of a random (often hostile) policy through the
//! environment pool, with the figures a long-running host needs: memory, file descriptors and
//! temporary folders at the start and the end, records written, and a digest of the verdicts
//! to compare with another run (idle against loaded).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use frognano_core::Task;
use frognano_env::{EnvConfig, EnvPool, SoakReport, taskset};
use frognano_policy::EpisodeSeededRandom;

use crate::eval::{table, workers};
use crate::synth::progress_bar;
use crate::{ImageArgs, open_sandbox};

#[derive(Args, Debug)]
pub struct BenchSoakArgs {
    /// Episodes to run.
    #[arg(long, default_value_t = 10_000)]
    episodes: usize,
    /// Task files (JSON lines), cycled over; repeat the flag for several (for example the
    /// sample tasks and a corpus's tasks.jsonl). Default: the sample tasks.
    #[arg(long)]
    tasks: Vec<PathBuf>,
    /// Environments (default: one per core).
    #[arg(long)]
    envs: Option<usize>,
    /// Steps per episode before the budget ends it.
    #[arg(long, default_value_t = 4)]
    max_steps: usize,
    /// Seed of the random policy (its actions depend on the seed, the task and the turn only,
    /// so two soaks with one seed take the same actions).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Chance per step that the random policy submits.
    #[arg(long, default_value_t = 0.2)]
    submit_probability: f64,
    /// Where the episode records go (JSON lines). Default: a temporary file, removed after.
    #[arg(long)]
    records: Option<PathBuf>,
    /// Print the figures as one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    image: ImageArgs,
}

pub fn bench_soak(args: &BenchSoakArgs) -> anyhow::Result<ExitCode> {
    if args.episodes == 0 {
        bail!("--episodes must be at least 1");
    }
    let files = if args.tasks.is_empty() {
        vec![crate::default_tasks()?]
    } else {
        args.tasks.clone()
    };
    let mut tasks: Vec<Task> = Vec::new();
    for file in &files {
        tasks.extend(taskset::load_tasks(file).with_context(|| format!("{}", file.display()))?);
    }
    if tasks.is_empty() {
        bail!("the task files hold no task");
    }
    let envs = workers(args.envs)?;
    let sandbox = Arc::new(open_sandbox(args.image.options()?, args.json)?);
    let config = EnvConfig {
        max_steps: args.max_steps,
        ..EnvConfig::default()
    };
    let pool = EnvPool::new(sandbox, envs, envs, config)?;
    let mut policy = EpisodeSeededRandom::new(args.seed, args.submit_probability);
    let scratch = tempfile::tempdir()?;
    let records = args
        .records
        .clone()
        .unwrap_or_else(|| scratch.path().join("records.jsonl"));
    let bar = progress_bar(args.episodes, "episodes");
    if args.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let report = frognano_env::soak(
        pool,
        &mut policy,
        &tasks,
        args.episodes,
        &records,
        |ended| bar.set_position(ended as u64),
    )?;
    bar.finish_and_clear();
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_report(&report, tasks.len(), envs);
    }
    // Records lost, or episodes that ended with nothing written, fail the soak.
    Ok(if report.records_written == report.episodes {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(report: &SoakReport, tasks: usize, envs: usize) {
    let mb = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0} MiB"));
    let count = |v: Option<usize>| v.map_or("-".to_string(), |v| v.to_string());
    println!(
        "{}",
        table(&[
            (
                "episodes",
                format!(
                    "{} over {tasks} tasks on {envs} environments ({} resolved, {} failed \
                     resets, {} failed by the policy)",
                    report.episodes, report.resolved, report.failed_resets, report.failed_episodes
                )
            ),
            (
                "records written",
                format!("{} of {}", report.records_written, report.episodes)
            ),
            (
                "resident memory",
                format!(
                    "start {}, after the first round {}, end {}, peak {}",
                    mb(report.rss_start_mb),
                    mb(report.rss_warm_mb),
                    mb(report.rss_end_mb),
                    mb(report.rss_peak_mb)
                )
            ),
            (
                "open file descriptors",
                format!(
                    "start {}, after the first round {}, end (pool dropped) {}",
                    count(report.fds_start),
                    count(report.fds_warm),
                    count(report.fds_end)
                )
            ),
            (
                "temporary folders left (pool dropped)",
                report.temp_dirs_left.to_string(),
            ),
            (
                "pace",
                format!(
                    "{:.0} s, {:.2} episodes/s",
                    report.wall_s, report.episodes_per_s
                )
            ),
            ("verdict digest", report.verdict_digest.clone()),
        ])
    );
}
