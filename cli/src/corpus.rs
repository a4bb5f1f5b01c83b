//! `frognano corpus`: registry packages, local trees and sdists as environments (a thin layer
//! over `frognano-corpus`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};
use frognano_corpus::{
    BuildEvent, BuildOptions, Corpus, CorpusSynthOptions, Failure, Manifest, Spec, SynthEvent,
};
use frognano_env::taskset;
use indicatif::{ProgressBar, ProgressStyle};

use crate::{ImageArgs, open_sandbox};

#[derive(Subcommand, Debug)]
pub enum CorpusCommand {
    /// Add package specs to a corpus (created if missing): NAME==VERSION [--hash=sha256:HEX],
    /// a source directory, or an sdist file.
    Add(AddArgs),
    /// Build every unfinished entry: fetch (hash-checked), unpack, find test requirements,
    /// run the clean suite once, write the manifest. Resumable: finished entries are kept.
    Build(BuildArgs),
    /// List the entries with their status, tests and reasons; failures grouped by cause. Takes
    /// a corpus directory or a summary file (`corpus summary`).
    List(ListArgs),
    /// Write the built entries' summary (one JSON line each: status or cause, test counts,
    /// excluded tests per reason, suite time, synthesis yield), to choose environments
    /// without building them.
    Summary(SummaryArgs),
    /// Synthesize tasks across the ready entries, an equal share per repository.
    Synth(CorpusSynthArgs),
    /// Write the corpus's tasks as a dataset (SWE-bench fields plus FrogNano's) with a card.
    Export(ExportArgs),
    /// Run a sample of ready entries natively too and compare the passing tests.
    Compare(CompareArgs),
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The corpus directory.
    corpus: PathBuf,
    /// Ready entries to compare, spread evenly over the corpus.
    #[arg(long, default_value_t = 10)]
    sample: usize,
    /// Only these entries (ids, comma-separated) instead of a sample.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Every ready entry not compared yet, instead of a sample (resumable: each comparison is
    /// kept in its entry's manifest as it ends).
    #[arg(long, conflicts_with = "only")]
    all: bool,
    /// With --all: compare the entries compared before again too.
    #[arg(long, requires = "all")]
    again: bool,
    /// Entries compared at once (default: one per core).
    #[arg(short, long)]
    jobs: Option<usize>,
    /// Host Python for the native runs (needs pytest).
    #[arg(long, default_value = "python3")]
    python: String,
    /// Seconds each run may take.
    #[arg(long, default_value_t = 300.0)]
    timeout: f64,
    #[command(flatten)]
    image: ImageArgs,
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The corpus directory.
    corpus: PathBuf,
    /// Specs to add.
    specs: Vec<String>,
    /// A file of specs, one per line.
    #[arg(long)]
    from: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// The corpus directory (created if missing).
    corpus: PathBuf,
    /// Add the specs of this list first (one per line; pip's `--hash=sha256:` pins).
    #[arg(long)]
    from: Option<PathBuf>,
    /// Add FrogNano's starter list first (300+ pinned pure-Python packages).
    #[arg(long)]
    starter: bool,
    /// Use only the first N specs of --from / --starter (a quick sample).
    #[arg(long)]
    limit: Option<usize>,
    /// Entries built at once (default: one per core).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// Seconds one clean-suite run may take.
    #[arg(long, default_value_t = 180.0)]
    timeout: f64,
    /// Build failed entries again.
    #[arg(long)]
    retry_failed: bool,
    /// Build every entry again.
    #[arg(long)]
    rebuild: bool,
    #[command(flatten)]
    image: ImageArgs,
    /// With --ray the entries are built by the cluster's workers, one entry each at a time;
    /// the corpus folder must be on a path every node shares.
    #[command(flatten)]
    ray: crate::cluster::RayArgs,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// The corpus directory, or a summary file written by `corpus summary`.
    corpus: PathBuf,
    /// Print the manifests as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Only failed entries.
    #[arg(long)]
    failed: bool,
}

