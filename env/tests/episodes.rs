//! RepoEnv and EnvPool against the real sandbox and the hand-made sample tasks.

use std::path::Path;

use frognano_core::{Action, Task, ToolCall};
use frognano_env::testing::{assert_all_resolved, rollout, rollout_in};
use frognano_env::{EnvConfig, EnvPool, EpisodeRecord, EvalSummary, RepoEnv, repo, taskset};
use frognano_policy::{NoopPolicy, OraclePolicy, RandomPolicy};
use frognano_sandbox::testing::{shared_sandbox as sandbox, workspace_root as root};

fn sample_tasks() -> Vec<Task> {
    taskset::load_tasks(&root().join("examples/tasks/sample.jsonl")).expect("sample tasks load")
}

fn text(s: &str) -> Action {
    Action::Text { text: s.into() }
}

#[test]
fn oracle_resolves_every_sample_task_and_noop_none() {
    let tasks = sample_tasks();
    assert!(tasks.len() >= 12);
    let mut oracle = OraclePolicy::new(&tasks);
    let records = rollout(&mut oracle, &tasks, 2);
    assert_eq!(records.len(), tasks.len());
    assert_all_resolved(&records);
    for record in &records {
        let grading = record.grading.as_ref().expect("graded");
        assert_eq!(record.outcome.reward, 1.0);
        assert!(record.outcome.submitted && !record.outcome.truncated);
        // The oracle runs the failing suite first, so every episode is a recovery.
        assert!(record.outcome.met_failure && record.outcome.recovered);
        assert!(!record.patch.is_empty());
        assert!(grading.restored_files.is_empty());
    }
    let summary = EvalSummary::of(&records);
    assert_eq!(summary.resolved_rate, 1.0);
    assert_eq!(summary.recovery_rate, 1.0);

    let records = rollout(&mut NoopPolicy, &tasks, 2);
    for record in &records {
        assert!(!record.outcome.resolved, "{}", record.task_id);
        assert_eq!(record.outcome.steps, 1);
        let grading = record.grading.as_ref().expect("graded");
        let f2p: Vec<_> = grading
            .tests
            .iter()
            .filter(|t| t.expected == "fail_to_pass")
            .collect();
        assert!(f2p.iter().all(|t| !t.passed), "{}", record.task_id);
        assert!(
            grading
                .tests
                .iter()
                .filter(|t| t.expected == "pass_to_pass")
                .all(|t| t.passed),
            "{}",
            record.task_id
        );
    }
}

#[test]
fn an_episode_by_hand() {
    let tasks = sample_tasks();
    let task = &tasks[0];
    let mut env = RepoEnv::new(sandbox(), EnvConfig::default()).expect("env");
    let first = env.reset_task(task).expect("reset");
    assert!(
        first
            .text
            .contains(task.problem_statement.lines().next().expect("title"))
    );
    assert!(first.text.contains("submit"));
    let workspace = env.workspace_path().expect("workspace").to_path_buf();

    let step = env.step_action(&text("test")).expect("step");
    assert!(!step.observation.is_error);
    assert!(
        step.observation.text.contains("failed"),
        "{}",
        step.observation.text
    );
    assert!(step.observation.text.contains(&task.fail_to_pass[0]));
    assert_eq!(
        step.info["tests"]["failing"].as_array().map(Vec::len),
        Some(task.fail_to_pass.len())
    );
    // The run also comes typed, naming the same failing tests.
    let run = step
        .observation
        .test_run
        .as_ref()
        .expect("a typed test run");
    assert!(run.failed > 0 && !run.ended_abnormally(), "{run:?}");
    assert!(run.failing.iter().any(|t| t.id == task.fail_to_pass[0]));
    assert!(!step.terminated && !step.truncated && step.reward == 0.0);

    let step = env.step_action(&text("please fix it")).expect("step");
    assert!(step.observation.is_error);
    assert!(step.observation.text.contains("No command found"));
    assert!(step.observation.test_run.is_none());

    let step = env.step_action(&text("view /etc/passwd")).expect("step");
    assert!(step.observation.is_error && step.observation.text.contains("outside the repository"));

    let step = env
        .step_action(&Action::Tool(ToolCall {
            name: "view".into(),
            arguments: serde_json::json!({"path": "tinyparse/config.py", "view_range": [1, 5]}),
        }))
        .expect("step");
    assert_eq!(
        step.observation.text.lines().count(),
        5,
        "{}",
        step.observation.text
    );

    // Editing the graded tests away does not help: protected files are restored for grading.
    let test_file = task.fail_to_pass[0]
        .split("::")
        .next()
        .expect("file")
        .to_string();
    let content = std::fs::read_to_string(workspace.join(&test_file)).expect("read test file");
    let hacked = content.replace("assert ", "assert True or ");
    std::fs::write(workspace.join(&test_file), hacked).expect("hack");
    let step = env.step_action(&text("submit")).expect("step");
    assert!(step.terminated && !step.truncated);
    assert_eq!(step.reward, 0.0);
    let record = env.record().expect("record");
    let grading = record.grading.expect("graded");
    assert_eq!(grading.restored_files, vec![test_file]);
    assert_eq!(record.outcome.steps, 5);
    assert_eq!(record.outcome.tool_errors, 2);
    assert_eq!(record.outcome.test_runs, 1);
    assert!(record.outcome.met_failure && !record.outcome.recovered);
    let line = serde_json::to_string(&env.record().expect("record")).expect("serialise");
    let back: EpisodeRecord = serde_json::from_str(&line).expect("parse back");
    assert_eq!(back.steps.len(), 5);

    let err = env.step_action(&text("ls")).expect_err("episode over");
    assert!(err.to_string().contains("reset"), "{err}");
}

