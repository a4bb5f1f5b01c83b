"""FrogNano's adaptations to a pytest and a Python newer than most suites were written for,
applied when the guest's pytest plugin loads (`apply`), before pytest reads its configuration.
Each is a no-op where what it restores exists, and a failure to apply one is reported on
stderr and leaves pytest as it was.

- private pytest names conftests still import (`_pytest.monkeypatch.notset`);
- `required_plugins` naming a plugin the sandbox leaves out and stands in for;
- `TestCase` classes that reject pytest's `runTest` placeholder (unittest2's);
- in the sandbox only: a warning filter naming a class from a module that cannot be imported
  there matches nothing.
"""

import re
import sys


def _filters_naming_absent_modules_match_nothing():
    """A warning filter whose category lives in a module that cannot be imported here (trio,
    left out because it cannot run in WASI) made pytest warn "Failed to import filter module"
    while applying the filters; under an earlier `error` filter that warning became an error in
    every test. Such a filter now names a category no code raises, so it matches nothing: the
    module's own warnings cannot occur where the module cannot be imported."""
    from _pytest import config as pytest_config
    from _pytest import warnings as pytest_warnings

    parse = pytest_config.parse_warning_filter
    if getattr(parse, "_frognano", False):
        return

    class _NeverRaised(Warning):
        """The category of a filter whose own category could not be imported."""

    def parse_warning_filter(arg, *, escape):
        try:
            return parse(arg, escape=escape)
        except ImportError:
            action, message, _category, module, lineno = parse(
                _without_category(arg), escape=escape)
            return action, message, _NeverRaised, module, lineno

    parse_warning_filter._frognano = True
    pytest_config.parse_warning_filter = parse_warning_filter
    pytest_warnings.parse_warning_filter = parse_warning_filter


def _without_category(arg):
    """`arg` (`action:message:category:module:line`) with its category field emptied."""
    parts = arg.split(":")
    if len(parts) > 2:
        parts[2] = ""
    return ":".join(parts)


def _names_pytest_9_removed():
    """Private names of pytest that conftests import and pytest 9 renamed: flask's conftest
    reads `_pytest.monkeypatch.notset`, now `_pytest.compat.NOTSET`."""
    from _pytest import compat, monkeypatch

    if not hasattr(monkeypatch, "notset") and hasattr(compat, "NOTSET"):
        monkeypatch.notset = compat.NOTSET


def _required_plugins_the_sandbox_stands_in_for(absent_distributions):
    """A project's `required_plugins` naming a plugin the sandbox leaves out and stands in for
    (pytest-timeout, pytest-xdist, pytest-cov: the sandbox's budget, one process) stopped the
    run with "Missing required plugins". Those names leave the check; any other missing plugin
    is still reported."""
    from _pytest.config import Config

    validate = Config._validate_plugins
    if getattr(validate, "_frognano", False):
        return

    def _validate_plugins(self):
        absent = absent_distributions()
        getini = self.getini

        def getini_without_absent(name):
            value = getini(name)
            if name == "required_plugins":
                value = [r for r in value if _requirement_name(r) not in absent]
            return value

        self.getini = getini_without_absent
        try:
            return validate(self)
        finally:
            del self.getini

    _validate_plugins._frognano = True
    Config._validate_plugins = _validate_plugins


def _requirement_name(requirement):
    """The normalised distribution name a requirement string starts with."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else requirement


def _test_cases_that_reject_run_test_still_collect():
    """pytest 8 and later make a placeholder instance of each `TestCase` class as
    `cls("runTest")`, which the standard library's `TestCase` accepts. Test cases built on
    unittest2 (deprecation, funcsigs, jaydebeapi) or on a base whose constructor checks the
    name reject it, and every class failed at collection ("no such test method ...: runTest").
    Such a class now gets its placeholder from its first test method (a base class with none,
    an instance whose constructor did not run)."""
    from _pytest.unittest import UnitTestCase

    newinstance = UnitTestCase.newinstance
    if getattr(newinstance, "_frognano", False):
        return

    def placeholder(self):
        try:
            return newinstance(self)
        except ValueError as exc:
            if "runTest" not in str(exc):
                raise
            import unittest

            names = unittest.TestLoader().getTestCaseNames(self.obj)
            if names:
                return self.obj(names[0])
            # A base class with no tests: pytest only reads its fixtures off the placeholder.
            return self.obj.__new__(self.obj)

    placeholder._frognano = True
    UnitTestCase.newinstance = placeholder


def apply(in_sandbox, absent_distributions):
    """Applies the adaptations: `absent_distributions()` gives the normalised names of the
    plugins the sandbox stands in for; `in_sandbox` adds those only the sandbox needs."""
    adaptations = [(_names_pytest_9_removed, ()),
                   (_required_plugins_the_sandbox_stands_in_for, (absent_distributions,)),
                   (_test_cases_that_reject_run_test_still_collect, ())]
    if in_sandbox:
        adaptations.append((_filters_naming_absent_modules_match_nothing, ()))
    for adapt, args in adaptations:
        try:
            adapt(*args)
        except Exception as exc:  # another pytest's internals: the session still works
            sys.stderr.write("frognano: the compatibility adaptation %s was not applied (%s: %s)\n"
                             % (adapt.__name__.lstrip("_"), type(exc).__name__, exc))
