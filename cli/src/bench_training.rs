//! `frognano bench curriculum` and `frognano bench learning`: curricula compared over seeds at
//! equal rollouts ([`frognano_train::run_experiment`]), shown as tables, a PNG and a JSON file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use frognano_train::{
    CurriculumKind, ExperimentObserver, ExperimentResult, ExperimentSpec, HeldOutSets, RunFigures,
    RunObserver, TrainConfig, TrainReport, mean_std, run_experiment,
};

use crate::ImageArgs;
use crate::plot::{Chart, Series, write_png};
use crate::train::{Bars, config_of, sandbox};

#[derive(Args, Debug)]
pub struct BenchCurriculumArgs {
    /// TOML configuration shared by every run (the curriculum and seed fields are set per run).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seeds (one training run per method and seed).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
    /// Methods to compare.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "frontier,static,easy_to_hard"
    )]
    methods: Vec<String>,
    /// Training iterations per run (overrides the config).
    #[arg(long)]
    iterations: Option<usize>,
    /// Output directory (results.json, curves.png, one directory per run).
    #[arg(long, short, default_value = "runs/bench-curriculum")]
    out: PathBuf,
    #[command(flatten)]
    image: ImageArgs,
}

#[derive(Args, Debug)]
pub struct BenchLearningArgs {
    /// The language-model training configuration every run shares (its curriculum and seed
    /// are set per run). Default: the main job's, examples/train/main.toml of a FrogNano
    /// checkout.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Seeds: each has its own held-out set, on which every method is measured.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
    /// Curricula compared at equal rollouts.
    #[arg(long, value_delimiter = ',', default_value = "frontier,static")]
    methods: Vec<String>,
    /// Training iterations per run (overrides the config).
    #[arg(long)]
    iterations: Option<usize>,
    /// Output directory (results.json, curves.png, one directory per run).
    #[arg(long, short, default_value = "runs/bench-learning")]
    out: PathBuf,
    #[command(flatten)]
    image: ImageArgs,
}

/// Progress bars per run and a line per finished run.
struct ExperimentBars {
    iterations: usize,
}

impl ExperimentObserver for ExperimentBars {
    fn stage(&mut self, name: &str) {
        eprintln!("  {name}");
    }

    fn run_observer(&mut self, method: CurriculumKind, seed: u64) -> Box<dyn RunObserver> {
        Box::new(Bars::new(
            self.iterations,
            &format!("[{} seed {seed}] ", method.as_str()),
        ))
    }

    fn run_finished(&mut self, report: &TrainReport) {
        let before = report.initial.as_ref().map_or(String::new(), |i| {
            format!(
                "{:.1}% ({} of {}) -> ",
                100.0 * i.resolved_rate,
                i.resolved,
                i.episodes
            )
        });
        println!(
            "[{} seed {}] held-out resolved {before}{:.1}% ({} of {}), {} rollouts, \
             synthesis wait {:.1} s, {:.0} s",
            report.curriculum.as_str(),
            report.seed,
            100.0 * report.trained.resolved_rate,
            report.trained.resolved,
            report.trained.episodes,
            report.rollouts,
            report.synthesis_wait_s,
            report.wall_s
        );
    }
}

fn methods_of(names: &[String]) -> anyhow::Result<Vec<CurriculumKind>> {
    let methods: Vec<CurriculumKind> = names
        .iter()
        .map(|m| CurriculumKind::parse(m))
        .collect::<Result<_, _>>()?;
    if methods.is_empty() {
        bail!("name at least one method");
    }
    Ok(methods)
}

