#!/usr/bin/env python3
"""Generate ``sample.jsonl``: hand-written bug-fix tasks over the sample repos.

This script is the provenance of the hand-made tasks in ``sample.jsonl``.
Every task is written down below (``BUGS``) as a set of exact text
replacements applied to one of the clean repositories in ``examples/repos``
together with a problem statement phrased the way a user would report the
symptom.  Nothing is generated at random: the script only *validates* each
bug and derives the rest of the record from real test runs.

For every bug the script

1. copies the clean repository to a temporary directory and runs its whole
   pytest suite there (every test must pass);
2. applies the replacements (each ``old`` snippet must occur exactly once in
   its file) and runs the suite again;
3. computes ``fail_to_pass`` (passed clean, did not pass with the bug) and
   ``pass_to_pass`` (passed in both runs), using pytest node ids relative to
   the repository root, and fails loudly if either list is empty;
4. renders the bug as a unified diff (``--- a/<path>`` / ``+++ b/<path>``,
   3 lines of context, one per-file diff per changed file, in path order).

The records are written to ``sample.jsonl`` next to this script, one JSON
object per line, and a summary table is printed.  The repositories under
``examples/repos`` are never modified and no ``__pycache__`` or
``.pytest_cache`` is left behind.

Re-run from the repository root with::

    python3 examples/tasks/make_sample_tasks.py

Requirements: Python 3.9+ and pytest (invoked as ``python3 -m pytest``).
"""

import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPOS_DIR = os.path.normpath(os.path.join(HERE, "..", "repos"))
OUTPUT = os.path.join(HERE, "sample.jsonl")


def bug(task_id, repo, edits, problem_statement, duplicated_buggy_line=False):
    """One hand-written bug.

    ``edits`` is a list of ``(path, old, new)`` replacements; ``path`` is
    relative to the repository root.  ``duplicated_buggy_line`` marks tasks
    whose introduced line(s) also occur verbatim elsewhere in the same file
    (so a fix must anchor on surrounding context); the script checks it.
    """
    return {
        "id": task_id,
        "repo": repo,
        "edits": edits,
        "problem_statement": problem_statement.strip(),
        "duplicated_buggy_line": duplicated_buggy_line,
    }


