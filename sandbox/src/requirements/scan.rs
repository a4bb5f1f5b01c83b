//! What a line-by-line scan of a repository's test files and conftests tells about their
//! imports, without running them: whether a collection pass could find anything to fix, which
//! modules nothing places (imports inside functions included), and which modules of a
//! requirements layer a snapshot should import.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use super::resolve::{DISTUTILS, MissingModule, is_stdlib};

/// Modules the pytest layer provides (pytest and its dependencies).
const PYTEST_LAYER_MODULES: &[&str] = &[
    "pytest",
    "_pytest",
    "pluggy",
    "iniconfig",
    "packaging",
    "pygments",
    "py",
];

/// True when a collection pass could find nothing to fix: the repository has test files that
/// pytest's default patterns collect, and every module its Python files import (as a
/// line-by-line scan reads them; the package's own files too, since the tests import them and
/// so everything they import) is the standard library's, the pytest layer's, a top-level entry
/// of the requirements layer `layer`, or the repository's own and importable from one of its
/// `import_roots` as it stands. Anything the scan cannot place makes it false (the pass then
/// runs), so it can only skip a pass, never a fix.
pub fn imports_resolve_statically(
    root: &Path,
    import_roots: &[String],
    layer: Option<&Path>,
) -> bool {
    let no_modules = BTreeSet::new();
    let elsewhere = placed_by(&no_modules, layer, &no_modules);
    let known = |module: &str| elsewhere(module) || importable_from(root, import_roots, module);
    let mut has_default_tests = false;
    for file in super::collection::python_files(root) {
        has_default_tests |= file.stem.starts_with("test_") || file.stem.ends_with("_test");
        let Ok(text) = fs::read_to_string(&file.path) else {
            return false;
        };
        for line in code_lines(&text) {
            if line_imports(line).iter().any(|m| !known(m)) || asks_for_metadata(line) {
                return false;
            }
        }
    }
    has_default_tests
}

/// Whether the repository itself makes `module` importable from one of `import_roots`.
fn importable_from(root: &Path, import_roots: &[String], module: &str) -> bool {
    import_roots
        .iter()
        .any(|dir| importable_in(&root.join(dir), module))
}

/// Whether `module` is importable from the folder `base` on the path: a module file or a
/// regular package on the way to it (what lies below is the package's own business), or
/// namespace folders (no `__init__.py`, or one that only extends a shared namespace) all the
/// way. A namespace folder places only what it holds: `opentelemetry.sdk` is missing where
/// `opentelemetry/` holds only `proto/` (a layer with opentelemetry-proto, a repository with
/// the exporter), and so is a module under `lib/` until a collection pass puts that folder on
/// the path.
fn importable_in(base: &Path, module: &str) -> bool {
    let mut base = base.to_path_buf();
    for part in module.split('.') {
        if base.join(format!("{part}.py")).is_file()
            || super::resolve::is_regular_package(&base.join(part))
        {
            return true;
        }
        base = base.join(part);
        if !base.is_dir() {
            return false;
        }
    }
    true
}

/// Whether the folder `base` holds the module `module` itself: every part of its dotted name a
/// folder, the last one a folder or a `.py` file (a package above it is not enough: the sdist
/// may have left the module out).
pub fn holds_module(base: &Path, module: &str) -> bool {
    let mut path = base.to_path_buf();
    let parts: Vec<&str> = module.split('.').collect();
    for (index, part) in parts.iter().enumerate() {
        if index + 1 == parts.len() && path.join(format!("{part}.py")).is_file() {
            return true;
        }
        path = path.join(part);
        if !path.is_dir() {
            return false;
        }
    }
    true
}

/// The modules the test files and conftests import (as a line-by-line scan reads them, so
/// also those imported inside functions, which collection never shows missing) that nothing
/// places: not the repository's own, the standard library's, the pytest layer's, the
/// requirements layer's (`layer`) nor the image's (`image`: its top-level modules). Each with
/// the first file importing it (relative to `root`), by top-level module.
pub fn unplaced_imports(
    root: &Path,
    own: &BTreeSet<String>,
    layer: Option<&Path>,
    image: &BTreeSet<String>,
) -> Vec<MissingModule> {
    let known = placed_by(own, layer, image);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (importer, text) in read_sources(root, test_sources(root)) {
        for line in code_lines(&text) {
            for module in line_imports(line) {
                let top = module.split('.').next().unwrap_or(module);
                if !known(module) && seen.insert(top.to_string()) {
                    out.push(MissingModule {
                        module: module.to_string(),
                        importer: importer.clone(),
                    });
                }
            }
        }
    }
    out
}

