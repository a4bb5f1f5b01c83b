//! Test requirements: detection on real packages' sdists (each place projects declare them),
//! and the resolution loop that adds what a suite imports, in the sandbox.

mod common;

use frognano_core::{RunOutcome, TestOutcome};
use frognano_sandbox::testing::{pinned_sdist, write_repo};
use frognano_sandbox::{RepoConfig, TestRequest};

/// Loads the configuration of a pinned sdist (detection only: nothing runs).
fn detect(name: &str) -> (tempfile::TempDir, RepoConfig) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = pinned_sdist(name).unpack(dir.path());
    let config = RepoConfig::load(&root).expect("load");
    (dir, config)
}

fn assert_detected(config: &RepoConfig, requirement: &str, source: &str) {
    assert!(
        config
            .detected
            .iter()
            .any(|d| d.requirement == requirement && d.source == source),
        "{requirement:?} from {source:?} not in {:#?}",
        config.detected
    );
}

fn assert_left_out(config: &RepoConfig, requirement: &str, reason_words: &str) {
    assert!(
        config
            .left_out
            .iter()
            .any(|l| l.requirement == requirement && l.reason.contains(reason_words)),
        "{requirement:?} not left out ({reason_words}) in {:#?}",
        config.left_out
    );
}

/// Prepares `repo` in the shared sandbox (detection and the resolution loop), runs its clean
/// suite, asserts that its `passed` tests pass, and returns the preparation.
fn prepared_and_passing(repo: &std::path::Path, passed: usize) -> frognano_sandbox::PreparedRepo {
    let sandbox = common::sandbox();
    let prepared = sandbox.prepare_repo(repo, &|_| {}).expect("prepare");
    let run = sandbox
        .run_tests_prepared(&prepared, &TestRequest::default())
        .expect("run");
    common::assert_passed(&run, passed);
    prepared
}

/// What the resolution loop added: (distribution, why).
fn added_by_the_loop(prepared: &frognano_sandbox::PreparedRepo) -> Vec<(&str, &str)> {
    prepared
        .requirements_report
        .added
        .iter()
        .map(|a| (a.distribution.as_str(), a.reason.as_str()))
        .collect()
}

#[test]
fn tox_ini_deps_and_the_requirements_files_they_include() {
    let (_dir, config) = detect("python-dateutil");
    let via = "requirements-dev.txt (via tox.ini [testenv] deps)";
    assert_detected(
        &config,
        "six >= 1.5",
        "setup.cfg [options] install_requires",
    );
    assert_detected(&config, "freezegun ; python_version != '3.3'", via);
    assert_detected(&config, "hypothesis >= 3.30", via);
    assert_left_out(&config, "mock ; python_version < '3.0'", "marker");
    assert_left_out(&config, "pytest-cov >= 2.0.0", "development tool");
    // The py33 environment's pins are not for this interpreter.
    assert!(
        !config.detected.iter().any(|d| d.source.contains("py33")),
        "{:#?}",
        config.detected
    );
    assert_eq!(
        config.requirements,
        vec![
            "attrs!=21.1.0",
            "freezegun ; python_version != '3.3'",
            "hypothesis >= 3.30",
            "six >= 1.5"
        ]
    );

    let (_dir, config) = detect("schema");
    // `frognano.toml` of the pinned copy lists the requirements: detection is skipped.
    assert!(!config.requirements_detected && config.detected.is_empty());
}

#[test]
fn setup_cfg_extras_require() {
    let (_dir, config) = detect("humanize");
    assert_detected(
        &config,
        "freezegun",
        "setup.cfg [options.extras_require] tests",
    );
    assert_left_out(
        &config,
        "importlib-metadata;python_version < '3.8'",
        "marker",
    );
    assert_eq!(config.requirements, vec!["freezegun"]);
}