BUGS = [
    # ------------------------------------------------------------------ tinyparse
    bug(
        "tinyparse-interpolation-depth-001",  # wrong comparison operator
        "tinyparse",
        [(
            "tinyparse/config.py",
            "        if depth > _MAX_INTERPOLATION_DEPTH:\n",
            "        if depth >= _MAX_INTERPOLATION_DEPTH:\n",
        )],
        """
Config interpolation gives up one level too early

A chain of `${...}` references that is exactly ten levels deep is rejected.
With a section like

    [c]
    k0 = end
    k1 = ${k0}
    ...
    k10 = ${k9}

`cfg.get("c", "k10")` raises `ConfigError: interpolation too deep in section 'c'`
instead of returning "end". The interpolation depth limit is 10, so a chain of
ten references should still resolve; only an eleventh level (or a real reference
loop) should be refused.
""",
    ),
    bug(
        "tinyparse-config-line-numbers-002",  # off-by-one in a range
        "tinyparse",
        [(
            "tinyparse/config.py",
            "    for lineno, line in enumerate(text.splitlines(), start=1):\n",
            "    for lineno, line in enumerate(text.splitlines(), start=0):\n",
        )],
        """
parse_config reports the wrong line number in ParseError

The line numbers attached to configuration parse errors are off. For example

    parse_config("[a]\\nkey = 1\\nkey = 2\\n")

raises `ParseError: duplicate key 'key' (at 2)` and `error.position == 2`, but
the duplicate key is on line 3. Likewise `parse_config("[a\\n")` reports an
unterminated section header at line 0. `ParseError.position` is documented as the
one-based line number for config files.
""",
    ),
    bug(
        "tinyparse-round-digits-003",  # swapped arguments
        "tinyparse",
        [(
            "tinyparse/expr.py",
            "            return func(values[0], int(values[1]))\n",
            "            return func(int(values[1]), values[0])\n",
        )],
        """
round() with a number of digits does not work in expressions

The one-argument form works (`evaluate("round(7.5)")` gives 8), but asking for a
number of digits fails:

    >>> evaluate("round(2.567, 2)")
    TypeError: 'float' object cannot be interpreted as an integer

Expected 2.57. `evaluate("round(3.14159, 1 + 1.0)")` should give 3.14 (the
digits argument may be any expression that evaluates to a whole number).
""",
    ),
    bug(
        "tinyparse-modulo-operator-004",  # spans two files
        "tinyparse",
        [
            (
                "tinyparse/tokenizer.py",
                '_ONE_CHAR_OPS = "+-*/%^"\n',
                '_ONE_CHAR_OPS = "+-*/^"\n',
            ),
            (
                "tinyparse/expr.py",
                '        while self.check_op("*", "/", "//", "%"):\n',
                '        while self.check_op("*", "/", "//"):\n',
            ),
        ],
        """
The % (modulo) operator is no longer accepted in expressions

The expression grammar lists `%` next to `*`, `/` and `//`, but any expression
that uses it fails before evaluation:

    >>> evaluate("17 % 5")
    ParseError: unexpected character '%' (at 3)

Expected 2. Likewise `evaluate("2 * 3 % 4")` should be 2 and `evaluate("5 % 0")`
should raise `EvaluationError("modulo by zero")` rather than a ParseError.
""",
    ),
    # ------------------------------------------------------------------ ordstructs
    bug(
        "ordstructs-floor-higher-001",  # two hunks in one file
        "ordstructs",
        [
            (
                "src/ordstructs/sortedlist.py",
                '        """Largest element <= value, or None."""\n'
                "        i = bisect_right(self._items, value)\n",
                '        """Largest element <= value, or None."""\n'
                "        i = bisect_left(self._items, value)\n",
            ),
            (
                "src/ordstructs/sortedlist.py",
                '        """Smallest element strictly > value, or None."""\n'
                "        i = bisect_right(self._items, value)\n",
                '        """Smallest element strictly > value, or None."""\n'
                "        i = bisect_left(self._items, value)\n",
            ),
        ],
        """
SortedList.floor() and SortedList.higher() are wrong when the value is present

When the queried value is itself in the list, two of the neighbour queries
return the wrong element:

    >>> s = SortedList([1, 3, 3, 5, 7, 9, 11])
    >>> s.floor(3)      # expected 3 (largest element <= 3)
    1
    >>> s.higher(3)     # expected 5 (smallest element strictly > 3)
    3
    >>> s.floor(1)      # expected 1
    None

For values that are not in the list both methods give the right answer, and
`lower()`, `ceiling()` and `rank()` behave correctly in all cases.
""",
        duplicated_buggy_line=True,
    ),
    bug(
        "ordstructs-heap-increase-key-002",  # buggy line duplicated in the file
        "ordstructs",
        [(
            "src/ordstructs/heap.py",
            "        elif priority > old:\n"
            "            self._sift_down(pos)\n",
            "        elif priority > old:\n"
            "            self._sift_up(pos)\n",
        )],
        """
PriorityQueue.update() breaks the queue when a priority is increased

Lowering an item's priority with `update()` works, but raising it leaves the
heap out of order:

    pq = PriorityQueue()
    for item, p in [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]:
        pq.push(item, p)
    pq.update("a", 10)
    pq.is_valid()   # False
    pq.drain()      # ['a', 'b', 'c', 'd', 'e'], expected ['b', 'c', 'd', 'e', 'a']

The docstring says update() changes the priority "either direction", so the item
should be popped according to its new priority.
""",
        duplicated_buggy_line=True,
    ),
    bug(
        "ordstructs-empty-pop-error-003",  # spans two files
        "ordstructs",
        [
            (
                "src/ordstructs/heap.py",
                '            raise IndexError("pop from empty queue")\n',
                '            raise ValueError("pop from empty queue")\n',
            ),
            (
                "src/ordstructs/sortedlist.py",
                '            raise IndexError("pop from empty SortedList")\n',
                '            raise ValueError("pop from empty SortedList")\n',
            ),
        ],
        """
pop() on an empty container raises the wrong exception type

Both `PriorityQueue().pop()` and `SortedList().pop()` raise `ValueError` when the
container is empty. Code written against the usual Python convention
(`list.pop()` on an empty list, and `PriorityQueue.peek()` on an empty queue,
raise `IndexError`) does not catch it:

    try:
        item = queue.pop()
    except IndexError:
        item = None          # never reached, ValueError escapes

Popping from an empty PriorityQueue or SortedList should raise IndexError.
""",
    ),
    bug(
        "ordstructs-lru-pop-default-004",  # wrong return value
        "ordstructs",
        [(
            "src/ordstructs/lru.py",
            "                raise KeyError(key)\n"
            "            return default\n",
            "                raise KeyError(key)\n"
            "            return None\n",
        )],
        """
LRUCache.pop() ignores the default for a missing key

`pop(key, default)` is meant to behave like `dict.pop`: return the default when
the key is absent. Instead it always returns None:

    >>> cache = LRUCache(3)
    >>> cache.pop("missing", "gone")
    None        # expected 'gone'

Popping an existing key and `pop(missing)` without a default (KeyError) work as
expected.
""",
    ),
    # ------------------------------------------------------------------ textkit
    bug(
        "textkit-roman-upper-bound-001",  # wrong constant
        "textkit",
        [(
            "textkit/roman.py",
            "    if number < 1 or number > 3999:\n",
            "    if number < 1 or number > 4999:\n",
        )],
        """
to_roman() accepts numbers above 3999

Roman numerals are documented to cover 1..3999, and `to_roman(0)` and
`to_roman(-1)` correctly raise ValueError, but

    >>> to_roman(4000)
    'MMMM'

returns a non-standard numeral instead of raising ValueError (which
`from_roman("MMMM")` then refuses to parse back).
""",
    ),
    bug(
        "textkit-acronym-split-002",  # removed condition
        "textkit",
        [(
            "textkit/case.py",
            "                (ch.isupper() and prev.islower())\n"
            "                or (ch.isupper() and prev.isupper() and nxt.islower())\n"
            "                or (ch.isdigit() != prev.isdigit())\n",
            "                (ch.isupper() and prev.islower())\n"
            "                or (ch.isdigit() != prev.isdigit())\n",
        )],
        """
Acronyms followed by a capitalised word are no longer split

`split_words` (and every converter built on it) glues an acronym to the word
that follows it:

    >>> split_words("HTTPServerError")
    ['httpserver', 'error']          # expected ['http', 'server', 'error']
    >>> to_snake("parseHTTPResponse")
    'parse_httpresponse'             # expected 'parse_http_response'
    >>> to_camel("XMLHttpRequest")
    'xmlhttpRequest'                 # expected 'xmlHttpRequest'

An acronym at the end of a name (`parseHTTP` -> ['parse', 'http']) and plain
camelCase names still work.
""",
    ),
    bug(
        "textkit-levenshtein-cutoff-003",  # two hunks in one file, wrong return value
        "textkit",
        [
            (
                "textkit/distance.py",
                "    if max_distance is not None and len(a) - len(b) > max_distance:\n"
                "        return max_distance + 1\n",
                "    if max_distance is not None and len(a) - len(b) > max_distance:\n"
                "        return max_distance\n",
            ),
            (
                "textkit/distance.py",
                "        if max_distance is not None and min(current) > max_distance:\n"
                "            return max_distance + 1\n",
                "        if max_distance is not None and min(current) > max_distance:\n"
                "            return max_distance\n",
            ),
        ],
        """
levenshtein() with max_distance cannot tell "over the limit" from "at the limit"

The docstring promises that when the distance exceeds `max_distance` the
result says so (it should be larger than the cutoff), so callers can tell the
limit was exceeded. Instead the cutoff itself is returned, which looks like a
genuine match at exactly that distance:

    >>> levenshtein("kitten", "sitting", max_distance=2)   # true distance 3
    2
    >>> levenshtein("a", "abcdef", max_distance=4)         # true distance 5
    4

Without `max_distance`, and when the distance is within the limit, the results
are correct.
""",
    ),
    bug(
        "textkit-wrap-long-words-004",  # off-by-one in a slice
        "textkit",
        [(
            "textkit/wrap.py",
            "            word = word[width:]\n",
            "            word = word[width + 1:]\n",
        )],
        """
wrap() loses characters when it splits a long word

When a word is longer than `width` and `break_long_words` is on (the default),
the pieces do not add up to the original word:

    >>> wrap("ab abcdefghij cd", 4)
    ['ab', 'abcd', 'fghi', ' cd']    # expected ['ab', 'abcd', 'efgh', 'ij', 'cd']
    >>> wrap("ab c", 1)
    ['a', '', 'c']                   # expected ['a', 'b', 'c']

Wrapping text whose words all fit in `width` is unaffected.
""",
    ),
]


