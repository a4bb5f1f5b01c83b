#!/usr/bin/env python3
"""Build FrogNano's starter corpus list from a list of candidate distributions.

For every candidate in ``scripts/corpus/candidates.txt`` this script:

1. asks pip for the newest release that supports Python 3.12 and downloads
   that release's source distribution (``pip download --no-binary NAME
   --no-deps``; build requirements may come as wheels); a release that has
   no sdist is skipped, older releases are never tried;
2. reads ``PKG-INFO`` and requires that ``Requires-Python`` admits both 3.12
   and 3.15 and that no unconditional runtime dependency is a known compiled
   distribution, other than those the interpreter image carries compiled in (numpy,
   pandas, lxml, ..., read from its standard-library zip: ``--image-zip``);
3. unpacks the archive into a temporary directory (rejecting members that
   would escape it) and keeps the package only when the sdist

   * ships tests (``test_*.py`` / ``*_test.py`` files, or ``.py`` files inside
     a ``test``/``tests``/``testing`` directory),
   * is pure Python (no C/C++/Cython/Rust/Fortran/Go sources outside test and
     documentation folders, no ``Cargo.toml``, no prebuilt binaries, no
     extension modules declared in ``setup.py``/``pyproject.toml``, no
     native build backend),
   * is at most 15 MB,
   * is not a Django project or app (those need a settings module).

The kept packages are written, sorted by name, to
``corpus/starter/packages.txt`` as ``name==version --hash=sha256:<hex>``
lines (pip's requirements-file hash syntax), and every candidate's outcome
goes to ``corpus/starter/survey.tsv``.

Only the standard library is used; pip is run as a subprocess.  Downloads and
pip's answers are cached in ``--download-dir`` so that a rerun only contacts
the registry for candidates it has not seen yet.  pip prepares each sdist's
metadata; pass ``--python`` an interpreter that has the common build backends
installed (setuptools, wheel, hatchling, hatch-vcs, flit_core, poetry-core,
pdm-backend, setuptools-scm) to make that fast; when a preparation without
build isolation fails, the script retries with isolation.

Usage::

    python3 scripts/corpus/make_starter_list.py [--jobs 4] [--download-dir DIR]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import email.parser
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zipfile
from pathlib import Path, PurePosixPath

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CANDIDATES = REPO_ROOT / "scripts" / "corpus" / "candidates.txt"
DEFAULT_OUT = REPO_ROOT / "corpus" / "starter" / "packages.txt"
DEFAULT_SURVEY = REPO_ROOT / "corpus" / "starter" / "survey.tsv"
DEFAULT_DOWNLOAD_DIR = Path.home() / ".cache" / "frognano" / "starter-survey"

# The Python versions every kept package must support.
TARGET_PYTHONS = ((3, 12), (3, 15))
MAX_SDIST_BYTES = 15 * 1024 * 1024
# Bumped whenever the cached pip answers would no longer be valid.
CACHE_FORMAT = 1

# Distributions that need compiled code at run time (no usable pure-Python
# fallback), or that are Django itself.  A candidate that depends on one of
# them unconditionally is rejected, and so is a candidate of that name.
# Kept by the filters, but their suites need what no sandbox offers: a network, servers,
# message brokers, a display or external programs (node, graphviz's dot, a Jupyter kernel).
NEEDS_OUTSIDE_WORLD = frozenset(
    {
        "httpretty",
        "vcrpy",
        "pytest-localserver",
        "pytest-httpserver",
        "pytest-xprocess",
        "kazoo",
        "celery",
        "kombu",
        "rq",
        "huey",
        "sparqlwrapper",
        "pyright",
        "graphviz",
        "nbconvert",
        "nbclient",
    }
)

COMPILED_DISTRIBUTIONS = frozenset(
    """
    aiohttp argon2-cffi argon2-cffi-bindings bcrypt bitarray blake3 blis brotli
    brotlicffi cairocffi cchardet cffi ciso8601 contourpy cramjam crc32c
    cryptography cymem cython cytoolz duckdb editdistance fastavro frozenlist
    gevent greenlet grpcio gssapi h5py httptools immutables inflate64 jellyfish
    jiter kiwisolver krb5 levenshtein libcst llvmlite lru-dict lxml lz4
    matplotlib mmh3 msgspec multidict murmurhash mysqlclient netifaces numba
    numpy orjson pandas pillow polars preshed propcache psutil
    psycopg2 psycopg2-binary pyarrow pybcj pycairo pycryptodome pycryptodomex
    pycurl pydantic pydantic-core pygit2 pynacl pyppmd pyproj python-levenshtein
    python-rapidjson pyzmq pyzstd rapidfuzz regex rpds-py ruamel-yaml-clib
    rustworkx safetensors scikit-learn scipy shapely srsly tensorflow thinc
    tiktoken tokenizers torch ujson uvloop watchfiles xxhash zopfli zstandard
    django
    """.split()
)

# Compiled distributions whose extension is optional: the sandbox builds their pure-Python
# wheel from the sdist (the extension switched off), so depending on them excludes nothing.
PURE_FALLBACK_DISTRIBUTIONS = frozenset("aiohttp frozenlist multidict propcache yarl".split())

NATIVE_SOURCE_SUFFIXES = frozenset(
    ".c .cc .cpp .cxx .c++ .m .mm .pyx .pxd .pxi .rs .f .f90 .f95 .for .go .swig .i".split()
)
BINARY_SUFFIXES = frozenset(".so .pyd .dll .dylib .a .lib .o .obj".split())
# Folders whose native sources are data (test inputs, docs), not extensions.
DATA_DIR_NAMES = frozenset(
    """
    test tests testing testdata test_data fixtures examples example docs doc
    data samples sample benchmarks bench pc
    """.split()
)
TEST_DIR_NAMES = frozenset(("test", "tests", "testing"))
SETUP_PY_EXT_MARKERS = ("ext_modules", "Extension(", "cffi_modules", "rust_extensions")
NATIVE_BUILD_BACKENDS = ("maturin", "scikit_build_core", "mesonpy", "setuptools_rust", "enscons")
# Modules a build needs only to compile native code: when preparing metadata without build
# isolation fails for lack of one of them, the isolated retry would install (and sometimes run)
# a compiler toolchain only to find a package the survey leaves out anyway.
NATIVE_BUILD_MODULES = ("setuptools_rust", "Cython", "pybind11", "numpy", "cffi", "skbuild",
                        "scikit_build_core", "mesonpy", "maturin", "nanobind", "cmake", "torch")
PYPROJECT_EXT_MARKERS = ("ext-modules", "ext_modules", "[tool.maturin]", "[tool.scikit-build]")


def default_image_zip() -> Path:
    """Where FrogNano's setup caches the default image's standard-library zip (the same
    cache directory the library uses: FROGNANO_CACHE, else XDG_CACHE_HOME/frognano, else
    ~/.cache/frognano)."""
    if os.environ.get("FROGNANO_CACHE"):
        cache = Path(os.environ["FROGNANO_CACHE"])
    elif os.environ.get("XDG_CACHE_HOME"):
        cache = Path(os.environ["XDG_CACHE_HOME"]) / "frognano"
    else:
        cache = Path.home() / ".cache" / "frognano"
    return cache / "images" / "python-3.15" / "lib" / "python315.zip"


def image_distributions(image_zip: Path) -> frozenset[str]:
    """The distributions the interpreter image carries compiled in (numpy, pandas, lxml, ...),
    read from the ``*.dist-info/METADATA`` entries of its standard-library zip: a candidate
    that depends on them runs in the sandbox, whose interpreter imports them."""
    import zipfile

    names = set()
    with zipfile.ZipFile(image_zip) as archive:
        for member in archive.namelist():
            top = member.split("/")[0]
            if top.endswith(".dist-info") and member.endswith("/METADATA"):
                names.add(normalize(top[: -len(".dist-info")].split("-")[0]))
    return frozenset(names)


def normalize(name: str) -> str:
    """PEP 503 normalised form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------