#[derive(Args, Debug)]
pub struct SummaryArgs {
    /// The corpus directory.
    corpus: PathBuf,
    /// Where the summary goes (default: summary.jsonl in the corpus directory).
    #[arg(short, long)]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CorpusSynthArgs {
    /// The corpus directory.
    corpus: PathBuf,
    /// Tasks to make across the corpus.
    #[arg(short = 'n', long, default_value_t = 100)]
    count: usize,
    /// Where to write the tasks (default: tasks.jsonl in the corpus).
    #[arg(short = 'o', long)]
    out: Option<PathBuf>,
    #[command(flatten)]
    bugs: crate::synth::BugArgs,
    /// An entry stops after this many candidates per task of its share.
    #[arg(long, default_value_t = 12)]
    candidates_per_task: usize,
    /// Entries synthesized at once (default: one per core).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
    /// Only these entries (ids, comma-separated).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    #[command(flatten)]
    image: ImageArgs,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The corpus directory.
    corpus: PathBuf,
    /// The export directory (tasks.jsonl and README.md, the dataset card).
    #[arg(short = 'o', long)]
    out: PathBuf,
    /// The tasks to export (default: tasks.jsonl in the corpus).
    #[arg(long)]
    tasks: Option<PathBuf>,
}

pub fn corpus(command: &CorpusCommand) -> anyhow::Result<ExitCode> {
    match command {
        CorpusCommand::Add(args) => add(args),
        CorpusCommand::Build(args) => build(args),
        CorpusCommand::List(args) => list(args),
        CorpusCommand::Summary(args) => summary(args),
        CorpusCommand::Synth(args) => synth(args),
        CorpusCommand::Export(args) => export(args),
        CorpusCommand::Compare(args) => compare(args),
    }
}

fn read_list(path: &Path) -> anyhow::Result<Vec<Spec>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    Ok(frognano_corpus::parse_list(
        &text,
        base,
        &path.display().to_string(),
    )?)
}

