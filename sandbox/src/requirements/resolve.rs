//! The resolution loop's pieces: which modules a collection run could not import, which
//! distribution provides a module, and whether a downloaded wheel really does.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use frognano_core::{TestOutcome, TestReport};

use crate::assets::{self, PinnedWheel, Progress};

pub use super::scan::{
    holds_module, imports_resolve_statically, layer_modules_imported, unplaced_imports,
};

/// The standard library's `distutils`, which setuptools provides since CPython dropped it.
pub(crate) const DISTUTILS: &str = "distutils";

/// Import name -> distribution, for names that differ (or that have no pure-Python wheel:
/// `pure == false`).
pub const ALIASES: &[(&str, &str, bool)] = &[
    ("yaml", "PyYAML", false),
    ("dateutil", "python-dateutil", true),
    ("attr", "attrs", true),
    ("bs4", "beautifulsoup4", true),
    ("PIL", "pillow", false),
    ("sklearn", "scikit-learn", false),
    ("skimage", "scikit-image", false),
    ("cv2", "opencv-python", false),
    ("jwt", "PyJWT", true),
    ("dotenv", "python-dotenv", true),
    ("magic", "python-magic", true),
    ("serial", "pyserial", true),
    ("Crypto", "pycryptodome", false),
    ("Cryptodome", "pycryptodomex", false),
    ("google.protobuf", "protobuf", true),
    // pytest's own `py` shim has only `py.path` and `py.error`; the rest is the `py` library.
    ("py.xml", "py", true),
    ("py.io", "py", true),
    ("py.log", "py", true),
    ("py.code", "py", true),
    ("py.builtin", "py", true),
    ("jose", "python-jose", true),
    ("markdown", "Markdown", true),
    ("docx", "python-docx", true),
    ("pptx", "python-pptx", true),
    // setuptools 81 dropped pkg_resources.
    ("pkg_resources", "setuptools<81", true),
    // Removed from the standard library in 3.12: setuptools' shim (a .pth file the run
    // executes, as an install does) imports its own copy under that name.
    (DISTUTILS, "setuptools", true),
    ("setuptools", "setuptools", true),
    ("typing_extensions", "typing-extensions", true),
    ("six", "six", true),
    ("mock", "mock", true),
    ("slugify", "python-slugify", true),
    ("multipart", "python-multipart", true),
    ("socks", "PySocks", true),
    ("OpenSSL", "pyOpenSSL", true),
    ("git", "GitPython", true),
    ("github", "PyGithub", true),
    ("ldap3", "ldap3", true),
    ("zmq", "pyzmq", false),
    ("psycopg2", "psycopg2-binary", false),
    ("MySQLdb", "mysqlclient", false),
    ("lxml", "lxml", false),
    ("numpy", "numpy", false),
    ("pandas", "pandas", false),
    ("scipy", "scipy", false),
    ("matplotlib", "matplotlib", false),
    ("pydantic_core", "pydantic-core", false),
    ("ujson", "ujson", false),
    ("orjson", "orjson", false),
    ("msgpack", "msgpack", true),
    ("simplejson", "simplejson", true),
    ("toml", "toml", true),
    ("tomli", "tomli", true),
    ("jinja2", "Jinja2", true),
    ("markupsafe", "MarkupSafe", true),
    ("dns", "dnspython", true),
    ("websocket", "websocket-client", true),
    ("win32api", "pywin32", false),
    ("wx", "wxPython", false),
    ("gi", "PyGObject", false),
    ("psutil", "psutil", false),
    ("Levenshtein", "Levenshtein", false),
    ("rapidfuzz", "rapidfuzz", false),
];