/// The lines of a Python source outside triple-quoted strings (as a line scan can tell them:
/// a line that opens or closes one is left out too), so that code samples in a test's strings
/// (isort's tests hold hundreds) are not read as imports.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut in_string = false;
    text.lines().filter(move |line| {
        let quotes = line.matches("\"\"\"").count() + line.matches("'''").count();
        let was_in_string = in_string;
        if quotes % 2 == 1 {
            in_string = !in_string;
        }
        !was_in_string && quotes == 0
    })
}

/// Whether a module's top level is the repository's own, the standard library's, the pytest
/// layer's, a top-level entry of the requirements layer `layer`, or one of `image`'s.
fn placed_by<'a>(
    own: &'a BTreeSet<String>,
    layer: Option<&'a Path>,
    image: &'a BTreeSet<String>,
) -> impl Fn(&str) -> bool + 'a {
    let in_layer = move |module: &str| layer.is_some_and(|layer| importable_in(layer, module));
    move |module: &str| {
        let top = module.split('.').next().unwrap_or(module);
        top.is_empty()
            || own.contains(top)
            || (is_stdlib(top) && top != DISTUTILS)
            || in_layer(module)
            || image.contains(top)
            || (top == DISTUTILS && in_layer("_distutils_hack"))
            || PYTEST_LAYER_MODULES.contains(&top)
    }
}

/// Whether a source line reads a distribution's metadata (`importlib.metadata.version(...)`,
/// `pkg_resources.get_distribution(...)`): the distribution may be missing though every
/// import resolves, which only a collection pass shows.
fn asks_for_metadata(line: &str) -> bool {
    [
        "version(",
        "distribution(",
        "get_distribution(",
        "metadata(",
    ]
    .iter()
    .any(|call| line.contains(call))
        && (line.contains('"') || line.contains('\''))
}

/// The repository's test files (pytest's default patterns) and conftests, each with whether it
/// is a test file.
/// Each readable file of `paths` as text, with its path relative to `root`; files that are not
/// UTF-8 text are passed over.
pub(super) fn read_sources(
    root: &Path,
    paths: impl IntoIterator<Item = std::path::PathBuf>,
) -> impl Iterator<Item = (String, String)> {
    paths.into_iter().filter_map(move |path| {
        let text = fs::read_to_string(&path).ok()?;
        let relative = path.strip_prefix(root).unwrap_or(&path).to_string_lossy();
        Some((relative.into_owned(), text))
    })
}

/// Largest test file the scans read (a generated fixture module can be many MB).
const MAX_TEST_FILE: u64 = 1 << 20;

/// The test modules, conftests and the helpers beside them in a tests folder (`tests/base.py`,
/// imported relatively by every test module), documentation and examples aside: what imports
/// for the tests.
pub(super) fn test_sources(root: &Path) -> Vec<std::path::PathBuf> {
    super::collection::python_files(root)
        .into_iter()
        .filter(|file| {
            file.stem.starts_with("test")
                || file.stem.ends_with("_test")
                || file.stem == "conftest"
                || file.in_test_dir
        })
        .filter(|file| fs::metadata(&file.path).is_ok_and(|m| m.len() <= MAX_TEST_FILE))
        .map(|file| file.path)
        .collect()
}

/// The absolute modules one source line imports (`import a, b.c` or `from a.b import c`), as
/// a line-by-line scan reads them; none for other lines and relative imports.
fn line_imports(line: &str) -> Vec<&str> {
    let line = line.trim();
    let modules: Vec<&str> = if let Some(rest) = line.strip_prefix("import ") {
        rest.split(',')
            .map(|part| part.split_whitespace().next().unwrap_or(""))
            .collect()
    } else if let Some(rest) = line.strip_prefix("from ") {
        let module = rest.split_whitespace().next().unwrap_or("");
        if module.starts_with('.') {
            return Vec::new();
        }
        vec![module]
    } else {
        return Vec::new();
    };
    modules
        .into_iter()
        .map(|m| m.trim_end_matches(['(', ')', ';', '\\']))
        .filter(|m| !m.is_empty())
        .collect()
}

