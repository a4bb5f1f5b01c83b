//! `--ray ADDRESS`: `eval`, `synth`, `corpus build` and `train` on a Ray cluster.
//!
//! Ray's client lives in Python, and so do FrogNano's Ray workers (`frognano.distributed`, over
//! the Python bindings), so the CLI does not talk to Ray itself: it runs that module's driver
//! (`python -m frognano.distributed`) with the job as one JSON request on stdin, reads its
//! events (JSON lines: progress, records, tasks, manifests, the end) from stdout, and renders
//! them with the same code as a single-machine run. The Python is `FROGNANO_PYTHON`, else
//! `python3`; it needs `pip install 'frognano[ray]'`, and the cluster's nodes need FrogNano's
//! package too.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

/// What to install for `--ray`.
pub const INSTALL: &str = "pip install 'frognano[ray]'";

/// The cluster options shared by the commands that take `--ray`.
#[derive(Args, Debug, Clone, Default)]
pub struct RayArgs {
    /// Run on a Ray cluster: "auto" (the cluster this machine belongs to), HOST:PORT,
    /// ray://HOST:PORT, or "local" (a private one on this machine). Needs Ray and FrogNano's
    /// Python package (pip install 'frognano[ray]') in FROGNANO_PYTHON (default: python3),
    /// and FrogNano's package on every node.
    #[arg(long = "ray", value_name = "ADDRESS")]
    pub address: Option<String>,
    /// Workers (Ray actors) to start on the cluster (default: one per CPU).
    #[arg(long, requires = "address")]
    pub ray_actors: Option<usize>,
    /// How often a unit of work whose worker died is tried again before it is reported failed.
    #[arg(long, default_value_t = 2, requires = "address")]
    pub ray_retries: usize,
}

impl RayArgs {
    /// The request's cluster fields.
    fn fields(&self) -> Value {
        json!({
            "address": self.address,
            "actors": self.ray_actors,
            "max_retries": self.ray_retries,
        })
    }
}

/// The Python that runs the driver.
fn python() -> OsString {
    std::env::var_os("FROGNANO_PYTHON")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// Checks that `python` can import Ray and FrogNano's cluster module, with an error that says
/// what to install.
fn check_python(python: &OsString) -> anyhow::Result<()> {
    let shown = python.to_string_lossy();
    let output = Command::new(python)
        .args(["-c", "import ray, frognano.distributed"])
        .stdin(Stdio::null())
        .output();
    match output {
        Err(e) => bail!(
            "--ray runs the job through Ray and FrogNano's Python package, but {shown} could \
             not be started ({e}): install them with {INSTALL} and set FROGNANO_PYTHON to that \
             Python"
        ),
        Ok(out) if !out.status.success() => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let reason = frognano_core::lines::last_nonblank(&stderr).unwrap_or("");
            bail!(
                "--ray needs Ray and FrogNano's Python package in {shown}, which cannot import \
                 them ({reason}): {INSTALL} (or set FROGNANO_PYTHON to a Python that has them)"
            )
        }
        Ok(_) => Ok(()),
    }
}

/// A progress bar over the units of a cluster job (done across every worker).
pub fn bar(unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{bar:30}} {{pos}}/{{len}} {unit} on the cluster [{{elapsed}}<{{eta}}] {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// Runs `command` with `request` (plus the cluster fields) on the cluster and hands every event
/// but errors to `on_event`, in the order the driver wrote them. Progress events move `bar`.
pub fn run(
    ray: &RayArgs,
    command: &str,
    mut request: Value,
    bar: Option<&ProgressBar>,
    mut on_event: impl FnMut(&Value) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let python = python();
    check_python(&python)?;
    if let (Value::Object(fields), Value::Object(cluster)) = (&mut request, ray.fields()) {
        fields.extend(cluster);
        fields.insert("command".into(), command.into());
    }
    // Ctrl-C reaches the driver too (same process group): it stops the cluster's workers and
    // ends with an "interrupted" event, which this process waits for.
    let _ = ctrlc::set_handler(|| {});
    let mut child = Command::new(&python)
        .args(["-m", "frognano.distributed"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("start {}", python.to_string_lossy()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(serde_json::to_string(&request)?.as_bytes())
            .context("send the job to the cluster driver")?;
    }
    let stdout = child.stdout.take().context("the cluster driver's output")?;
    let mut failure = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("read the cluster driver's output")?;
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            eprintln!("{line}");
            continue;
        };
        match event["event"].as_str() {
            Some("error") => failure = event["message"].as_str().map(str::to_string),
            Some("progress") => {
                if let Some(bar) = bar {
                    bar.set_length(event["total"].as_u64().unwrap_or(0));
                    bar.set_position(event["done"].as_u64().unwrap_or(0));
                }
            }
            _ => {
                if failure.is_none()
                    && let Err(e) = on_event(&event)
                {
                    failure = Some(e.to_string());
                }
            }
        }
    }
    let status = child.wait().context("wait for the cluster driver")?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(message) = failure {
        if message == "interrupted" {
            eprintln!("interrupted: the cluster's workers were stopped; finished work was kept");
            std::process::exit(130);
        }
        bail!("on the Ray cluster: {message}");
    }
    if !status.success() {
        bail!("the Ray cluster driver failed ({status})");
    }
    Ok(())
}

/// Prints the workers that died during a job (their units were retried).
pub fn report_deaths(event: &Value) {
    if let Some(deaths) = event["worker_deaths"].as_array()
        && !deaths.is_empty()
    {
        eprintln!(
            "{} worker(s) died during the job; their work was retried elsewhere:",
            deaths.len()
        );
        for death in deaths {
            eprintln!(
                "  {}: {}",
                death["unit"].as_str().unwrap_or("?"),
                death["worker_died"].as_str().unwrap_or("?")
            );
        }
    }
}