/// Standard-library modules (of any recent CPython); a missing one is absent from the WASI
/// build (no sockets, threads, processes or terminals there) or removed from recent Pythons.
const STDLIB: &str = "__future__ _abc _ast _asyncio _bisect _blake2 _bz2 _codecs _collections \
    _collections_abc _compression _contextvars _crypt _csv _ctypes _curses _curses_panel \
    _datetime _dbm _decimal _elementtree _functools _gdbm _hashlib _heapq _imp _io _json _locale \
    _lsprof _lzma _md5 _multibytecodec _multiprocessing _opcode _operator _pickle _posixshmem \
    _posixsubprocess _queue _random _sha1 _sha256 _sha3 _sha512 _signal _socket _sqlite3 _sre \
    _ssl _stat _statistics _string _struct _symtable _thread _tkinter _tokenize _tracemalloc \
    _typing _uuid _warnings _weakref _zoneinfo abc aifc argparse array ast asynchat asyncio \
    asyncore atexit audioop base64 bdb binascii bisect builtins bz2 cProfile calendar cgi cgitb \
    chunk cmath cmd code codecs codeop collections colorsys compileall concurrent configparser \
    contextlib contextvars copy copyreg crypt csv ctypes curses dataclasses datetime dbm decimal \
    difflib dis distutils doctest email encodings ensurepip enum errno faulthandler fcntl \
    filecmp fileinput fnmatch fractions ftplib functools gc genericpath getopt getpass gettext \
    glob graphlib grp gzip hashlib heapq hmac html http idlelib imaplib imghdr imp importlib \
    inspect io ipaddress itertools json keyword lib2to3 linecache locale logging lzma mailbox \
    mailcap marshal math mimetypes mmap modulefinder msilib msvcrt multiprocessing netrc nis \
    nntplib nt ntpath nturl2path numbers opcode operator optparse os ossaudiodev pathlib pdb \
    pickle pickletools pipes pkgutil platform plistlib poplib posix posixpath pprint profile \
    pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat queue quopri random re readline \
    reprlib resource rlcompleter runpy sched secrets select selectors shelve shlex shutil signal \
    site smtpd smtplib sndhdr socket socketserver spwd sqlite3 sre_compile sre_constants \
    sre_parse ssl stat statistics string stringprep struct subprocess sunau symtable sys \
    sysconfig syslog tabnanny tarfile telnetlib tempfile termios textwrap threading time timeit \
    tkinter token tokenize tomllib trace traceback tracemalloc tty turtle types typing \
    unicodedata unittest urllib uu uuid venv warnings wave weakref webbrowser winreg winsound \
    wsgiref xdrlib xml xmlrpc zipapp zipfile zipimport zlib zoneinfo";

/// Whether `module` (top level) is part of the standard library.
pub fn is_stdlib(module: &str) -> bool {
    STDLIB.split_whitespace().any(|m| m == module)
}

/// Distributions that install as pure Python but cannot run in WASI, and why: layers leave
/// them out, so that what merely tries them (anyio's backends) finds them missing.
const CANNOT_RUN_IN_WASI: &[(&str, &str)] = &[
    (
        "trio",
        "trio needs an I/O manager (epoll, kqueue or IOCP) that WASI does not have: importing \
         it raises NotImplementedError",
    ),
    (
        "pytest-trio",
        "pytest-trio runs its tests on trio, which needs an I/O manager WASI does not have",
    ),
];

/// Why the distribution `name` cannot run in WASI, when it is one that installs but cannot.
pub fn cannot_run_in_wasi(name: &str) -> Option<&'static str> {
    let name = crate::layers::normalise(name);
    CANNOT_RUN_IN_WASI
        .iter()
        .find(|(distribution, _)| *distribution == name)
        .map(|(_, reason)| *reason)
}

/// Why the top-level module `top` cannot be provided by any requirement, when it is part of
/// CPython itself (its own test package, or a standard-library module the WebAssembly
/// interpreter lacks) or a distribution that cannot run in WASI.
pub fn unavailable_module(top: &str) -> Option<String> {
    if let Some(reason) = cannot_run_in_wasi(top) {
        return Some(reason.to_string());
    }
    if top == DISTUTILS {
        // Gone from the standard library since 3.12; setuptools provides it (see ALIASES).
        return None;
    }
    if top == "test" {
        return Some(
            "test is CPython's own test package (test.support and its helpers), which the \
             interpreter's standard library leaves out: suites written against it cannot run here"
                .into(),
        );
    }
    is_stdlib(top).then(|| {
        format!(
            "{top} is a standard-library module this WebAssembly interpreter does not have \
             (no sockets, threads, processes or terminals; or removed from recent Python)"
        )
    })
}

