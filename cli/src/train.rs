//! `frognano train`: the main job.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use frognano_core::IterationMetrics;
use frognano_env::EvalSummary;
use frognano_sandbox::Sandbox;
use frognano_train::{
    CurriculumKind, DifficultyMix, Estimator, RunObserver, TrainConfig, TrainProgress, TrainReport,
    prepare_pools,
};
use indicatif::{ProgressBar, ProgressStyle};

use crate::plot::{Chart, Series, write_png};
use crate::{ImageArgs, open_sandbox};

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// TOML configuration (every field optional; see docs/training.md). Without it: the main
    /// job, examples/train/main.toml of a FrogNano checkout (SmolLM2-135M trained with RL on
    /// tasks from the sample repositories, 10-20 minutes on two cores; the first run installs
    /// the PyTorch learner's environment).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Output directory (metrics.jsonl, checkpoint.json, curves.png, eval.jsonl). An existing
    /// checkpoint there is resumed.
    #[arg(long, short)]
    out: Option<PathBuf>,
    /// Curriculum: frontier, static or easy_to_hard (overrides the config).
    #[arg(long)]
    curriculum: Option<String>,
    /// Training iterations (overrides the config).
    #[arg(long)]
    iterations: Option<usize>,
    /// Seed (overrides the config).
    #[arg(long)]
    seed: Option<u64>,
    /// Advantage estimator: grpo, dr_grpo or rloo (overrides the config).
    #[arg(long)]
    estimator: Option<String>,
    #[command(flatten)]
    image: ImageArgs,
    /// With --ray the training rollouts run on the cluster's workers (the repair policy's
    /// state travels each iteration); synthesis, learning and the held-out evaluation stay
    /// on this machine.
    #[command(flatten)]
    ray: crate::cluster::RayArgs,
}

/// The job's configuration: the file (or defaults on the bundled repositories) plus flags.
pub(crate) fn config_of(
    file: Option<&Path>,
    curriculum: Option<&str>,
    iterations: Option<usize>,
    seed: Option<u64>,
) -> anyhow::Result<TrainConfig> {
    let config = match file {
        Some(path) => TrainConfig::from_file(path)?,
        None => TrainConfig::default(),
    }
    .or_bundled_repos()?;
    with_flags(config, curriculum, iterations, seed)
}

/// A configuration with the command line's overrides, checked.
fn with_flags(
    mut config: TrainConfig,
    curriculum: Option<&str>,
    iterations: Option<usize>,
    seed: Option<u64>,
) -> anyhow::Result<TrainConfig> {
    if let Some(c) = curriculum {
        config.curriculum = CurriculumKind::parse(c)?;
    }
    if let Some(i) = iterations {
        config.iterations = i;
    }
    if let Some(s) = seed {
        config.seed = s;
    }
    config.validate()?;
    Ok(config)
}

/// Progress bars for a training job: a spinner for stages, a bar per iteration.
pub(crate) struct Bars {
    stage: ProgressBar,
    bar: Option<ProgressBar>,
    iterations: usize,
    label: String,
    plain: bool,
}

impl Bars {
    pub(crate) fn new(iterations: usize, label: &str) -> Self {
        let stage = ProgressBar::new_spinner();
        stage.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        stage.enable_steady_tick(std::time::Duration::from_millis(120));
        let plain = stage.is_hidden();
        Bars {
            stage,
            bar: None,
            iterations,
            label: label.to_string(),
            plain,
        }
    }

    fn bar(&mut self, total: usize, message: String) -> &ProgressBar {
        self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix:>22} [{bar:30}] {pos}/{len} episodes {msg} [{elapsed}]",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_message(message);
            bar
        })
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        self.stage.finish_and_clear();
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        self.finish();
    }
}

impl RunObserver for Bars {
    fn stage(&mut self, name: &str) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        if self.plain {
            eprintln!("  {}{name}", self.label);
        } else {
            self.stage.println(format!("  {}{name}", self.label));
        }
        self.stage.set_message(format!("{}{name}", self.label));
    }

    fn episode(&mut self, p: TrainProgress) {
        let iterations = self.iterations;
        let label = self.label.clone();
        let bar = self.bar(p.episodes_total, String::new());
        bar.set_prefix(format!("{label}iteration {}/{iterations}", p.iteration + 1));
        bar.set_length(p.episodes_total as u64);
        bar.set_position(p.episodes_done as u64);
        bar.set_message(format!("resolved {}", p.resolved));
    }

    fn iteration(&mut self, m: &IterationMetrics) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        let line = iteration_line(m);
        if self.plain {
            eprintln!("  {}{line}", self.label);
        } else {
            self.stage.println(format!("  {}{line}", self.label));
        }
    }

    fn eval_episode(&mut self, done: usize, total: usize) {
        let label = self.label.clone();
        let bar = self.bar(total, String::new());
        bar.set_prefix(format!("{label}held-out eval"));
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if done == total
            && let Some(bar) = self.bar.take()
        {
            bar.finish_and_clear();
        }
    }
}

