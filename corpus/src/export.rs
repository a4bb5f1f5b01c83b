//! A corpus's tasks as a dataset: records in SWE-bench's field names plus FrogNano's own, and a
//! dataset card with counts per repository, operator and difficulty.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use frognano_core::Task;
use frognano_env::taskset;

use crate::manifest::Manifest;
use crate::{Corpus, CorpusError, Result};

/// The dataset's records file, inside the export directory.
pub const DATASET_FILE: &str = "tasks.jsonl";
/// The dataset card, inside the export directory.
pub const CARD_FILE: &str = "README.md";

/// What [`export`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExportSummary {
    /// Records written.
    pub tasks: usize,
    /// Tasks per repository (entry id).
    pub by_repository: BTreeMap<String, usize>,
    /// Tasks per operator family.
    pub by_operator: BTreeMap<String, usize>,
    /// Tasks per difficulty (`N bug(s), hint H`).
    pub by_difficulty: BTreeMap<String, usize>,
    /// The records file.
    pub dataset: PathBuf,
    /// The card.
    pub card: PathBuf,
}

/// Writes `tasks` (made from `corpus`) into `out`: [`DATASET_FILE`] with one record per task in
/// SWE-bench's fields (`instance_id`, `repo`, `patch`, `FAIL_TO_PASS`, ...; readable by
/// `frognano eval --tasks` again) plus `package`, `package_version`, `sdist_sha256`,
/// `operators`, `bug_count` and `hint_level`, and a dataset card ([`CARD_FILE`]).
pub fn export(corpus: &Corpus, tasks: &[Task], out: &Path) -> Result<ExportSummary> {
    fs::create_dir_all(out).map_err(CorpusError::io(format!("create {}", out.display())))?;
    let manifests = corpus.manifests()?;
    let by_dir: BTreeMap<PathBuf, &Manifest> = manifests
        .iter()
        .filter_map(|m| {
            let repo = corpus.root().join(m.repo.as_deref()?);
            Some((fs::canonicalize(&repo).unwrap_or(repo), m))
        })
        .collect();
    let mut summary = ExportSummary {
        dataset: out.join(DATASET_FILE),
        card: out.join(CARD_FILE),
        ..ExportSummary::default()
    };
    let mut lines = String::new();
    for task in tasks {
        let path = task.repo.path();
        let manifest = by_dir
            .get(&fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
            .copied();
        let mut record = taskset::to_swe_bench(task)?;
        let repository = manifest
            .map(|m| m.id.clone())
            .or_else(|| path.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "unknown".into());
        record["repo"] = serde_json::Value::String(repository.clone());
        record["package"] = serde_json::json!(manifest.and_then(|m| m.package.clone()));
        record["package_version"] = serde_json::json!(manifest.and_then(|m| m.version.clone()));
        record["sdist_sha256"] = serde_json::json!(manifest.and_then(|m| m.sdist_sha256.clone()));
        if record["version"].is_null() {
            // SWE-bench's `version` is the project's release the task was made from.
            record["version"] = serde_json::json!(manifest.and_then(|m| m.version.clone()));
        }
        let difficulty = task.difficulty();
        let family = difficulty
            .as_ref()
            .map(|d| d.operator_family())
            .unwrap_or_else(|| "unknown".into());
        record["operators"] = serde_json::json!(difficulty.as_ref().map(|d| d.operators.clone()));
        record["bug_count"] = serde_json::json!(difficulty.as_ref().map(|d| d.bug_count));
        record["hint_level"] = serde_json::json!(difficulty.as_ref().map(|d| d.hint_level));
        let level = difficulty
            .as_ref()
            .map(|d| {
                format!(
                    "{} bug{}, hint {}",
                    d.bug_count,
                    if d.bug_count == 1 { "" } else { "s" },
                    d.hint_level
                )
            })
            .unwrap_or_else(|| "unknown".into());
        *summary.by_repository.entry(repository).or_insert(0) += 1;
        *summary.by_operator.entry(family).or_insert(0) += 1;
        *summary.by_difficulty.entry(level).or_insert(0) += 1;
        lines.push_str(&record.to_string());
        lines.push('\n');
    }
    summary.tasks = tasks.len();
    taskset::write_atomically(&summary.dataset, lines.as_bytes())?;
    let card = card(&summary, &manifests);
    taskset::write_atomically(&summary.card, card.as_bytes())?;
    Ok(summary)
}

fn card(summary: &ExportSummary, manifests: &[Manifest]) -> String {
    let ready = manifests.iter().filter(|m| m.is_ready()).count();
    let mut text = String::new();
    let _ = writeln!(
        text,
        "---\npretty_name: FrogNano bug-fix tasks\ntask_categories:\n- text-generation\ntags:\n- code\n- swe-bench\n- reinforcement-learning\nconfigs:\n- config_name: default\n  data_files: {DATASET_FILE}\n---\n"
    );
    let _ = writeln!(text, "# FrogNano bug-fix tasks\n");
    let _ = writeln!(
        text,
        "{} validated bug-fix tasks from {} repositories ({} of {} corpus entries run their \
         tests in the sandbox). Each bug was made by a parser-driven mutation of the package's \
         source and kept only if some of the package's own passing tests fail with it and others \
         still pass (SWE-smith's rule), reproduced by a second run.\n",
        summary.tasks,
        summary.by_repository.len(),
        ready,
        manifests.len()
    );
    let _ = writeln!(
        text,
        "## Fields\n\nSWE-bench's: `instance_id`, `repo` (the corpus entry), `base_commit` (null: \
         the base is the sdist, see `sdist_sha256`), `patch` (the fix), `test_patch` (empty: the \
         tests are the package's own), `problem_statement`, `FAIL_TO_PASS`, `PASS_TO_PASS`, \
         `version`. FrogNano's: `bug_patch` (applied to the clean tree it makes the task), \
         `repo_path`, `content_hash` (of the clean tree), `package`, `package_version`, \
         `sdist_sha256`, `operators`, `bug_count`, `hint_level`, `metadata` (difficulty and \
         synthesis details). `frognano eval --tasks {DATASET_FILE}` reads the file back.\n"
    );
    let table = |text: &mut String, title: &str, column: &str, counts: &BTreeMap<String, usize>| {
        let _ = writeln!(text, "## {title}\n\n| {column} | tasks |\n|---|---:|");
        let mut rows: Vec<(&String, &usize)> = counts.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (key, count) in rows {
            let _ = writeln!(text, "| {key} | {count} |");
        }
        let _ = writeln!(text);
    };
    table(
        &mut text,
        "Tasks per repository",
        "repository",
        &summary.by_repository,
    );
    table(
        &mut text,
        "Tasks per operator",
        "operator",
        &summary.by_operator,
    );
    table(
        &mut text,
        "Tasks per difficulty",
        "difficulty",
        &summary.by_difficulty,
    );
    let mut packages = String::new();
    for m in manifests
        .iter()
        .filter(|m| summary.by_repository.contains_key(&m.id))
    {
        let _ = writeln!(
            packages,
            "| {} | {} | {} | {} |",
            m.id,
            m.sdist_sha256.as_deref().unwrap_or("-"),
            m.tests.passed,
            m.tests.collected
        );
    }
    if !packages.is_empty() {
        let _ = writeln!(
            text,
            "## Sources\n\n| repository | sdist sha256 | passing tests | tests |\n|---|---|---:|---:|\n{packages}"
        );
    }
    text
}
