"""Run a repository's test suite in the FrogNano sandbox and print the report.

    python examples/python/run_tests.py [REPO_DIR]
"""

import sys
from pathlib import Path

import frognano


def main() -> int:
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "repos" / "textkit"
    sandbox = frognano.Sandbox()
    report = sandbox.run_tests(repo, timeout=120)
    for test in report.tests:
        print(f"{test.outcome:<8} {test.duration_s:8.4f}s  {test.id}")
    print(f"{report.outcome}: {report.passed} passed, {report.failed} failed, {report.errors} errors, "
          f"{report.skipped} skipped in {report.duration_s:.2f} s")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
