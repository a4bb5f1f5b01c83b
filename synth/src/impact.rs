//! Test impact analysis: which passing tests can observe a change to a given span of a file.
//!
//! Validating a candidate bug needs only the tests that can see it. Two sources decide:
//! the per-test line coverage of the clean suite (a test that never executed any line of the
//! changed statement inside a function body behaves exactly as before), and the import graph
//! (code that runs at import or in shared fixtures can affect every test whose module imports
//! it, directly, through a package `__init__`, or through a `conftest.py`). When the repository
//! imports modules dynamically the import graph is not sound, and module-level changes fall
//! back to the whole suite.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use frognano_core::{Coverage, FileLines};
use frognano_repo::FileTree;
use serde::Serialize;

use crate::intake::Intake;

/// How a selection was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectionKind {
    /// Tests that executed a line of the changed statement.
    Coverage,
    /// Tests whose modules import the changed module.
    Imports,
    /// The whole passing suite (nothing narrower is sound).
    Full,
}

impl SelectionKind {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectionKind::Coverage => "coverage",
            SelectionKind::Imports => "imports",
            SelectionKind::Full => "full",
        }
    }
}

/// The tests to run for a change.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Passing test ids that can observe the change (empty: no test reaches it).
    pub tests: BTreeSet<String>,
    /// How they were chosen.
    pub kind: SelectionKind,
}

/// A changed line range of one file, with whether it only runs at call time.
#[derive(Debug, Clone, Copy)]
pub struct ChangedSpan<'a> {
    /// Repository-relative path.
    pub file: &'a str,
    /// 1-based first line of the changed statement.
    pub start_line: u32,
    /// 1-based last line of the changed statement.
    pub end_line: u32,
    /// The whole change lies inside function bodies.
    pub in_function_body: bool,
}

/// Coverage and import graph of a clean repository, ready to answer selections.
#[derive(Debug)]
pub struct ImpactIndex {
    passing: BTreeSet<String>,
    coverage: Option<Coverage>,
    /// file -> tests (passing) whose module or conftests transitively import it.
    importers: HashMap<String, BTreeSet<String>>,
    /// Files of passing tests that could not be placed in the graph: always selected.
    unplaced: BTreeSet<String>,
    dynamic_imports: bool,
}