/// A module a collection run could not import, and who imported it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct MissingModule {
    /// The dotted name as the error states it.
    pub module: String,
    /// The test file or conftest whose import failed.
    pub importer: String,
}

impl MissingModule {
    /// The top-level package.
    pub fn top_level(&self) -> &str {
        self.module.split('.').next().unwrap_or(&self.module)
    }
}

/// Every `No module named 'x'` of a collection run: in collection error records, and in
/// conftest import failures (which pytest writes to its output).
pub fn missing_modules(report: &TestReport) -> Vec<MissingModule> {
    missing_in(report, modules_in)
}

/// Every distribution whose metadata a collection run asked for and did not find
/// (`importlib.metadata.PackageNotFoundError`: a conftest or test module that reads a
/// dependency's version), with who asked; in [`MissingModule::module`], the distribution.
pub fn missing_distributions(report: &TestReport) -> Vec<MissingModule> {
    missing_in(report, distributions_in)
}

/// The names `extract` finds in a collection run's error records and conftest failures, each
/// with the first file that failed for it.
fn missing_in(report: &TestReport, extract: fn(&str) -> Vec<String>) -> Vec<MissingModule> {
    let mut out = BTreeSet::new();
    for record in &report.tests {
        if record.outcome != TestOutcome::Error {
            continue;
        }
        let importer = record
            .id
            .split("::")
            .next()
            .unwrap_or(&record.id)
            .to_string();
        if let Some(message) = &record.message {
            for module in extract(message) {
                out.insert(MissingModule {
                    module,
                    importer: importer.clone(),
                });
            }
        }
    }
    for text in [&report.stdout, &report.stderr] {
        // Only conftest failures: collection errors of test files are records already.
        let mut importer: Option<String> = None;
        for line in text.lines() {
            if let Some(rest) = line.split("ImportError while loading conftest '").nth(1) {
                let path = rest.split('\'').next().unwrap_or(rest);
                importer = Some(
                    path.strip_prefix(crate::GUEST_WORK)
                        .map(|p| p.trim_start_matches('/'))
                        .unwrap_or(path)
                        .to_string(),
                );
            }
            let Some(importer) = &importer else {
                continue;
            };
            for module in extract(line) {
                out.insert(MissingModule {
                    module,
                    importer: importer.clone(),
                });
            }
        }
    }
    // One entry per module: the first importer names the reason.
    let mut seen = BTreeSet::new();
    out.into_iter()
        .filter(|m| seen.insert(m.module.clone()))
        .collect()
}

/// The distribution names of `No package metadata was found for x` in `text`.
fn distributions_in(text: &str) -> Vec<String> {
    names_after(text, "No package metadata was found for ", true)
}

/// The module names of `No module named 'x'` / `No module named x` in `text`.
fn modules_in(text: &str) -> Vec<String> {
    names_after(text, "No module named ", false)
}