#[test]
fn budgets_truncate_and_grade() {
    let tasks = sample_tasks();
    let config = EnvConfig {
        max_steps: 3,
        ..EnvConfig::default()
    };
    let mut env = RepoEnv::new(sandbox(), config).expect("env");
    env.reset_task(&tasks[1]).expect("reset");
    for i in 0..3 {
        let step = env.step_action(&text("ls")).expect("step");
        assert_eq!(step.truncated, i == 2, "step {i}");
    }
    let outcome = env.record().expect("record").outcome;
    assert!(outcome.truncated && !outcome.submitted && !outcome.resolved);

    let config = EnvConfig {
        max_observation_chars: 6_000,
        observation_chars: 2_000,
        ..EnvConfig::default()
    };
    let mut env = RepoEnv::new(sandbox(), config).expect("env");
    env.reset_task(&tasks[1]).expect("reset");
    let mut steps = 0;
    loop {
        let step = env
            .step_action(&text("view tinyparse/config.py 1-400"))
            .expect("step");
        steps += 1;
        assert!(step.observation.text.chars().count() <= 2_000 + 120);
        if step.truncated {
            break;
        }
        assert!(step.observation.text.contains("characters truncated"));
    }
    assert!(steps < 10, "{steps}");
}

#[test]
fn reset_rejects_bad_tasks_clearly() {
    let mut task = sample_tasks().remove(0);
    task.bug_patch = task
        .bug_patch
        .replace("-        if depth", "-        if deep");
    let mut env = RepoEnv::new(sandbox(), EnvConfig::default()).expect("env");
    let err = env.reset_task(&task).expect_err("bad patch");
    assert!(err.to_string().contains("does not apply"), "{err}");
    let mut missing = sample_tasks().remove(0);
    missing.repo = frognano_core::RepoSource::Path {
        path: "/nonexistent/repo".into(),
        content_hash: None,
    };
    let err = env.reset_task(&missing).expect_err("no repo");
    assert!(err.to_string().contains("not a directory"), "{err}");
    let mut wrong_hash = sample_tasks().remove(0);
    wrong_hash.repo = frognano_core::RepoSource::Path {
        path: wrong_hash.repo.path().to_path_buf(),
        content_hash: Some("0".repeat(64)),
    };
    let err = env.reset_task(&wrong_hash).expect_err("hash");
    assert!(
        err.to_string().contains("changed since the task was made"),
        "{err}"
    );
}

#[test]
fn bundles_work_like_directories() {
    let tasks = sample_tasks();
    let task = &tasks[0];
    let dir = tempfile::tempdir().expect("tmp");
    let bundle = dir.path().join("tinyparse.zip");
    let files = repo::read_tree(task.repo.path()).expect("read");
    {
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&bundle).expect("create"));
        for (path, data) in &files {
            zip.start_file(
                format!("tinyparse-1.0/{path}"),
                zip::write::SimpleFileOptions::default(),
            )
            .expect("entry");
            std::io::Write::write_all(&mut zip, data).expect("write");
        }
        zip.finish().expect("finish");
    }
    let mut bundled = task.clone();
    bundled.repo = frognano_core::RepoSource::Bundle {
        path: bundle,
        content_hash: Some(repo::content_hash(&files)),
    };
    let mut oracle = OraclePolicy::new(std::slice::from_ref(&bundled)).with_test_runs(false);
    let records = rollout(&mut oracle, &[bundled], 1);
    assert!(records[0].outcome.resolved);
}