# Version specifiers and markers (just enough of PEP 440 / PEP 508, stdlib only)
# ---------------------------------------------------------------------------


def _release(text: str) -> tuple[int, ...]:
    match = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    if not match:
        raise ValueError(f"unparsable version {text!r}")
    return tuple(int(part) for part in match.group(1).split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    width = max(len(a), len(b))
    a = a + (0,) * (width - len(a))
    b = b + (0,) * (width - len(b))
    return (a > b) - (a < b)


def python_satisfies(spec: str, python: tuple[int, int]) -> bool:
    """Whether Python ``python`` (as ``X.Y.0``) satisfies the specifier set.

    Unparsable clauses are treated as satisfied: the point is to reject
    packages that clearly exclude a target version, not to be a full PEP 440
    implementation.
    """
    version = python + (0,)
    for clause in spec.split(","):
        clause = clause.strip()
        if not clause:
            continue
        match = re.match(r"(~=|===|==|!=|<=|>=|<|>)\s*(.+)$", clause)
        if not match:
            continue
        op, target = match.group(1), match.group(2).strip()
        wildcard = target.endswith(".*")
        if wildcard:
            target = target[:-2]
        try:
            rel = _release(target)
        except ValueError:
            continue
        if op in ("==", "===", "!="):
            if wildcard:
                equal = version[: len(rel)] == rel
            else:
                equal = _cmp(version, rel) == 0
            ok = equal if op != "!=" else not equal
        elif op == ">=":
            ok = _cmp(version, rel) >= 0
        elif op == ">":
            ok = _cmp(version, rel) > 0
        elif op == "<=":
            ok = _cmp(version, rel) <= 0
        elif op == "<":
            ok = _cmp(version, rel) < 0
        else:  # ~=
            if len(rel) < 2:
                continue
            ok = _cmp(version, rel) >= 0 and version[: len(rel) - 1] == rel[:-1]
        if not ok:
            return False
    return True


_MARKER_ATOM = re.compile(
    r"""^\s*(python_version|python_full_version|sys_platform|platform_system|os_name|
    platform_python_implementation|implementation_name)\s*
    (==|!=|<=|>=|<|>|~=)\s*['"]([^'"]*)['"]\s*$""",
    re.X,
)
_MARKER_ENV = {
    "sys_platform": "wasi",
    "platform_system": "",
    "os_name": "posix",
    "platform_python_implementation": "CPython",
    "implementation_name": "cpython",
}


def _atom_true(atom: str, python: tuple[int, int]) -> bool:
    atom = atom.strip()
    while atom.startswith("(") and atom.endswith(")"):
        atom = atom[1:-1].strip()
    match = _MARKER_ATOM.match(atom)
    if not match:
        return True  # unknown: assume the requirement applies
    var, op, value = match.groups()
    if var in ("python_version", "python_full_version"):
        return python_satisfies(f"{op}{value}", python)
    actual = _MARKER_ENV[var]
    if op == "==":
        return actual == value
    if op == "!=":
        return actual != value
    return True


def marker_applies(marker: str, python: tuple[int, int]) -> bool:
    """Crude PEP 508 marker evaluation for the WASI guest at ``python``."""
    if re.search(r"\bextra\s*==", marker):
        return False
    # Markers rarely mix ``and``/``or`` with parentheses; evaluate or-of-ands.
    for alternative in re.split(r"\s+or\s+", marker):
        if all(_atom_true(atom, python) for atom in re.split(r"\s+and\s+", alternative)):
            return True
    return False


def required_distributions(requires_dist: list[str]) -> set[str]:
    """Normalised names of dependencies needed on any target Python."""
    names = set()
    for requirement in requires_dist:
        req, _, marker = requirement.partition(";")
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        if not match:
            continue
        if marker.strip() and not any(marker_applies(marker, py) for py in TARGET_PYTHONS):
            continue
        names.add(normalize(match.group(1)))
    return names


# ---------------------------------------------------------------------------
# Archives
# ---------------------------------------------------------------------------


class ArchiveError(Exception):
    """The sdist could not be read or unpacked safely."""


def _safe_member(root: Path, name: str) -> Path:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise ArchiveError(f"member {name!r} escapes the archive")
    return root.joinpath(*path.parts)


def unpack(archive: Path, dest: Path) -> None:
    """Unpack a .tar.gz/.tar.bz2/.zip sdist into ``dest``; reject path escapes,
    links and device files."""
    name = archive.name.lower()
    if name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                target = _safe_member(dest, info.filename)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with zf.open(info) as src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
        return
    try:
        tf = tarfile.open(archive)
    except tarfile.TarError as err:
        raise ArchiveError(f"not a tar archive: {err}") from err
    with tf:
        for member in tf.getmembers():
            target = _safe_member(dest, member.name)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                src = tf.extractfile(member)
                if src is None:
                    continue
                with src, open(target, "wb") as out:
                    shutil.copyfileobj(src, out)
            elif member.issym() or member.islnk():
                continue  # links are not needed to judge the contents
            else:
                raise ArchiveError(f"member {member.name!r} is a device or fifo")


def read_pkg_info(root: Path) -> email.message.Message:
    """The sdist's top-level PKG-INFO (``<root>/<name>-<version>/PKG-INFO``)."""
    candidates = sorted(root.glob("*/PKG-INFO")) or sorted(root.glob("PKG-INFO"))
    if not candidates:
        raise ArchiveError("no PKG-INFO at the top of the sdist")
    text = candidates[0].read_text(encoding="utf-8", errors="replace")
    return email.parser.Parser().parsestr(text, headersonly=True)


@dataclasses.dataclass
class Scan:
    test_files: int = 0
    native_sources: list[str] = dataclasses.field(default_factory=list)
    binaries: list[str] = dataclasses.field(default_factory=list)
    cargo: bool = False
    setup_py_ext: str = ""
    pyproject_native: str = ""


def scan_tree(root: Path) -> Scan:
    scan = Scan()
    tops = [p for p in root.iterdir() if p.is_dir()]
    project = tops[0] if len(tops) == 1 else root
    for dirpath, _dirnames, filenames in os.walk(project):
        rel_dir = Path(dirpath).relative_to(project)
        parts = [part.lower() for part in rel_dir.parts]
        in_test_dir = any(part in TEST_DIR_NAMES for part in parts)
        in_data_dir = any(part in DATA_DIR_NAMES for part in parts)
        for filename in filenames:
            lower = filename.lower()
            suffix = os.path.splitext(lower)[1]
            rel = str(rel_dir / filename)
            if lower.endswith(".py") and (
                in_test_dir
                or (lower.startswith("test_"))
                or lower.endswith("_test.py")
            ):
                scan.test_files += 1
            if filename == "Cargo.toml":
                scan.cargo = True
            if suffix in BINARY_SUFFIXES:
                scan.binaries.append(rel)
            elif suffix in NATIVE_SOURCE_SUFFIXES and not in_data_dir:
                scan.native_sources.append(rel)
    setup_py = project / "setup.py"
    if setup_py.is_file():
        text = setup_py.read_text(encoding="utf-8", errors="replace")
        for marker in SETUP_PY_EXT_MARKERS:
            if marker in text:
                scan.setup_py_ext = marker
                break
    pyproject = project / "pyproject.toml"
    if pyproject.is_file():
        text = pyproject.read_text(encoding="utf-8", errors="replace")
        backend = re.search(r"""build-backend\s*=\s*["']([^"']+)["']""", text)
        if backend and backend.group(1).split(".")[0] in NATIVE_BUILD_BACKENDS:
            scan.pyproject_native = f"build backend {backend.group(1)}"
        else:
            for marker in PYPROJECT_EXT_MARKERS:
                if marker in text:
                    scan.pyproject_native = marker
                    break
    return scan


# ---------------------------------------------------------------------------
# pip
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Fetched:
    sdist: Path | None
    newest: str | None
    error: str = ""


def _run(cmd: list[str], timeout: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONIOENCODING="utf-8")
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


def _last_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln.strip(" │") for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip(" │")]
    # pip nests a failed build step's own output; its first specific error says what went
    # wrong, where pip's last lines only say that a subprocess failed.
    specific = [
        ln
        for ln in lines
        if ln.lower().startswith("error") and "subprocess-exited-with-error" not in ln
    ]
    if specific:
        return specific[0][:200]
    errors = [
        ln
        for ln in lines
        if ln.startswith(("ERROR", "×", "╰─>"))
        or "Error" in ln
        and not ln.startswith(("note:", "hint:"))
    ]
    text = (errors or lines or ["pip failed without output"])[-1]
    return text[:200]