# --------------------------------------------------------------------------
# pytest plumbing

# A tiny pytest plugin that records the outcome of every test phase by node id.
_PLUGIN_SOURCE = '''\
import json
import os

_RESULTS = {"tests": {}, "collect_errors": []}


def pytest_runtest_logreport(report):
    phases = _RESULTS["tests"].setdefault(report.nodeid, {})
    phases[report.when] = report.outcome


def pytest_collectreport(report):
    if report.failed:
        _RESULTS["collect_errors"].append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["SAMPLE_TASKS_RESULTS"], "w") as fh:
        json.dump(_RESULTS, fh)
'''
_PLUGIN_NAME = "_sample_tasks_outcomes"


def run_suite(repo_dir, work_dir):
    """Run the whole suite in ``repo_dir``.

    Returns ``(passed_ids, all_ids, returncode, output, collect_error_ids)``.

    A test counts as passed when its call phase passed and neither setup nor
    teardown failed.  Node ids are exactly as pytest reports them with the
    repository root as rootdir.
    """
    plugin_dir = os.path.join(work_dir, "plugin")
    os.makedirs(plugin_dir, exist_ok=True)
    with open(os.path.join(plugin_dir, _PLUGIN_NAME + ".py"), "w") as fh:
        fh.write(_PLUGIN_SOURCE)
    results_path = os.path.join(work_dir, "results.json")
    if os.path.exists(results_path):
        os.remove(results_path)
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = plugin_dir
    env["SAMPLE_TASKS_RESULTS"] = results_path
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    cmd = [
        sys.executable, "-m", "pytest",
        "-p", "no:cacheprovider", "-p", _PLUGIN_NAME,
        "-q", "--rootdir", repo_dir,
    ]
    proc = subprocess.run(
        cmd, cwd=repo_dir, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, universal_newlines=True, timeout=600,
    )
    if not os.path.exists(results_path):
        raise SystemExit("pytest produced no results in %s:\n%s" % (repo_dir, proc.stdout))
    with open(results_path) as fh:
        results = json.load(fh)
    passed = set()
    for nodeid, phases in results["tests"].items():
        if phases.get("call") == "passed" and "failed" not in phases.values():
            passed.add(nodeid)
    return passed, set(results["tests"]), proc.returncode, proc.stdout, results["collect_errors"]