/// The dotted names (quoted or not; with dashes where `dashes`, as distribution names have)
/// that follow each `marker` in `text`.
fn names_after(text: &str, marker: &str, dashes: bool) -> Vec<String> {
    let mut out = Vec::new();
    for piece in text.split(marker).skip(1) {
        let piece = piece.trim_start_matches(['\'', '"']);
        let name: String = piece
            .chars()
            .take_while(|c| {
                c.is_ascii_alphanumeric() || *c == '_' || *c == '.' || (dashes && *c == '-')
            })
            .collect();
        let name = name.trim_end_matches('.').to_string();
        if !name.is_empty() && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// What to do about a missing module.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Try these distributions, in order.
    Try(Vec<String>),
    /// It cannot be provided, for this reason.
    Unresolvable(String),
}

/// The curated import-name table of pipreqs (`pipreqs/mapping`: `module:distribution`
/// lines, about 1,150 of them), pinned: which distribution provides a module whose name
/// differs from its own (`jwt` is PyJWT, `serial` pyserial, `magic` python-magic), where a
/// distribution of the module's own name would be another project.
const IMPORT_NAME_TABLE: PinnedWheel = PinnedWheel {
    name: "pipreqs",
    version: "0.5.0",
    file: "pipreqs-0.5.0-py3-none-any.whl",
    sha256: "0809f6217028e35785f80e90217e18043e58c99ba28175e28320f9074dd03874",
};
const IMPORT_NAME_MEMBER: &str = "pipreqs/mapping";

/// Module names too generic to map: a repository's own folders (`src`, `tests`, `utils`)
/// missing from the path are not some distribution's package.
const GENERIC_MODULES: &[&str] = &[
    "api", "app", "apps", "base", "client", "common", "config", "core", "data", "doc", "docs",
    "example", "examples", "ext", "helpers", "lib", "libs", "main", "model", "models", "plugins",
    "scripts", "server", "setup", "src", "test", "testing", "tests", "tools", "util", "utils",
];

/// Top-level import name -> the distribution that provides it, where the two names differ.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportNames(BTreeMap<String, String>);

impl ImportNames {
    /// Reads `module:distribution` lines. A module listed with more than one distribution is
    /// left out (the table cannot say which), and so are generic names and entries naming
    /// the module's own distribution.
    pub fn parse(text: &str) -> Self {
        let mut seen: BTreeMap<&str, Option<&str>> = BTreeMap::new();
        for line in text.lines() {
            let Some((module, distribution)) = line.trim().split_once(':') else {
                continue;
            };
            let (module, distribution) = (module.trim(), distribution.trim());
            if module.is_empty() || distribution.is_empty() {
                continue;
            }
            seen.entry(module)
                .and_modify(|d| {
                    if *d != Some(distribution) {
                        *d = None;
                    }
                })
                .or_insert(Some(distribution));
        }
        let same = |module: &str, distribution: &str| {
            crate::layers::normalise(module) == crate::layers::normalise(distribution)
        };
        ImportNames(
            seen.into_iter()
                .filter_map(|(module, distribution)| Some((module, distribution?)))
                .filter(|(module, distribution)| {
                    !GENERIC_MODULES.contains(module) && !same(module, distribution)
                })
                .map(|(m, d)| (m.to_string(), d.to_string()))
                .collect(),
        )
    }

    /// The distribution providing the top-level module `module`, when its name differs.
    pub fn distribution(&self, module: &str) -> Option<&str> {
        self.0.get(module).map(String::as_str)
    }

    /// How many modules the table maps.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The pinned import-name table, fetched and verified once (into the cache) and read once per
/// process.
pub fn import_names(progress: Progress<'_>) -> crate::Result<&'static ImportNames> {
    static TABLE: OnceLock<ImportNames> = OnceLock::new();
    if let Some(table) = TABLE.get() {
        return Ok(table);
    }
    let wheel = assets::fetch_wheels(&[IMPORT_NAME_TABLE], progress)?
        .into_iter()
        .next()
        .ok_or_else(|| crate::SandboxError::Asset {
            name: IMPORT_NAME_TABLE.name.into(),
            message: "no wheel fetched".into(),
        })?;
    let text =
        read_member(&wheel, IMPORT_NAME_MEMBER).map_err(|message| crate::SandboxError::Asset {
            name: IMPORT_NAME_TABLE.name.into(),
            message: format!("{IMPORT_NAME_MEMBER} in {}: {message}", wheel.display()),
        })?;
    Ok(TABLE.get_or_init(|| ImportNames::parse(&text)))
}

fn read_member(archive: &Path, member: &str) -> std::result::Result<String, String> {
    let file = fs::File::open(archive).map_err(|e| e.to_string())?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| e.to_string())?;
    let mut entry = zip.by_name(member).map_err(|e| e.to_string())?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut entry, &mut text).map_err(|e| e.to_string())?;
    Ok(text)
}

/// How a missing module could be provided. `own_modules` are the top-level names the
/// repository itself defines; `names` maps import names to distributions named otherwise
/// (tried first, before the module's own name, which may be another project).
pub fn plan(missing: &MissingModule, own_modules: &BTreeSet<String>, names: &ImportNames) -> Plan {
    let top = missing.top_level();
    let parts: Vec<&str> = missing.module.split('.').collect();
    let own_prefix = (2..=parts.len()).any(|k| own_modules.contains(&parts[..k].join(".")));
    let last = parts.last().copied().unwrap_or(top);
    if let Some(reason) = cannot_run_in_wasi(top) {
        return Plan::Unresolvable(reason.to_string());
    }
    if parts.len() > 1
        && own_modules.contains(top)
        && !own_modules.contains(last)
        && !last.starts_with('_')
    {
        // No file or package of that name anywhere in the repository (private names are
        // often compiled or generated: `_speedups`, `_version`).
        return Plan::Unresolvable(format!(
            "the sdist does not ship {} ({} imports it from the repository's own {top}): a \
             file left out of the release, which only the project's source repository has",
            missing.module, missing.importer
        ));
    }
    if own_modules.contains(top) || own_prefix {
        return Plan::Unresolvable(format!(
            "{top} belongs to the repository itself ({} cannot import {}): a generated or \
             compiled module, or an import path that needs [test] python-path in frognano.toml",
            missing.importer, missing.module
        ));
    }
    if let Some(reason) = unavailable_module(top) {
        return Plan::Unresolvable(reason);
    }
    let alias = ALIASES
        .iter()
        .find(|(m, _, _)| missing.module == *m || missing.module.starts_with(&format!("{m}.")))
        .or_else(|| ALIASES.iter().find(|(m, _, _)| *m == top));
    if let Some((_, distribution, pure)) = alias {
        if !pure {
            return Plan::Unresolvable(format!(
                "{distribution} has no pure-Python wheel: this suite cannot run in WebAssembly"
            ));
        }
        return Plan::Try(vec![distribution.to_string()]);
    }
    // Python names the first component it could not find, so a dotted name means its parent
    // imported: a namespace package (`azure.storage`, `jaraco`, `sphinxcontrib`) that other
    // distributions extend, each named for its dotted path.
    let mut candidates: Vec<String> = names
        .distribution(top)
        .map(String::from)
        .into_iter()
        .collect();
    candidates.extend((2..=parts.len()).rev().map(|k| parts[..k].join("-")));
    candidates.push(top.to_string());
    let dashed = top.replace('_', "-");
    if dashed != top {
        candidates.push(dashed);
    }
    candidates.push(format!("python-{}", top.replace('_', "-")));
    // Test helpers published as pytest plugins under their module's name (xprocess).
    candidates.push(format!("pytest-{}", top.replace('_', "-")));
    Plan::Try(candidates)
}

/// Top-level module names a repository defines (packages and modules anywhere in it), so
/// that a failing import of the project's own code is never "resolved" with a download.
///
/// A namespace package the repository shares with other distributions (its `__init__.py`
/// only extends its path) is not the repository's own: its other members are requirements.
/// The packages inside one are also listed by their dotted names (`azure.storage.blob`).
pub fn own_modules(root: &Path) -> BTreeSet<String> {
    let python_files: Vec<PathBuf> = crate::workspace::walk_repo(root)
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "py"))
        .map(|e| e.into_path())
        .collect();
    let namespaces: BTreeSet<&Path> = python_files
        .iter()
        .filter(|path| path.file_name().is_some_and(|n| n == "__init__.py"))
        .filter(|init| declares_namespace(init))
        .filter_map(|init| init.parent())
        .collect();
    let name = |dir: &Path| dir.file_name().and_then(|s| s.to_str()).map(String::from);
    let mut out = BTreeSet::new();
    for path in &python_files {
        if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
            out.insert(stem.to_string());
        }
        let Some(dir) = path.parent().filter(|p| *p != root) else {
            continue;
        };
        if namespaces.contains(dir) {
            continue;
        }
        out.extend(name(dir));
        let mut dotted = name(dir).into_iter().collect::<Vec<_>>();
        let mut parent = dir.parent();
        while let Some(namespace) = parent.filter(|p| namespaces.contains(p)) {
            dotted.extend(name(namespace));
            parent = namespace.parent();
        }
        if dotted.len() > 1 {
            dotted.reverse();
            out.insert(dotted.join("."));
        }
    }
    out
}

