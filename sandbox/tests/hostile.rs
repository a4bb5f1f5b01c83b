//! Hostile test code is contained: host files stay unreadable and unwritten, limits end runs
//! with distinct outcomes, and the sandbox keeps working afterwards.

mod common;

use common::{limited as request, run_one};

use std::time::{Duration, Instant};

use frognano_core::{RunOutcome, TestReport};
use frognano_sandbox::TestRequest;

/// Asserts that less than `secs` seconds passed since `started`.
fn assert_within(started: Instant, secs: u64) {
    let took = started.elapsed();
    assert!(took < Duration::from_secs(secs), "took {took:?}");
}

/// Runs one test file under a `timeout_s` limit and asserts that it timed out in less than
/// `within` seconds.
fn run_to_timeout(file: &str, source: &str, timeout_s: f64, within: u64) -> TestReport {
    let started = Instant::now();
    let report = run_one(file, source, &request(timeout_s, 512, 1 << 20));
    assert_within(started, within);
    assert_eq!(report.outcome, RunOutcome::Timeout);
    report
}

/// A hostile run must leave the sandbox able to run an ordinary suite.
fn assert_healthy() {
    let report = run_one(
        "test_ok.py",
        "def test_ok():\n    assert sum([1, 2]) == 3\n",
        &TestRequest::default(),
    );
    assert_eq!(report.outcome, RunOutcome::Passed, "{report:?}");
}

#[test]
fn host_files_network_processes_and_environment_are_out_of_reach() {
    let outside = tempfile::tempdir().expect("tempdir");
    let secret = format!("TOP-SECRET-{}", std::process::id());
    std::fs::write(outside.path().join("secret.txt"), &secret).expect("write secret");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("addr").port();
    let outside_path = outside.path().display().to_string();
    let tests = format!(
        r#"import os, socket, subprocess
import pytest

OUTSIDE = {outside_path:?}


def test_read_etc_passwd():
    with pytest.raises(OSError):
        print(open("/etc/passwd").read())


def test_dotdot_escape():
    with pytest.raises(OSError):
        print(open("../" * 12 + "etc/passwd").read())


def test_absolute_host_path():
    with pytest.raises(OSError):
        print(open(OUTSIDE + "/secret.txt").read())


def test_symlink_in_repo_pointing_out():
    with pytest.raises(OSError):
        print(open("leak.txt").read())
    with pytest.raises(OSError):
        print(open("leakdir/secret.txt").read())


def test_symlink_made_by_guest():
    try:
        os.symlink(OUTSIDE, "mylink")
    except OSError:
        return
    with pytest.raises(OSError):
        print(open("mylink/secret.txt").read())


def test_write_outside_workspace():
    for path in ["/escape.txt", "../escape.txt", OUTSIDE + "/escape.txt", "/usr/local/lib/escape.txt",
                 "/frognano/pytest/escape.py"]:
        with pytest.raises(OSError):
            open(path, "w").write("x")


def test_environment_is_not_inherited():
    assert "FROGNANO_TEST_SECRET" not in os.environ
    own = {{key for key in os.environ if not key.startswith("PYTEST_")}}
    # What the sandbox itself sets: a home, temporary files, hashing, locale and a user name.
    assert own <= {{"HOME", "TMPDIR", "PYTHONHASHSEED", "LANG", "USER", "LOGNAME"}}, dict(os.environ)


def test_subprocess_refused():
    with pytest.raises(OSError):
        subprocess.run(["cat", "/etc/passwd"])


def test_socket_refused():
    # The interpreter has no working socket layer: creating or resolving fails.
    with pytest.raises((OSError, AttributeError)):
        socket.create_connection(("127.0.0.1", {port}), timeout=1)
"#
    );
    let repo = common::make_repo(&[("tests/test_hostile.py", &tests)]);
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        repo.path().join("leak.txt"),
    )
    .expect("link");
    std::os::unix::fs::symlink(outside.path(), repo.path().join("leakdir")).expect("link");
    // SAFETY: set before any thread of this test reads the environment; only this test uses it.
    unsafe { std::env::set_var("FROGNANO_TEST_SECRET", &secret) };
    let before = common::tree_snapshot(repo.path());
    let report = common::sandbox()
        .run_tests(repo.path(), &request(60.0, 512, 1 << 20))
        .expect("run");
    assert_eq!(
        report.outcome,
        RunOutcome::Passed,
        "{:#?}",
        report
            .tests
            .iter()
            .filter(|t| !t.outcome.is_ok())
            .collect::<Vec<_>>()
    );
    assert_eq!(report.passed, 9);
    let everything = format!("{} {} {:?}", report.stdout, report.stderr, report.tests);
    assert!(
        !everything.contains(&secret),
        "the secret leaked into the report"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("list").count(),
        1,
        "a file was written outside"
    );
    assert!(
        listener.accept().is_err(),
        "the guest reached a host socket"
    );
    assert_eq!(
        before,
        common::tree_snapshot(repo.path()),
        "the user's repository changed"
    );
    assert_healthy();
}

