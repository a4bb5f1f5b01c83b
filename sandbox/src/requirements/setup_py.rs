//! `setup.py` and `noxfile.py`, parsed with tree-sitter and never executed: literal lists,
//! tuples and dicts of strings (directly or through simple module-level names, `+` and
//! `NAME["key"]`) in `setup(...)` keywords and `session.install(...)` calls. Anything dynamic is
//! skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tree_sitter::{Node, Parser, Tree};

use super::{Found, Groups, Item, include_target, is_test_word, read_included};

/// A value built from literals.
#[derive(Debug, Clone, PartialEq)]
enum PyValue {
    Str(String),
    List(Vec<String>),
    Dict(Vec<(String, PyValue)>),
}

/// What `setup(...)` declares.
#[derive(Debug, Default)]
pub struct SetupPy {
    /// `name=` when it is a literal.
    pub name: Option<String>,
    install_requires: Vec<String>,
    tests_require: Vec<String>,
    extras: Vec<(String, Vec<String>)>,
}

fn parse(text: &str) -> Option<Tree> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .ok()?;
    parser.parse(text, None)
}

/// Parses `file` under `root`; `None` (with a note when it exists but cannot be used).
fn read_tree(root: &Path, file: &str, found: &mut Found) -> Option<(String, Tree)> {
    let text = found.read_file(root, file)?;
    let Some(tree) = parse(&text) else {
        found.note(format!("skipped {file}: could not be parsed"));
        return None;
    };
    if tree.root_node().has_error() {
        found.note(format!("skipped {file}: it has syntax errors"));
        return None;
    }
    Some((text, tree))
}

impl SetupPy {
    /// Reads the `setup(...)` call of `setup.py`, if there is one.
    pub fn read(root: &Path, found: &mut Found) -> Option<SetupPy> {
        let (text, tree) = read_tree(root, "setup.py", found)?;
        let src = text.as_bytes();
        let env = module_names(tree.root_node(), src);
        let mut calls = Vec::new();
        find_calls(tree.root_node(), &mut |node| {
            let function = node.child_by_field_name("function")?;
            let name = function.utf8_text(src).ok()?;
            (name == "setup" || name.ends_with(".setup")).then_some(())?;
            calls.push(node);
            Some(())
        });
        let mut setup = SetupPy::default();
        for call in calls {
            let Some(arguments) = call.child_by_field_name("arguments") else {
                continue;
            };
            let mut cursor = arguments.walk();
            for argument in arguments.named_children(&mut cursor) {
                if argument.kind() != "keyword_argument" {
                    continue;
                }
                let (Some(key), Some(value)) = (
                    argument.child_by_field_name("name"),
                    argument.child_by_field_name("value"),
                ) else {
                    continue;
                };
                let value = eval(value, src, &env);
                match (key.utf8_text(src).unwrap_or_default(), value) {
                    ("name", Some(PyValue::Str(name))) => setup.name = Some(name),
                    ("install_requires", Some(v)) => setup.install_requires = as_list(&v),
                    ("tests_require", Some(v)) => setup.tests_require = as_list(&v),
                    ("extras_require", Some(PyValue::Dict(entries))) => {
                        setup.extras = entries
                            .iter()
                            .map(|(k, v)| (k.clone(), as_list(v)))
                            .collect();
                    }
                    _ => {}
                }
            }
        }
        Some(setup)
    }

    /// Adds what the call declares.
    pub fn collect(&self, found: &mut Found) {
        for r in &self.install_requires {
            found.add(r.clone(), "setup.py install_requires");
        }
        for r in &self.tests_require {
            found.add(r.clone(), "setup.py tests_require");
        }
        let mut groups = Groups::new("setup.py extras_require");
        for (name, items) in &self.extras {
            groups.groups.push((
                name.clone(),
                items.iter().cloned().map(Item::Requirement).collect(),
            ));
        }
        groups.collect(found);
    }
}

