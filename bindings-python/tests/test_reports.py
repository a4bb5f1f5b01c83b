import json

import pytest

import frognano


def test_sample_repo_passes_with_typed_per_test_results(sandbox, sample_repo):
    report = sandbox.run_tests(sample_repo)
    assert isinstance(report, frognano.TestReport)
    assert report.outcome == "passed" and report.ok
    assert report.failed == 0 and report.errors == 0
    assert report.passed == len(report.tests) >= 40
    first = report.tests[0]
    assert isinstance(first, frognano.TestResult)
    assert first.outcome == "passed" and "::" in first.id and first.duration_s >= 0
    as_dict = report.to_dict()
    assert as_dict["outcome"] == "passed" and len(as_dict["tests"]) == report.passed
    assert json.loads(report.to_json())["passed"] == report.passed


def test_failures_errors_and_selection(sandbox, make_repo):
    repo = make_repo(
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "tests/test_calc.py": """
                import pytest
                from calc import add

                def test_add():
                    assert add(2, 2) == 4

                def test_zero():
                    assert add(0, 0) == 0

                @pytest.mark.skip(reason="later")
                def test_skipped():
                    pass
            """,
        }
    )
    report = sandbox.run_tests(repo)
    assert report.outcome == "failed" and not report.ok
    assert (report.passed, report.failed, report.skipped) == (1, 1, 1)
    failed = [t for t in report.tests if t.outcome == "failed"]
    assert failed[0].id == "tests/test_calc.py::test_add"
    assert "assert 0 == 4" in failed[0].message
    only = sandbox.run_tests(repo, ["-k", "zero"])
    assert [t.id for t in only.tests] == ["tests/test_calc.py::test_zero"]


def test_limits_are_report_values_not_exceptions(sandbox, make_repo):
    spin = make_repo({"test_spin.py": "def test_first():\n    pass\n\ndef test_spin():\n    while True:\n        pass\n"})
    report = sandbox.run_tests(spin, timeout=1.5)
    assert report.outcome == "timeout"
    assert [t.id for t in report.tests] == ["test_spin.py::test_first"]
    assert "limit" in report.detail
    assert report.interrupted == "test_spin.py::test_spin"


def test_memory_and_output_caps(sandbox, make_repo):
    bomb = make_repo({"test_bomb.py": "def test_bomb():\n    x = []\n    while True:\n        x.append(bytearray(10**7))\n"})
    assert sandbox.run_tests(bomb, memory_mb=200).outcome == "memory_exceeded"


def test_run_many_keeps_order(sandbox, sample_repo, make_repo):
    failing = make_repo({"test_f.py": "def test_f():\n    assert False\n"})
    reports = sandbox.run_tests_many([sample_repo, failing, sample_repo])
    assert [r.outcome for r in reports] == ["passed", "failed", "passed"]


def test_sharded_runs_match_and_reports_carry_a_profile(sandbox, sample_repo):
    single = sandbox.run_tests(sample_repo)
    sharded = sandbox.run_tests(sample_repo, shards=2)
    assert [(t.id, t.outcome) for t in sharded.tests] == [(t.id, t.outcome) for t in single.tests]
    assert sharded.outcome == single.outcome == "passed"
    profile = sharded.profile
    assert profile["shards"] == 2 and profile["tests"] == len(single.tests)
    assert single.profile["shards"] == 1 and single.profile["collection_s"] > 0
    assert single.to_dict()["profile"] == single.profile
    with pytest.raises(frognano.InvalidArgumentError):
        sandbox.run_tests(sample_repo, shards=0)
