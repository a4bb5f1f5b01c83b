//! Tests that need what WebAssembly (WASI) lacks are told apart by cause, fd-level capture
//! cannot break the tests after it, and a run pytest ends early says why.

use std::collections::BTreeMap;

use frognano_core::{RunOutcome, TestOutcome, TestReport};
use frognano_sandbox::TestRequest;
use frognano_sandbox::testing::{shared_sandbox, write_repo};

fn run(files: &[(&str, &str)]) -> TestReport {
    run_with(files, &[])
}

fn run_with(files: &[(&str, &str)], pytest_args: &[&str]) -> TestReport {
    let repo = write_repo(files);
    let request = TestRequest {
        pytest_args: pytest_args.iter().map(|a| a.to_string()).collect(),
        ..TestRequest::default()
    };
    shared_sandbox()
        .run_tests(repo.path(), &request)
        .expect("run")
}

/// Asserts that the run passed with `count` passing tests.
fn assert_all_passed(report: &TestReport, count: usize) {
    assert_eq!(report.outcome, RunOutcome::Passed, "{:?}", report.tests);
    assert_eq!(report.passed, count);
}

/// `id -> (outcome, platform label)` of every test of `report`.
fn outcomes(report: &TestReport) -> BTreeMap<String, (TestOutcome, Option<String>)> {
    report
        .tests
        .iter()
        .map(|t| (t.id.clone(), (t.outcome, t.platform.clone())))
        .collect()
}

const PLATFORM_TESTS: &str = r#"import os
import signal
import socket
import subprocess
import threading
import unittest
from concurrent.futures import ThreadPoolExecutor

import pytest


def test_thread():
    threading.Thread(target=print).start()


def test_thread_pool_wrapped():
    try:
        with ThreadPoolExecutor(2) as pool:
            pool.submit(print).result()
    except RuntimeError as exc:
        raise ValueError("worker pool unavailable") from exc


def test_socket_connect():
    socket.socket().connect(("127.0.0.1", 9))


def test_socket_server():
    import socketserver
    socketserver.TCPServer(("127.0.0.1", 0), None)


def test_subprocess():
    subprocess.run(["echo", "hi"], check=True)


def test_umask():
    os.umask(0o022)


def test_the_process_has_a_user():
    import getpass
    import pwd
    assert os.getuid() == os.geteuid() != 0
    assert pwd.getpwuid(os.getuid()).pw_name == getpass.getuser()
    with pytest.raises(KeyError):
        pwd.getpwnam("nobody-here")


def test_import_of_what_os_lacks():
    from os import umask  # noqa: F401


def test_alarm():
    signal.alarm(1)


def test_ssl_contexts_are_made_and_configured():
    import ssl
    context = ssl.create_default_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["h2", "http/1.1"])
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with pytest.raises(FileNotFoundError):
        context.load_verify_locations("no-such-bundle.pem")


def test_the_user_is_named():
    import getpass
    assert getpass.getuser()


def test_ssl():
    import ssl
    context = ssl.create_default_context()
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.org")


def test_asyncio_runs_coroutines_tasks_and_timers():
    import asyncio

    async def main():
        queue = asyncio.Queue()
        await queue.put(1)
        task = asyncio.create_task(asyncio.sleep(0.01, result=2))
        try:
            await asyncio.wait_for(asyncio.sleep(5), 0.01)
        except TimeoutError:
            pass
        return await queue.get() + await task

    assert asyncio.run(main()) == 3


class AsyncCase(unittest.IsolatedAsyncioTestCase):
    async def test_awaits(self):
        import asyncio

        self.assertEqual(await asyncio.sleep(0, result=4), 4)


def test_asyncio_to_thread():
    import asyncio

    async def main():
        loop = asyncio.get_running_loop()
        assert await asyncio.to_thread(sum, [1, 2]) == 3
        assert await loop.run_in_executor(None, pow, 2, 5) == 32
        with pytest.raises(ZeroDivisionError):
            await loop.run_in_executor(None, divmod, 1, 0)

    asyncio.run(main())