# --------------------------------------------------------------------------
# bug application and diffs

def read_text(path):
    with open(path, encoding="utf-8", newline="") as fh:
        return fh.read()


def write_text(path, text):
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def apply_edits(repo_dir, task):
    """Apply the task's replacements in ``repo_dir``; return ``{path: (clean, buggy)}``."""
    changed = {}
    for path, old, new in task["edits"]:
        full = os.path.join(repo_dir, *path.split("/"))
        text = read_text(full)
        changed.setdefault(path, (text, None))
        occurrences = text.count(old)
        if occurrences != 1:
            raise SystemExit(
                "%s: snippet for %s occurs %d times (must be exactly once):\n%s"
                % (task["id"], path, occurrences, old)
            )
        if old == new:
            raise SystemExit("%s: replacement for %s is a no-op" % (task["id"], path))
        text = text.replace(old, new, 1)
        write_text(full, text)
        changed[path] = (changed[path][0], text)
    return changed


def file_diff(path, clean, buggy):
    for label, text in (("clean", clean), ("buggy", buggy)):
        if not text.endswith("\n"):
            raise SystemExit("%s (%s) does not end with a newline" % (path, label))
    return "".join(difflib.unified_diff(
        clean.splitlines(keepends=True),
        buggy.splitlines(keepends=True),
        fromfile="a/" + path,
        tofile="b/" + path,
        n=3,
    ))


