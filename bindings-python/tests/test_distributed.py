"""frognano.distributed against a real Ray cluster on loopback: a head and a second node
(`ray start`, one CPU each, so two FrogNano workers), started and stopped here.

Without Ray the cluster tests are skipped (unless FROGNANO_REQUIRE_INTEGRATIONS=1, as in the
test script, where the integrations environment provides Ray); the tests of what happens
without Ray always run."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import frognano
from frognano import distributed

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_TASKS = ROOT / "examples" / "tasks" / "sample.jsonl"
REPOS = ROOT / "examples" / "repos"
REQUIRED = os.environ.get("FROGNANO_REQUIRE_INTEGRATIONS") == "1"

try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False
    if REQUIRED:
        raise

needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed")


def _ray_cli(*args, env=None, check=True):
    # `python -m` rather than the `ray` script: a relocated virtualenv's scripts name an old path.
    return subprocess.run([sys.executable, "-m", "ray.scripts.scripts", *args], env=env,
                          check=check, capture_output=True, text=True, timeout=180)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ray_address():
    """A two-node Ray cluster on 127.0.0.1 (head + one worker node, one CPU each)."""
    if not HAVE_RAY:
        pytest.skip("Ray is not installed")
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="fnray")  # short: Ray's socket paths must fit 107 bytes
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    common = ["--num-cpus=1", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    address = f"127.0.0.1:{port}"
    try:
        _ray_cli("start", "--head", f"--port={port}", "--include-dashboard=false",
                 f"--temp-dir={temp}", *common, env=env)
        _ray_cli("start", f"--address={address}", *common, env=env)
        yield address
    finally:
        _ray_cli("stop", "--force", env=env, check=False)
        shutil.rmtree(temp, ignore_errors=True)


def _comparable(record):
    """What an episode did, without timings and machine paths."""
    return {
        "task_id": record["task_id"],
        "outcome": record["outcome"],
        "patch": record["patch"],
        "actions": [step["action"] for step in record["steps"]],
        "rewards": [step.get("reward") for step in record["steps"]],
    }


def _summary(report):
    keys = ("episodes", "resolved", "met_failure", "recovered", "mean_steps", "tool_errors",
            "test_runs", "truncated", "actions", "valid_actions", "failed_episodes")
    return {key: report[key] for key in keys}


# Without Ray ---------------------------------------------------------------------------------


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(frognano.ClusterError, match=r"pip install 'frognano\[ray\]'"):
        frognano.evaluate(frognano.load_tasks(SAMPLE_TASKS)[:1], "oracle", ray_address="auto")


def test_frognano_does_not_import_ray():
    out = subprocess.run([sys.executable, "-c",
                          "import sys, frognano, frognano.distributed; "
                          "print('ray' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_cli_says_what_to_install_without_ray(tmp_path):
    cli = os.environ.get("FROGNANO_CLI")
    if not cli:
        pytest.skip("FROGNANO_CLI is not set (the test script sets it)")
    # A Python that has neither Ray nor FrogNano: a bare virtualenv.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")],
                   check=True)
    env = dict(os.environ, FROGNANO_PYTHON=str(tmp_path / "bare" / "bin" / "python"))
    out = subprocess.run([cli, "eval", "--ray", "auto", "--limit", "1"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "pip install 'frognano[ray]'" in out.stderr


def test_repositories_pack_to_the_same_bytes_and_unpack_whole(tmp_path):
    digest, data = distributed.pack_repository(REPOS / "tinyparse")
    again, same = distributed.pack_repository(REPOS / "tinyparse")
    assert (digest, data) == (again, same)
    folder = distributed.unpack_repository(digest, data, str(tmp_path))
    assert Path(folder).name == "tinyparse"  # task ids are made from the repository's name
    shipped = sorted(p.relative_to(folder).as_posix() for p in Path(folder).rglob("*")
                     if p.is_file())
    original = sorted(p.relative_to(REPOS / "tinyparse").as_posix()
                      for p in (REPOS / "tinyparse").rglob("*")
                      if p.is_file() and "__pycache__" not in p.parts
                      and ".pytest_cache" not in p.parts and p.suffix != ".pyc")
    assert shipped == original
    with pytest.raises(frognano.ClusterError, match="do not match"):
        distributed.unpack_repository("0" * 64, data, str(tmp_path))


# On a cluster --------------------------------------------------------------------------------


@needs_ray
def test_evaluation_on_the_cluster_equals_the_single_machine_run(ray_address, sandbox):
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:6]
    local_report, local_records = frognano.evaluate(tasks, "oracle", sandbox=sandbox, workers=2)
    seen = []
    report, records = frognano.evaluate(tasks, "oracle", ray_address=ray_address,
                                        progress=lambda done, total: seen.append((done, total)))
    # In task order, each episode as it went on one machine.
    assert [r["task_id"] for r in records] == [t["id"] for t in tasks]
    by_id = {r["task_id"]: _comparable(r) for r in local_records}
    assert [_comparable(r) for r in records] == [by_id[t["id"]] for t in tasks]
    assert _summary(report) == _summary(local_report)
    assert report["resolved"] == len(tasks)
    assert report["workers"] == 2  # two nodes, one worker each
    assert seen[-1] == (len(tasks), len(tasks))


@needs_ray
def test_a_repair_policy_travels_with_its_state(ray_address, sandbox):
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:3]
    policy = frognano.RepairPolicy(seed=3, greedy=True)
    policy.set_weights([0.5 * (i % 3) for i in range(len(frognano.repair_feature_names()))])
    local_report, local_records = frognano.evaluate(tasks, policy, sandbox=sandbox)
    report, records = frognano.evaluate(tasks, policy, ray_address=ray_address)
    by_id = {r["task_id"]: _comparable(r) for r in local_records}
    assert [_comparable(r) for r in records] == [by_id[t["id"]] for t in tasks]
    assert _summary(report) == _summary(local_report)


@needs_ray
def test_a_killed_worker_loses_no_episode(ray_address, sandbox):
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:8]
    _, local_records = frognano.evaluate(tasks, "oracle", sandbox=sandbox, workers=2)
    with distributed.Cluster(ray_address, actors=2) as cluster:
        pids = [where["pid"] for where in cluster.start()]
        assert len(pids) == 2
        first_done = threading.Event()
        killed = []

        def kill_one_mid_run():
            # A second after the first episode ended both workers are in an episode (each
            # takes seconds: test runs in the sandbox).
            if first_done.wait(timeout=300):
                time.sleep(1.0)
                os.kill(pids[1], signal.SIGKILL)
                killed.append(pids[1])

        killer = threading.Thread(target=kill_one_mid_run)
        killer.start()
        try:
            report, records = cluster.evaluate(tasks, "oracle",
                                               progress=lambda done, total: first_done.set())
        finally:
            first_done.set()
            killer.join()
        assert killed
        assert cluster.events, "the worker's death was not noticed"
    by_id = {r["task_id"]: _comparable(r) for r in local_records}
    assert [_comparable(r) for r in records] == [by_id[t["id"]] for t in tasks]
    assert report["failed_tasks"] == []
    assert report["episodes"] == len(tasks)


@needs_ray
def test_a_task_that_keeps_killing_workers_is_marked_failed(ray_address):
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:3]
    killer = tasks[1]["id"]

    class KillsItsWorker:
        """Submits at once, except on one task, where it ends its worker's process."""

        def act(self, contexts):
            for context in contexts:
                if context["task_id"] == killer:
                    os._exit(3)
            return ["submit" for _ in contexts]

    with distributed.Cluster(ray_address, actors=2, max_retries=1) as cluster:
        report, records = cluster.evaluate(tasks, KillsItsWorker())
    assert [r["task_id"] for r in records] == [tasks[0]["id"], tasks[2]["id"]]
    assert len(report["failed_tasks"]) == 1
    failed = report["failed_tasks"][0]
    assert failed["task_id"] == killer
    assert "died" in failed["error"] and "retried 1 times" in failed["error"]


