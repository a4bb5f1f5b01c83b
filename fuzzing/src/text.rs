//! Targets over text a model or a repository supplies: actions (parsed, then run by the file
//! tools in a scratch workspace), unified diffs, and Python sources for the mutation engine.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use frognano_core::{Action, ToolCall};
use frognano_env::protocol::{ToolRequest, parse_action, parse_text};
use frognano_env::tools::{ToolLimits, Workspace};
use frognano_repo::patch::{self, FileTree};
use serde_json::Value;

/// The repository the file tools act on: a package, its tests, and two links that point out
/// of it (a repository can hold links; no tool may write through them).
const WORKSPACE_FILES: &[(&str, &str)] = &[
    ("pkg/__init__.py", "from .core import add, Stack\n"),
    (
        "pkg/core.py",
        "def add(a, b):\n    return a + b\n\n\nclass Stack:\n    def __init__(self):\n        \
         self.items = []\n\n    def push(self, item):\n        self.items.append(item)\n",
    ),
    (
        "tests/test_core.py",
        "from pkg import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    ),
    ("README.md", "# pkg\n"),
];
const OUTSIDE_FILE: &str = "outside.py";
const OUTSIDE_TEXT: &str = "SECRET = 1\n";

/// Model output: the action parser (text, and the structured tool-call form when the input is
/// a JSON object with a `name`), then the file tool it asks for, run in a fresh workspace whose
/// parent must look the same afterwards.
pub fn action(data: &[u8]) {
    if let Ok(Value::Object(call)) = serde_json::from_slice::<Value>(data)
        && let Some(name) = call.get("name").and_then(Value::as_str)
    {
        let arguments = call.get("arguments").cloned().unwrap_or(Value::Null);
        let _ = parse_action(&Action::Tool(ToolCall {
            name: name.to_string(),
            arguments,
        }));
    }
    let text = String::from_utf8_lossy(data);
    let Ok(request) = parse_text(&text) else {
        return;
    };
    if matches!(request, ToolRequest::RunTests { .. } | ToolRequest::Submit) {
        return;
    }
    let scratch = tempfile::tempdir().expect("scratch folder");
    let root = scratch.path().join("repo");
    for (path, text) in WORKSPACE_FILES {
        let file = root.join(path);
        fs::create_dir_all(file.parent().expect("a parent")).expect("workspace folder");
        fs::write(file, text).expect("workspace file");
    }
    fs::write(scratch.path().join(OUTSIDE_FILE), OUTSIDE_TEXT).expect("outside file");
    link(
        &format!("../../{OUTSIDE_FILE}"),
        &root.join("pkg/linked.py"),
    );
    link("..", &root.join("up"));
    let mut workspace = Workspace::open(&root, ToolLimits::default()).expect("workspace");
    let _ = workspace.execute(&request);
    // Undoing whatever it did must keep to the workspace too.
    let _ = workspace.execute(&ToolRequest::Undo);
    let outside = fs::read_to_string(scratch.path().join(OUTSIDE_FILE)).expect("outside file");
    assert_eq!(
        outside, OUTSIDE_TEXT,
        "a file tool changed a file outside its workspace"
    );
    let mut names: Vec<String> = fs::read_dir(scratch.path())
        .expect("scratch folder")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [OUTSIDE_FILE, "repo"],
        "a file tool wrote outside its workspace"
    );
}

#[cfg(unix)]
fn link(target: &str, at: &Path) {
    std::os::unix::fs::symlink(target, at).expect("link");
}

#[cfg(not(unix))]
fn link(_target: &str, _at: &Path) {}

/// A small tree of text files, one without a final newline and one not UTF-8, for patches.
fn patch_tree() -> FileTree {
    let mut tree = patch::text_tree(&[
        (
            "pkg/core.py",
            "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
        ),
        ("pkg/util.py", "X = 1\nY = 2"),
        (
            "tests/test_core.py",
            "from pkg.core import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
        ),
    ]);
    tree.insert("data.bin".into(), Arc::new(vec![0xff, 0x00, 0xfe, b'\n']));
    tree
}

/// Unified diffs: the files a patch names, its reverse, and applying it to a small tree; when
/// it applies, the diff between the trees before and after must apply to the tree before and
/// give the tree after.
pub fn patch(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = patch::changed_files(&text);
    let _ = patch::reverse(&text);
    let before = patch_tree();
    let mut after = before.clone();
    if patch::apply(&mut after, &text).is_err() || after == before {
        return;
    }
    let diff = patch::diff_trees(&before, &after, 3);
    let mut again = before.clone();
    if let Err(err) = patch::apply(&mut again, &diff) {
        panic!("the diff of an applied patch does not apply: {err}\n{diff}");
    }
    assert!(
        again == after,
        "the diff of an applied patch gives another tree:\n{diff}"
    );
}

/// Python sources from a repository: every mutation operator's candidates, each applied.
pub fn python_source(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let names: Vec<&str> = frognano_mutate::operators()
        .iter()
        .map(|o| o.name)
        .collect();
    let _ = frognano_mutate::parses(source);
    let Ok((kept, dropped)) = frognano_mutate::find_mutations_with_rejects(source, &names) else {
        return;
    };
    for mutation in kept.iter().chain(&dropped).take(64) {
        if let Ok(mutated) = frognano_mutate::apply(source, &mutation.edits) {
            let _ = frognano_mutate::parses(&mutated);
        }
    }
}
