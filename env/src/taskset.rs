//! Task sets: JSONL files of [`Task`] records, and conversion to and from SWE-bench's field
//! names so that tooling built for SWE-bench (datasets, evaluation scripts) can be reused.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use frognano_core::{RepoSource, Task};
use serde_json::{Map, Value, json};

use crate::{EnvError, Result, patch};

/// Parses one task record, naming the field that is wrong.
pub fn parse_task(line: &str) -> std::result::Result<Task, String> {
    let mut de = serde_json::Deserializer::from_str(line);
    let task: Task = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        if path == "." || path.is_empty() {
            e.inner().to_string()
        } else {
            format!("field `{path}`: {}", e.inner())
        }
    })?;
    de.end()
        .map_err(|e| format!("trailing data after the record: {e}"))?;
    check_task(&task)?;
    Ok(task)
}

/// Validation beyond the record's shape: [`Task::validate`] plus diffs that parse.
pub fn check_task(task: &Task) -> std::result::Result<(), String> {
    task.validate().map_err(|e| e.to_string())?;
    for (field, diff) in [
        ("bug_patch", Some(&task.bug_patch)),
        ("gold_patch", task.gold_patch.as_ref()),
        ("test_patch", task.test_patch.as_ref()),
    ] {
        if let Some(diff) = diff
            && !diff.trim().is_empty()
        {
            match patch::changed_files(diff) {
                Ok(files) if !files.is_empty() => {}
                Ok(_) => return Err(format!("field `{field}`: holds no file changes")),
                Err(e) => return Err(format!("field `{field}`: {e}")),
            }
        }
    }
    Ok(())
}

/// Reads a JSONL task set. Repository paths are resolved against the file's directory; blank
/// lines and lines starting with `#` are skipped. Records in SWE-bench's field names are
/// converted (see [`from_swe_bench`]). Duplicate ids are rejected.
pub fn load_tasks(path: &Path) -> Result<Vec<Task>> {
    let text = fs::read_to_string(path).map_err(|e| EnvError::TaskRecord {
        path: path.to_path_buf(),
        line: 0,
        message: format!("cannot read the task file: {e}"),
    })?;
    let base = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let mut tasks = Vec::new();
    let mut seen = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let record_error = |message: String| EnvError::TaskRecord {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let value: Value = serde_json::from_str(trimmed)
            .map_err(|e| record_error(format!("not a JSON object: {e}")))?;
        let task = if value.get("instance_id").is_some() && value.get("id").is_none() {
            from_swe_bench(&value, &base).map_err(record_error)?
        } else {
            let mut task = parse_task(trimmed).map_err(record_error)?;
            task.repo = task.repo.resolved_against(&base);
            task
        };
        if !seen.insert(task.id.clone()) {
            return Err(record_error(format!("duplicate task id {:?}", task.id)));
        }
        tasks.push(task);
    }
    Ok(tasks)
}

/// Writes tasks as JSONL (one record per line).
pub fn save_tasks(path: &Path, tasks: &[Task]) -> Result<()> {
    let mut out = Vec::new();
    for task in tasks {
        serde_json::to_writer(&mut out, task).map_err(frognano_core::Error::from)?;
        out.push(b'\n');
    }
    write_atomically(path, &out)
}

/// Writes a file through a temporary sibling and a rename, so a crash never leaves half a file
/// ([`frognano_repo::write_atomically`] with this crate's error).
pub fn write_atomically(path: &Path, data: &[u8]) -> Result<()> {
    Ok(frognano_repo::write_atomically(path, data)?)
}

fn string_list(value: Option<&Value>, field: &str) -> std::result::Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        // SWE-bench datasets store these lists as JSON-encoded strings.
        Some(Value::String(s)) => serde_json::from_str::<Vec<String>>(s)
            .map_err(|e| format!("field `{field}`: not a JSON list of test ids: {e}")),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("field `{field}`: every test id must be a string"))
            })
            .collect(),
        Some(_) => Err(format!("field `{field}`: expected a list of test ids")),
    }
}

/// Converts a record in SWE-bench's field names into a task.
///
/// Mapping: `instance_id` -> id; `patch` -> gold_patch (the fix, applied to the buggy
/// repository); `bug_patch` (FrogNano's extension) -> bug_patch; `test_patch`,
/// `problem_statement`, `FAIL_TO_PASS` / `PASS_TO_PASS` (lists or JSON-encoded lists). The
/// repository is `repo_path` when present, else `repo` as a directory relative to `base`
/// (SWE-bench's `owner/name` names a local checkout there). A record without `bug_patch` is taken
/// to describe a repository already in its buggy state.
pub fn from_swe_bench(value: &Value, base: &Path) -> std::result::Result<Task, String> {
    let Value::Object(map) = value else {
        return Err("a SWE-bench record must be a JSON object".into());
    };
    let text = |field: &str| -> std::result::Result<Option<String>, String> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("field `{field}`: expected a string")),
        }
    };
    let id = text("instance_id")?.ok_or("field `instance_id`: missing")?;
    let repo_path = text("repo_path")?
        .or(text("repo")?)
        .ok_or("field `repo`: missing (give `repo` or `repo_path`, a local checkout)")?;
    let repo = RepoSource::Path {
        path: PathBuf::from(repo_path),
        content_hash: text("content_hash")?,
    }
    .resolved_against(base);
    let mut metadata = match map.get("metadata") {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for key in ["base_commit", "version", "created_at", "hints_text"] {
        if let Some(v) = map.get(key) {
            metadata.insert(key.into(), v.clone());
        }
    }
    let task = Task {
        id,
        repo,
        bug_patch: text("bug_patch")?.unwrap_or_default(),
        gold_patch: text("patch")?,
        test_patch: text("test_patch")?.filter(|s| !s.trim().is_empty()),
        problem_statement: text("problem_statement")?.unwrap_or_default(),
        fail_to_pass: string_list(map.get("FAIL_TO_PASS"), "FAIL_TO_PASS")?,
        pass_to_pass: string_list(map.get("PASS_TO_PASS"), "PASS_TO_PASS")?,
        test_args: Vec::new(),
        limits: Default::default(),
        metadata,
    };
    check_task(&task)?;
    Ok(task)
}