def check_duplicated_lines(task, changed):
    """Every line the bug introduces must also occur elsewhere in its file."""
    for path, (clean, buggy) in changed.items():
        clean_lines = clean.splitlines()
        buggy_lines = buggy.splitlines()
        matcher = difflib.SequenceMatcher(a=clean_lines, b=buggy_lines, autojunk=False)
        for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            for line in buggy_lines[j1:j2]:
                if buggy_lines.count(line) < 2:
                    raise SystemExit(
                        "%s: introduced line %r in %s is not duplicated in the file"
                        % (task["id"], line, path)
                    )


def copy_repo(name, dest):
    shutil.copytree(
        os.path.join(REPOS_DIR, name), dest,
        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.egg-info", "*.pyc"),
    )


def build_record(task, work_root):
    repo = task["repo"]
    work_dir = os.path.join(work_root, task["id"])
    repo_dir = os.path.join(work_dir, repo)
    os.makedirs(work_dir)
    copy_repo(repo, repo_dir)

    clean_passed, clean_all, rc, output, errors = run_suite(repo_dir, work_dir)
    if rc != 0 or errors or clean_passed != clean_all or not clean_passed:
        raise SystemExit("%s: clean suite of %s does not pass:\n%s" % (task["id"], repo, output))

    changed = apply_edits(repo_dir, task)
    if task["duplicated_buggy_line"]:
        check_duplicated_lines(task, changed)

    buggy_passed, _buggy_all, rc, output, _errors = run_suite(repo_dir, work_dir)
    fail_to_pass = sorted(clean_passed - buggy_passed)
    pass_to_pass = sorted(clean_passed & buggy_passed)
    if rc == 0 or not fail_to_pass:
        raise SystemExit("%s: the bug makes no test fail:\n%s" % (task["id"], output))
    if not pass_to_pass:
        raise SystemExit("%s: the bug leaves no passing test:\n%s" % (task["id"], output))

    files = sorted(changed)
    patch = "".join(file_diff(path, *changed[path]) for path in files)
    hunks = sum(1 for line in patch.splitlines() if line.startswith("@@ "))
    repo_path = os.path.relpath(os.path.join(REPOS_DIR, repo), HERE).replace(os.sep, "/")
    return {
        "id": task["id"],
        "repo": {"kind": "path", "path": repo_path},
        "bug_patch": patch,
        "problem_statement": task["problem_statement"],
        "fail_to_pass": fail_to_pass,
        "pass_to_pass": pass_to_pass,
        "metadata": {"source": "hand-written", "files": files, "hunks": hunks},
    }


def main():
    ids = [task["id"] for task in BUGS]
    if len(set(ids)) != len(ids):
        raise SystemExit("duplicate task ids")
    records = []
    with tempfile.TemporaryDirectory(prefix="sample-tasks-") as work_root:
        for task in BUGS:
            records.append(build_record(task, work_root))
    with open(OUTPUT, "w", encoding="utf-8", newline="\n") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")

    header = ("id", "#F2P", "#P2P", "files")
    rows = [
        (r["id"], str(len(r["fail_to_pass"])), str(len(r["pass_to_pass"])),
         ", ".join(r["metadata"]["files"]))
        for r in records
    ]
    widths = [max(len(row[i]) for row in [header] + rows) for i in range(3)]
    line = "%-*s  %*s  %*s  %s"
    print(line % (widths[0], header[0], widths[1], header[1], widths[2], header[2], header[3]))
    for row in rows:
        print(line % (widths[0], row[0], widths[1], row[1], widths[2], row[2], row[3]))
    print("wrote %d tasks to %s" % (len(records), os.path.relpath(OUTPUT)))


if __name__ == "__main__":
    main()