/// Runs the experiment with progress bars, writes results.json and curves.png.
fn experiment(
    base: TrainConfig,
    methods: Vec<CurriculumKind>,
    seeds: &[u64],
    held_out: HeldOutSets,
    out: &PathBuf,
    image: &ImageArgs,
) -> anyhow::Result<ExperimentResult> {
    if seeds.is_empty() {
        bail!("name at least one seed");
    }
    std::fs::create_dir_all(out).with_context(|| format!("create {}", out.display()))?;
    println!(
        "{} x {} seeds, {} iterations x {} tasks x {} rollouts each, {} held-out tasks {}",
        methods
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>()
            .join(" / "),
        seeds.len(),
        base.iterations,
        base.trainer.tasks_per_iteration,
        base.trainer.group_size,
        base.held_out,
        match held_out {
            HeldOutSets::Shared => "(one set for every run)",
            HeldOutSets::PerSeed => "per seed",
        }
    );
    let spec = ExperimentSpec {
        methods,
        seeds: seeds.to_vec(),
        held_out,
        out: out.clone(),
        base,
    };
    let mut observer = ExperimentBars {
        iterations: spec.base.iterations,
    };
    let result = run_experiment(&sandbox(image)?, &spec, &mut observer)?;
    let path = out.join("results.json");
    frognano_repo::write_atomically(&path, serde_json::to_string_pretty(&result)?.as_bytes())?;
    let plot = out.join("curves.png");
    write_png(&plot, &charts(&result))?;
    Ok(result)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn mean_sd(values: &[f64]) -> String {
    let (mean, std) = mean_std(values);
    format!("{:.1}% ± {:.1}", 100.0 * mean, 100.0 * std)
}

/// Frontier against static, relative, against the paper's +24.7%.
fn frontier_vs_static(result: &ExperimentResult) {
    let (Some(frontier), Some(fixed)) = (
        result.method(CurriculumKind::Frontier),
        result.method(CurriculumKind::Static),
    ) else {
        return;
    };
    if fixed.mean > 0.0 {
        let relative = (frontier.mean - fixed.mean) / fixed.mean;
        println!(
            "frontier vs static: {:+.1}% relative held-out resolved (the paper's figure: \
             +24.7%): {}",
            100.0 * relative,
            if relative >= 0.247 { "met" } else { "not met" }
        );
    } else {
        println!(
            "frontier vs static: the static curriculum resolved no held-out task, so the \
             relative improvement is undefined (frontier: {})",
            pct(frontier.mean)
        );
    }
}

/// The training resolved rate per iteration, mean over seeds, and each run's held-out
/// resolved rate before and after.
fn charts(result: &ExperimentResult) -> Vec<Chart> {
    let training = result
        .methods
        .iter()
        .map(|m| Series {
            label: format!("{} (mean over seeds)", m.curriculum.as_str()),
            points: m
                .mean_curve
                .iter()
                .enumerate()
                .map(|(i, v)| ((i + 1) as f64, *v))
                .collect(),
        })
        .collect();
    let zero_variance = result
        .methods
        .iter()
        .map(|m| {
            let iterations = m.mean_curve.len();
            Series {
                label: format!("{} zero-variance groups", m.curriculum.as_str()),
                points: (0..iterations)
                    .map(|i| {
                        let values: Vec<f64> = m
                            .reports
                            .iter()
                            .filter_map(|r| r.history.get(i))
                            .filter_map(|h| h.extra.get("zero_variance_fraction")?.as_f64())
                            .collect();
                        ((i + 1) as f64, mean_std(&values).0)
                    })
                    .collect(),
            }
        })
        .collect();
    let mut held_out: Vec<Series> = Vec::new();
    for method in &result.methods {
        let runs: Vec<&RunFigures> = result
            .runs
            .iter()
            .filter(|r| r.curriculum == method.curriculum)
            .collect();
        held_out.push(Series {
            label: format!("{} trained", method.curriculum.as_str()),
            points: runs
                .iter()
                .enumerate()
                .map(|(i, r)| ((i + 1) as f64, r.resolved_after))
                .collect(),
        });
        if held_out.len() == 1 {
            held_out.push(Series {
                label: "untrained".into(),
                points: runs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, r)| Some(((i + 1) as f64, r.resolved_before?)))
                    .collect(),
            });
        }
    }
    vec![
        Chart {
            title: "Training resolved rate per iteration".into(),
            x_label: "iteration".into(),
            y_label: "resolved".into(),
            series: training,
            y_range: Some((0.0, 1.0)),
        },
        Chart {
            title: "Groups without learning signal".into(),
            x_label: "iteration".into(),
            y_label: "share of groups".into(),
            series: zero_variance,
            y_range: Some((0.0, 1.0)),
        },
        Chart {
            title: "Held-out resolved per seed".into(),
            x_label: "seed (in run order)".into(),
            y_label: "resolved".into(),
            series: held_out,
            y_range: Some((0.0, 1.0)),
        },
    ]
}

/// `frognano bench curriculum`: the same policy initialisation and rollout budget, trained with
/// each curriculum over several seeds, measured on one held-out set.
pub fn bench_curriculum(args: &BenchCurriculumArgs) -> anyhow::Result<ExitCode> {
    let methods = methods_of(&args.methods)?;
    let base = config_of(args.config.as_deref(), None, args.iterations, None)?;
    print!("curriculum benchmark: ");
    let result = experiment(
        base,
        methods,
        &args.seeds,
        HeldOutSets::Shared,
        &args.out,
        &args.image,
    )?;
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "curriculum",
        "held-out resolved (mean ± sd)",
        "per seed",
        "vs static",
        "zero-variance groups",
        "synthesis wait",
    ]);
    let static_mean = result.method(CurriculumKind::Static).map(|r| r.mean);
    for r in &result.methods {
        let vs = match static_mean {
            Some(s) if s > 0.0 => format!("{:+.1}%", 100.0 * (r.mean - s) / s),
            _ => "-".into(),
        };
        table.add_row(vec![
            r.curriculum.as_str().to_string(),
            format!("{:.1}% ± {:.1}", 100.0 * r.mean, 100.0 * r.std),
            r.held_out_resolved
                .iter()
                .map(|v| format!("{:.1}", 100.0 * v))
                .collect::<Vec<_>>()
                .join(", "),
            vs,
            format!("{:.0}%", 100.0 * r.zero_variance_fraction),
            format!("{:.1} s", mean_std(&r.synthesis_wait_s).0),
        ]);
    }
    println!("{table}");
    if let Some(i) = result
        .methods
        .first()
        .and_then(|m| m.reports.first())
        .and_then(|r| r.initial.as_ref())
    {
        println!(
            "untrained policy on the same {} held-out tasks: {:.1}% ({} of {})",
            i.episodes,
            100.0 * i.resolved_rate,
            i.resolved,
            i.episodes
        );
    }
    frontier_vs_static(&result);
    println!(
        "results: {}\nplot: {}",
        args.out.join("results.json").display(),
        args.out.join("curves.png").display()
    );
    Ok(ExitCode::SUCCESS)
}