@needs_ray
def test_synthesis_on_one_shard_equals_the_single_machine_run(ray_address, sandbox):
    repo = REPOS / "tinyparse"
    # Generous timeouts: a validation run over its budget is rejected, so load is the one
    # input of synthesis that is not the seed (see test_synth.py).
    local, _ = frognano.synthesize(repo, 2, seed=5, sandbox=sandbox, timeout_factor=30.0)
    tasks, stats = frognano.synthesize(repo, 2, seed=5, ray_address=ray_address, shards=1,
                                       timeout_factor=30.0)
    assert [t["id"] for t in tasks] == [t["id"] for t in local]
    assert [t["bug_patch"] for t in tasks] == [t["bug_patch"] for t in local]
    # The tasks name the repository as given, not a worker's copy.
    assert all(Path(t["repo"]["path"]) == repo.resolve() for t in tasks)
    assert stats["shards"] == 1
    # Tasks made on the cluster run here.
    report, _ = frognano.evaluate(tasks, "oracle", sandbox=sandbox)
    assert report["resolved"] == len(tasks)


@needs_ray
def test_a_corpus_builds_one_entry_per_worker(ray_address, tmp_path):
    corpus = tmp_path / "corpus"
    ids = frognano.corpus_add(corpus, [str(REPOS / "tinyparse"), str(REPOS / "textkit")])
    summary = frognano.corpus_build(corpus, ray_address=ray_address)
    assert summary["built"] == 2 and summary["ready"] == 2, summary
    assert sorted(m["id"] for m in summary["manifests"]) == sorted(ids)
    assert {e["status"] for e in frognano.corpus_entries(corpus)} == {"ready"}
    # A second build keeps what is built.
    again = frognano.corpus_build(corpus, ray_address=ray_address)
    assert again["built"] == 0 and again["kept"] == 2