fn num(m: &IterationMetrics, key: &str) -> f64 {
    m.extra.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0)
}

fn iteration_line(m: &IterationMetrics) -> String {
    let mean_bugs = DifficultyMix::of_metrics(m).map_or(0.0, |d| d.mean_bugs);
    format!(
        "iteration {:>2}: resolved {:>5.1}% of {} rollouts, zero-variance groups {:>3.0}%, \
         learnability {:.3}, mean bugs {:.2}, {:.2} rollouts/s, synthesis wait {:.1} s",
        m.iteration + 1,
        100.0 * m.resolved_rate,
        m.rollouts,
        100.0 * num(m, "zero_variance_fraction"),
        num(m, "mean_learnability"),
        mean_bugs,
        num(m, "rollouts_per_s"),
        num(m, "synthesis_wait_s"),
    )
}

fn curves(report: &TrainReport) -> Vec<Chart> {
    let points = |f: &dyn Fn(&IterationMetrics) -> f64| -> Vec<(f64, f64)> {
        report
            .history
            .iter()
            .map(|m| ((m.iteration + 1) as f64, f(m)))
            .collect()
    };
    let mut resolved = vec![Series {
        label: "training rollouts resolved".into(),
        points: points(&|m| m.resolved_rate),
    }];
    let last = report.history.len() as f64;
    // A held-out figure as single points: before training (when evaluated) and after it.
    let held_out = |series: &mut Vec<Series>, what: &str, figure: fn(&EvalSummary) -> f64| {
        if let Some(initial) = &report.initial {
            series.push(Series {
                label: format!("held-out{what}, untrained"),
                points: vec![(0.0, figure(initial))],
            });
        }
        series.push(Series {
            label: format!("held-out{what}, trained"),
            points: vec![(last, figure(&report.trained))],
        });
    };
    held_out(&mut resolved, "", |summary| summary.resolved_rate);
    resolved.push(Series {
        label: "zero-variance groups".into(),
        points: points(&|m| num(m, "zero_variance_fraction")),
    });
    resolved.push(Series {
        label: "training actions that are valid commands".into(),
        points: points(&|m| num(m, "valid_command_rate")),
    });
    held_out(&mut resolved, " valid commands", |summary| {
        summary.valid_command_rate
    });
    let difficulty = |field: fn(&DifficultyMix) -> f64| {
        move |m: &IterationMetrics| DifficultyMix::of_metrics(m).map_or(0.0, |d| field(&d))
    };
    vec![
        Chart {
            title: format!("Learning curve ({} curriculum)", report.curriculum.as_str()),
            x_label: "iteration".into(),
            y_label: "rate".into(),
            series: resolved,
            y_range: Some((0.0, 1.0)),
        },
        Chart {
            title: "Difficulty chosen".into(),
            x_label: "iteration".into(),
            y_label: "mean per task".into(),
            series: vec![
                Series {
                    label: "bugs per task".into(),
                    points: points(&difficulty(|d| d.mean_bugs)),
                },
                Series {
                    label: "difficulty score / 10".into(),
                    points: points(&|m| difficulty(|d| d.mean_difficulty)(m) / 10.0),
                },
                Series {
                    label: "mean learnability p(1-p)".into(),
                    points: points(&|m| num(m, "mean_learnability")),
                },
            ],
            y_range: None,
        },
    ]
}