impl ImpactIndex {
    /// Builds the index of a clean tree from its intake. `import_roots` are the directories
    /// on `sys.path` (`.`, `src`, ...).
    pub fn build(files: &FileTree, import_roots: &[String], intake: &Intake) -> ImpactIndex {
        let modules = module_map(files, import_roots);
        let mut graph: HashMap<&str, Vec<String>> = HashMap::new();
        let mut dynamic_imports = false;
        let mut parser = python_parser();
        for (path, data) in files {
            if !path.ends_with(".py") {
                continue;
            }
            let source = String::from_utf8_lossy(data);
            if source.contains("import_module(")
                || source.contains("__import__(")
                || source.contains("exec(")
                || source.contains("runpy.")
            {
                dynamic_imports = true;
            }
            let edges = match parser.as_mut() {
                Some(parser) => file_imports(parser, path, &source, &modules),
                None => Vec::new(),
            };
            graph.insert(path.as_str(), edges);
        }
        // Each test file reaches what it imports, and what the conftest.py files of its
        // directory and every parent import (pytest loads them first).
        let conftests: Vec<&str> = files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some("conftest.py"))
            .map(String::as_str)
            .collect();
        let mut by_file: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
        for id in &intake.passing {
            by_file.entry(test_file(id)).or_default().push(id);
        }
        let mut importers: HashMap<String, BTreeSet<String>> = HashMap::new();
        let mut unplaced = BTreeSet::new();
        for (file, ids) in by_file {
            if !graph.contains_key(file) {
                unplaced.extend(ids.iter().map(|s| s.to_string()));
                continue;
            }
            let dir = file.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            let mut starts = vec![file.to_string()];
            starts.extend(
                conftests
                    .iter()
                    .filter(|c| {
                        let cdir = c.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
                        cdir.is_empty() || dir == cdir || dir.starts_with(&format!("{cdir}/"))
                    })
                    .map(|c| c.to_string()),
            );
            for reached in reachable(&graph, &starts) {
                importers
                    .entry(reached)
                    .or_default()
                    .extend(ids.iter().map(|s| s.to_string()));
            }
        }
        ImpactIndex {
            passing: intake.passing.clone(),
            coverage: intake
                .coverage
                .clone()
                .filter(|c| c.unavailable.is_none() && !c.tests.is_empty()),
            importers,
            unplaced,
            dynamic_imports,
        }
    }

    /// Whether any module is imported dynamically (module-level changes then run everything).
    pub fn has_dynamic_imports(&self) -> bool {
        self.dynamic_imports
    }

    /// Whether per-test coverage is available.
    pub fn has_coverage(&self) -> bool {
        self.coverage.is_some()
    }

    /// Whether any test or import executed a line of the span (always true without coverage).
    pub fn is_reached(&self, span: &ChangedSpan<'_>) -> bool {
        let Some(coverage) = &self.coverage else {
            return true;
        };
        touches(&coverage.shared, span) || coverage.tests.values().any(|files| touches(files, span))
    }

    /// The passing tests that can observe a change of `spans` (one per changed statement).
    pub fn select(&self, spans: &[ChangedSpan<'_>]) -> Selection {
        let mut tests = BTreeSet::new();
        let mut kind = SelectionKind::Coverage;
        for span in spans {
            let part = self.select_one(span);
            kind = kind.max(part.kind);
            tests.extend(part.tests);
        }
        if kind == SelectionKind::Full {
            tests = self.passing.clone();
        }
        Selection { tests, kind }
    }

    fn select_one(&self, span: &ChangedSpan<'_>) -> Selection {
        if let Some(coverage) = &self.coverage {
            let shared = touches(&coverage.shared, span);
            let mut tests: BTreeSet<String> = coverage
                .tests
                .iter()
                .filter(|(id, files)| self.passing.contains(*id) && touches(files, span))
                .map(|(id, _)| id.clone())
                .collect();
            if span.in_function_body && !shared {
                return Selection {
                    tests,
                    kind: SelectionKind::Coverage,
                };
            }
            if !shared && tests.is_empty() {
                // Nothing ever executed the statement: no test can tell the difference.
                return Selection {
                    tests,
                    kind: SelectionKind::Coverage,
                };
            }
            let by_imports = self.by_imports(span.file);
            tests.extend(by_imports.tests);
            return Selection {
                tests,
                kind: by_imports.kind,
            };
        }
        self.by_imports(span.file)
    }

    fn by_imports(&self, file: &str) -> Selection {
        if self.dynamic_imports {
            return Selection {
                tests: self.passing.clone(),
                kind: SelectionKind::Full,
            };
        }
        let mut tests = self.unplaced.clone();
        if let Some(importers) = self.importers.get(file) {
            tests.extend(importers.iter().cloned());
        }
        Selection {
            tests,
            kind: SelectionKind::Imports,
        }
    }
}

/// The file part of a pytest node id.
pub fn test_file(id: &str) -> &str {
    id.split("::").next().unwrap_or(id)
}

fn touches(files: &FileLines, span: &ChangedSpan<'_>) -> bool {
    files.get(span.file).is_some_and(|lines| {
        let from = lines.partition_point(|l| *l < span.start_line);
        lines.get(from).is_some_and(|l| *l <= span.end_line)
    })
}

fn python_parser() -> Option<tree_sitter::Parser> {
    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_python::LANGUAGE.into())
        .ok()?;
    Some(parser)
}

/// Dotted module name -> file, for every `.py` file under each import root.
fn module_map(files: &FileTree, import_roots: &[String]) -> HashMap<String, String> {
    let mut modules = HashMap::new();
    for path in files.keys().filter(|p| p.ends_with(".py")) {
        for root in import_roots {
            let relative = if root == "." || root.is_empty() {
                Some(path.as_str())
            } else {
                path.strip_prefix(&format!("{}/", root.trim_end_matches('/')))
            };
            let Some(relative) = relative else { continue };
            let stem = relative.trim_end_matches(".py");
            let name = stem
                .strip_suffix("/__init__")
                .unwrap_or(stem)
                .replace('/', ".");
            if name.is_empty() || name == "__init__" {
                continue;
            }
            modules.entry(name).or_insert_with(|| path.clone());
        }
    }
    modules
}