def fetch(name: str, python: str, cache: Path, timeout: int, retry_failed: bool) -> Fetched:
    """Download the newest sdist of ``name`` into ``cache/sdists/<name>/``,
    reusing an earlier run's answer when there is one."""
    key = normalize(name)
    record_path = cache / "records" / f"{key}.json"
    sdist_dir = cache / "sdists" / key
    if record_path.is_file():
        try:
            record = json.loads(record_path.read_text())
        except (OSError, ValueError):
            record = {}
        if record.get("format") == CACHE_FORMAT:
            sdist = record.get("sdist")
            if sdist and (sdist_dir / sdist).is_file():
                return Fetched(sdist_dir / sdist, record.get("newest"))
            if not sdist and not retry_failed:
                return Fetched(None, record.get("newest"), record.get("error", "download failed"))

    pyver = ".".join(map(str, TARGET_PYTHONS[0]))
    newest = None
    try:
        proc = _run(
            [python, "-m", "pip", "index", "versions", "--python-version", pyver, name], timeout
        )
        match = re.match(r"\S+ \(([^)]+)\)", proc.stdout.strip())
        if proc.returncode == 0 and match:
            newest = match.group(1)
    except subprocess.TimeoutExpired:
        pass

    result = Fetched(None, newest, "")
    if sdist_dir.exists():
        shutil.rmtree(sdist_dir)
    sdist_dir.mkdir(parents=True)
    base = [
        python, "-m", "pip", "download", "--no-binary", key, "--no-deps",
        "--python-version", pyver, "--disable-pip-version-check", "-d", str(sdist_dir), name,
    ]  # fmt: skip
    # First without build isolation (fast when --python has the common build
    # backends); then, if a backend or build requirement was missing, isolated.
    for attempt in (base[:4] + ["--no-build-isolation"] + base[4:], base):
        try:
            proc = _run(attempt, timeout)
        except subprocess.TimeoutExpired:
            result.error = f"pip download timed out after {timeout} s"
            break
        files = [p for p in sdist_dir.iterdir() if p.is_file()]
        if proc.returncode == 0 and files:
            result.sdist = files[0]
            result.error = ""
            break
        output = proc.stderr + proc.stdout
        backend = re.search(r"Cannot import build backend '([^']+)'", output)
        if backend and backend.group(1).split(".")[0] in NATIVE_BUILD_BACKENDS:
            result.error = f"compiled: native build backend {backend.group(1)}"
            break
        needed = re.search(r"No module named '([A-Za-z0-9_]+)", output)
        if needed and needed.group(1) in NATIVE_BUILD_MODULES:
            result.error = f"compiled: its build needs {needed.group(1)}"
            break
        missing = re.search(r"No matching distribution found for ([A-Za-z0-9._-]+)", output)
        if missing and normalize(missing.group(1)) == key:
            result.error = "no-sdist: " + _last_error_line(proc)
            break
        result.error = "pip download failed: " + _last_error_line(proc)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(
        json.dumps(
            {
                "format": CACHE_FORMAT,
                "name": name,
                "newest": newest,
                "sdist": result.sdist.name if result.sdist else None,
                "error": result.error,
            }
        )
    )
    return result