fn as_list(value: &PyValue) -> Vec<String> {
    match value {
        PyValue::Str(s) => s
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect(),
        PyValue::List(items) => items.clone(),
        PyValue::Dict(_) => Vec::new(),
    }
}

/// Module-level `NAME = literal` and `NAME["key"] = literal` assignments, in order.
fn module_names(root: Node<'_>, src: &[u8]) -> BTreeMap<String, PyValue> {
    let mut env = BTreeMap::new();
    let mut cursor = root.walk();
    for statement in root.named_children(&mut cursor) {
        if statement.kind() != "expression_statement" {
            continue;
        }
        let Some(assignment) = statement
            .named_child(0)
            .filter(|n| n.kind() == "assignment")
        else {
            continue;
        };
        let (Some(left), Some(right)) = (
            assignment.child_by_field_name("left"),
            assignment.child_by_field_name("right"),
        ) else {
            continue;
        };
        let Some(value) = eval(right, src, &env) else {
            if left.kind() == "identifier"
                && let Ok(name) = left.utf8_text(src)
            {
                // A dynamic reassignment: the name no longer holds a known literal.
                env.remove(name);
            }
            continue;
        };
        match left.kind() {
            "identifier" => {
                if let Ok(name) = left.utf8_text(src) {
                    env.insert(name.to_string(), value);
                }
            }
            "subscript" => {
                let (Some(target), Some(key)) = (
                    left.child_by_field_name("value"),
                    left.child_by_field_name("subscript"),
                ) else {
                    continue;
                };
                let (Ok(target), Some(PyValue::Str(key))) =
                    (target.utf8_text(src), eval(key, src, &env))
                else {
                    continue;
                };
                if let Some(PyValue::Dict(entries)) = env.get_mut(target) {
                    entries.retain(|(k, _)| *k != key);
                    entries.push((key, value));
                }
            }
            _ => {}
        }
    }
    env
}