#[test]
fn a_tool_the_project_depends_on_at_run_time_is_a_requirement() {
    // hatch-vcs imports hatchling (a build backend, tooling when a project only builds with
    // it): as a run-time dependency it is kept; tox, a test extra, is still left out.
    let repo = write_repo(&[(
        "pyproject.toml",
        "[project]\nname = \"plugin\"\nversion = \"1\"\ndependencies = [\"hatchling>=1.1\"]\n\n\
         [project.optional-dependencies]\ntest = [\"hatchling\", \"tox\", \"freezegun\"]\n",
    )]);
    let config = RepoConfig::load(repo.path()).expect("load");
    assert_eq!(
        config.requirements,
        vec!["freezegun", "hatchling>=1.1"],
        "{:#?}",
        config.left_out
    );
    assert_left_out(&config, "tox", "development tool");
}

#[test]
fn setup_py_literals_names_and_extras() {
    let (_dir, config) = detect("marshmallow");
    assert_detected(&config, "packaging>=17.0", "setup.py install_requires");
    assert_detected(&config, "pytz", "setup.py extras_require tests");
    assert_detected(&config, "simplejson", "setup.py extras_require tests");
    // `EXTRAS_REQUIRE["dev"] = EXTRAS_REQUIRE["tests"] + EXTRAS_REQUIRE["lint"] + ["tox"]`
    assert_detected(&config, "flake8==6.0.0", "setup.py extras_require dev");
    assert_left_out(&config, "tox", "development tool");
    assert_eq!(config.requirements, vec!["pytz", "simplejson"]);

    let (_dir, config) = detect("xmltodict");
    assert_detected(&config, "nose2", "setup.py tests_require");
    assert_eq!(config.requirements, vec!["nose2"]);
}

#[test]
fn requirements_in_files() {
    let (_dir, config) = detect("wcwidth");
    assert_detected(&config, "wrapt>=1.14", "requirements-tests39.in");
    let via = "requirements-tests39.txt (via tox.ini [testenv] deps)";
    assert!(
        config
            .detected
            .iter()
            .any(|d| d.requirement.starts_with("wrapt==") && d.source == via),
        "{:#?}",
        config.detected
    );
    assert_left_out(&config, "pylint>=2.15", "development tool");
    assert!(
        config.requirements.iter().any(|r| r.starts_with("wrapt")),
        "{:?}",
        config.requirements
    );
}

#[test]
fn pyproject_groups_extras_and_poetry_tables() {
    let (_dir, config) = detect("iniconfig");
    assert_detected(
        &config,
        "pytest-xdist>=3.8",
        "pyproject.toml [dependency-groups] dev",
    );
    assert_left_out(&config, "pytest-xdist>=3.8", "development tool");
    assert_left_out(&config, "pytest>=8.4.2", "pytest layer");

    let (_dir, config) = detect("cleo");
    assert_detected(
        &config,
        "crashtest",
        "pyproject.toml [tool.poetry.dependencies]",
    );
    assert_detected(
        &config,
        "pytest-mock",
        "pyproject.toml [tool.poetry.group.dev.dependencies]",
    );
    assert!(
        !config.detected.iter().any(|d| d.requirement == "Sphinx"),
        "the doc group is not for tests"
    );
    assert_eq!(
        config.requirements,
        vec!["crashtest", "pytest-mock", "rapidfuzz"]
    );

    let (_dir, config) = detect("tomlkit");
    assert_detected(
        &config,
        "PyYAML",
        "pyproject.toml [tool.poetry.dev-dependencies]",
    );
    assert_left_out(&config, "Sphinx", "development tool");

    let (_dir, config) = detect("attrs");
    let extras = "pyproject.toml [project.optional-dependencies]";
    assert_detected(&config, "hypothesis", &format!("{extras} tests"));
    assert_detected(&config, "pympler", &format!("{extras} tests"));
    // `dev = ["attrs[tests]", "pre-commit-uv"]`: the self-reference expands to the extra.
    assert_detected(&config, "pre-commit-uv", &format!("{extras} dev"));
    assert!(
        !config
            .detected
            .iter()
            .any(|d| d.requirement.starts_with("attrs"))
    );

    let (_dir, config) = detect("pluggy");
    assert_detected(&config, "tox", &format!("{extras} dev"));
    assert_detected(&config, "pytest-benchmark", &format!("{extras} testing"));
    assert!(config.requirements.is_empty(), "{:?}", config.requirements);
}

