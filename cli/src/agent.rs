//! `frognano agent REPO`: a local model, or one behind an OpenAI-compatible server
//! (`--endpoint`), tries to make a repository's failing tests pass inside the sandbox. The user's
//! files change only with `--apply`.

use std::path::{Component, Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use frognano_core::{Policy, RepoSource, Task, TestOutcome};
use frognano_env::{EnvConfig, RepoEnv, patch};
use frognano_policy::llm::{OnnxPolicy, OnnxPolicyConfig};
use frognano_policy::{HttpPolicy, HttpPolicyConfig};
use frognano_sandbox::TestRequest;

use crate::models::{resolve_with_progress, spinner};
use crate::{ImageArgs, open_sandbox};

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// The repository (a folder with a pytest suite) whose failing tests the agent should fix.
    repo: PathBuf,
    /// Model folder or registry name; with --endpoint, the name the server knows the model by.
    #[arg(long, default_value = "smollm2-135m")]
    model: String,
    /// An OpenAI-compatible server to ask instead of a local model (Ollama:
    /// http://127.0.0.1:11434/v1, vLLM and `frognano serve`: http://127.0.0.1:8000/v1).
    #[arg(long)]
    endpoint: Option<String>,
    /// With --endpoint: the environment variable holding the API key.
    #[arg(long, default_value = "OPENAI_API_KEY")]
    api_key_env: String,
    /// With --endpoint: act through native tool calls (the server must support `tools`)
    /// instead of text commands.
    #[arg(long)]
    tools: bool,
    /// Write the agent's changes into REPO (default: only print the diff).
    #[arg(long)]
    apply: bool,
    /// Most actions.
    #[arg(long, default_value_t = 20)]
    max_steps: usize,
    #[command(flatten)]
    generation: crate::models::GenerationArgs,
    /// What to fix, in words (default: the failing tests and their messages).
    #[arg(long)]
    statement: Option<String>,
    #[command(flatten)]
    image: ImageArgs,
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max {
        out.push('…');
    }
    out
}

pub fn agent(args: &AgentArgs) -> anyhow::Result<ExitCode> {
    if !args.repo.is_dir() {
        bail!("{}: not a directory", args.repo.display());
    }
    let repo = std::fs::canonicalize(&args.repo)
        .with_context(|| format!("resolve {}", args.repo.display()))?;
    let generation = args.generation.options(384);
    let mut policy: Box<dyn Policy> = match &args.endpoint {
        Some(endpoint) => {
            let bar = spinner("server");
            bar.set_message(format!("connecting to {endpoint}"));
            let policy = HttpPolicy::connect(HttpPolicyConfig {
                api_key_env: args.api_key_env.clone(),
                tool_calls: args.tools,
                generation,
                ..HttpPolicyConfig::new(endpoint.clone(), args.model.clone())
            });
            bar.finish_and_clear();
            Box::new(policy?)
        }
        None => {
            if args.tools {
                bail!("--tools needs --endpoint (a local model acts through text commands)");
            }
            let model_dir = resolve_with_progress(&args.model)?;
            let config = OnnxPolicyConfig {
                generation,
                ..OnnxPolicyConfig::default()
            };
            Box::new(OnnxPolicy::load(&model_dir, config)?)
        }
    };
    let sandbox = Arc::new(open_sandbox(args.image.options()?, false)?);
    let bar = spinner("tests");
    bar.set_message("running the suite in the sandbox");
    let prepared = sandbox.prepare_repo(&repo, &|m| bar.set_message(m.to_string()))?;
    let report = sandbox.run_tests_prepared(&prepared, &TestRequest::default())?;
    bar.finish_and_clear();
    let failing: Vec<_> = report
        .tests
        .iter()
        .filter(|t| matches!(t.outcome, TestOutcome::Failed | TestOutcome::Error))
        .collect();
    let passing: Vec<String> = report.passed_ids().map(str::to_string).collect();
    if report.tests.is_empty() {
        bail!(
            "the suite ran no tests ({:?}{}); nothing for the agent to fix",
            report.outcome,
            report
                .detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        );
    }
    if failing.is_empty() {
        println!("all {} tests pass: nothing to fix", passing.len());
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} failing, {} passing", failing.len(), passing.len());
    let statement = args.statement.clone().unwrap_or_else(|| {
        let mut text = String::from(
            "Some tests of this repository fail. Fix the source code (not the tests) so that \
             they pass without breaking the others.\nFailing tests:\n",
        );
        for test in failing.iter().take(10) {
            text.push_str(&format!("- {}", test.id));
            if let Some(message) = &test.message {
                text.push_str(&format!(": {}", first_line(message, 200)));
            }
            text.push('\n');
        }
        text
    });
    let task = Task {
        id: repo
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "repo".into()),
        repo: RepoSource::Path {
            path: repo.clone(),
            content_hash: None,
        },
        // The repository is already in its buggy state and the fix is what we are after: no bug
        // patch to apply, and a gold patch that is unknown (empty).
        bug_patch: String::new(),
        gold_patch: Some(String::new()),
        test_patch: None,
        problem_statement: statement,
        fail_to_pass: failing.iter().map(|t| t.id.clone()).collect(),
        pass_to_pass: passing,
        test_args: Vec::new(),
        limits: prepared.config.limits(),
        metadata: serde_json::Map::new(),
    };
    let mut env = RepoEnv::new(
        sandbox,
        EnvConfig {
            max_steps: args.max_steps,
            ..EnvConfig::default()
        },
    )?;
    env.reset_task(&task)?;
    let bar = spinner("agent");
    for step in 1..=args.max_steps {
        let Some(context) = env.context() else { break };
        bar.set_message(format!("step {step}: thinking"));
        let output = policy
            .act(std::slice::from_ref(&context))?
            .pop()
            .context("the policy returned no action")?;
        if let Some(error) = &output.error {
            bar.finish_and_clear();
            bail!("step {step}: the model could not answer: {error}");
        }
        let action_text = match &output.action {
            frognano_core::Action::Text { text } => text.clone(),
            frognano_core::Action::Tool(call) => serde_json::to_string(call)?,
        };
        bar.set_message(format!("step {step}: {}", first_line(&action_text, 60)));
        let result = env.step_action(&output.action)?;
        env.annotate_last_step(&output);
        let line = format!(
            "{step:>3}. {}\n     -> {}{}",
            first_line(&action_text, 100),
            if result.observation.is_error {
                "error: "
            } else {
                ""
            },
            first_line(&result.observation.text, 100)
        );
        // Printed around the spinner (a hidden spinner, as in a pipe, would swallow println).
        bar.suspend(|| println!("{line}"));
        if result.terminated || result.truncated {
            break;
        }
    }
    bar.finish_and_clear();
    let record = env.record().context("the episode left no record")?;
    let resolved = record.outcome.resolved;
    println!(
        "{} after {} steps",
        if resolved {
            "RESOLVED: every failing test passes and nothing broke"
        } else {
            "not resolved"
        },
        record.outcome.steps
    );
    if record.patch.trim().is_empty() {
        println!("(the agent changed nothing)");
        return Ok(ExitCode::from(if resolved { 0 } else { 1 }));
    }
    println!("{}", record.patch);
    if args.apply {
        let written = apply_patch(&repo, &record.patch)?;
        println!("applied to {}: {}", repo.display(), written.join(", "));
    } else {
        println!(
            "(not applied; rerun with --apply to write these changes into {})",
            repo.display()
        );
    }
    Ok(ExitCode::from(if resolved { 0 } else { 1 }))
}