fn add(args: &AddArgs) -> anyhow::Result<ExitCode> {
    let corpus = Corpus::create(&args.corpus)?;
    let mut specs = Vec::new();
    for (i, text) in args.specs.iter().enumerate() {
        specs.push(Spec::parse(
            text,
            Path::new("."),
            &format!("argument {}", i + 1),
        )?);
    }
    if let Some(list) = &args.from {
        specs.extend(read_list(list)?);
    }
    if specs.is_empty() {
        bail!("nothing to add: give specs (NAME==VERSION, a directory, an sdist) or --from LIST");
    }
    let added = corpus.add(&specs)?;
    println!(
        "{added} new spec(s) in {} ({} in all); build them with `frognano corpus build {}`",
        args.corpus.display(),
        corpus.specs()?.len(),
        args.corpus.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C sets the flag (work in progress is abandoned, finished work kept); a second Ctrl-C
/// ends the process at once.
fn cancel_on_ctrl_c() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let handler_flag = flag.clone();
    let installed = ctrlc::set_handler(move || {
        if handler_flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\nstopping: finished entries are kept (Ctrl-C again to quit now)");
    });
    if let Err(err) = installed {
        eprintln!("note: Ctrl-C will not stop cleanly ({err})");
    }
    flag
}

/// Prints a line above the bar, or plainly when there is no terminal to draw the bar on (CI,
/// a pipe), where indicatif would drop it.
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

fn bar_style(what: &str) -> ProgressStyle {
    ProgressStyle::with_template(&format!(
        "{{bar:30}} {{pos}}/{{len}} {what} [{{elapsed}}<{{eta}}] {{msg}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn build(args: &BuildArgs) -> anyhow::Result<ExitCode> {
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let corpus = Corpus::create(&args.corpus)?;
    let mut specs = Vec::new();
    if args.starter {
        specs.extend(frognano_corpus::parse_list(
            frognano_corpus::STARTER_LIST,
            Path::new("."),
            "the starter list",
        )?);
    }
    if let Some(list) = &args.from {
        specs.extend(read_list(list)?);
    }
    if let Some(limit) = args.limit {
        specs.truncate(limit);
    }
    let only: Vec<String> = if specs.is_empty() {
        Vec::new()
    } else {
        corpus.add(&specs)?;
        specs.iter().map(Spec::id).collect()
    };
    if corpus.specs()?.is_empty() {
        bail!(
            "{} lists no packages: add some with --from LIST, --starter or `frognano corpus add`",
            args.corpus.display()
        );
    }
    if args.ray.address.is_some() {
        return build_on_cluster(args, &corpus, only);
    }
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let cancel = cancel_on_ctrl_c();
    let options = BuildOptions {
        jobs: args.jobs.unwrap_or(0),
        timeout_s: args.timeout,
        retry_failed: args.retry_failed,
        rebuild: args.rebuild,
        only,
        cancel: Some(cancel.clone()),
    };
    let bar = ProgressBar::hidden();
    let running: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());
    let tally = Mutex::new((0usize, 0usize));
    let show_running = |bar: &ProgressBar| {
        if let (Ok(running), Ok(tally)) = (running.lock(), tally.lock()) {
            let now: Vec<String> = running
                .iter()
                .map(|(id, step)| format!("{id}: {step}"))
                .collect();
            bar.set_message(format!(
                "{} ready, {} failed | {}",
                tally.0,
                tally.1,
                now.join(" | ")
            ));
        }
    };
    let summary = corpus.build(&sandbox, &options, &|event| match event {
        BuildEvent::Planned { to_build, kept } => {
            eprintln!("{to_build} entries to build, {kept} already built");
            bar.set_length(*to_build as u64);
            bar.set_style(bar_style("entries"));
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        BuildEvent::Started { id } => {
            if let Ok(mut r) = running.lock() {
                r.insert(id.to_string(), "starting".into());
            }
            show_running(&bar);
        }
        BuildEvent::Step { id, message } => {
            if let Ok(mut r) = running.lock() {
                r.insert(id.to_string(), message.chars().take(60).collect());
            }
            show_running(&bar);
        }
        BuildEvent::Finished { manifest } => {
            if let Ok(mut r) = running.lock() {
                r.remove(&manifest.id);
            }
            if let Ok(mut t) = tally.lock() {
                if manifest.is_ready() {
                    t.0 += 1;
                } else {
                    t.1 += 1;
                }
            }
            say(&bar, entry_line(manifest));
            bar.inc(1);
            show_running(&bar);
        }
    })?;
    bar.finish_and_clear();
    let manifests = corpus.manifests()?;
    print_summary(&manifests);
    println!(
        "built {} entries in {:.0} s ({} kept from earlier builds); {} ready, {} failed{}",
        summary.built,
        summary.seconds,
        summary.kept,
        summary.ready,
        summary.failed,
        if summary.unfinished > 0 {
            format!(
                "; {} unfinished (run the same command again to finish them)",
                summary.unfinished
            )
        } else {
            String::new()
        }
    );
    Ok(if cancel.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else {
        build_exit_code(&manifests, 0)
    })
}

/// 1 when no entry of the corpus is ready (every unit of work failed, so scripts notice, as
/// with pip and cargo) or some entry could not be built at all; 0 otherwise.
fn build_exit_code(manifests: &[Manifest], unbuildable: usize) -> ExitCode {
    if !manifests.is_empty() && !manifests.iter().any(Manifest::is_ready) {
        eprintln!("no entry of the corpus is ready (see `frognano corpus list --failed`)");
        ExitCode::from(1)
    } else if unbuildable > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `frognano corpus build --ray`: the entries spread over a Ray cluster's workers.
fn build_on_cluster(
    args: &BuildArgs,
    corpus: &Corpus,
    only: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let root = std::path::absolute(corpus.root())?;
    let request = serde_json::json!({
        "corpus": root,
        "only": only,
        "timeout": args.timeout,
        "retry_failed": args.retry_failed,
        "rebuild": args.rebuild,
    });
    let bar = crate::cluster::bar("entries");
    let mut summary = serde_json::Value::Null;
    crate::cluster::run(&args.ray, "corpus-build", request, Some(&bar), |event| {
        match event["event"].as_str() {
            Some("manifest") => {
                let manifest: Manifest = serde_json::from_value(event["manifest"].clone())
                    .context("a manifest from the cluster")?;
                say(&bar, entry_line(&manifest));
            }
            Some("done") => {
                summary = event["summary"].clone();
                crate::cluster::report_deaths(event);
            }
            _ => {}
        }
        Ok(())
    })?;
    let manifests = corpus.manifests()?;
    print_summary(&manifests);
    let count = |key: &str| summary[key].as_u64().unwrap_or(0);
    println!(
        "built {} entries on the cluster in {:.0} s ({} kept from earlier builds); {} ready, \
         {} failed",
        count("built"),
        summary["seconds"].as_f64().unwrap_or(0.0),
        count("kept"),
        count("ready"),
        count("failed"),
    );
    let errors = summary["errors"].as_array().cloned().unwrap_or_default();
    for error in &errors {
        eprintln!(
            "  {} could not be built: {}",
            error["id"].as_str().unwrap_or("?"),
            error["error"].as_str().unwrap_or("?")
        );
    }
    Ok(build_exit_code(&manifests, errors.len()))
}

fn entry_line(m: &Manifest) -> String {
    match &m.failure {
        None => format!(
            "  ok    {:<36} {:>5} passing of {:>5} tests, suite {:.1} s",
            m.id,
            m.tests.passed,
            m.tests.collected,
            m.suite_seconds.unwrap_or(0.0)
        ),
        Some(f) => format!("  FAIL  {:<36} {}", m.id, failure_line(f, 160)),
    }
}

/// A failure as `kind: first line of its message`, the line cut to `max_chars` characters.
fn failure_line(failure: &Failure, max_chars: usize) -> String {
    let first_line = failure.message.lines().next().unwrap_or("");
    format!(
        "{}: {}",
        failure.kind,
        first_line.chars().take(max_chars).collect::<String>()
    )
}

/// Ready/failed counts, test totals, excluded tests by reason and failures grouped by kind.
fn print_summary(manifests: &[Manifest]) {
    let ready: Vec<&Manifest> = manifests.iter().filter(|m| m.is_ready()).collect();
    let collected: usize = ready.iter().map(|m| m.tests.collected).sum();
    let passed: usize = ready.iter().map(|m| m.tests.passed).sum();
    let suite: f64 = ready.iter().filter_map(|m| m.suite_seconds).sum();
    println!(
        "\n{} of {} entries ready: {passed} passing tests of {collected} collected; clean suites {:.0} s in all",
        ready.len(),
        manifests.len(),
        suite
    );
    let mut excluded: BTreeMap<String, usize> = BTreeMap::new();
    for m in &ready {
        for (reason, count) in &m.excluded_by_reason {
            *excluded.entry(reason.clone()).or_insert(0) += count;
        }
    }
    if !excluded.is_empty() {
        let mut rows: Vec<(String, usize)> = excluded.into_iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(r.1));
        let parts: Vec<String> = rows.iter().map(|(r, c)| format!("{c} {r}")).collect();
        println!("excluded tests in ready entries: {}", parts.join(", "));
    }
    let compared: Vec<f64> = ready
        .iter()
        .filter_map(|m| m.native.map(|n| n.native_share()))
        .collect();
    if !compared.is_empty() {
        println!(
            "compared with native pytest (`corpus compare`): {} of {} ready entries pass at least \
             90% of the tests native pytest passes",
            compared.iter().filter(|share| **share >= 0.9).count(),
            compared.len()
        );
    }
    let groups = frognano_corpus::failures_by_kind(manifests);
    if groups.is_empty() {
        return;
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec!["failed because", "entries", "what to do", "examples"]);
    let mut rows: Vec<_> = groups.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1.len()));
    for (kind, entries) in rows {
        let examples: Vec<String> = entries.iter().take(3).map(|(id, _)| id.clone()).collect();
        table.add_row(vec![
            kind.to_string(),
            entries.len().to_string(),
            kind.advice().to_string(),
            examples.join(", "),
        ]);
    }
    println!("{table}");
}

fn summary(args: &SummaryArgs) -> anyhow::Result<ExitCode> {
    let corpus = Corpus::open(&args.corpus)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.corpus.join(frognano_corpus::SUMMARY_FILE));
    let entries = frognano_corpus::write_summary(&corpus, &out)?;
    println!("{entries} entries -> {}", out.display());
    Ok(ExitCode::SUCCESS)
}

