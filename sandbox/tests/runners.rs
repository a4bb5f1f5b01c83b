//! Projects whose declared runner is unittest run the suite unittest would run.

mod common;

use frognano_core::{RunOutcome, TestOutcome};
use frognano_sandbox::testing::write_repo;

/// A unittest suite as projects write them: a package of tests that turns warnings into
/// errors, with helpers pytest's own collection would take for tests.
const SUITE: &[(&str, &str)] = &[
    (
        "tests/__init__.py",
        "import warnings\n\nwarnings.simplefilter('error')\n",
    ),
    (
        "tests/test_words.py",
        "import unittest\n\n\n\
         class TestSuite:\n    \"\"\"A helper that builds cases, not a test.\"\"\"\n\n    \
         def __init__(self, words):\n        self.words = words\n\n\n\
         def test_data(name):\n    return name.upper()\n\n\n\
         class WordTests(unittest.TestCase):\n    \
         def test_upper(self):\n        self.assertEqual(test_data('a'), 'A')\n\n    \
         def test_suite_helper(self):\n        self.assertEqual(TestSuite(['x']).words, ['x'])\n",
    ),
];

#[test]
fn a_suite_run_with_unittest_is_collected_as_unittest_collects_it() {
    let tox = "[tox]\nenvlist = py3\n\n[testenv]\ncommands =\n    \
               coverage run -m unittest discover {toxinidir}/tests\n";
    let repo = write_repo(&[SUITE, &[("tox.ini", tox)]].concat());
    let report = common::run_clean(repo.path());
    assert_eq!(
        (report.outcome, report.passed, report.errors),
        (RunOutcome::Passed, 2, 0),
        "{:?}\n{}",
        report.detail,
        report.stdout
    );
    assert!(
        report
            .tests
            .iter()
            .all(|t| t.id.contains("::WordTests::") && t.outcome == TestOutcome::Passed),
        "{:?}",
        report.tests
    );

    // The same suite declared as a pytest project keeps pytest's collection: its helpers then
    // stop the run (what the unittest runner's projects used to get).
    let repo = write_repo(&[SUITE, &[("tox.ini", "[testenv]\ncommands = pytest\n")]].concat());
    let report = common::run_clean(repo.path());
    assert_ne!(report.outcome, RunOutcome::Passed, "{report:?}");
}

#[test]
fn suites_named_otherwise_than_pytests_patterns_are_collected() {
    // Run as `python -m unittest pkg.tests`: modules named for what they test, gathered by the
    // package's `__init__`.
    let repo = write_repo(&[
        ("pkg/__init__.py", "def double(x):\n    return 2 * x\n"),
        (
            "pkg/tests/__init__.py",
            "from .arithmetic import ArithmeticTest\nfrom .helpers import helper\n",
        ),
        ("pkg/tests/helpers.py", "def helper():\n    return 2\n"),
        (
            "pkg/tests/arithmetic.py",
            "import unittest\n\nfrom pkg import double\n\nfrom .helpers import helper\n\n\n\
             class ArithmeticTest(unittest.TestCase):\n    def test_double(self):\n        \
             self.assertEqual(double(helper()), 4)\n\n    \
             def test_zero(self):\n        self.assertEqual(double(0), 0)\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    let ids: Vec<&str> = report.tests.iter().map(|t| t.id.as_str()).collect();
    common::assert_passed(&report, 2);
    assert!(
        ids.iter()
            .all(|id| id.starts_with("pkg/tests/arithmetic.py::ArithmeticTest::")),
        "{ids:?}"
    );

    // Tests written as doctests in a test module.
    let repo = write_repo(&[
        (
            "art/__init__.py",
            "def shout(s):\n    return s.upper() + '!'\n",
        ),
        ("art/tests/__init__.py", ""),
        (
            "art/tests/test.py",
            "\"\"\"\n>>> from art import shout\n>>> shout('hi')\n'HI!'\n\"\"\"\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    common::assert_passed(&report, 1);
}