fn rungs(run: &RunFigures) -> String {
    run.by_hint_level
        .iter()
        .map(|r| {
            let before = r
                .initial_resolved
                .map_or(String::new(), |n| format!("{n}->"));
            format!(
                "L{}: {before}{} of {}",
                r.hint_level, r.trained_resolved, r.tasks
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn optional_rate(value: Option<f64>) -> String {
    value.map_or("-".into(), |v| format!("{v:.0}"))
}

/// `frognano bench learning`: a language model trained with each curriculum over several
/// seeds at equal rollouts, each seed measured on its own held-out set before and after.
pub fn bench_learning(args: &BenchLearningArgs) -> anyhow::Result<ExitCode> {
    let methods = methods_of(&args.methods)?;
    let config = match &args.config {
        Some(path) => path.clone(),
        None => frognano_train::bundled_main_config()?,
    };
    let base = config_of(Some(&config), None, args.iterations, None)?;
    print!("learning benchmark: ");
    let result = experiment(
        base,
        methods,
        &args.seeds,
        HeldOutSets::PerSeed,
        &args.out,
        &args.image,
    )?;
    let mut runs = Table::new();
    runs.load_preset(UTF8_FULL_CONDENSED);
    runs.set_header(vec![
        "seed",
        "curriculum",
        "held-out resolved",
        "per rung (hint level)",
        "valid commands",
        "zero-variance groups",
        "rollout tok/s",
        "learner tok/s",
        "wall",
    ]);
    for run in &result.runs {
        runs.add_row(vec![
            run.seed.to_string(),
            run.curriculum.as_str().to_string(),
            format!(
                "{} -> {}",
                run.resolved_before.map_or("-".into(), pct),
                pct(run.resolved_after)
            ),
            rungs(run),
            format!(
                "{} -> {}",
                run.valid_commands_before.map_or("-".into(), pct),
                pct(run.valid_commands_after)
            ),
            pct(run.zero_variance_fraction),
            optional_rate(run.rollout_tokens_per_s),
            optional_rate(run.learner_tokens_per_s),
            format!("{:.0} s", run.wall_s),
        ]);
    }
    println!("{runs}");
    let mut summary = Table::new();
    summary.load_preset(UTF8_FULL_CONDENSED);
    summary.set_header(vec![
        "curriculum (mean ± sd over seeds)",
        "held-out before",
        "held-out after",
        "gain (points)",
        "valid commands after",
        "zero-variance groups",
        "rollout tok/s",
        "learner tok/s",
        "wall per run",
    ]);
    for method in &result.methods {
        let of = |f: &dyn Fn(&RunFigures) -> Option<f64>| -> Vec<f64> {
            result
                .runs
                .iter()
                .filter(|r| r.curriculum == method.curriculum)
                .filter_map(f)
                .collect()
        };
        let (gain, gain_sd) = result.gain(method.curriculum);
        let rate = |values: Vec<f64>| {
            let (mean, std) = mean_std(&values);
            if values.is_empty() {
                "-".to_string()
            } else {
                format!("{mean:.0} ± {std:.0}")
            }
        };
        let (wall, wall_sd) = mean_std(&of(&|r| Some(r.wall_s)));
        summary.add_row(vec![
            method.curriculum.as_str().to_string(),
            mean_sd(&of(&|r| r.resolved_before)),
            mean_sd(&of(&|r| Some(r.resolved_after))),
            format!("{:+.1} ± {:.1}", 100.0 * gain, 100.0 * gain_sd),
            mean_sd(&of(&|r| Some(r.valid_commands_after))),
            mean_sd(&of(&|r| Some(r.zero_variance_fraction))),
            rate(of(&|r| r.rollout_tokens_per_s)),
            rate(of(&|r| r.learner_tokens_per_s)),
            format!("{wall:.0} ± {wall_sd:.0} s"),
        ]);
    }
    println!("{summary}");
    frontier_vs_static(&result);
    println!(
        "{} runs in {:.0} s\nresults: {}\nplot: {}",
        result.runs.len(),
        result.wall_s,
        args.out.join("results.json").display(),
        args.out.join("curves.png").display()
    );
    Ok(ExitCode::SUCCESS)
}