fn summary_table(report: &TrainReport) -> Table {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec!["metric", "value"]);
    let pct = |x: f64| format!("{:.1}%", 100.0 * x);
    let mut rows = vec![
        ("curriculum", report.curriculum.as_str().to_string()),
        ("iterations", report.history.len().to_string()),
        ("training rollouts", report.rollouts.to_string()),
        (
            "training resolved (first -> last iteration)",
            format!(
                "{} -> {}",
                report
                    .history
                    .first()
                    .map_or("-".into(), |m| pct(m.resolved_rate)),
                report
                    .history
                    .last()
                    .map_or("-".into(), |m| pct(m.resolved_rate)),
            ),
        ),
    ];
    if let Some(initial) = &report.initial {
        rows.push((
            "held-out resolved, untrained",
            format!(
                "{} ({} of {})",
                pct(initial.resolved_rate),
                initial.resolved,
                initial.episodes
            ),
        ));
    }
    rows.push((
        "held-out resolved, trained",
        format!(
            "{} ({} of {})",
            pct(report.trained.resolved_rate),
            report.trained.resolved,
            report.trained.episodes
        ),
    ));
    // Per difficulty rung, when the held-out set spans more than one.
    let rung_rows: Vec<(String, String)> = if report.by_hint_level.len() > 1 {
        report
            .by_hint_level
            .iter()
            .map(|r| {
                let initial = r
                    .initial_resolved
                    .map_or(String::new(), |n| format!("{n} -> "));
                (
                    format!("held-out resolved at hint level {}", r.hint_level),
                    format!("{initial}{} of {}", r.trained_resolved, r.tasks),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    rows.push((
        "held-out error recovery, trained",
        format!(
            "{} of {} episodes that met a failure ({})",
            report.trained.recovered,
            report.trained.met_failure,
            pct(report.trained.recovery_rate)
        ),
    ));
    rows.push((
        "synthesis wait",
        format!("{:.1} s", report.synthesis_wait_s),
    ));
    rows.push(("wall", format!("{:.0} s", report.wall_s)));
    for (k, v) in rows {
        table.add_row(vec![k.to_string(), v]);
    }
    for (k, v) in rung_rows {
        table.add_row(vec![k, v]);
    }
    table
}

pub(crate) fn sandbox(image: &ImageArgs) -> anyhow::Result<Arc<Sandbox>> {
    Ok(Arc::new(open_sandbox(image.options()?, false)?))
}

/// The training job with its rollouts on a Ray cluster, shown on the same bars.
fn train_on_cluster(
    ray: &crate::cluster::RayArgs,
    config: &TrainConfig,
    bars: &mut Bars,
) -> anyhow::Result<TrainReport> {
    if !matches!(config.policy, frognano_train::PolicyConfig::Repair(_)) {
        bail!(
            "--ray trains the repair policy (its state travels to the workers); a language \
             model's rollouts run where its weights are: train it without --ray"
        );
    }
    let request = serde_json::json!({"config": config, "out": config.out});
    let mut report = None;
    let mut iteration = 0;
    crate::cluster::run(ray, "train", request, None, |event| {
        let data = &event["data"];
        match event["event"].as_str() {
            Some("stage") => bars.stage(data["name"].as_str().unwrap_or("")),
            Some("episodes") => bars.episode(TrainProgress {
                iteration,
                episodes_done: data["done"].as_u64().unwrap_or(0) as usize,
                episodes_total: data["total"].as_u64().unwrap_or(0) as usize,
                resolved: 0,
            }),
            Some("iteration") => {
                let metrics: IterationMetrics =
                    serde_json::from_value(data.clone()).context("iteration metrics")?;
                iteration = metrics.iteration + 1;
                bars.iteration(&metrics);
            }
            Some("done") => {
                report = Some(
                    serde_json::from_value(event["report"].clone())
                        .context("the training report from the cluster")?,
                );
            }
            _ => {}
        }
        Ok(())
    })?;
    report.context("the cluster driver ended without a report")
}

/// `frognano train`.
pub fn train(args: &TrainArgs) -> anyhow::Result<ExitCode> {
    let (curriculum, iterations, seed) = (args.curriculum.as_deref(), args.iterations, args.seed);
    let mut config = match &args.config {
        Some(path) => config_of(Some(path), curriculum, iterations, seed)?,
        // Without a configuration: the main job's.
        None => with_flags(
            frognano_train::main_job_config()?,
            curriculum,
            iterations,
            seed,
        )?,
    };
    if let Some(e) = &args.estimator {
        config.trainer.estimator = Estimator::parse(e)?;
    }
    let out = args
        .out
        .clone()
        .or_else(|| config.out.clone())
        .unwrap_or_else(|| PathBuf::from("runs/train"));
    config.out = Some(out.clone());
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let policy = match &config.policy {
        frognano_train::PolicyConfig::Repair(_) => "the repair policy".to_string(),
        frognano_train::PolicyConfig::Onnx(model) => format!("the language model {}", model.model),
    };
    println!(
        "training {policy}: {} curriculum, {} iterations x {} tasks x {} rollouts, \
         {} repositories, {} held-out tasks -> {}",
        config.curriculum.as_str(),
        config.iterations,
        config.trainer.tasks_per_iteration,
        config.trainer.group_size,
        config.repos.len(),
        config.held_out,
        out.display()
    );
    let mut bars = Bars::new(config.iterations, "");
    let report = if args.ray.address.is_some() {
        train_on_cluster(&args.ray, &config, &mut bars)?
    } else {
        let sandbox = sandbox(&args.image)?;
        let pools = prepare_pools(&sandbox, &config, &mut bars)?;
        frognano_train::run(&sandbox, &config, &pools, &mut bars, None)?
    };
    bars.finish();
    let plot = out.join("curves.png");
    write_png(&plot, &curves(&report))?;
    let report_path = out.join("report.json");
    frognano_repo::write_atomically(
        &report_path,
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    println!("{}", summary_table(&report));
    let evaluated = match &report.weights {
        Some(weights) => format!("onnx:{}", weights.display()),
        None => format!("repair:{}", out.join("checkpoint.json").display()),
    };
    println!(
        "metrics: {}\ncheckpoint: {} (evaluate it: frognano eval --tasks {} --policy {evaluated})\nplot: {}",
        out.join("metrics.jsonl").display(),
        out.join("checkpoint.json").display(),
        out.join("held_out.jsonl").display(),
        plot.display()
    );
    Ok(ExitCode::SUCCESS)
}