fn list(args: &ListArgs) -> anyhow::Result<ExitCode> {
    // A summary file lists what it recorded; a corpus directory also knows its unbuilt specs.
    let (all, specs) = if args.corpus.is_file() {
        let all = frognano_corpus::read_summary(&args.corpus)?;
        let specs = all.len();
        (all, specs)
    } else {
        let corpus = Corpus::open(&args.corpus)?;
        (corpus.manifests()?, corpus.specs()?.len())
    };
    let manifests: Vec<&Manifest> = all
        .iter()
        .filter(|m| !args.failed || !m.is_ready())
        .collect();
    if args.json {
        for m in &manifests {
            println!("{}", serde_json::to_string(m)?);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "entry", "status", "tests", "passing", "excluded", "native", "suite s", "tasks", "reason",
    ]);
    for m in &manifests {
        let mut reasons: Vec<(&String, &usize)> = m.excluded_by_reason.iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(a.1));
        let excluded: Vec<String> = reasons
            .iter()
            .take(3)
            .map(|(r, c)| format!("{c} {r}"))
            .collect();
        table.add_row(vec![
            m.id.clone(),
            if m.is_ready() { "ready" } else { "failed" }.to_string(),
            m.tests.collected.to_string(),
            m.tests.passed.to_string(),
            excluded.join(", "),
            // Share of the natively passing tests that pass here (after `corpus compare`).
            m.native
                .map(|n| format!("{:.0}%", 100.0 * n.native_share()))
                .unwrap_or_default(),
            m.suite_seconds
                .map(|s| format!("{s:.1}"))
                .unwrap_or_default(),
            m.synthesis
                .as_ref()
                .map(|s| s.tasks.to_string())
                .unwrap_or_default(),
            m.failure
                .as_ref()
                .map(|f| failure_line(f, 90))
                .unwrap_or_default(),
        ]);
    }
    println!("{table}");
    print_summary(&all);
    if all.len() < specs {
        println!(
            "{} of {specs} specs not built yet: `frognano corpus build {}`",
            specs - all.len(),
            args.corpus.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn synth(args: &CorpusSynthArgs) -> anyhow::Result<ExitCode> {
    if args.jobs == Some(0) {
        bail!("--jobs must be at least 1");
    }
    let corpus = Corpus::open(&args.corpus)?;
    let config = args.bugs.config()?;
    config.validate()?;
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let cancel = cancel_on_ctrl_c();
    let options = CorpusSynthOptions {
        count: args.count,
        config,
        candidates_per_task: args.candidates_per_task,
        jobs: args.jobs.unwrap_or(0),
        only: args.only.clone(),
        cancel: Some(cancel.clone()),
    };
    let bar = ProgressBar::new(args.count as u64);
    bar.set_style(bar_style("tasks"));
    let result = frognano_corpus::synthesize(&corpus, &sandbox, &options, &|event| match event {
        SynthEvent::Planned { entries, count } => {
            say(&bar, format!("{count} tasks over {entries} ready entries"));
        }
        SynthEvent::Task { id } => {
            bar.inc(1);
            bar.set_message(id.to_string());
        }
        SynthEvent::Finished { id, summary } => {
            say(
                &bar,
                match &summary.error {
                    Some(err) => format!(
                        "  {id:<36} no tasks: {}",
                        err.lines()
                            .next()
                            .unwrap_or("")
                            .chars()
                            .take(140)
                            .collect::<String>()
                    ),
                    None => format!(
                        "  {id:<36} {} tasks from {} candidates in {:.0} s",
                        summary.tasks, summary.candidates, summary.seconds
                    ),
                },
            );
        }
    })?;
    bar.finish_and_clear();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.corpus.join("tasks.jsonl"));
    taskset::save_tasks(&out, &result.tasks)?;
    let productive = result.entries.values().filter(|s| s.tasks > 0).count();
    println!(
        "{} tasks from {productive} of {} entries in {:.0} s -> {}",
        result.tasks.len(),
        result.entries.len(),
        result.seconds,
        out.display()
    );
    print_yields(&result.entries);
    Ok(if cancel.load(Ordering::SeqCst) {
        ExitCode::from(130)
    } else if result.tasks.is_empty() {
        // Every entry's synthesis came back empty: nothing was made.
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Per-operator yield (valid / tried) over the entries, with the count of entries that tried it.
fn print_yields(entries: &BTreeMap<String, frognano_corpus::SynthesisSummary>) {
    let mut totals: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for summary in entries.values() {
        for (op, (tried, valid)) in &summary.yield_by_operator {
            let t = totals.entry(op.clone()).or_insert((0, 0, 0));
            t.0 += tried;
            t.1 += valid;
            t.2 += 1;
        }
    }
    if totals.is_empty() {
        return;
    }
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec!["operator", "tried", "valid", "yield", "entries"]);
    for (op, (tried, valid, n)) in totals {
        table.add_row(vec![
            op,
            tried.to_string(),
            valid.to_string(),
            if tried == 0 {
                "-".into()
            } else {
                format!("{:.0}%", 100.0 * valid as f64 / tried as f64)
            },
            n.to_string(),
        ]);
    }
    println!("{table}");
}

fn export(args: &ExportArgs) -> anyhow::Result<ExitCode> {
    let corpus = Corpus::open(&args.corpus)?;
    let path = args
        .tasks
        .clone()
        .unwrap_or_else(|| args.corpus.join("tasks.jsonl"));
    if !path.is_file() {
        bail!(
            "{} does not exist: make tasks with `frognano corpus synth {}` or name them with --tasks",
            path.display(),
            args.corpus.display()
        );
    }
    let tasks = taskset::load_tasks(&path)?;
    let summary = frognano_corpus::export(&corpus, &tasks, &args.out)?;
    println!(
        "{} tasks from {} repositories -> {} (card: {})",
        summary.tasks,
        summary.by_repository.len(),
        summary.dataset.display(),
        summary.card.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn compare(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let corpus = Corpus::open(&args.corpus)?;
    let ready: Vec<Manifest> = corpus
        .manifests()?
        .into_iter()
        .filter(Manifest::is_ready)
        .collect();
    let ids: Vec<String> = if !args.only.is_empty() {
        args.only.clone()
    } else if args.all {
        ready
            .iter()
            .filter(|m| args.again || m.native.is_none())
            .map(|m| m.id.clone())
            .collect()
    } else {
        if args.sample == 0 {
            bail!("--sample must be at least 1");
        }
        // Evenly spaced over the ready entries (the list is alphabetical, not by size).
        let n = args.sample.min(ready.len());
        (0..n)
            .map(|i| ready[i * ready.len() / n].id.clone())
            .collect()
    };
    if ids.is_empty() {
        if args.all && !ready.is_empty() {
            println!("every ready entry is compared already (--again compares them anew)");
            return Ok(ExitCode::SUCCESS);
        }
        bail!("no ready entries to compare: run `frognano corpus build` first");
    }
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let bar = ProgressBar::new(ids.len() as u64);
    bar.set_style(bar_style("entries"));
    let comparisons = frognano_corpus::compare_entries(
        &corpus,
        &sandbox,
        &ids,
        &args.python,
        args.timeout,
        args.jobs.unwrap_or(0),
        &|c| {
            bar.set_message(c.id.clone());
            bar.inc(1);
        },
    );
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header(vec![
        "entry",
        "sandbox passed",
        "native passed",
        "both",
        "agreement",
        "native only (why)",
        "sandbox s",
        "native s",
    ]);
    let (mut both, mut either, mut compared) = (0usize, 0usize, 0usize);
    for c in &comparisons {
        if let Some(err) = &c.error {
            table.add_row(vec![
                c.id.clone(),
                c.sandbox_passed.to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                err.chars().take(80).collect(),
                format!("{:.1}", c.seconds.0),
                "-".into(),
            ]);
            continue;
        }
        compared += 1;
        both += c.both_passed;
        either += c.sandbox_passed + c.native_passed - c.both_passed;
        let why: Vec<String> = c
            .native_only_by_reason
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        table.add_row(vec![
            c.id.clone(),
            c.sandbox_passed.to_string(),
            c.native_passed.to_string(),
            c.both_passed.to_string(),
            format!("{:.1}%", 100.0 * c.agreement()),
            why.join(", "),
            format!("{:.1}", c.seconds.0),
            format!("{:.1}", c.seconds.1),
        ]);
    }
    bar.finish_and_clear();
    println!("{table}");
    println!(
        "passing-test agreement over {compared} entries: {both} of {either} tests passing in either run pass in both ({:.1}%)",
        if either == 0 {
            100.0
        } else {
            100.0 * both as f64 / either as f64
        }
    );
    Ok(ExitCode::SUCCESS)
}