/// The repository files one file imports (every import, conditional or not, counts).
fn file_imports(
    parser: &mut tree_sitter::Parser,
    path: &str,
    source: &str,
    modules: &HashMap<String, String>,
) -> Vec<String> {
    let Some(tree) = parser.parse(source, None) else {
        return Vec::new();
    };
    let package = {
        // The package this file belongs to, for relative imports.
        let module = modules
            .iter()
            .find(|(_, file)| file.as_str() == path)
            .map(|(name, _)| name.clone())
            .unwrap_or_default();
        if path.ends_with("/__init__.py") {
            module
        } else {
            module
                .rsplit_once('.')
                .map(|(p, _)| p.to_string())
                .unwrap_or_default()
        }
    };
    let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
    let mut names: Vec<String> = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        match node.kind() {
            "import_statement" => {
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    let name_node = if child.kind() == "aliased_import" {
                        child.child_by_field_name("name")
                    } else {
                        Some(child)
                    };
                    if let Some(n) = name_node {
                        names.push(text(n, source).to_string());
                    }
                }
            }
            "import_from_statement" => {
                let Some(module) = node.child_by_field_name("module_name") else {
                    continue;
                };
                let base = if module.kind() == "relative_import" {
                    resolve_relative(text(module, source), &package)
                } else {
                    text(module, source).to_string()
                };
                names.push(base.clone());
                let mut cursor = node.walk();
                for child in node.children_by_field_name("name", &mut cursor) {
                    let n = if child.kind() == "aliased_import" {
                        child.child_by_field_name("name").unwrap_or(child)
                    } else {
                        child
                    };
                    let item = text(n, source);
                    names.push(if base.is_empty() {
                        item.to_string()
                    } else {
                        format!("{base}.{item}")
                    });
                }
                if node
                    .children(&mut node.walk())
                    .any(|c| c.kind() == "wildcard_import")
                {
                    // `from pkg import *` may pull any submodule listed in __all__.
                    let prefix = format!("{base}.");
                    names.extend(modules.keys().filter(|m| m.starts_with(&prefix)).cloned());
                }
            }
            _ => {
                let mut cursor = node.walk();
                stack.extend(node.children(&mut cursor));
            }
        }
    }
    let mut files = BTreeSet::new();
    for name in names {
        // Importing a.b.c runs a/__init__.py and a/b/__init__.py first.
        let parts: Vec<&str> = name.split('.').filter(|p| !p.is_empty()).collect();
        for end in 1..=parts.len() {
            let prefix = parts[..end].join(".");
            if let Some(file) = modules.get(&prefix) {
                files.insert(file.clone());
            }
            // Tests import helpers next to them (pytest puts their directory on sys.path).
            let local = if dir.is_empty() {
                format!("{}.py", parts[..end].join("/"))
            } else {
                format!("{dir}/{}.py", parts[..end].join("/"))
            };
            if modules.values().any(|f| *f == local) {
                files.insert(local);
            }
        }
    }
    files.remove(path);
    files.into_iter().collect()
}

fn resolve_relative(spec: &str, package: &str) -> String {
    let dots = spec.chars().take_while(|c| *c == '.').count();
    let rest = &spec[dots..];
    let mut parts: Vec<&str> = package.split('.').filter(|p| !p.is_empty()).collect();
    for _ in 1..dots {
        parts.pop();
    }
    let mut base = parts.join(".");
    if !rest.is_empty() {
        if !base.is_empty() {
            base.push('.');
        }
        base.push_str(rest);
    }
    base
}

fn text<'a>(node: tree_sitter::Node<'_>, source: &'a str) -> &'a str {
    source.get(node.byte_range()).unwrap_or("")
}

