//! The bundled sample repositories pass in the sandbox with the same per-test outcomes as a
//! native pytest run, and their directories are left untouched.

mod common;

use frognano_core::RunOutcome;
use frognano_sandbox::TestRequest;

#[test]
fn sample_repos_match_native_pytest() {
    let repos = common::sample_repos();
    assert!(
        repos.len() >= 3,
        "expected at least three sample repositories"
    );
    for repo in repos {
        let before = common::tree_snapshot(&repo);
        let (sandboxed, report) = common::sandbox_outcomes(&repo, &TestRequest::default());
        assert_eq!(
            report.outcome,
            RunOutcome::Passed,
            "{}: {:?}\n{}",
            repo.display(),
            report.detail,
            report.stdout
        );
        assert!(
            report.tests.len() >= 30,
            "{}: only {} tests",
            repo.display(),
            report.tests.len()
        );
        let config = frognano_sandbox::RepoConfig::load(&repo).expect("config");
        let roots: Vec<_> = config
            .import_roots
            .iter()
            .map(std::path::PathBuf::from)
            .collect();
        let native = common::native_outcomes(&repo, &roots, &[]);
        assert_eq!(
            sandboxed,
            native,
            "{}: outcomes differ from native pytest",
            repo.display()
        );
        assert_eq!(
            before,
            common::tree_snapshot(&repo),
            "{} was modified",
            repo.display()
        );
    }
}

#[test]
fn pytest_arguments_select_tests() {
    let repo = &common::sample_repos()[0];
    let all = common::run_clean(repo);
    let first = all.tests[0].id.clone();
    let one = common::sandbox()
        .run_tests(
            repo,
            &TestRequest {
                pytest_args: vec![first.clone()],
                ..TestRequest::default()
            },
        )
        .expect("run");
    assert_eq!(one.tests.len(), 1, "{:?}", one.tests);
    assert_eq!(one.tests[0].id, first);
    let none = common::sandbox()
        .run_tests(
            repo,
            &TestRequest {
                pytest_args: vec!["-k".into(), "no_such_test_name_anywhere".into()],
                ..TestRequest::default()
            },
        )
        .expect("run");
    assert_eq!(none.outcome, RunOutcome::NoTests);
}