/// The top-level modules of requirements layer `layer` that the repository's test files and
/// conftests import (a line-by-line scan), sorted: what a snapshot of the layer imports.
pub fn layer_modules_imported(root: &Path, layer: &Path) -> Vec<String> {
    let mut provided: BTreeSet<String> = BTreeSet::new();
    if let Ok(entries) = fs::read_dir(layer) {
        for entry in entries.filter_map(|e| e.ok()) {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".dist-info") || name.starts_with("__") {
                continue;
            }
            provided.insert(name.strip_suffix(".py").unwrap_or(&name).to_string());
        }
    }
    let mut imported: BTreeSet<String> = BTreeSet::new();
    for path in test_sources(root) {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        for module in text.lines().flat_map(line_imports) {
            let top = module.split('.').next().unwrap_or(module);
            if provided.contains(top) {
                imported.insert(top.to_string());
            }
        }
    }
    imported.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requirements::resolve::own_modules;

    #[test]
    fn a_pass_is_skipped_only_when_every_import_is_placed() {
        let dir = tempfile::tempdir().expect("tmp");
        let write = |rel: &str, text: &str| {
            let path = dir.path().join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        };
        write("mypkg/__init__.py", "");
        write(
            "tests/test_a.py",
            "import os, sys as system\nfrom mypkg import core\nfrom . import helpers\nimport pytest\n",
        );
        let roots = [".".to_string()];
        assert!(imports_resolve_statically(dir.path(), &roots, None));
        // A module of the repository that its import roots do not reach needs the pass.
        write("lib/extra.py", "");
        write("tests/test_extra.py", "import extra\n");
        let own = own_modules(dir.path());
        assert!(!imports_resolve_statically(dir.path(), &roots, None));
        let with_lib = [".".to_string(), "lib".to_string()];
        assert!(imports_resolve_statically(dir.path(), &with_lib, None));
        fs::remove_file(dir.path().join("tests/test_extra.py")).expect("remove");
        // Helpers of the tests and the package's own modules count.
        write("tests/base.py", "import jsonschema\n");
        assert!(!imports_resolve_statically(dir.path(), &roots, None));
        fs::remove_file(dir.path().join("tests/base.py")).expect("remove");
        write("mypkg/core.py", "from opentelemetry.sdk import metrics\n");
        assert!(!imports_resolve_statically(dir.path(), &roots, None));
        // ... also where the repository holds another part of that namespace package.
        write("opentelemetry/exporter/otlp.py", "");
        assert!(!imports_resolve_statically(dir.path(), &roots, None));
        write("opentelemetry/sdk/__init__.py", "");
        assert!(imports_resolve_statically(dir.path(), &roots, None));
        assert!(holds_module(dir.path(), "opentelemetry.sdk"));
        assert!(holds_module(dir.path(), "opentelemetry.exporter.otlp"));
        assert!(!holds_module(dir.path(), "opentelemetry.sdk.trace"));
        assert!(!holds_module(dir.path(), "mypkg.left_out"));
        fs::remove_dir_all(dir.path().join("opentelemetry")).expect("remove");
        fs::remove_file(dir.path().join("mypkg/core.py")).expect("remove");
        write("tests/conftest.py", "import freezegun\n");
        assert!(!imports_resolve_statically(dir.path(), &roots, None));
        assert_eq!(
            unplaced_imports(dir.path(), &own, None, &BTreeSet::new()),
            vec![MissingModule {
                module: "freezegun".into(),
                importer: "tests/conftest.py".into()
            }]
        );
        let image: BTreeSet<String> = ["freezegun".to_string()].into();
        assert!(unplaced_imports(dir.path(), &own, None, &image).is_empty());
        // Code samples in strings are not imports.
        write(
            "tests/test_samples.py",
            "SAMPLE = \"\"\"\nimport not_a_dependency\n\"\"\"\n\n\ndef test_x():\n    import late\n",
        );
        let found: Vec<String> = unplaced_imports(dir.path(), &own, None, &image)
            .into_iter()
            .map(|m| m.module)
            .collect();
        assert_eq!(found, vec!["late"]);
        fs::remove_file(dir.path().join("tests/test_samples.py")).expect("remove");
        let layer = tempfile::tempdir().expect("layer");
        fs::create_dir(layer.path().join("freezegun")).expect("mkdir");
        fs::write(layer.path().join("freezegun/__init__.py"), "").expect("write");
        assert!(imports_resolve_statically(
            dir.path(),
            &roots,
            Some(layer.path())
        ));
        // A layer's namespace package places only the portions it holds.
        fs::create_dir_all(layer.path().join("opentelemetry/proto")).expect("mkdir");
        fs::write(layer.path().join("opentelemetry/proto/__init__.py"), "").expect("write");
        write(
            "tests/test_otel.py",
            "from opentelemetry.proto import trace\n",
        );
        assert!(imports_resolve_statically(
            dir.path(),
            &roots,
            Some(layer.path())
        ));
        write(
            "tests/test_otel.py",
            "from opentelemetry.sdk import trace\n",
        );
        assert!(!imports_resolve_statically(
            dir.path(),
            &roots,
            Some(layer.path())
        ));
        let found: Vec<String> = unplaced_imports(dir.path(), &own, Some(layer.path()), &image)
            .into_iter()
            .map(|m| m.module)
            .collect();
        assert_eq!(found, vec!["opentelemetry.sdk"]);
        fs::remove_file(dir.path().join("tests/test_otel.py")).expect("remove");
        let no_tests = crate::testing::write_repo(&[("pkg/tests.py", "")]);
        assert!(!imports_resolve_statically(no_tests.path(), &roots, None));
    }
}