#[test]
fn infinite_loop_times_out_and_keeps_finished_tests() {
    let report = run_to_timeout(
        "test_loop.py",
        "def test_first():\n    assert True\n\n\ndef test_spin():\n    while True:\n        pass\n",
        2.0,
        6,
    );
    assert_eq!(
        report.test("test_loop.py::test_first").map(|t| t.outcome),
        Some(frognano_core::TestOutcome::Passed)
    );
    assert_eq!(
        report.interrupted.as_deref(),
        Some("test_loop.py::test_spin")
    );
    assert_healthy();
}

#[test]
fn sleeping_in_a_host_call_times_out() {
    // A sleeping guest uses no CPU, but its sleep is its own time: it ends at the limit (where
    // the kernel keeps no scheduler statistics, at the wall-clock backstop of four times it).
    let report = run_to_timeout(
        "test_sleep.py",
        "import time\n\n\ndef test_sleep():\n    time.sleep(10**6)\n",
        1.0,
        8,
    );
    let detail = report.detail.as_deref().unwrap_or_default();
    if std::path::Path::new("/proc/thread-self/schedstat").is_file() {
        assert!(
            detail.starts_with("time limit of 1.0 s reached") && detail.contains("waiting"),
            "{detail}"
        );
        assert!(report.duration_s < 3.0, "{report:?}");
    } else {
        assert!(detail.contains("backstop"), "{detail}");
    }
    assert_eq!(
        report.interrupted.as_deref(),
        Some("test_sleep.py::test_sleep")
    );
    assert_healthy();
}

#[test]
fn memory_bomb_hits_the_cap() {
    let report = run_one(
        "test_mem.py",
        "def test_bomb():\n    hoard = []\n    while True:\n        hoard.append(bytearray(16 * 1024 * 1024))\n",
        &request(60.0, 256, 1 << 20),
    );
    assert_eq!(report.outcome, RunOutcome::MemoryExceeded, "{report:?}");
    assert_healthy();
}

#[test]
fn output_flood_hits_the_cap() {
    let report = run_one(
        "test_flood.py",
        "import os\n\n\ndef test_flood():\n    while True:\n        os.write(1, b'x' * 65536)\n",
        &request(60.0, 512, 256 * 1024),
    );
    assert_eq!(report.outcome, RunOutcome::OutputExceeded, "{report:?}");
    assert!(report.stdout.len() <= 256 * 1024);
    assert_healthy();
}

#[test]
fn deep_recursion_raises_recursion_error() {
    let report = run_one(
        "test_rec.py",
        "import pytest\n\n\ndef down(n):\n    return down(n + 1)\n\n\n\
         def test_caught():\n    with pytest.raises(RecursionError):\n        down(0)\n\n\n\
         def test_uncaught():\n    down(0)\n",
        &request(60.0, 512, 1 << 20),
    );
    assert_eq!(report.outcome, RunOutcome::Failed, "{report:?}");
    assert_eq!((report.passed, report.failed), (1, 1));
    let uncaught = report.test("test_rec.py::test_uncaught").expect("recorded");
    assert!(
        uncaught
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("RecursionError"),
        "{uncaught:?}"
    );
    assert_healthy();
}

#[test]
fn exiting_the_interpreter_is_a_crash_with_partial_results() {
    let report = run_one(
        "test_exit.py",
        "import os\n\n\ndef test_first():\n    pass\n\n\ndef test_exit():\n    os._exit(3)\n",
        &request(60.0, 512, 1 << 20),
    );
    assert_eq!(report.outcome, RunOutcome::Crashed, "{report:?}");
    assert_eq!(report.passed, 1);
    assert_eq!(
        report.interrupted.as_deref(),
        Some("test_exit.py::test_exit")
    );
    assert_healthy();
}