/// Whether `dir` is a regular package: an `__init__.py` that is more than a declaration of a
/// namespace other distributions share (a folder without one, or with only that, is a portion
/// of a namespace package, which places only what it holds).
pub fn is_regular_package(dir: &Path) -> bool {
    let init = dir.join("__init__.py");
    init.is_file() && !declares_namespace(&init)
}

/// Whether a package's `__init__.py` only declares a namespace that other distributions share
/// (pkgutil's `extend_path` or pkg_resources' `declare_namespace`).
fn declares_namespace(init: &Path) -> bool {
    fs::read_to_string(init).is_ok_and(|text| {
        text.len() < 2048 && (text.contains("extend_path(") || text.contains("declare_namespace("))
    })
}

/// The shallowest directory of the repository (relative, never the root itself nor one of
/// `roots`) that holds the top-level package `module` (`DIR/module/__init__.py`) or module
/// (`DIR/module.py`): where a `lib/`- or `python/`-style layout keeps its code.
pub fn import_root_for(root: &Path, module: &str, roots: &[String]) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for entry in crate::workspace::walk_repo(root)
        .filter_map(|e| e.ok())
        .filter(|e| e.depth() <= 5)
    {
        let path = entry.path();
        let holds = if entry.file_type().is_dir() {
            entry.file_name().to_str() == Some(module) && path.join("__init__.py").is_file()
        } else {
            entry.file_type().is_file()
                && entry.file_name().to_str() == Some(&format!("{module}.py"))
        };
        if !holds {
            continue;
        }
        // A folder that is itself a package is not a place to import from: its modules are
        // the package's (`azure/core/tracing/opentelemetry.py` put first on the path would
        // shadow the `opentelemetry` distribution).
        if path
            .parent()
            .is_some_and(|dir| dir.join("__init__.py").is_file())
        {
            continue;
        }
        let Some(parent) = path.parent().and_then(|p| p.strip_prefix(root).ok()) else {
            continue;
        };
        let rel = parent.to_string_lossy().replace('\\', "/");
        if rel.is_empty() || roots.iter().any(|r| r.trim_end_matches('/') == rel) {
            continue;
        }
        let depth = parent.components().count();
        if best
            .as_ref()
            .is_none_or(|(d, r)| depth < *d || (depth == *d && rel < *r))
        {
            best = Some((depth, rel));
        }
    }
    best.map(|(_, rel)| rel)
}