/// The literal value of an expression, or `None` when it is dynamic.
fn eval(node: Node<'_>, src: &[u8], env: &BTreeMap<String, PyValue>) -> Option<PyValue> {
    match node.kind() {
        "string" => string_literal(node, src).map(PyValue::Str),
        "concatenated_string" => {
            let mut out = String::new();
            let mut cursor = node.walk();
            for part in node.named_children(&mut cursor) {
                out.push_str(&string_literal(part, src)?);
            }
            Some(PyValue::Str(out))
        }
        "list" | "tuple" => {
            let mut items = Vec::new();
            let mut cursor = node.walk();
            for element in node.named_children(&mut cursor) {
                if element.kind() == "comment" {
                    continue;
                }
                match eval(element, src, env) {
                    Some(PyValue::Str(s)) => items.push(s),
                    // `*OTHER` inside a literal.
                    _ if element.kind() == "list_splat" => {
                        let inner = element.named_child(0)?;
                        if let Some(PyValue::List(more)) = eval(inner, src, env) {
                            items.extend(more);
                        }
                    }
                    _ => {}
                }
            }
            Some(PyValue::List(items))
        }
        "dictionary" => {
            let mut entries = Vec::new();
            let mut cursor = node.walk();
            for pair in node.named_children(&mut cursor) {
                if pair.kind() != "pair" {
                    continue;
                }
                let (Some(key), Some(value)) = (
                    pair.child_by_field_name("key"),
                    pair.child_by_field_name("value"),
                ) else {
                    continue;
                };
                if let (Some(PyValue::Str(key)), Some(value)) =
                    (eval(key, src, env), eval(value, src, env))
                {
                    entries.push((key, value));
                }
            }
            Some(PyValue::Dict(entries))
        }
        "identifier" => env.get(node.utf8_text(src).ok()?).cloned(),
        "parenthesized_expression" => eval(node.named_child(0)?, src, env),
        "binary_operator" => {
            let operator = node.child_by_field_name("operator")?;
            if operator.utf8_text(src).ok()? != "+" {
                return None;
            }
            let left = eval(node.child_by_field_name("left")?, src, env)?;
            let right = eval(node.child_by_field_name("right")?, src, env)?;
            match (left, right) {
                (PyValue::List(mut a), PyValue::List(b)) => {
                    a.extend(b);
                    Some(PyValue::List(a))
                }
                (PyValue::Str(a), PyValue::Str(b)) => Some(PyValue::Str(a + &b)),
                _ => None,
            }
        }
        "subscript" => {
            let value = eval(node.child_by_field_name("value")?, src, env)?;
            let Some(PyValue::Str(key)) = eval(node.child_by_field_name("subscript")?, src, env)
            else {
                return None;
            };
            match value {
                PyValue::Dict(entries) => entries.into_iter().find(|(k, _)| *k == key).map(|e| e.1),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The contents of a plain (not f-) string literal without escapes to interpret.
fn string_literal(node: Node<'_>, src: &[u8]) -> Option<String> {
    if node.kind() != "string" {
        return None;
    }
    let text = node.utf8_text(src).ok()?;
    let quote_at = text.find(['"', '\''])?;
    let prefix = text[..quote_at].to_ascii_lowercase();
    if prefix.contains('f') || prefix.contains('b') {
        return None;
    }
    let body = &text[quote_at..];
    let quote = if body.starts_with("\"\"\"") || body.starts_with("'''") {
        &body[..3]
    } else {
        &body[..1]
    };
    let inner = body.strip_prefix(quote)?.strip_suffix(quote)?;
    if inner.contains('\\') && !prefix.contains('r') {
        return None;
    }
    Some(inner.to_string())
}

/// Calls every `call` node below `node` with `visit` (depth first).
fn find_calls<'a>(node: Node<'a>, visit: &mut dyn FnMut(Node<'a>) -> Option<()>) {
    if node.kind() == "call" {
        visit(node);
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        find_calls(child, visit);
    }
}

/// Adds the literal arguments of `session.install(...)` in the test sessions of
/// `noxfile.py` (functions whose name says test or unit).
pub fn collect_noxfile(root: &Path, found: &mut Found, seen: &mut BTreeSet<PathBuf>) {
    let Some((text, tree)) = read_tree(root, "noxfile.py", found) else {
        return;
    };
    let src = text.as_bytes();
    let env = module_names(tree.root_node(), src);
    let mut functions = Vec::new();
    collect_functions(tree.root_node(), &mut functions);
    for function in functions {
        let Some(name) = function
            .child_by_field_name("name")
            .and_then(|n| n.utf8_text(src).ok())
        else {
            continue;
        };
        if !name
            .split('_')
            .any(|w| is_test_word(&w.to_ascii_lowercase()))
        {
            continue;
        }
        let source = format!("noxfile.py {name}()");
        let mut args_lists: Vec<Vec<String>> = Vec::new();
        find_calls(function, &mut |call| {
            let callee = call.child_by_field_name("function")?;
            if callee.kind() != "attribute"
                || callee
                    .child_by_field_name("attribute")?
                    .utf8_text(src)
                    .ok()?
                    != "install"
            {
                return None;
            }
            let arguments = call.child_by_field_name("arguments")?;
            let mut cursor = arguments.walk();
            let mut args = Vec::new();
            for argument in arguments.named_children(&mut cursor) {
                let target = if argument.kind() == "list_splat" {
                    argument.named_child(0)?
                } else {
                    argument
                };
                match eval(target, src, &env) {
                    Some(PyValue::Str(s)) => args.push(s),
                    Some(PyValue::List(items)) => args.extend(items),
                    _ => {}
                }
            }
            args_lists.push(args);
            Some(())
        });
        for args in args_lists {
            let mut i = 0;
            while i < args.len() {
                let arg = args[i].trim();
                i += 1;
                if matches!(arg, "-r" | "--requirement" | "-c" | "--constraint" | "-e") {
                    let value = args.get(i).map(|s| s.trim().to_string());
                    i += 1;
                    if let (true, Some(file)) = (matches!(arg, "-r" | "--requirement"), value) {
                        read_included(root, &file, &source, found, seen);
                    }
                    continue;
                }
                if let Some((file, false)) = include_target(arg) {
                    read_included(root, &file, &source, found, seen);
                    continue;
                }
                if arg.starts_with('-') || arg.starts_with('.') || arg.contains('/') {
                    continue;
                }
                found.add(arg.to_string(), &source);
            }
        }
    }
}

fn collect_functions<'a>(node: Node<'a>, out: &mut Vec<Node<'a>>) {
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            "function_definition" => out.push(child),
            "decorated_definition" => {
                if let Some(def) = child.child_by_field_name("definition")
                    && def.kind() == "function_definition"
                {
                    out.push(def);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn pairs(found: &Found) -> Vec<(String, String)> {
        crate::requirements::requirement_sources(&found.items)
    }

    #[test]
    fn literals_names_plus_and_subscripts() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join("setup.py"),
            r#"
from setuptools import setup
import os
BASE = ["six>=1.5"]
TEST_DEPS = ("toolz", 'freezegun; python_version >= "3.8"')
EXTRAS = {"tests": list(TEST_DEPS), "lint": ["flake8"]}
EXTRAS["dev"] = EXTRAS["lint"] + ["mock"]
DYNAMIC = open("requirements.txt").read().split()
setup(
    name="demo",
    install_requires=BASE + ["attrs"],
    tests_require=TEST_DEPS,
    extras_require=EXTRAS,
    setup_requires=DYNAMIC,
    **{"zip_safe": False}
)
"#,
        )
        .expect("write");
        let mut found = Found::default();
        let setup = SetupPy::read(dir.path(), &mut found).expect("setup.py");
        assert_eq!(setup.name.as_deref(), Some("demo"));
        setup.collect(&mut found);
        assert_eq!(
            pairs(&found),
            vec![
                ("six>=1.5".into(), "setup.py install_requires".into()),
                ("attrs".into(), "setup.py install_requires".into()),
                ("toolz".into(), "setup.py tests_require".into()),
                (
                    "freezegun; python_version >= \"3.8\"".into(),
                    "setup.py tests_require".into()
                ),
                ("flake8".into(), "setup.py extras_require dev".into()),
                ("mock".into(), "setup.py extras_require dev".into()),
            ]
        );
    }

    #[test]
    fn dynamic_or_broken_setup_files_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path().join("setup.py"),
            "from setuptools import setup\nsetup(install_requires=open('r.txt').read().split())\n",
        )
        .expect("write");
        let mut found = Found::default();
        let setup = SetupPy::read(dir.path(), &mut found).expect("parsed");
        setup.collect(&mut found);
        assert!(found.items.is_empty());
        fs::write(dir.path().join("setup.py"), "setup(tests_require=[\n").expect("write");
        assert!(SetupPy::read(dir.path(), &mut found).is_none());
        assert!(found.notes[0].contains("syntax"), "{:?}", found.notes);
    }

    #[test]
    fn noxfile_test_sessions() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("requirements-ci.txt"), "responses\n").expect("write");
        fs::write(
            dir.path().join("noxfile.py"),
            r#"
import nox
DEPS = ["toolz", "six"]

@nox.session(python=["3.11"])
def tests(session):
    session.install("-e", ".")
    session.install(".", "pytest", *DEPS)
    session.install("-r", "requirements-ci.txt")
    session.run("pytest")

@nox.session
def lint(session):
    session.install("flake8")

def unit_fast(session):
    session.install("mock", "-c", "constraints.txt")
"#,
        )
        .expect("write");
        let mut found = Found::default();
        collect_noxfile(dir.path(), &mut found, &mut BTreeSet::new());
        assert_eq!(
            pairs(&found),
            vec![
                ("pytest".into(), "noxfile.py tests()".into()),
                ("toolz".into(), "noxfile.py tests()".into()),
                ("six".into(), "noxfile.py tests()".into()),
                (
                    "responses".into(),
                    "requirements-ci.txt (via noxfile.py tests())".into()
                ),
                ("mock".into(), "noxfile.py unit_fast()".into()),
            ]
        );
    }
}