fn reachable(graph: &HashMap<&str, Vec<String>>, starts: &[String]) -> HashSet<String> {
    let mut seen: HashSet<String> = starts.iter().cloned().collect();
    let mut queue: VecDeque<String> = starts.iter().cloned().collect();
    while let Some(file) = queue.pop_front() {
        if let Some(edges) = graph.get(file.as_str()) {
            for next in edges {
                if seen.insert(next.clone()) {
                    queue.push_back(next.clone());
                }
            }
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_repo::patch::text_tree as tree;
    use std::sync::Arc;

    fn intake(passing: &[&str], coverage: Option<Coverage>) -> Intake {
        Intake {
            content_hash: "h".into(),
            passing: passing.iter().map(|s| s.to_string()).collect(),
            flaky: BTreeSet::new(),
            failing: BTreeSet::new(),
            skipped: BTreeSet::new(),
            order_dependent: BTreeSet::new(),
            platform: Default::default(),
            suite_seconds: 0.1,
            coverage,
        }
    }

    fn repo() -> FileTree {
        tree(&[
            ("src/pkg/__init__.py", "from .core import run\n"),
            (
                "src/pkg/core.py",
                "from . import util\n\ndef run(x):\n    return util.double(x)\n",
            ),
            ("src/pkg/util.py", "def double(x):\n    return 2 * x\n"),
            ("src/pkg/other.py", "def alone():\n    return 1\n"),
            ("tests/conftest.py", "import pytest\n"),
            (
                "tests/test_core.py",
                "from pkg.core import run\n\ndef test_run():\n    assert run(2) == 4\n",
            ),
            (
                "tests/test_other.py",
                "import pkg.other as o\n\ndef test_alone():\n    assert o.alone() == 1\n",
            ),
        ])
    }

    fn span(file: &str, start: u32, end: u32, body: bool) -> ChangedSpan<'_> {
        ChangedSpan {
            file,
            start_line: start,
            end_line: end,
            in_function_body: body,
        }
    }

    /// The index of [`repo`] (import roots `.` and `src`) over its two tests.
    fn repo_index(coverage: Option<Coverage>) -> ImpactIndex {
        let roots = vec![".".to_string(), "src".to_string()];
        ImpactIndex::build(
            &repo(),
            &roots,
            &intake(
                &[
                    "tests/test_core.py::test_run",
                    "tests/test_other.py::test_alone",
                ],
                coverage,
            ),
        )
    }

    #[test]
    fn import_graph_follows_relative_imports_and_package_inits() {
        let index = repo_index(None);
        let core = index.select(&[span("src/pkg/util.py", 2, 2, true)]);
        assert_eq!(core.kind, SelectionKind::Imports);
        // test_other imports pkg.other, which runs pkg/__init__ -> core -> util first.
        assert_eq!(core.tests.len(), 2);
        let init_only = ImpactIndex::build(
            &tree(&[
                ("pkg/__init__.py", ""),
                ("pkg/a.py", "X = 1\n"),
                ("pkg/b.py", "Y = 2\n"),
                ("tests/test_a.py", "from pkg import a\n"),
                ("tests/test_b.py", "from pkg.b import Y\n"),
            ]),
            &[".".to_string()],
            &intake(&["tests/test_a.py::t", "tests/test_b.py::t"], None),
        );
        let a = init_only.select(&[span("pkg/a.py", 1, 1, false)]);
        assert_eq!(a.tests, BTreeSet::from(["tests/test_a.py::t".to_string()]));
        let init = init_only.select(&[span("pkg/__init__.py", 1, 1, false)]);
        assert_eq!(init.tests.len(), 2);
    }

    #[test]
    fn coverage_narrows_function_bodies_and_keeps_import_time_code_conservative() {
        let mut coverage = Coverage::default();
        coverage.tests.insert(
            "tests/test_core.py::test_run".into(),
            BTreeMap::from([("src/pkg/util.py".to_string(), vec![2])]),
        );
        coverage.tests.insert(
            "tests/test_other.py::test_alone".into(),
            BTreeMap::from([("src/pkg/other.py".to_string(), vec![2])]),
        );
        coverage.shared = BTreeMap::from([
            ("src/pkg/util.py".to_string(), vec![1]),
            ("src/pkg/other.py".to_string(), vec![1]),
        ]);
        let index = repo_index(Some(coverage));
        let body = index.select(&[span("src/pkg/util.py", 2, 2, true)]);
        assert_eq!(body.kind, SelectionKind::Coverage);
        assert_eq!(
            body.tests,
            BTreeSet::from(["tests/test_core.py::test_run".to_string()])
        );
        // The def line runs at import: everything importing the module.
        let def = index.select(&[span("src/pkg/util.py", 1, 2, false)]);
        assert_eq!(def.kind, SelectionKind::Imports);
        assert_eq!(def.tests.len(), 2);
        // A line nobody executed is unreachable.
        let dead = span("src/pkg/core.py", 9, 9, true);
        assert!(!index.is_reached(&dead));
        assert!(index.select(&[dead]).tests.is_empty());
    }

    #[test]
    fn dynamic_imports_fall_back_to_the_whole_suite() {
        let mut files = repo();
        files.insert(
            "src/pkg/plugins.py".into(),
            Arc::new(b"import importlib\nmod = importlib.import_module('pkg.other')\n".to_vec()),
        );
        let index = ImpactIndex::build(
            &files,
            &[".".to_string(), "src".to_string()],
            &intake(
                &[
                    "tests/test_core.py::test_run",
                    "tests/test_other.py::test_alone",
                ],
                None,
            ),
        );
        assert!(index.has_dynamic_imports());
        let any = index.select(&[span("src/pkg/other.py", 1, 1, false)]);
        assert_eq!(any.kind, SelectionKind::Full);
        assert_eq!(any.tests.len(), 2);
    }

    #[test]
    fn relative_import_resolution() {
        assert_eq!(resolve_relative(".", "a.b"), "a.b");
        assert_eq!(resolve_relative(".x", "a.b"), "a.b.x");
        assert_eq!(resolve_relative("..y", "a.b"), "a.y");
    }
}