#[test]
fn a_crash_after_every_test_finished_keeps_their_verdicts() {
    // The process ends after pytest's run loop (here in a hook; in the wild, a finalizer or
    // interpreter shutdown): no verdict depends on it, so the run is graded by its tests.
    let repo = common::make_repo(&[
        (
            "test_ok.py",
            "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n",
        ),
        (
            "conftest.py",
            "import os\n\n\ndef pytest_unconfigure(config):\n    os._exit(3)\n",
        ),
    ]);
    let report = common::sandbox()
        .run_tests(repo.path(), &request(60.0, 512, 1 << 20))
        .expect("run");
    assert_eq!(report.outcome, RunOutcome::Passed, "{report:?}");
    assert_eq!(report.passed, 2);
    assert!(
        report
            .detail
            .as_deref()
            .is_some_and(|d| d.starts_with("every test finished; the interpreter then crashed")),
        "{report:?}"
    );
    assert_healthy();
}

#[test]
fn invalid_limits_and_missing_repos_are_errors() {
    let repo = common::make_repo(&[("test_ok.py", "def test_ok():\n    pass\n")]);
    let err = common::sandbox()
        .run_tests(repo.path(), &request(0.0, 512, 1024))
        .expect_err("zero timeout");
    assert!(err.to_string().contains("timeout"), "{err}");
    let err = common::sandbox()
        .run_tests(repo.path(), &request(1.0, 0, 1024))
        .expect_err("zero memory");
    assert!(err.to_string().contains("memory"), "{err}");
    let err = common::sandbox()
        .run_tests(&repo.path().join("missing"), &TestRequest::default())
        .expect_err("missing repo");
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[test]
fn a_cancelled_run_stops_promptly() {
    let repo = common::make_repo(&[(
        "test_spin.py",
        "def test_spin():\n    while True:\n        pass\n",
    )]);
    let flag = frognano_sandbox::CancelFlag::default();
    let setter = flag.clone();
    let started = Instant::now();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        setter.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let result = common::sandbox().run_tests(
        repo.path(),
        &TestRequest {
            cancel: Some(flag),
            ..request(60.0, 512, 1 << 20)
        },
    );
    canceller.join().expect("join");
    assert!(
        matches!(result, Err(frognano_sandbox::SandboxError::Cancelled)),
        "{result:?}"
    );
    assert_within(started, 5);
    assert_healthy();
}

#[test]
fn disk_flood_hits_the_cap() {
    let small_disk = frognano_sandbox::Sandbox::new(
        frognano_sandbox::SandboxOptions {
            disk_mb: 32,
            ..Default::default()
        },
        &|_| {},
    )
    .expect("sandbox");
    let repo = common::make_repo(&[(
        "test_disk.py",
        "def test_fill(tmp_path):\n    chunk = b'x' * (1 << 20)\n    with open('big.bin', 'wb') as out:\n        while True:\n            out.write(chunk)\n            out.flush()\n",
    )]);
    let started = Instant::now();
    let report = small_disk
        .run_tests(repo.path(), &request(60.0, 512, 1 << 20))
        .expect("run");
    assert_eq!(report.outcome, RunOutcome::OutputExceeded, "{report:?}");
    assert!(
        report
            .detail
            .as_deref()
            .unwrap_or_default()
            .contains("disk"),
        "{report:?}"
    );
    assert_within(started, 10);
    assert_healthy();
}

#[test]
fn sandboxes_share_an_empty_layer_that_stays_empty_and_leave_no_temporary_folders() {
    let empty_layers_in_temp = || -> std::collections::BTreeSet<String> {
        std::fs::read_dir(std::env::temp_dir())
            .expect("temp dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("frognano-empty-"))
            .collect()
    };
    let before = empty_layers_in_temp();
    // Every run without requirements mounts the empty layer: a stray file in it is removed when
    // a sandbox starts.
    let empty = frognano_sandbox::layers::prepare_empty_layer().expect("empty layer");
    std::fs::write(empty.join("frognano-stray.txt"), "stray\n").expect("write");
    let sandbox = frognano_sandbox::Sandbox::new(Default::default(), &|_| {}).expect("sandbox");
    assert!(
        std::fs::read_dir(&empty).expect("read").next().is_none(),
        "the empty layer holds something"
    );
    // A sandbox kept for the life of the process (in a static, which never drops) leaves
    // nothing in the temporary folder.
    std::mem::forget(sandbox);
    let after = empty_layers_in_temp();
    assert!(after.is_subset(&before), "{:?}", after.difference(&before));
}