# ---------------------------------------------------------------------------
# Judging one candidate
# ---------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    candidate: str
    name: str = ""
    version: str = ""
    size: int = 0
    tests: int = 0
    sha256: str = ""
    reason: str = ""  # empty: kept

    @property
    def kept(self) -> bool:
        return not self.reason


def judge(
    candidate: str, fetched: Fetched, image_provides: frozenset[str] = frozenset()
) -> Outcome:
    out = Outcome(candidate)
    if fetched.sdist is None:
        error = fetched.error or "download failed"
        known = ("compiled:", "no-sdist:")
        out.reason = error if error.startswith(known) else f"download-failed: {error}"
        return out
    sdist = fetched.sdist
    out.size = sdist.stat().st_size
    out.sha256 = hashlib.sha256(sdist.read_bytes()).hexdigest()
    with tempfile.TemporaryDirectory(prefix="frognano-sdist-") as tmp:
        root = Path(tmp)
        try:
            unpack(sdist, root)
            meta = read_pkg_info(root)
        except (ArchiveError, OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as err:
            out.reason = f"bad-archive: {err}"
            return out
        out.name = normalize(meta.get("Name", candidate))
        out.version = (meta.get("Version") or "").strip()
        scan = scan_tree(root)
    out.tests = scan.test_files

    if fetched.newest and fetched.newest != out.version:
        out.reason = f"newest-has-no-sdist: newest {fetched.newest}, sdist {out.version}"
    elif out.size > MAX_SDIST_BYTES:
        out.reason = f"too-large: {out.size} bytes"
    elif not all(python_satisfies(meta.get("Requires-Python") or "", py) for py in TARGET_PYTHONS):
        out.reason = f"requires-python: {meta.get('Requires-Python')}"
    elif out.name in COMPILED_DISTRIBUTIONS:
        out.reason = "compiled: known compiled distribution"
    elif "django" in out.name:
        out.reason = "django: needs a settings module"
    elif scan.cargo:
        out.reason = "compiled: Cargo.toml"
    elif scan.native_sources:
        out.reason = f"compiled: native source {scan.native_sources[0]}"
    elif scan.binaries:
        out.reason = f"compiled: binary {scan.binaries[0]}"
    elif scan.setup_py_ext:
        out.reason = f"compiled: setup.py mentions {scan.setup_py_ext}"
    elif scan.pyproject_native:
        out.reason = f"compiled: pyproject.toml {scan.pyproject_native}"
    elif scan.test_files == 0:
        out.reason = "no-tests: sdist ships no test files"
    else:
        deps = required_distributions(meta.get_all("Requires-Dist") or [])
        excused = image_provides | PURE_FALLBACK_DISTRIBUTIONS
        bad = sorted((deps & COMPILED_DISTRIBUTIONS) - excused)
        if "django" in bad:
            out.reason = "django: depends on django"
        elif bad:
            out.reason = f"compiled-dep: {', '.join(bad)}"
    return out


def read_candidates(path: Path) -> list[str]:
    names, seen = [], set()
    for line in path.read_text(encoding="utf-8").splitlines():
        name = line.split("#", 1)[0].strip()
        if name and normalize(name) not in seen:
            seen.add(normalize(name))
            names.append(name)
    return names


def header(candidates: Path, max_kept: int, first: int | None = None) -> str:
    """The comment block heading a generated list."""
    try:
        source = candidates.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        source = candidates.name
    if first is not None:
        source = f"the first {first} candidates of {source}"
    return f"""\
# FrogNano corpus list: widely used pure-Python distributions whose source
# distributions ship their own test suites.  Each line pins one sdist by
# version and sha256 (pip's requirements-file hash syntax).
#
# Generated by `python3 scripts/corpus/make_starter_list.py` from
# {source}: the newest sdist of every candidate was
# downloaded and kept only if it supports Python 3.12 and 3.15, ships test
# files, is pure Python (no native sources, extension modules or compiled
# runtime dependencies but those the interpreter image carries), is at most 15 MB, is not a Django project and needs no
# network, servers or GUI; of those, the smallest sdists (at most --max, {max_kept}).
# Do not edit by hand; rerun the script instead.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", type=Path, default=DEFAULT_CANDIDATES)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--survey", type=Path, default=DEFAULT_SURVEY)
    parser.add_argument("--download-dir", type=Path, default=DEFAULT_DOWNLOAD_DIR)
    parser.add_argument("--python", default=sys.executable, help="interpreter that runs pip")
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--timeout", type=int, default=120, help="seconds per pip call")
    parser.add_argument("--retry-failed", action="store_true", help="retry cached failures")
    parser.add_argument("--min-kept", type=int, default=300, help="exit 1 below this count")
    parser.add_argument(
        "--first",
        type=int,
        default=None,
        help="survey only the first N candidates of the list (a large list in resumable chunks)",
    )
    parser.add_argument(
        "--max",
        type=int,
        default=320,
        help="keep at most this many, the smallest sdists first (a build of the whole list "
        "then fits in about an hour on two cores)",
    )
    parser.add_argument(
        "--image-zip",
        type=Path,
        default=None,
        help="the interpreter image's standard-library zip, whose compiled-in distributions "
        "(numpy, pandas, lxml, ...) do not exclude a candidate that depends on them (default: "
        "the one `frognano setup` caches; without it they exclude it)",
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    candidates = read_candidates(args.candidates)
    if args.first is not None:
        candidates = candidates[: max(0, args.first)]
    args.download_dir.mkdir(parents=True, exist_ok=True)
    print(f"{len(candidates)} candidates, cache {args.download_dir}", file=sys.stderr)

    image_zip = args.image_zip or default_image_zip()
    if image_zip.is_file():
        image_provides = image_distributions(image_zip)
        print(f"the image provides {len(image_provides)} distributions", file=sys.stderr)
    elif args.image_zip is not None:
        parser.error(f"--image-zip {image_zip}: no such file")
    else:
        image_provides = frozenset()
        print(
            "no image found (run `frognano setup`): candidates that depend on numpy, pandas, "
            "lxml and the image's other compiled-in distributions are left out",
            file=sys.stderr,
        )
    lock = threading.Lock()
    done = [0]

    def work(name: str) -> Outcome:
        try:
            fetched = fetch(name, args.python, args.download_dir, args.timeout, args.retry_failed)
            outcome = judge(name, fetched, image_provides)
        except Exception as err:  # keep surveying the other candidates
            outcome = Outcome(name, reason=f"error: {type(err).__name__}: {err}")
        with lock:
            done[0] += 1
            status = "kept" if outcome.kept else outcome.reason[:90]
            print(f"[{done[0]}/{len(candidates)}] {name}: {status}", file=sys.stderr)
        return outcome

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(work, candidates))

    kept: dict[str, Outcome] = {}
    for outcome in outcomes:
        if outcome.kept and normalize(outcome.name) in NEEDS_OUTSIDE_WORLD:
            outcome.reason = "needs-outside-world: network, services, a GUI or external programs"
        if outcome.kept:
            kept.setdefault(outcome.name, outcome)
    if len(kept) > args.max:
        by_size = sorted(kept.values(), key=lambda o: (o.size, o.name))
        for o in by_size[args.max :]:
            o.reason = f"over-max: not among the {args.max} smallest kept sdists"
            del kept[o.name]
    lines = [
        f"{o.name}=={o.version} --hash=sha256:{o.sha256}"
        for o in sorted(kept.values(), key=lambda o: o.name)
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = header(args.candidates, args.max, args.first) + "\n".join(lines) + "\n"
    args.out.write_text(text, encoding="utf-8")

    survey = io.StringIO()
    survey.write("candidate\tname\tversion\tsdist_bytes\ttest_files\tresult\n")
    for o in sorted(outcomes, key=lambda o: normalize(o.candidate)):
        reason = o.reason.replace("\t", " ").replace("\n", " ")
        survey.write(
            f"{o.candidate}\t{o.name}\t{o.version}\t{o.size}\t{o.tests}\t{reason or 'kept'}\n"
        )
    args.survey.parent.mkdir(parents=True, exist_ok=True)
    args.survey.write_text(survey.getvalue(), encoding="utf-8")

    counts: dict[str, int] = {}
    for o in outcomes:
        if not o.kept:
            key = o.reason.split(":", 1)[0]
            counts[key] = counts.get(key, 0) + 1
    elapsed = time.monotonic() - started
    print(f"kept {len(kept)} of {len(candidates)} candidates -> {args.out}")
    for key, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  rejected {count:4d}  {key}")
    print(f"wall time {elapsed:.0f} s")
    return 0 if len(kept) >= args.min_kept else 1


if __name__ == "__main__":
    sys.exit(main())