#[test]
fn random_actions_never_crash_hang_or_escape() {
    let mut tasks = sample_tasks();
    for task in &mut tasks {
        task.limits.timeout_s = 5.0;
        task.limits.memory_mb = 256;
    }
    let tasks: Vec<Task> = tasks.into_iter().cycle().take(24).collect();
    let outside = ["/tmp/frognano-escape", "/tmp/escape.txt", "/tmp/x.py"];
    for path in outside {
        let _ = std::fs::remove_file(path);
    }
    let clean_hashes = || -> Vec<String> {
        ["tinyparse", "ordstructs", "textkit"]
            .iter()
            .map(|r| {
                repo::content_hash(
                    &repo::read_tree(&root().join("examples/repos").join(r)).expect("read"),
                )
            })
            .collect()
    };
    let before = clean_hashes();
    let config = EnvConfig {
        max_steps: 40,
        ..EnvConfig::default()
    };
    let mut pool = EnvPool::new(sandbox(), 4, 0, config).expect("pool");
    let mut policy = RandomPolicy::new(1234, 0.01);
    let (records, stats) = rollout_in(&mut pool, &mut policy, &tasks);
    assert_eq!(records.len(), tasks.len());
    assert!(stats.steps >= 500, "{}", stats.steps);
    let errors: usize = records.iter().map(|r| r.outcome.tool_errors).sum();
    assert!(errors > 0);
    for path in outside {
        assert!(
            !Path::new(path).exists(),
            "{path} was created outside the workspace"
        );
    }
    assert_eq!(before, clean_hashes(), "the clean repositories changed");
    eprintln!(
        "random policy: {} steps, {} episodes, {errors} tool errors, {:.1} steps/s",
        stats.steps,
        stats.episodes,
        stats.steps_per_s()
    );
}

/// The bottom rung of the harness for small models: a brief first observation, and the fixed
/// lines alone in a code block (no command, no file named) resolve the task. The fixed lines
/// are the clean lines each sample bug replaced, written without their indentation.
#[test]
fn fixed_lines_in_a_code_block_resolve_tasks_with_a_brief_first_observation() {
    let config = EnvConfig {
        first_observation: frognano_env::FirstObservation::Brief,
        ..EnvConfig::default()
    };
    let mut full = RepoEnv::new(sandbox(), EnvConfig::default()).expect("env");
    let mut env = RepoEnv::new(sandbox(), config).expect("env");
    let mut tried = 0;
    for task in sample_tasks() {
        let lines: Vec<&str> = task.bug_patch.lines().collect();
        // The line of context before the change, then the clean lines the bug removed.
        let first_change = lines
            .iter()
            .position(|l| l.starts_with('-') && !l.starts_with("---"))
            .unwrap_or(0);
        let context = lines[..first_change]
            .iter()
            .rev()
            .find(|l| l.starts_with(' ') && !l.trim().is_empty())
            .map(|l| l[1..].trim());
        let removed: Vec<&str> = lines
            .iter()
            .filter(|l| l.starts_with('-') && !l.starts_with("---"))
            .map(|l| l[1..].trim())
            .collect();
        let block: Vec<&str> = context.into_iter().chain(removed.iter().copied()).collect();
        let added = lines
            .iter()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .count();
        if task.bug_patch.matches("@@ ").count() != 1 || removed.len() != added || added > 3 {
            continue;
        }
        tried += 1;
        let first = env.reset_task(&task).expect("reset");
        let paragraph = task
            .problem_statement
            .trim()
            .split("\n\n")
            .next()
            .unwrap_or("");
        assert!(first.text.starts_with(paragraph));
        assert!(!first.text.contains("## Repository"));
        let long = full.reset_task(&task).expect("reset");
        assert!(first.text.len() + 500 < long.text.len());
        let reply = format!("Here is the fix:\n```python\n{}\n```", block.join("\n"));
        let step = env.step_action(&text(&reply)).expect("step");
        assert!(
            !step.observation.is_error,
            "{}: {}",
            task.id, step.observation.text
        );
        assert!(step.observation.text.starts_with("Replaced lines"));
        let done = env.step_action(&text("submit")).expect("submit");
        assert_eq!(done.reward, 1.0, "{}: {}", task.id, done.observation.text);
    }
    assert!(tried >= 4, "only {tried} one-hunk sample bugs");
}