fn safe_relative(path: &str) -> anyhow::Result<&Path> {
    let p = Path::new(path);
    if p.is_absolute() || p.components().any(|c| !matches!(c, Component::Normal(_))) {
        bail!("refusing to write outside the repository: {path}");
    }
    Ok(p)
}

/// Applies the agent's diff to the user's files: all or nothing (every hunk is checked against
/// the files on disk before anything is written).
fn apply_patch(repo: &Path, diff: &str) -> anyhow::Result<Vec<String>> {
    let mut tree = patch::FileTree::new();
    for change in patch::changed_files(diff)? {
        let paths: Vec<&str> = match &change {
            patch::FileChange::Create(_) => Vec::new(),
            patch::FileChange::Delete(p) => vec![p.as_str()],
            patch::FileChange::Modify { from, .. } => vec![from.as_str()],
        };
        for path in paths {
            let full = repo.join(safe_relative(path)?);
            let bytes = std::fs::read(&full).with_context(|| format!("read {}", full.display()))?;
            tree.insert(path.to_string(), Arc::new(bytes));
        }
    }
    let before = tree.clone();
    let touched = patch::apply(&mut tree, diff)
        .context("the diff no longer applies to the files on disk (changed since the run?)")?;
    for path in &touched {
        let full = repo.join(safe_relative(path)?);
        match tree.get(path) {
            Some(content) => {
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                let dir = full.parent().unwrap_or(repo);
                let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
                std::io::Write::write_all(&mut tmp, content)?;
                if let Ok(meta) = std::fs::metadata(&full) {
                    let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
                }
                tmp.persist(&full)
                    .with_context(|| format!("write {}", full.display()))?;
            }
            None if before.contains_key(path) => {
                std::fs::remove_file(&full)
                    .with_context(|| format!("remove {}", full.display()))?;
            }
            None => {}
        }
    }
    Ok(touched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_patch_writes_all_or_nothing_inside_the_repository() {
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = dir.path();
        std::fs::create_dir_all(repo.join("pkg")).expect("mkdir");
        std::fs::write(
            repo.join("pkg/calc.py"),
            "def add(a, b):\n    return a - b\n",
        )
        .expect("write");
        let diff = "diff --git a/pkg/calc.py b/pkg/calc.py\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n";
        let touched = apply_patch(repo, diff).expect("applies");
        assert_eq!(touched, vec!["pkg/calc.py".to_string()]);
        assert_eq!(
            std::fs::read_to_string(repo.join("pkg/calc.py")).expect("read"),
            "def add(a, b):\n    return a + b\n"
        );
        // Applying again fails (the file changed) and writes nothing.
        assert!(apply_patch(repo, diff).is_err());
        assert_eq!(
            std::fs::read_to_string(repo.join("pkg/calc.py")).expect("read"),
            "def add(a, b):\n    return a + b\n"
        );
        let escape = "diff --git a/../outside.py b/../outside.py\n--- a/../outside.py\n+++ b/../outside.py\n@@ -1 +1 @@\n-x\n+y\n";
        let err = apply_patch(repo, escape).expect_err("outside the repository");
        assert!(err.to_string().contains("outside"), "{err}");
    }
}