@needs_ray
def test_the_trainers_rollouts_run_on_the_cluster(ray_address, sandbox):
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:1]
    policy = frognano.RepairPolicy(seed=1, max_attempts=2)
    calls = []
    with distributed.Cluster(ray_address) as cluster:

        def rollouts(state, batch, env):
            calls.append((state["kind"], len(batch), env["max_steps"]))
            return cluster.rollouts(state, batch, env)

        trainer = frognano.GrpoTrainer(sandbox, policy, tasks, tasks_per_iteration=1,
                                       group_size=2, max_steps=6, rollouts=rollouts)
        metrics = trainer.iterate()
    assert calls == [("repair", 2, 6)]
    assert metrics["rollouts"] == 2
    assert trainer.last_batch is not None


@needs_ray
def test_the_training_job_sends_its_rollouts_to_the_cluster(ray_address, tmp_path):
    config = {"repos": [str(REPOS / "textkit")], "iterations": 1, "held_out": 1,
              "evaluate_initial": False, "policy": {"max_attempts": 2},
              "trainer": {"tasks_per_iteration": 1, "group_size": 2, "env": {"max_steps": 6}}}
    events = []
    report = frognano.train(config, tmp_path / "out", ray_address=ray_address,
                            progress=lambda event, data: events.append((event, data)))
    assert report["rollouts"] == 2
    episodes = [data for event, data in events if event == "episodes"]
    assert episodes and episodes[-1] == {"done": 2, "total": 2}
    assert len((tmp_path / "out" / "metrics.jsonl").read_text().splitlines()) == 1