#[test]
fn failures_are_reported_per_test_with_messages() {
    let repo = common::make_repo(&[
        ("calc.py", "def add(a, b):\n    return a - b\n"),
        (
            "tests/test_calc.py",
            "import pytest\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n\
             def test_zero():\n    assert add(0, 0) == 0\n\n\n@pytest.mark.skip(reason='later')\ndef test_skip():\n    pass\n\n\n\
             @pytest.mark.xfail\ndef test_xfail():\n    assert False\n\n\n@pytest.mark.xfail\ndef test_xpass():\n    assert True\n\n\n\
             @pytest.fixture\ndef broken():\n    raise RuntimeError('fixture broke')\n\n\ndef test_error(broken):\n    pass\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    assert_eq!(report.outcome, RunOutcome::Failed);
    assert_eq!(
        (
            report.passed,
            report.failed,
            report.errors,
            report.skipped,
            report.xfailed,
            report.xpassed
        ),
        (1, 1, 1, 1, 1, 1)
    );
    let failed = report
        .test("tests/test_calc.py::test_add")
        .expect("recorded");
    assert!(
        failed
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("assert 0 == 4"),
        "{failed:?}"
    );
    let error = report
        .test("tests/test_calc.py::test_error")
        .expect("recorded");
    assert!(
        error
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("fixture broke"),
        "{error:?}"
    );
    assert_eq!(report.exit_code, Some(1));
}

#[test]
fn collection_errors_are_errors_not_crashes() {
    let repo = common::make_repo(&[(
        "tests/test_broken.py",
        "import no_such_module_here\n\ndef test_x():\n    pass\n",
    )]);
    let report = common::run_clean(repo.path());
    assert_eq!(report.outcome, RunOutcome::Failed, "{report:?}");
    assert_eq!(report.errors, 1);
    assert!(
        report.tests[0]
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("no_such_module_here")
    );
}

#[test]
fn parallel_runs_match_serial_runs() {
    let repos = common::sample_repos();
    let jobs: Vec<_> = repos
        .iter()
        .chain(repos.iter())
        .map(|r| (r.clone(), TestRequest::default()))
        .collect();
    let reports = common::sandbox().run_tests_many(&jobs);
    assert_eq!(reports.len(), jobs.len());
    for ((repo, _), report) in jobs.iter().zip(reports) {
        let report = report.expect("run");
        let serial = common::run_clean(repo);
        let ids = |r: &frognano_core::TestReport| {
            r.tests
                .iter()
                .map(|t| (t.id.clone(), t.outcome))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        assert_eq!(ids(&report), ids(&serial), "{}", repo.display());
    }
}

#[test]
fn edits_in_a_workspace_are_seen_despite_the_bytecode_cache() {
    let repo = common::make_repo(&[
        ("shapes.py", "def area(w, h):\n    return w * h\n"),
        (
            "tests/test_shapes.py",
            "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
        ),
    ]);
    let sandbox = common::sandbox();
    let prepared = sandbox.prepare_repo(repo.path(), &|_| {}).expect("prepare");
    assert!(
        prepared.bytecode.is_some(),
        "a clean repository gets a bytecode cache"
    );
    let clean = tempfile::tempdir().expect("tempdir");
    frognano_sandbox::workspace::copy_repo(repo.path(), clean.path()).expect("copy");
    let report = sandbox
        .run_tests_in_workspace(&prepared, clean.path(), &TestRequest::default())
        .expect("run");
    assert_eq!(report.outcome, RunOutcome::Passed);

    // Same size, same mtime granularity: only the checked hash can tell the files apart.
    let edited = tempfile::tempdir().expect("tempdir");
    frognano_sandbox::workspace::copy_repo(repo.path(), edited.path()).expect("copy");
    // Writes one file of the edited copy and runs its tests.
    let edit_and_run = |path: &str, contents: &str| {
        std::fs::write(edited.path().join(path), contents).expect("edit");
        sandbox
            .run_tests_in_workspace(&prepared, edited.path(), &TestRequest::default())
            .expect("run")
            .outcome
    };
    assert_eq!(
        edit_and_run("shapes.py", "def area(w, h):\n    return w + h\n"),
        RunOutcome::Failed,
        "the edit must be what runs"
    );
    assert_eq!(
        edit_and_run(
            "tests/test_shapes.py",
            "from shapes import area\n\n\ndef test_area():\n    assert area(2, 3) == 5\n",
        ),
        RunOutcome::Passed,
        "the edited test must be what runs"
    );
}

#[test]
fn coverage_maps_each_test_to_the_lines_it_executed() {
    let repo = common::root().join("examples/repos/textkit");
    let request = TestRequest {
        coverage: true,
        ..TestRequest::default()
    };
    let report = common::sandbox().run_tests(&repo, &request).expect("run");
    assert_eq!(report.outcome, RunOutcome::Passed);
    let coverage = report.coverage.expect("coverage was asked for");
    assert_eq!(coverage.unavailable, None);
    assert_eq!(
        coverage.tests.len(),
        report.tests.len(),
        "one entry per test"
    );
    // Imports run outside any test: the package's module-level lines are shared.
    assert!(coverage.shared.contains_key("textkit/__init__.py"));
    for (id, files) in &coverage.tests {
        let test_file = id.split("::").next().expect("node id has a file");
        assert!(
            files.contains_key(test_file),
            "{id} ran lines of its own file"
        );
        for lines in files.values() {
            assert!(lines.windows(2).all(|w| w[0] < w[1]), "sorted, unique");
        }
        // Tests of the roman module never execute the wrapping module, and vice versa.
        if test_file.ends_with("test_roman.py") {
            assert!(files.contains_key("textkit/roman.py"), "{id}");
            assert!(!files.contains_key("textkit/wrap.py"), "{id}");
        }
        if test_file.ends_with("test_wrap.py") {
            assert!(!files.contains_key("textkit/roman.py"), "{id}");
        }
    }
    // Without the flag, no coverage is recorded.
    let plain = common::run_clean(&repo);
    assert!(plain.coverage.is_none());
}