def test_asyncio_with_an_explicit_thread_pool():
    import asyncio

    async def main():
        with ThreadPoolExecutor() as pool:
            await asyncio.get_running_loop().run_in_executor(pool, print)

    asyncio.run(main())


@pytest.fixture
def child():
    return subprocess.Popen(["sleep", "1"])


def test_fixture_needs_a_process(child):
    assert child.wait() == 0


def test_ordinary_assertion():
    assert 1 + 1 == 3


def test_ordinary_error():
    raise ValueError("not a platform gap")


def test_missing_file():
    open("/no/such/file")


def test_attribute_of_an_object():
    class Thing:
        pass

    Thing().umask


def test_handled_gap_then_assertion():
    try:
        os.umask(0o022)
    except AttributeError:
        pass
    assert "umask" == "mask"


def test_expected_gap():
    with pytest.raises(OSError):
        socket.socket().connect(("127.0.0.1", 9))


def test_passes():
    assert sum([1, 2]) == 3


@pytest.mark.skip(reason="never runs")
def test_skipped():
    os.umask(0)
"#;

#[test]
fn platform_failures_are_labelled_by_cause_and_ordinary_failures_are_not() {
    let report = run_with(
        &[
            ("tests/test_platform.py", PLATFORM_TESTS),
            (
                "tests/test_import_gap.py",
                "import termios\n\n\ndef test_x():\n    pass\n",
            ),
            // CPython's own test helpers are not in the image's standard library.
            (
                "tests/test_cpython_helpers.py",
                "from test.support import os_helper\n\n\ndef test_x():\n    pass\n",
            ),
        ],
        &["--continue-on-collection-errors"],
    );
    assert_eq!(report.outcome, RunOutcome::Failed, "{report:?}");
    let got = outcomes(&report);
    let id = |name: &str| format!("tests/test_platform.py::{name}");
    let expect: &[(&str, TestOutcome, Option<&str>)] = &[
        ("test_thread", TestOutcome::Failed, Some("threads")),
        (
            "test_thread_pool_wrapped",
            TestOutcome::Failed,
            Some("threads"),
        ),
        ("test_socket_connect", TestOutcome::Failed, Some("sockets")),
        ("test_socket_server", TestOutcome::Failed, Some("sockets")),
        ("test_subprocess", TestOutcome::Failed, Some("subprocesses")),
        ("test_umask", TestOutcome::Failed, Some("os.umask")),
        ("test_the_process_has_a_user", TestOutcome::Passed, None),
        (
            "test_import_of_what_os_lacks",
            TestOutcome::Failed,
            Some("os.umask"),
        ),
        ("test_alarm", TestOutcome::Failed, Some("signals")),
        ("test_ssl", TestOutcome::Failed, Some("ssl")),
        ("test_the_user_is_named", TestOutcome::Passed, None),
        (
            "test_ssl_contexts_are_made_and_configured",
            TestOutcome::Passed,
            None,
        ),
        (
            "test_asyncio_runs_coroutines_tasks_and_timers",
            TestOutcome::Passed,
            None,
        ),
        ("AsyncCase::test_awaits", TestOutcome::Passed, None),
        ("test_asyncio_to_thread", TestOutcome::Passed, None),
        (
            "test_asyncio_with_an_explicit_thread_pool",
            TestOutcome::Failed,
            Some("threads"),
        ),
        (
            "test_fixture_needs_a_process",
            TestOutcome::Error,
            Some("subprocesses"),
        ),
        ("test_ordinary_assertion", TestOutcome::Failed, None),
        ("test_ordinary_error", TestOutcome::Failed, None),
        ("test_missing_file", TestOutcome::Failed, None),
        ("test_attribute_of_an_object", TestOutcome::Failed, None),
        ("test_handled_gap_then_assertion", TestOutcome::Failed, None),
        ("test_expected_gap", TestOutcome::Passed, None),
        ("test_passes", TestOutcome::Passed, None),
        ("test_skipped", TestOutcome::Skipped, None),
    ];
    for (name, outcome, label) in expect {
        let (got_outcome, got_label) = got
            .get(&id(name))
            .unwrap_or_else(|| panic!("{name} did not run: {got:?}"));
        assert_eq!(
            (got_outcome, got_label.as_deref()),
            (outcome, *label),
            "{name}: {:?}",
            report.test(&id(name)).and_then(|t| t.message.as_deref())
        );
    }
    // A test module that imports what the platform lacks errors at collection, labelled.
    let module = report
        .test("tests/test_import_gap.py")
        .expect("collection error");
    assert_eq!(module.outcome, TestOutcome::Error);
    assert_eq!(module.platform.as_deref(), Some("termios"));
    let module = report
        .test("tests/test_cpython_helpers.py")
        .expect("collection error");
    assert_eq!(module.platform.as_deref(), Some("test.support"));

    let counts = report.platform_failures();
    let expected: BTreeMap<String, usize> = [
        ("threads", 3),
        ("sockets", 2),
        ("subprocesses", 2),
        ("os.umask", 2),
        ("signals", 1),
        ("ssl", 1),
        ("termios", 1),
        ("test.support", 1),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(counts, expected);
    // The label rides along in the report's JSON, and only on the tests that have one.
    let json = serde_json::to_value(&report).expect("json");
    let tests = json["tests"].as_array().expect("tests");
    let labelled = tests.iter().filter(|t| t.get("platform").is_some()).count();
    assert_eq!(labelled, expected.values().sum::<usize>());
}

#[test]
fn fd_level_capture_breaks_no_later_test() {
    let later = r#"import logging
import sys

import pytest


@pytest.mark.parametrize("i", range(25))
def test_prints(i):
    print("line", i)
    sys.stderr.write("to stderr\n")


def test_capsys(capsys):
    print("captured")
    assert capsys.readouterr().out == "captured\n"


def test_caplog(caplog):
    logging.getLogger("later").warning("logged")
    assert "logged" in caplog.text


def test_capfd_again(capfd):
    sys.stderr.write("again\n")
    assert capfd.readouterr().err == "again\n"
"#;
    let early = r#"import os
import subprocess
import sys


def test_capfd(capfd):
    print("hello")
    sys.stderr.write("oops\n")
    out, err = capfd.readouterr()
    assert (out, err) == ("hello\n", "oops\n")


def test_capfdbinary(capfdbinary):
    print("bytes")
    assert capfdbinary.readouterr().out == b"bytes\n"


def test_capfd_disabled(capfd):
    with capfd.disabled():
        print("straight through")
    print("kept")
    assert capfd.readouterr().out == "kept\n"


def test_real_fd_capture(real_fd_capture):
    print("never")


def test_subprocess():
    subprocess.run(["echo", "hi"])


def test_dup2():
    os.dup2(1, 9)
"#;
    // pytest's own fd-level capture fixture, as a plugin or conftest may define it: its setup
    // fails on os.dup after registering the fixture with the capture manager.
    let conftest = r#"import pytest
from _pytest.capture import CaptureFixture, FDCapture


@pytest.fixture
def real_fd_capture(request):
    capman = request.config.pluginmanager.getplugin("capturemanager")
    fixture = CaptureFixture(FDCapture, request, _ispytest=True)
    capman.set_fixture(fixture)
    fixture._start()
    yield fixture
    fixture.close()
    capman.unset_fixture()
"#;
    let report = run(&[
        // fd-level global capture, as a repository's options may ask for it.
        ("frognano.toml", "[test]\nargs = [\"--capture=fd\"]\n"),
        ("tests/conftest.py", conftest),
        ("tests/test_a_early.py", early),
        ("tests/test_b_later.py", later),
    ]);
    let got = outcomes(&report);
    let early_id = |name: &str| format!("tests/test_a_early.py::{name}");
    for name in ["test_capfd", "test_capfdbinary", "test_capfd_disabled"] {
        assert_eq!(
            got.get(&early_id(name)),
            Some(&(TestOutcome::Passed, None)),
            "{name}: {:?}",
            report.test(&early_id(name))
        );
    }
    assert_eq!(
        got.get(&early_id("test_real_fd_capture")),
        Some(&(TestOutcome::Error, Some("fd duplication".to_string())))
    );
    assert_eq!(
        got.get(&early_id("test_subprocess")),
        Some(&(TestOutcome::Failed, Some("subprocesses".to_string())))
    );
    assert_eq!(
        got.get(&early_id("test_dup2")),
        Some(&(TestOutcome::Failed, Some("fd duplication".to_string())))
    );
    let later: Vec<_> = report
        .tests
        .iter()
        .filter(|t| t.id.starts_with("tests/test_b_later.py::"))
        .collect();
    assert_eq!(later.len(), 28, "{got:?}");
    for test in later {
        assert_eq!(test.outcome, TestOutcome::Passed, "{test:?}");
    }
    assert_eq!((report.passed, report.failed, report.errors), (31, 2, 1));
}

/// Runs a passing test beside `file`, which stops pytest with a usage error (exit status 4).
fn run_to_usage_error(file: (&str, &str)) -> TestReport {
    let report = run(&[file, ("tests/test_a.py", "def test_a():\n    pass\n")]);
    assert_eq!(report.outcome, RunOutcome::Failed, "{report:?}");
    assert_eq!(report.exit_code, Some(4));
    report
}

#[test]
fn a_conftest_importing_a_missing_module_says_which_and_how_to_fix_it() {
    let report = run_to_usage_error((
        "tests/conftest.py",
        "import os\nimport frognano_no_such_module.sub\n",
    ));
    assert_eq!(
        report.detail.as_deref(),
        Some(
            "tests/conftest.py imports frognano_no_such_module, which is not installed: add its \
             distribution to [test] requirements in frognano.toml"
        ),
        "{}",
        report.stderr
    );
}

#[test]
fn an_unrecognised_option_is_named() {
    let report = run_to_usage_error((
        "pyproject.toml",
        "[tool.pytest.ini_options]\naddopts = \"--frognano-no-such-flag\"\n",
    ));
    let detail = report.detail.expect("detail");
    assert!(
        detail.contains("does not recognise the option(s) --frognano-no-such-flag"),
        "{detail}\n{}",
        report.stderr
    );
    assert!(detail.contains("[test] args"), "{detail}");
}

/// `sysconfig` describes the sandbox as a native install: the pytest and requirement layers
/// are site-packages and the zipped standard library is the standard library, so tools that
/// tell the project's own code from third-party code by those paths (Hypothesis, coverage
/// tools) see only the repository as local.
#[test]
fn layers_are_site_packages_and_the_stdlib_is_the_stdlib() {
    let report = run(&[(
        "test_layout.py",
        "import os\nimport sysconfig\nfrom pathlib import Path\n\nimport pytest\n\n\n\
         def test_layers_are_installed_packages():\n    \
             site = {Path(sysconfig.get_path(k)) for k in ('purelib', 'platlib')}\n    \
             assert any(Path(pytest.__file__).is_relative_to(p) for p in site), site\n\n\n\
         def test_stdlib_is_the_stdlib():\n    \
             stdlib = {Path(sysconfig.get_path(k)) for k in ('stdlib', 'platstdlib')}\n    \
             assert any(Path(os.__file__).is_relative_to(p) for p in stdlib), stdlib\n\n\n\
         def test_the_repository_is_local():\n    \
             here = Path(__file__)\n    \
             installed = {Path(sysconfig.get_path(k)) for k in ('purelib', 'platlib', 'stdlib', 'platstdlib')}\n    \
             assert not any(here.is_relative_to(p) for p in installed)\n",
    )]);
    assert_all_passed(&report, 3);
}

/// matplotlib, compiled into the image, reads its data folder (`mpl-data`: the default
/// `matplotlibrc`, fonts, styles) with ordinary file calls beside its modules, inside the
/// stdlib zip; the image ships that folder as a nested zip. Importing matplotlib failed with
/// `NotADirectoryError`, and every conftest that configures it (networkx, pint) stopped the
/// whole run.
#[test]
fn matplotlib_reads_its_data_folder_from_inside_the_stdlib_zip() {
    let report = run(&[(
        "test_plots.py",
        "import matplotlib\n\nmatplotlib.use('Agg')\n\n\
         def test_defaults_come_from_its_matplotlibrc():\n    \
             assert matplotlib.rcParams['lines.linewidth'] == 1.5\n\n\n\
         def test_a_figure_is_drawn():\n    \
             import io\n    \
             import matplotlib.pyplot as plt\n\n    \
             fig, ax = plt.subplots()\n    \
             ax.plot([1, 2, 3], [3, 1, 2])\n    \
             ax.set_title('drawn')\n    \
             out = io.BytesIO()\n    \
             fig.savefig(out, format='png')\n    \
             assert out.getvalue().startswith(b'\\x89PNG')\n",
    )]);
    assert_all_passed(&report, 2);
}

/// Suites written for Pythons before 3.10 import the ABC aliases from `collections` (passlib,
/// funcsigs, deprecation) or use `typing.no_type_check_decorator` (incremental): the names are
/// back, as the objects they were.
#[test]
fn names_the_standard_library_removed_since_python_3_9_are_back() {
    let report = run(&[(
        "test_old_names.py",
        "import collections.abc\nimport typing\nfrom collections import Callable, MutableMapping\n\n\
         def test_collections_aliases_are_the_abcs():\n    \
             assert MutableMapping is collections.abc.MutableMapping\n    \
             assert isinstance(len, Callable)\n    \
             assert isinstance({}, collections.Mapping)\n\n\n\
         def test_no_type_check_decorator_still_decorates():\n    \
             def twice(f):\n        \
                 return lambda x: f(f(x))\n\n    \
             @typing.no_type_check_decorator(twice)\n    \
             def inc(x: int) -> int:\n        \
                 return x + 1\n\n    \
             assert inc(1) == 3\n",
    )]);
    assert_all_passed(&report, 2);
}

/// Code that looks for an optional program by running it and catches `FileNotFoundError`
/// (networkx's conftest runs `dot -V`) goes on without it, as on a machine without the
/// program; a test that needs a process still fails, labelled `subprocesses`.
#[test]
fn starting_a_program_fails_as_where_it_is_not_installed() {
    let report = run(&[(
        "test_programs.py",
        "import subprocess\n\nimport pytest\n\ntry:\n    \
             subprocess.check_output(['dot', '-V'])\n    HAS_DOT = True\n\
         except FileNotFoundError:\n    HAS_DOT = False\n\n\n\
         def test_the_probe_found_no_program():\n    assert HAS_DOT is False\n\n\n\
         def test_a_missing_program_is_not_found():\n    \
             with pytest.raises(FileNotFoundError):\n        \
                 subprocess.run(['git', 'status'], shell=False)\n\n\n\
         def test_running_a_program_is_labelled():\n    \
             subprocess.run('echo hello', shell=True, check=True)\n",
    )]);
    let outcomes = outcomes(&report);
    let outcome = |name: &str| {
        outcomes
            .iter()
            .find(|(id, _)| id.ends_with(name))
            .map(|(_, o)| o.clone())
    };
    assert_eq!(
        outcome("test_the_probe_found_no_program"),
        Some((TestOutcome::Passed, None)),
        "{outcomes:?}"
    );
    assert_eq!(
        outcome("test_a_missing_program_is_not_found"),
        Some((TestOutcome::Passed, None)),
        "{outcomes:?}"
    );
    assert_eq!(
        outcome("test_running_a_program_is_labelled"),
        Some((TestOutcome::Failed, Some("subprocesses".to_string()))),
        "{outcomes:?}"
    );
}