#[test]
fn resolution_loop_adds_what_the_suite_imports() {
    let sandbox = common::sandbox();
    // The default image bundles some popular packages (dateutil, toolz, yaml, numpy): these
    // two are not among them. `dotenv` is a module whose distribution has another name. A
    // fresh conftest makes this a new repository version, so the loop runs (not its cache).
    let nonce = format!(
        "# {:?}\n",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
    );
    let repo = write_repo(&[
        ("conftest.py", nonce.as_str()),
        (
            "tests/test_env.py",
            "import io\n\nimport dotenv\n\n\ndef test_values():\n    \
             assert dotenv.dotenv_values(stream=io.StringIO('A=1')) == {'A': '1'}\n",
        ),
        (
            "tests/test_time.py",
            "import datetime\n\nimport freezegun\n\n\ndef test_frozen():\n    \
             with freezegun.freeze_time('2020-01-02'):\n        \
             assert datetime.date.today().year == 2020\n",
        ),
    ]);
    let messages = std::sync::Mutex::new(Vec::new());
    let progress = |m: &str| messages.lock().expect("lock").push(m.to_string());
    let prepared = sandbox
        .prepare_repo(repo.path(), &progress)
        .expect("prepare");
    let report = &prepared.requirements_report;
    let added: Vec<(&str, &str, &str)> = report
        .added
        .iter()
        .map(|a| {
            (
                a.distribution.as_str(),
                a.module.as_str(),
                a.reason.as_str(),
            )
        })
        .collect();
    assert_eq!(
        added,
        vec![
            (
                "python-dotenv",
                "dotenv",
                "tests/test_env.py imports dotenv"
            ),
            (
                "freezegun",
                "freezegun",
                "tests/test_time.py imports freezegun"
            ),
        ],
        "{report:#?}"
    );
    assert!(report.unresolved.is_empty(), "{report:#?}");
    assert!(
        messages
            .lock()
            .expect("lock")
            .iter()
            .any(|m| m.contains("added python-dotenv")),
        "progress names what was added"
    );
    let run = sandbox
        .run_tests_prepared(&prepared, &TestRequest::default())
        .expect("run");
    assert_eq!(
        run.outcome,
        RunOutcome::Passed,
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(run.passed, 2);
    // The result is cached per repository version: the same report, no collection pass.
    let messages = std::sync::Mutex::new(Vec::new());
    let progress = |m: &str| messages.lock().expect("lock").push(m.to_string());
    let again = sandbox
        .prepare_repo(repo.path(), &progress)
        .expect("prepare");
    assert_eq!(again.requirements_report, prepared.requirements_report);
    assert_eq!(again.config.requirements, prepared.config.requirements);
    assert!(
        !messages
            .lock()
            .expect("lock")
            .iter()
            .any(|m| m.contains("checking the test suite's imports")),
        "{:?}",
        messages.lock().expect("lock")
    );
}

#[test]
fn unresolvable_imports_are_reported_not_retried() {
    let sandbox = common::sandbox();
    let repo = write_repo(&[
        ("mypkg/__init__.py", "from mypkg._speedups import fast\n"),
        (
            "tests/test_json.py",
            "import ujson\n\n\ndef test_dumps():\n    assert ujson.dumps(1) == '1'\n",
        ),
        (
            "tests/test_own.py",
            "import mypkg\n\n\ndef test_fast():\n    assert mypkg.fast\n",
        ),
        ("tests/test_fine.py", "def test_ok():\n    assert True\n"),
    ]);
    let prepared = sandbox.prepare_repo(repo.path(), &|_| {}).expect("prepare");
    let report = &prepared.requirements_report;
    assert!(report.added.is_empty(), "{report:#?}");
    let unresolved: Vec<(&str, &str)> = report
        .unresolved
        .iter()
        .map(|u| (u.module.as_str(), u.reason.as_str()))
        .collect();
    assert_eq!(unresolved.len(), 2, "{report:#?}");
    assert!(unresolved.iter().any(|(m, r)| *m == "ujson"
        && r.contains("ujson has no pure-Python wheel: this suite cannot run in WebAssembly")));
    assert!(
        unresolved
            .iter()
            .any(|(m, r)| *m == "mypkg._speedups" && r.contains("belongs to the repository"))
    );
    assert!(prepared.deps_layer.is_none());
}

#[test]
fn the_pinned_import_name_table_names_the_distributions_called_otherwise() {
    // A module whose distribution has another name must not be "resolved" with an unrelated
    // project that happens to carry the module's name.
    let names = frognano_sandbox::requirements::resolve::import_names(&|m| eprintln!("{m}"))
        .expect("the pinned import-name table");
    assert!(names.len() > 600, "{} modules mapped", names.len());
    assert_eq!(names.distribution("memcache"), Some("python_memcached"));
    assert_eq!(names.distribution("telegram"), Some("python-telegram-bot"));
    assert_eq!(names.distribution("bson"), Some("pymongo"));
    // Generic folder names are never mapped to some distribution.
    assert_eq!(names.distribution("src"), None);
    assert_eq!(names.distribution("test"), None);
}

#[test]
fn warnings_as_errors_do_not_turn_the_sandboxs_preloaded_plugins_into_an_internal_error() {
    // The sandbox imports a layer's pytest plugins before pytest starts (to disable those that
    // cannot load); pytest then notes that it cannot rewrite their asserts. Under a project's
    // `filterwarnings = ["error"]` that note used to stop the run before any test.
    let repo = write_repo(&[
        (
            "pyproject.toml",
            "[project]\nname = \"strict\"\nversion = \"0.1\"\n\n\
             [project.optional-dependencies]\ntest = [\"pytest\", \"pytest-mock\"]\n\n\
             [tool.pytest.ini_options]\nfilterwarnings = [\"error\"]\n",
        ),
        (
            "tests/test_strict.py",
            "import warnings\n\nimport pytest\n\n\ndef test_mocker(mocker):\n    \
             assert mocker.Mock(return_value=3)() == 3\n\n\ndef test_warnings_still_fail():\n    \
             with pytest.raises(UserWarning):\n        warnings.warn('still an error')\n",
        ),
        // pytest 9 deprecates `config.inicfg` (black's conftest reads it): a notice of what
        // pytest 10 removes, which a project written against pytest 8 never saw.
        (
            "tests/conftest.py",
            "def pytest_configure(config):\n    config.inicfg.get('strict')\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    common::assert_passed(&report, 2);
}

#[test]
fn a_warning_filter_naming_an_absent_module_and_pytest_8_private_names_break_no_test() {
    // httpx ignores a trio warning by class; trio cannot run in WASI and is left out, and
    // pytest's "Failed to import filter module" note became an error in every test under the
    // project's `error` filter. flask's conftest reads `_pytest.monkeypatch.notset`, which
    // pytest 9 renamed.
    let repo = write_repo(&[
        (
            "pyproject.toml",
            "[project]\nname = \"strict\"\nversion = \"0.1\"\n\n\
             [tool.pytest.ini_options]\nfilterwarnings = [\"error\", \
             \"ignore:old:absentmodule.AbsentWarning\"]\n",
        ),
        (
            "tests/conftest.py",
            "from _pytest import monkeypatch\n\nUNSET = monkeypatch.notset\n",
        ),
        (
            "tests/test_strict.py",
            "import warnings\n\nimport pytest\n\n\ndef test_runs():\n    assert 1 + 1 == 2\n\n\n\
             def test_other_warnings_still_fail():\n    \
             with pytest.raises(UserWarning):\n        warnings.warn('old and still an error')\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    common::assert_passed(&report, 2);
}

#[test]
fn test_cases_whose_constructor_rejects_run_test_are_collected() {
    // pytest 8 and later make each TestCase class's placeholder as `cls("runTest")`; unittest2
    // test cases (deprecation, funcsigs, jaydebeapi) and bases that check the name reject it.
    let repo = write_repo(&[(
        "tests/test_strict.py",
        "import unittest\n\n\nclass StrictCase(unittest.TestCase):\n    \
         def __init__(self, methodName):\n        if not hasattr(self, methodName):\n            \
         raise ValueError('no such test method in %s: %s' % (type(self), methodName))\n        \
         super().__init__(methodName)\n\n\nclass TestStrict(StrictCase):\n    \
         def test_one(self):\n        self.assertEqual(1 + 1, 2)\n\n    \
         def test_two(self):\n        self.assertTrue(True)\n",
    )]);
    let report = common::run_clean(repo.path());
    common::assert_passed(&report, 2);
}

#[test]
fn plugins_left_out_of_the_layer_can_still_be_named_by_the_projects_configuration() {
    // pytest-timeout and pytest-xdist are left out of test requirements (the sandbox's budget
    // and single process stand in for them). A project that loads them with `-p` in its
    // addopts, sets their ini keys under --strict-config and uses their markers under
    // --strict-markers used to stop at configuration ("No module named 'timeout'"), and one
    // that lists them in `required_plugins` with "Missing required plugins".
    let repo = write_repo(&[
        (
            "pyproject.toml",
            "[project]\nname = \"timed\"\nversion = \"0.1\"\n\n\
             [project.optional-dependencies]\ntest = [\"pytest\", \"pytest-timeout\", \
             \"pytest-xdist\"]\n\n\
             [tool.pytest.ini_options]\n\
             addopts = \"-p timeout -p xdist --strict-config --strict-markers\"\n\
             required_plugins = [\"pytest-timeout>=2\", \"pytest_xdist\", \"pytest-cov\"]\n\
             timeout = \"20\"\ntimeout_method = \"thread\"\nrsyncdirs = [\"src\"]\n",
        ),
        (
            "tests/test_timed.py",
            "import pytest\n\n\n@pytest.mark.timeout(5)\ndef test_marked():\n    \
             assert True\n\n\n@pytest.mark.xdist_group('one')\ndef test_grouped():\n    \
             assert True\n",
        ),
        // What flaky and pytest-json-report do when they find xdist registered: implement
        // its hooks, which pluggy refuses unless someone declared them.
        (
            "tests/conftest.py",
            "class XdistAware:\n    def pytest_testnodedown(self, node, error):\n        \
             pass\n\n\ndef pytest_configure(config):\n    \
             if config.pluginmanager.hasplugin('xdist'):\n        \
             config.pluginmanager.register(XdistAware())\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    let outcome = |name: &str| {
        report
            .tests
            .iter()
            .find(|t| t.id.ends_with(name))
            .map(|t| t.outcome)
    };
    assert_eq!(
        (
            outcome("test_marked"),
            outcome("test_grouped"),
            report.passed
        ),
        (Some(TestOutcome::Passed), Some(TestOutcome::Passed), 2),
        "{:?}\n{}\n{}",
        report.detail,
        report.stdout,
        report.stderr
    );
}

#[test]
fn undeclared_test_plugins_are_found_from_their_markers_fixtures_and_ini_keys() {
    // Nothing the sdist ships declares pytest-asyncio or pytest-mock (they live in a
    // requirements file it leaves out); the tests use them, and warnings are errors (so the
    // plugin's warning about an unset loop scope would stop the run).
    let repo = write_repo(&[
        (
            "setup.cfg",
            "[metadata]\nname = aiothing\n\n[tool:pytest]\nfilterwarnings =\n    error\n\
             asyncio_mode = auto\n",
        ),
        (
            "tests/test_async.py",
            "import asyncio\n\nimport pytest\n\n\n@pytest.mark.asyncio\nasync def test_marked():\n    \
             assert await asyncio.sleep(0, result=1) == 1\n\n\n\
             async def test_auto_mode():\n    task = asyncio.create_task(asyncio.sleep(0.01, result=2))\n    \
             assert await task == 2\n\n\n\
             def test_mocker(mocker):\n    assert mocker.Mock(return_value=3)() == 3\n",
        ),
    ]);
    let sandbox = common::sandbox();
    let prepared = sandbox
        .prepare_repo(repo.path(), &|m| eprintln!("prepare: {m}"))
        .expect("prepare");
    let sources: Vec<&str> = prepared
        .requirements_report
        .detected
        .iter()
        .map(|d| d.source.as_str())
        .collect();
    assert!(
        sources.contains(&"undeclared test plugin: setup.cfg sets asyncio_mode")
            && sources.contains(
                &"undeclared test plugin: tests/test_async.py uses pytest-mock's mocker fixture"
            ),
        "{sources:?}"
    );
    let report = sandbox
        .run_tests_prepared(&prepared, &TestRequest::default())
        .expect("run");
    common::assert_passed(&report, 3);
}

#[test]
fn a_module_planned_with_a_version_specifier_is_provided() {
    // `pkg_resources` is planned as `setuptools<81` (setuptools 81 dropped it); the wheel that
    // came back used to be compared with that whole requirement and discarded.
    let dir = tempfile::tempdir().expect("tmp");
    let wheel = frognano_sandbox::layers::download_pure_wheel("setuptools<81", "3.15", dir.path())
        .expect("download")
        .expect("a setuptools wheel older than 81");
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(name.starts_with("setuptools-"), "{name}");
    assert!(frognano_sandbox::requirements::resolve::wheel_provides(
        &wheel,
        "pkg_resources"
    ));
}

#[test]
fn a_pytest_plugin_package_is_tested_with_its_own_plugin_loaded() {
    // Installed, the package registers its plugin through a pytest11 entry point; its tests
    // use the plugin's fixture directly and in the sessions pytester starts.
    let repo = write_repo(&[
        (
            "pyproject.toml",
            "[project]\nname = \"pytest-greeting\"\ndynamic = [\"version\"]\n\n\
             [project.entry-points.pytest11]\ngreeting = \"pytest_greeting\"\n",
        ),
        (
            "pytest_greeting.py",
            "import pytest\n\n\n@pytest.fixture\ndef greeting():\n    return 'hello'\n",
        ),
        (
            "tests/test_plugin.py",
            "pytest_plugins = ['pytester']\n\n\n\
             def test_the_fixture(greeting):\n    assert greeting == 'hello'\n\n\n\
             def test_in_a_pytester_session(pytester):\n    \
             pytester.makepyfile(\"def test_x(greeting):\\n    assert greeting == 'hello'\\n\")\n    \
             pytester.runpytest_inprocess().assert_outcomes(passed=1)\n",
        ),
    ]);
    let report = common::run_clean(repo.path());
    common::assert_passed(&report, 2);
}

#[test]
fn a_real_suite_that_needs_a_setup_cfg_extra_passes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = pinned_sdist("humanize").unpack(dir.path());
    let sandbox = common::sandbox();
    let prepared = sandbox
        .prepare_repo(&root, &|m| eprintln!("prepare: {m}"))
        .expect("prepare");
    assert!(
        prepared
            .requirements_report
            .detected
            .iter()
            .any(|d| d.requirement == "freezegun"
                && d.source == "setup.cfg [options.extras_require] tests"),
        "{:#?}",
        prepared.requirements_report
    );
    assert!(prepared.deps_layer.is_some());
    let report = sandbox
        .run_tests_prepared(&prepared, &TestRequest::default())
        .expect("run");
    assert_eq!(
        report.outcome,
        RunOutcome::Passed,
        "{:?}\n{}\n{}",
        report.detail,
        report.stdout,
        report.stderr
    );
    assert!(report.passed >= 100, "{} passed", report.passed);
}

#[test]
fn a_requirement_the_image_carries_compiled_in_is_taken_from_the_image() {
    // numpy has no pure-Python wheel, but the 3.15 interpreter carries it compiled in: the
    // requirement is reported as the image's copy, and the tests import that copy.
    let repo = write_repo(&[
        (
            "pyproject.toml",
            "[project]\nname = \"arrays\"\nversion = \"0.1\"\n\n\
             [project.optional-dependencies]\ntest = [\"pytest\", \"numpy\"]\n",
        ),
        (
            "tests/test_arrays.py",
            "import numpy\n\n\ndef test_sum():\n    assert numpy.arange(4).sum() == 6\n",
        ),
    ]);
    let sandbox = common::sandbox();
    let prepared = sandbox.prepare_repo(repo.path(), &|_| {}).expect("prepare");
    let numpy = prepared
        .requirements_report
        .left_out
        .iter()
        .find(|l| l.requirement == "numpy")
        .unwrap_or_else(|| panic!("{:?}", prepared.requirements_report));
    assert!(
        numpy.reason.contains("carries numpy") && numpy.reason.contains("compiled in"),
        "{}",
        numpy.reason
    );
    let report = sandbox
        .run_tests_prepared(&prepared, &TestRequest::default())
        .expect("run");
    common::assert_passed(&report, 1);
}

#[test]
fn a_requirement_that_depends_on_a_distribution_the_image_carries_resolves_to_that_copy() {
    // Flask depends on MarkupSafe, which has no pure-Python wheel: without the image's copy
    // standing in for it, pip cannot resolve Flask and the requirement is left out.
    let test_app = format!(
        "import flask\nimport markupsafe\n\n\n\
         def test_a_page_escapes_its_input():\n    \
         app = flask.Flask(__name__)\n\n    \
         @app.route('/<name>')\n    \
         def hello(name):\n        \
         return flask.render_template_string('<b>{{{{ n }}}}</b>', n=name)\n\n    \
         reply = app.test_client().get('/<i>')\n    \
         assert reply.status_code == 200\n    \
         assert reply.data == b'<b>&lt;i&gt;</b>'\n    \
         assert not markupsafe.__file__.startswith('{}')\n",
        frognano_sandbox::GUEST_DEPS
    );
    let repo = write_repo(&[
        (
            "pyproject.toml",
            "[project]\nname = \"webapp\"\nversion = \"0.1\"\n\n\
             [project.optional-dependencies]\ntest = [\"pytest\", \"flask\"]\n",
        ),
        ("tests/test_app.py", test_app.as_str()),
    ]);
    let prepared = prepared_and_passing(repo.path(), 1);
    let report = &prepared.requirements_report;
    assert!(
        report.left_out.iter().all(|l| l.requirement != "flask"),
        "{report:#?}"
    );
    let layer = prepared.deps_layer.as_ref().expect("a layer with flask");
    assert!(frognano_sandbox::layers::layer_provides(layer, "flask"));
    assert!(frognano_sandbox::layers::layer_provides(layer, "werkzeug"));
    assert!(
        !frognano_sandbox::layers::layer_provides(layer, "markupsafe"),
        "the stub never enters the layer"
    );
}

#[test]
fn a_suite_that_imports_distutils_gets_setuptools_copy_of_it() {
    // distutils left the standard library in 3.12; setuptools provides it through a .pth file
    // that an install runs at start-up, and so does the sandbox for its layer.
    let repo = write_repo(&[(
        "tests/test_legacy.py",
        "import distutils.errors\n\n\n\
         def test_the_shim_provides_distutils():\n    \
         assert issubclass(distutils.errors.DistutilsError, Exception)\n    \
         assert 'setuptools' in distutils.__file__\n",
    )]);
    let prepared = prepared_and_passing(repo.path(), 1);
    assert_eq!(
        added_by_the_loop(&prepared),
        vec![("setuptools", "tests/test_legacy.py imports distutils")]
    );
}

#[test]
fn a_distribution_whose_metadata_the_suite_reads_is_added() {
    // Every import resolves, but the conftest reads a dependency's version: only a collection
    // pass shows that the distribution is missing (PackageNotFoundError).
    let repo = write_repo(&[
        (
            "tests/conftest.py",
            "import importlib.metadata\n\n\
             DOTENV = importlib.metadata.version('python-dotenv')\n",
        ),
        (
            "tests/test_version.py",
            "from conftest import DOTENV\n\n\n\
             def test_a_version_is_read():\n    assert DOTENV.split('.')[0].isdigit()\n",
        ),
    ]);
    let prepared = prepared_and_passing(repo.path(), 1);
    assert_eq!(
        added_by_the_loop(&prepared),
        vec![(
            "python-dotenv",
            "tests/conftest.py asks for the metadata of python-dotenv"
        )]
    );
}

#[test]
fn a_module_imported_inside_a_test_function_is_added() {
    // Collection imports only the module's top level: an import inside a test fails when the
    // test runs, so only the scan of the sources finds it. numpy is the image's own copy.
    let repo = write_repo(&[(
        "tests/test_late.py",
        "import datetime\n\n\n\
         def test_frozen():\n    \
         import freezegun\n    \
         import numpy\n\n    \
         with freezegun.freeze_time('2020-01-02'):\n        \
         assert datetime.date.today().year == 2020 == int(numpy.int64(2020))\n",
    )]);
    let prepared = prepared_and_passing(repo.path(), 1);
    assert_eq!(
        added_by_the_loop(&prepared),
        vec![("freezegun", "tests/test_late.py imports freezegun")]
    );
}

#[test]
fn modules_imported_by_a_test_helper_and_by_the_package_itself_are_added() {
    // The test modules import only the package and a helper beside them; the helper and the
    // package import what nobody declared. A scan of the test modules alone found nothing to
    // fix and skipped the collection pass that shows both missing.
    let repo = write_repo(&[
        ("mypkg/__init__.py", "from . import core\n"),
        ("mypkg/core.py", "import cachetools\n"),
        ("tests/__init__.py", ""),
        ("tests/base.py", "import iso8601\n"),
        (
            "tests/test_uses.py",
            "import mypkg\n\nfrom . import base\n\n\n\
             def test_both():\n    \
             assert base.iso8601.parse_date('2020-01-02').year == 2020\n    \
             assert mypkg.core.cachetools.LRUCache(maxsize=2).maxsize == 2\n",
        ),
    ]);
    let prepared = prepared_and_passing(repo.path(), 1);
    let mut added: Vec<&str> = added_by_the_loop(&prepared)
        .into_iter()
        .map(|(distribution, _)| distribution)
        .collect();
    added.sort_unstable();
    assert_eq!(added, vec!["cachetools", "iso8601"]);
}

#[test]
fn a_distribution_published_only_as_an_sdist_gets_a_pure_wheel_built_from_it() {
    // PyMeeus publishes no wheel at all: pip's pure-Python resolution finds nothing, so the
    // sandbox builds the wheel from the sdist (once, kept in the cache) and resolves again.
    let repo = write_repo(&[(
        "tests/test_moon.py",
        "from pymeeus.Epoch import Epoch\n\n\n\
         def test_an_epoch_counts_julian_days():\n    \
         assert abs(Epoch(2000, 1, 1.5).jde() - 2451545.0) < 1e-6\n",
    )]);
    let prepared = prepared_and_passing(repo.path(), 1);
    let added = added_by_the_loop(&prepared);
    assert!(
        added
            .iter()
            .any(|(distribution, _)| distribution.eq_ignore_ascii_case("pymeeus")),
        "{added:?}"
    );
    // The index has no wheel of it: the layer's copy is the one built here.
    let layer = prepared
        .deps_layer
        .as_deref()
        .expect("a requirements layer");
    assert!(frognano_sandbox::layers::layer_provides(layer, "pymeeus"));
}

#[test]
fn trio_is_left_out_so_that_anyios_plugin_runs_its_tests_on_asyncio() {
    // trio installs as pure Python but raises NotImplementedError at import in WASI (no epoll
    // or kqueue). anyio's pytest plugin lists the backends it can import when it loads, and
    // only ImportError means "not available": with trio in the layer, the plugin failed to
    // load and no test ran.
    let repo = write_repo(&[
        ("requirements-test.txt", "anyio\ntrio\n"),
        (
            "tests/test_sleep.py",
            "import anyio\nimport pytest\n\npytestmark = pytest.mark.anyio\n\n\n\
             async def test_sleeps_on_asyncio():\n    await anyio.sleep(0)\n",
        ),
    ]);
    let prepared = prepared_and_passing(repo.path(), 1);
    let left_out = &prepared.config.left_out;
    assert!(
        left_out
            .iter()
            .any(|l| l.requirement == "trio" && l.reason.contains("I/O manager")),
        "{left_out:#?}"
    );
}