@needs_ray
def test_inside_a_ray_job_the_existing_connection_is_used(ray_address):
    """A trainer's Ray actor (verl's, SkyRL's) evaluates through FrogNano's workers on the same
    cluster, and its own Ray connection stays open afterwards."""
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:2]
    ray.init(address=ray_address, log_to_driver=False)
    try:

        @ray.remote(num_cpus=0)
        class TrainerActor:
            def evaluate(self, tasks):
                import ray as ray_inside

                import frognano as fn

                report, records = fn.evaluate(tasks, "oracle", ray_address="auto")
                return report["resolved"], [r["task_id"] for r in records], \
                    ray_inside.is_initialized()

        actor = TrainerActor.remote()
        resolved, ids, still_connected = ray.get(actor.evaluate.remote(tasks), timeout=600)
        assert resolved == len(tasks)
        assert ids == [t["id"] for t in tasks]
        assert still_connected
        ray.kill(actor)
    finally:
        ray.shutdown()


@needs_ray
def test_a_guest_trap_in_a_connected_driver_is_a_crashed_run(ray_address, tmp_path):
    """Ray's driver installs a crash logger for SIGSEGV/SIGILL over the sandbox's trap handlers;
    a guest that exhausts its stack after that must still end as a crashed run, not kill the
    host. Runs in a child process so that a regression fails this test, not the whole run."""
    (tmp_path / "test_deep.py").write_text(
        "import copy\nimport sys\n\n\ndef test_deep_copy():\n"
        "    sys.setrecursionlimit(10**7)\n    x = []\n    for _ in range(10**6):\n"
        "        x = [x]\n    copy.deepcopy(x)\n")
    script = (
        "import sys, frognano, ray\n"
        "sandbox = frognano.Sandbox()\n"
        "sandbox.run_tests(sys.argv[2])\n"  # the sandbox's handlers are installed first
        "ray.init(address=sys.argv[1], log_to_driver=False)\n"
        "print(sandbox.run_tests(sys.argv[2]).outcome)\n"
        "ray.shutdown()\n")
    child = subprocess.run([sys.executable, "-c", script, ray_address, str(tmp_path)],
                           capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split()[-1] == "crashed", child.stdout


@needs_ray
def test_the_cli_runs_eval_on_the_cluster(ray_address, tmp_path):
    cli = os.environ.get("FROGNANO_CLI")
    if not cli:
        pytest.skip("FROGNANO_CLI is not set (the test script sets it)")
    env = dict(os.environ, FROGNANO_PYTHON=sys.executable)
    local = subprocess.run([cli, "eval", "--limit", "3", "--json"], env=env,
                           capture_output=True, text=True, timeout=600)
    out = tmp_path / "records.jsonl"
    remote = subprocess.run([cli, "eval", "--limit", "3", "--json", "--ray", ray_address,
                             "--out", str(out)], env=env, capture_output=True, text=True,
                            timeout=600)
    assert remote.returncode == 0, remote.stderr
    assert _summary(json.loads(remote.stdout)) == _summary(json.loads(local.stdout))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in lines] == [t["id"] for t in
                                             frognano.load_tasks(SAMPLE_TASKS)[:3]]


@needs_ray
def test_a_cluster_without_room_for_a_worker_says_so(ray_address):
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:1]
    with distributed.Cluster(ray_address, actors=1, cpus_per_actor=64,
                             start_timeout=3) as cluster:
        with pytest.raises(frognano.ClusterError, match="free CPU"):
            cluster.evaluate(tasks, "oracle")


def _frognano_workers():
    """Processes of FrogNano's Ray workers on this machine (Ray titles them ray::Worker)."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if line.startswith("ray::Worker")]


@needs_ray
def test_ctrl_c_stops_the_clusters_work(ray_address, ctrl_c):
    ctrl_c(
        setup=f"tasks = frognano.load_tasks({str(SAMPLE_TASKS)!r}) * 4",
        call=f"frognano.evaluate(tasks, 'oracle', ray_address={ray_address!r})",
        after=15, timeout=60,
    )
    deadline = time.monotonic() + 30
    while _frognano_workers() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _frognano_workers() == []