/// A task in SWE-bench's field names: `patch` is the fix (the given gold patch, else the reverse
/// of the bug); `bug_patch`, `repo_path`, `content_hash` and `metadata` are kept as extensions so
/// that [`from_swe_bench`] restores the task.
pub fn to_swe_bench(task: &Task) -> Result<Value> {
    let fix = match &task.gold_patch {
        Some(p) => p.clone(),
        None => patch::reverse(&task.bug_patch)?,
    };
    Ok(json!({
        "instance_id": task.id,
        "repo": task.repo.path().display().to_string(),
        "repo_path": task.repo.path().display().to_string(),
        "content_hash": task.repo.content_hash(),
        "base_commit": task.metadata.get("base_commit").cloned().unwrap_or(Value::Null),
        "patch": fix,
        "test_patch": task.test_patch.clone().unwrap_or_default(),
        "bug_patch": task.bug_patch,
        "problem_statement": task.problem_statement,
        "FAIL_TO_PASS": task.fail_to_pass,
        "PASS_TO_PASS": task.pass_to_pass,
        "version": task.metadata.get("version").cloned().unwrap_or(Value::Null),
        "metadata": task.metadata,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUG: &str = "--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n";

    fn record() -> Value {
        json!({
            "id": "t1",
            "repo": {"kind": "path", "path": "repo"},
            "bug_patch": BUG,
            "problem_statement": "x is wrong",
            "fail_to_pass": ["tests/test_m.py::test_x"],
            "pass_to_pass": ["tests/test_m.py::test_y"],
        })
    }

    fn load_lines(lines: &[String]) -> Result<Vec<Task>> {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("tasks.jsonl");
        fs::write(&path, lines.join("\n")).expect("write");
        load_tasks(&path)
    }

    #[test]
    fn loads_and_resolves_repo_paths() {
        let tasks = load_lines(&[record().to_string()]).expect("loads");
        assert_eq!(tasks[0].id, "t1");
        assert!(tasks[0].repo.path().is_absolute());
        assert!(tasks[0].repo.path().ends_with("repo"));
    }

    #[test]
    fn malformed_records_name_line_and_field() {
        let mut bad_limits = record();
        bad_limits["limits"] = json!({"timeout_s": "soon"});
        let mut no_f2p = record();
        no_f2p["fail_to_pass"] = json!([]);
        let mut bad_patch = record();
        bad_patch["bug_patch"] =
            json!("--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n");
        let mut wrong_type = record();
        wrong_type["pass_to_pass"] = json!("tests/test_m.py::test_y");
        for (bad, needle) in [
            (bad_limits.to_string(), "field `limits.timeout_s`"),
            (no_f2p.to_string(), "fail_to_pass"),
            (bad_patch.to_string(), "field `bug_patch`"),
            (wrong_type.to_string(), "field `pass_to_pass`"),
            ("{\"id\": ".to_string(), "not a JSON object"),
        ] {
            let err = load_lines(&[record().to_string(), String::new(), bad])
                .expect_err("rejected")
                .to_string();
            assert!(err.contains(":3: "), "{err}");
            assert!(err.contains(needle), "{err}");
        }
        let dup = load_lines(&[record().to_string(), record().to_string()]).expect_err("dup");
        assert!(dup.to_string().contains("duplicate task id"), "{dup}");
    }

    #[test]
    fn swe_bench_round_trip() {
        let base = Path::new("/data");
        let mut ours = record();
        ours["instance_id"] = json!("t1");
        let ours = ours.as_object().map(|m| {
            let mut m = m.clone();
            m.remove("id");
            Value::Object(m)
        });
        let task = from_swe_bench(&ours.expect("object"), base);
        assert!(task.is_err());
        let mut task = parse_task(&record().to_string()).expect("task");
        task.repo = task.repo.resolved_against(base);
        let swe = to_swe_bench(&task).expect("export");
        assert_eq!(swe["FAIL_TO_PASS"], json!(["tests/test_m.py::test_x"]));
        assert!(swe["patch"].as_str().expect("fix").contains("+x = 1"));
        let mut encoded = swe.clone();
        encoded["FAIL_TO_PASS"] = json!("[\"tests/test_m.py::test_x\"]");
        let back = from_swe_bench(&encoded, base).expect("import");
        assert_eq!(back.id, task.id);
        assert_eq!(back.bug_patch, task.bug_patch);
        assert_eq!(back.fail_to_pass, task.fail_to_pass);
        assert_eq!(back.pass_to_pass, task.pass_to_pass);
        assert_eq!(back.repo, task.repo);
    }
}