/// Whether a wheel provides the top-level module `module` (its `top_level.txt`, else its
/// file list).
pub fn wheel_provides(wheel: &Path, module: &str) -> bool {
    let Ok(file) = fs::File::open(wheel) else {
        return false;
    };
    let Ok(mut zip) = zip::ZipArchive::new(file) else {
        return false;
    };
    let names: Vec<String> = zip.file_names().map(str::to_string).collect();
    let top = module.split('.').next().unwrap_or(module);
    if top == DISTUTILS && names.iter().any(|n| n.starts_with("_distutils_hack/")) {
        // setuptools' shim: its .pth file puts setuptools' copy in place of `distutils`.
        return true;
    }
    let path_prefix = format!("{}/", module.replace('.', "/"));
    let file_module = format!("{}.py", module.replace('.', "/"));
    if names
        .iter()
        .any(|n| n.starts_with(&path_prefix) || *n == file_module)
    {
        return true;
    }
    for name in names
        .iter()
        .filter(|n| n.ends_with(".dist-info/top_level.txt"))
    {
        if let Ok(mut entry) = zip.by_name(name) {
            let mut text = String::new();
            if std::io::Read::read_to_string(&mut entry, &mut text).is_ok()
                && text.lines().any(|l| l.trim() == top)
            {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use frognano_core::TestRecord;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tmp");
        for file in files {
            let path = dir.path().join(file);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, "").expect("write");
        }
        dir
    }

    #[test]
    fn trio_cannot_run_here_under_either_name() {
        assert!(unavailable_module("trio").is_some_and(|r| r.contains("I/O manager")));
        assert!(cannot_run_in_wasi("pytest_trio").is_some());
        assert!(cannot_run_in_wasi("anyio").is_none());
    }

    #[test]
    fn packages_outside_the_import_roots_are_found() {
        let dir = tree(&[
            "lib/mypkg/__init__.py",
            "lib/mypkg/core.py",
            "tests/test_core.py",
            "python/single.py",
            "azure/core/tracing/__init__.py",
            "azure/core/tracing/opentelemetry.py",
        ]);
        let roots = vec![".".to_string()];
        // A module inside a package is the package's, never a top-level module.
        assert_eq!(import_root_for(dir.path(), "opentelemetry", &roots), None);
        assert_eq!(
            import_root_for(dir.path(), "mypkg", &roots).as_deref(),
            Some("lib")
        );
        assert_eq!(
            import_root_for(dir.path(), "single", &roots).as_deref(),
            Some("python")
        );
        assert_eq!(
            import_root_for(dir.path(), "mypkg", &["lib".to_string()]),
            None
        );
        assert_eq!(import_root_for(dir.path(), "absent", &roots), None);
    }

    #[test]
    fn missing_modules_from_records_and_conftest_output() {
        let mut record = TestRecord::new("tests/test_a.py", TestOutcome::Error);
        record.message = Some(
            "tests/test_a.py:1: in <module>\n    import dateutil.parser\n\
             E   ModuleNotFoundError: No module named 'dateutil'"
                .into(),
        );
        let mut report = TestReport::from_records(vec![record], 0.0);
        report.stderr = format!(
            "ImportError while loading conftest '{}/tests/conftest.py'.\n\
             tests/conftest.py:1: in <module>\n    import toolz\n\
             E   ModuleNotFoundError: No module named 'toolz'\n",
            crate::GUEST_WORK
        );
        assert_eq!(
            missing_modules(&report),
            vec![
                MissingModule {
                    module: "dateutil".into(),
                    importer: "tests/test_a.py".into()
                },
                MissingModule {
                    module: "toolz".into(),
                    importer: "tests/conftest.py".into()
                },
            ]
        );
        assert_eq!(
            modules_in("ImportError: No module named foo.bar"),
            vec!["foo.bar"]
        );
        report.stderr = format!(
            "ImportError while loading conftest '{}/test/conftest.py'.\n\
             E   importlib.metadata.PackageNotFoundError: No package metadata was found for \
             ansible-core\n",
            crate::GUEST_WORK
        );
        assert_eq!(
            missing_distributions(&report),
            vec![MissingModule {
                module: "ansible-core".into(),
                importer: "test/conftest.py".into()
            }]
        );
    }

    #[test]
    fn plans() {
        let own: BTreeSet<String> = ["mypkg".to_string()].into_iter().collect();
        let missing = |m: &str| MissingModule {
            module: m.into(),
            importer: "t.py".into(),
        };
        let names = ImportNames::default();
        assert_eq!(
            plan(&missing("dateutil.tz"), &own, &names),
            Plan::Try(vec!["python-dateutil".into()])
        );
        assert_eq!(
            plan(&missing("google.protobuf"), &own, &names),
            Plan::Try(vec!["protobuf".into()])
        );
        assert_eq!(
            plan(&missing("py.xml"), &own, &names),
            Plan::Try(vec!["py".into()])
        );
        assert_eq!(
            plan(&missing("toolz"), &own, &names),
            Plan::Try(vec![
                "toolz".into(),
                "python-toolz".into(),
                "pytest-toolz".into()
            ])
        );
        assert_eq!(
            plan(&missing("ruamel_yaml"), &own, &names),
            Plan::Try(vec![
                "ruamel_yaml".into(),
                "ruamel-yaml".into(),
                "python-ruamel-yaml".into(),
                "pytest-ruamel-yaml".into()
            ])
        );
        for (module, words) in [
            ("numpy", "numpy has no pure-Python wheel"),
            ("mypkg._speedups", "belongs to the repository"),
            ("_ssl", "standard-library"),
            ("termios", "standard-library"),
            ("test.support.os_helper", "CPython's own test package"),
            ("mypkg.helpers", "the sdist does not ship mypkg.helpers"),
        ] {
            match plan(&missing(module), &own, &names) {
                Plan::Unresolvable(reason) => assert!(reason.contains(words), "{reason}"),
                other => panic!("{module}: {other:?}"),
            }
        }
    }

    #[test]
    fn members_of_a_shared_namespace_are_requirements_and_the_repositorys_own_are_not() {
        let dir = tempfile::tempdir().expect("tmp");
        let namespace = "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n";
        for (rel, text) in [
            ("azure/__init__.py", namespace),
            ("azure/storage/__init__.py", namespace),
            (
                "azure/storage/filedatalake/__init__.py",
                "from ._client import Client\n",
            ),
            (
                "azure/storage/filedatalake/_client.py",
                "class Client: pass\n",
            ),
            ("tests/test_client.py", "import azure.storage.blob\n"),
        ] {
            let path = dir.path().join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        }
        let own = own_modules(dir.path());
        assert!(own.contains("azure.storage.filedatalake"), "{own:?}");
        assert!(
            !own.contains("azure") && !own.contains("storage"),
            "{own:?}"
        );
        let missing = |m: &str| MissingModule {
            module: m.into(),
            importer: "tests/test_client.py".into(),
        };
        let names = ImportNames::default();
        assert_eq!(
            plan(&missing("azure.storage.blob"), &own, &names),
            Plan::Try(vec![
                "azure-storage-blob".into(),
                "azure-storage".into(),
                "azure".into(),
                "python-azure".into(),
                "pytest-azure".into()
            ])
        );
        assert!(matches!(
            plan(&missing("azure.storage.filedatalake._generated"), &own, &names),
            Plan::Unresolvable(reason) if reason.contains("belongs to the repository")
        ));
    }

    #[test]
    fn the_import_name_table_is_tried_before_the_modules_own_name() {
        let names = ImportNames::parse(
            "sqlalchemy_utils:SQLAlchemy_Utils\nwx:wxPython\nserial:pyserial\n\
             serial:another\nsrc:atlas\ntoolz:toolz\nbroken line\n:empty\nfitz:PyMuPDF\n\
             foo_ext:foo-extras\n",
        );
        // Ambiguous (serial), generic (src) and same-name entries (toolz, sqlalchemy_utils
        // once normalised) are left out.
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(names.distribution("fitz"), Some("PyMuPDF"));
        assert_eq!(names.distribution("serial"), None);
        assert_eq!(names.distribution("sqlalchemy_utils"), None);
        let own = BTreeSet::new();
        let missing = |m: &str| MissingModule {
            module: m.into(),
            importer: "t.py".into(),
        };
        assert_eq!(
            plan(&missing("foo_ext.types"), &own, &names),
            Plan::Try(vec![
                "foo-extras".into(),
                "foo_ext-types".into(),
                "foo_ext".into(),
                "foo-ext".into(),
                "python-foo-ext".into(),
                "pytest-foo-ext".into()
            ])
        );
        // The curated aliases still come first, with what they know of native code.
        assert!(matches!(
            plan(&missing("wx"), &own, &names),
            Plan::Unresolvable(reason) if reason.contains("no pure-Python wheel")
        ));
    }
}
