"""FrogNano across machines: evaluation, synthesis, corpus builds and trainer rollouts on Ray.

Needs Ray (``pip install 'frognano[ray]'``) and FrogNano's package on every node of the
cluster. FrogNano imports this module only when asked for a cluster (ray_address=, the
CLI's --ray), and it imports Ray only then, so everything else works without Ray.

A :class:`Cluster` connects to a Ray cluster (``"auto"``: the one this machine belongs to, an
address such as ``"127.0.0.1:6379"`` or ``"ray://head:10001"``, ``"local"``: a private one
started in-process) and starts FrogNano workers on it: Ray actors that each hold a
:class:`frognano.Sandbox` (the runtime cache prepared once per node on start) and run episodes,
syntheses and corpus entries with the same library calls as a single machine. Inside a
process that Ray already runs (a trainer's actor, a verl or SkyRL worker) the existing
connection is used and left open.

Work goes out one unit at a time (an episode, a synthesis shard, a corpus entry) to whichever
worker has room, and results come back in the order of the input. A worker that dies has its
units retried on another (``max_retries`` times each): nothing finished is lost, and a unit
that keeps killing workers is reported as failed with the reason. Ctrl-C stops the workers
and raises ``KeyboardInterrupt`` after the results so far were handed out.

Repositories travel by content: the driver packs each repository once (a deterministic
archive), puts it in Ray's object store under its sha256, and each node unpacks it once into
its cache. With ``shared_paths=True`` tasks keep their paths (a file system every node
mounts at the same place).

>>> import frognano
>>> tasks = frognano.load_tasks("examples/tasks/sample.jsonl")
>>> summary, records = frognano.evaluate(tasks, "oracle", ray_address="auto")
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import json
import os
import sys
import tarfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ._errors import ClusterError, FrognanoError

INSTALL_HINT = "pip install 'frognano[ray]'"



def ray_module():
    """Ray, imported; a ClusterError that says what to install when it is missing."""
    try:
        import ray
    except ImportError as e:
        raise ClusterError(
            f"Ray is not installed in this Python ({sys.executable}): {INSTALL_HINT} "
            "(and FrogNano's package on every node of the cluster)"
        ) from e
    return ray


# ---------------------------------------------------------------------------------------------
# Repositories by content hash.


def _tree_files(root: str) -> List[str]:
    from . import _frognano

    # Never shipped: the folders a sandbox's workspace never copies either.
    skipped = set(_frognano.SKIPPED_DIRS)
    files = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skipped)
        for name in sorted(names):
            if not name.endswith((".pyc", ".pyo")):
                files.append(os.path.join(folder, name))
    return files


def pack_repository(path: str) -> Tuple[str, bytes]:
    """(sha256, archive) of a repository directory or bundle file: a tar.gz with sorted
    entries and no times or owners, so the same content always packs to the same bytes. The
    archive holds one top-level entry named as the repository (task ids and module maps are
    made from that name)."""
    import gzip

    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise FrognanoError(f"{path}: no such repository")
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as stream:
        with tarfile.open(fileobj=stream, mode="w", format=tarfile.PAX_FORMAT) as archive:
            base = os.path.dirname(path)
            files = _tree_files(path) if os.path.isdir(path) else [path]
            for file in files:
                _add_file(archive, base, path, file)
    data = buffer.getvalue()
    return hashlib.sha256(data).hexdigest(), data


def _add_file(archive: tarfile.TarFile, base: str, root: str, file: str) -> None:
    info = archive.gettarinfo(file, arcname=os.path.relpath(file, base))
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if info.issym():
        # A link that stays inside the repository travels as a link; one pointing out of it
        # is left behind (the sandbox would not follow it either).
        target = os.path.realpath(file)
        if os.path.commonpath([target, os.path.realpath(root)]) == os.path.realpath(root):
            archive.addfile(info)
        return
    if not info.isfile():
        return
    info.mode = 0o755 if info.mode & 0o111 else 0o644
    with open(file, "rb") as f:
        archive.addfile(info, f)


def unpack_repository(digest: str, data: bytes, cache: str) -> str:
    """Unpacks an archive of pack_repository into cache/<digest> once (atomically) and returns
    the repository in it (cache/<digest>/<its name>)."""
    target = os.path.join(cache, digest)
    if os.path.isdir(target):
        return _only_entry(target)
    if hashlib.sha256(data).hexdigest() != digest:
        raise ClusterError(f"repository archive {digest[:12]}: the bytes do not match the hash")
    os.makedirs(cache, exist_ok=True)
    partial = f"{target}.partial-{os.getpid()}-{threading.get_ident()}"
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        archive.extractall(partial, filter="data")
    try:
        os.rename(partial, target)
    except OSError:
        # Another worker of this node unpacked it first.
        import shutil

        shutil.rmtree(partial, ignore_errors=True)
        if not os.path.isdir(target):
            raise
    return _only_entry(target)


def _only_entry(folder: str) -> str:
    names = os.listdir(folder)
    if len(names) != 1:
        raise ClusterError(f"{folder}: a shipped repository holds {len(names)} entries, not 1")
    return os.path.join(folder, names[0])


class _Shipment:
    """The repositories of some tasks, packed once and put in the object store."""

    def __init__(self, ray, shared_paths: bool):
        self._ray = ray
        self._shared = shared_paths
        self._by_path: Dict[str, Optional[Tuple[str, Any, str]]] = {}

    def ticket(self, repo: Any) -> Optional[Tuple[str, List[Any], str]]:
        """(digest, [object ref], kind) of a task's repository source, or None when paths are
        shared. The ref is wrapped in a list so Ray hands it over unresolved: a worker fetches
        the bytes only when its node has not unpacked them yet."""
        if self._shared or not isinstance(repo, dict) or "path" not in repo:
            return None
        path = os.path.abspath(str(repo["path"]))
        if path not in self._by_path:
            digest, data = pack_repository(path)
            self._by_path[path] = (digest, self._ray.put(data), repo.get("kind", "path"))
        digest, ref, kind = self._by_path[path]
        return digest, [ref], kind


def _localised(task: Dict[str, Any], path: str) -> Dict[str, Any]:
    task = dict(task)
    task["repo"] = dict(task["repo"], path=path)
    return task


# ---------------------------------------------------------------------------------------------
# Policies shipped to workers.


def policy_description(policy: Any) -> Dict[str, Any]:
    """What a worker needs to rebuild `policy`: a spec string as it is, a RepairPolicy by its
    configuration and state, any other object with act(contexts) by pickling (cloudpickle)."""
    import frognano

    if policy is None:
        policy = "oracle"
    key = uuid.uuid4().hex
    if isinstance(policy, str):
        return {"key": key, "spec": policy}
    if isinstance(policy, frognano.RepairPolicy):
        return {"key": key, "repair": {"config": policy.config, "state": policy.state()}}
    if isinstance(policy, (frognano.OnnxPolicy, frognano.HttpPolicy)):
        raise FrognanoError(
            f"a {type(policy).__name__} object holds a loaded model and cannot travel to other "
            "machines: pass its spec instead ('onnx:MODEL' or 'openai:URL@MODEL')"
        )
    if not hasattr(policy, "act"):
        raise FrognanoError(
            f"policy must be a spec string, a RepairPolicy or an object with act(contexts), "
            f"got {type(policy).__name__}"
        )
    ray = ray_module()
    try:
        blob = ray.cloudpickle.dumps(policy)
    except Exception as e:
        raise FrognanoError(
            f"the policy {type(policy).__name__} cannot be pickled to send it to the cluster's "
            f"workers: {e}"
        ) from e
    return {"key": key, "pickled": blob}


_REPAIR_OPTIONS = ("max_attempts", "view_chunk", "max_file_lines", "max_candidates",
                   "temperature", "greedy", "learning_rate")


def build_policy(description: Dict[str, Any], seed: Optional[int] = None) -> Any:
    """The policy a worker acts with, from policy_description's dict (a repair policy seeded
    with `seed` when given)."""
    import frognano

    if "spec" in description:
        return description["spec"]
    if "repair" in description:
        config = dict(description["repair"]["config"])
        options = {k: config[k] for k in _REPAIR_OPTIONS if k in config}
        policy = frognano.RepairPolicy(int(config.get("seed", 0) if seed is None else seed),
                                       **options)
        policy.load_state(description["repair"]["state"])
        return policy
    import pickle

    return pickle.loads(description["pickled"])


# ---------------------------------------------------------------------------------------------
# The worker (a Ray actor).


class Worker:
    """A FrogNano worker: one Sandbox, episodes, synthesis shards and corpus entries. Ray runs
    it as an actor with max_concurrency = its environments, one unit per thread."""

    def __init__(self, image: Optional[str], sandbox_workers: int):
        import frognano

        self._cache = os.path.join(frognano.cache_dir(), "cluster")
        os.makedirs(self._cache, exist_ok=True)
        # Workers of one node prepare the runtime once: the first holds the lock while it
        # fetches and compiles, the others then find the cache ready.
        import fcntl

        with open(os.path.join(self._cache, "setup.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            frognano.setup(image, progress=lambda _message: None)
        self.sandbox = frognano.Sandbox(image=image, workers=sandbox_workers,
                                        progress=lambda _message: None)
        self._local = threading.local()

    def where(self) -> Dict[str, Any]:
        """This worker's process id and Ray node (tests kill workers by pid)."""
        import ray

        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    def _repo(self, ticket) -> Optional[str]:
        """This node's copy of a shipped repository (unpacked on first use), or None."""
        if ticket is None:
            return None
        digest, (ref,), _kind = ticket
        cache = os.path.join(self._cache, "repos")
        if os.path.isdir(os.path.join(cache, digest)):
            return _only_entry(os.path.join(cache, digest))
        import ray

        return unpack_repository(digest, ray.get(ref), cache)

    def _policy(self, description: Dict[str, Any], seed: Optional[int]) -> Any:
        if description.get("reseed") and seed is not None:
            # Training rollouts sample: every episode gets its own seed, so the rollouts of a
            # group differ wherever they run.
            return build_policy(description, seed)
        cached = getattr(self._local, "policy", None)
        if cached is None or cached[0] != description["key"]:
            cached = (description["key"], build_policy(description))
            self._local.policy = cached
        return cached[1]

    def episode(self, task: Dict[str, Any], ticket, policy: Dict[str, Any],
                max_steps: int, seed: Optional[int] = None) -> Dict[str, Any]:
        """One episode of `task`: {"record": ...} or {"failed": {"task_id", "error"}}."""
        import frognano

        local = self._repo(ticket)
        if local is not None:
            task = _localised(task, local)
        summary, records = frognano.evaluate([task], self._policy(policy, seed),
                                             sandbox=self.sandbox, workers=1,
                                             max_steps=max_steps)
        if records:
            return {"record": records[0]}
        failed = summary["failed_tasks"]
        return {"failed": failed[0] if failed else {"task_id": task.get("id"),
                                                     "error": "the episode did not run"}}

    def synthesize(self, repo: str, ticket, n: int, options: Dict[str, Any]) -> Dict[str, Any]:
        """Tasks of one synthesis shard, their repository given back as `repo`."""
        import frognano

        local = self._repo(ticket)
        path = local if local is not None else repo
        tasks, stats = frognano.synthesize(path, n, sandbox=self.sandbox, **options)
        for task in tasks:
            task["repo"] = dict(task["repo"], path=repo)
        return {"tasks": tasks, "stats": stats}

    def build_entry(self, corpus: str, entry: str, options: Dict[str, Any]) -> Dict[str, Any]:
        """Builds one corpus entry (the corpus folder is on a path every node shares)."""
        import frognano

        return frognano.corpus_build(corpus, only=[entry], jobs=1, sandbox=self.sandbox,
                                     **options)


# ---------------------------------------------------------------------------------------------
# The cluster and its scheduler.


class UnitFailed(Exception):
    """A unit of work that raised on its worker (the same input would raise again)."""


def _is_worker_death(ray, error: BaseException) -> bool:
    exceptions = ray.exceptions
    kinds = tuple(
        getattr(exceptions, name)
        for name in ("RayActorError", "ActorDiedError", "ActorUnavailableError",
                     "WorkerCrashedError", "NodeDiedError", "OutOfMemoryError")
        if hasattr(exceptions, name)
    )
    return isinstance(error, kinds)


class Cluster:
    """FrogNano's workers on a Ray cluster.

    address: "auto" (the cluster this machine belongs to), "HOST:PORT", "ray://HOST:PORT" or
    "local" (a private cluster in this process); ignored when Ray is already initialised in
    this process (a trainer's), whose connection is used and left open.
    actors: workers to start (default: the cluster's CPUs / cpus_per_actor).
    envs_per_actor: units a worker runs at once (default: cpus_per_actor).
    max_retries: how often a unit whose worker died is tried again before it is reported failed.
    shared_paths: tasks' repositories are on a file system every node mounts at the same path
    (nothing is shipped).
    start_timeout: seconds to wait for a first worker to be ready (prepared its runtime) while
    none is, before giving up with a ClusterError.
    """

    def __init__(self, address: str = "auto", *, actors: Optional[int] = None,
                 envs_per_actor: Optional[int] = None, cpus_per_actor: float = 1.0,
                 max_retries: int = 2, image: Optional[str] = None,
                 shared_paths: bool = False, max_actor_starts: Optional[int] = None,
                 start_timeout: float = 600.0):
        ray = ray_module()
        self._ray = ray
        for name, value in (("actors", actors), ("envs_per_actor", envs_per_actor)):
            if value is not None and value < 1:
                raise FrognanoError(f"{name} must be at least 1, got {value}")
        if max_retries < 0:
            raise FrognanoError(f"max_retries must be at least 0, got {max_retries}")
        if not cpus_per_actor > 0:
            raise FrognanoError(f"cpus_per_actor must be positive, got {cpus_per_actor}")
        self._owns_connection = False
        # FrogNano's workers use no accelerator; keep Ray from warning about its future default.
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
        if not ray.is_initialized():
            try:
                ray.init(address=None if address == "local" else address,
                         log_to_driver=False, include_dashboard=False,
                         configure_logging=False)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise ClusterError(f"cannot connect to the Ray cluster at {address}: {e}") from e
            self._owns_connection = True
        if actors is None:
            cpus = ray.cluster_resources().get("CPU", 1.0)
            actors = max(1, int(cpus // cpus_per_actor))
        self.actors = actors
        self.envs_per_actor = envs_per_actor or max(1, int(cpus_per_actor))
        self.cpus_per_actor = cpus_per_actor
        self.max_retries = max_retries
        self.shared_paths = shared_paths
        self.image = image
        self._max_starts = max_actor_starts if max_actor_starts is not None else 2 * actors + 8
        self._starts = 0
        self._workers: List[Any] = []  # started and not known dead
        self._starting: Dict[Any, Any] = {}  # worker -> its where() ref, until it answers
        self._ready: List[Any] = []
        self._start_failures: List[str] = []
        self.start_timeout = start_timeout
        self.nodes: List[Dict[str, Any]] = []  # where() of every worker that started
        self._remote_class = None
        self._cancel = threading.Event()
        self.events: List[Dict[str, Any]] = []  # worker deaths and retries, for reports

    # Lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def close(self) -> None:
        """Stops the workers (and the connection, when this object opened it)."""
        for worker in self._workers:
            with contextlib.suppress(Exception):
                self._ray.kill(worker)
        self._workers, self._ready, self._starting = [], [], {}
        if self._owns_connection:
            with contextlib.suppress(Exception):
                self._ray.shutdown()
            self._owns_connection = False

    def _start_worker(self):
        if self._starts >= self._max_starts:
            return None
        if self._remote_class is None:
            self._remote_class = self._ray.remote(Worker)
        self._starts += 1
        sandbox_workers = max(1, int(self.cpus_per_actor))
        worker = self._remote_class.options(
            num_cpus=self.cpus_per_actor, max_concurrency=self.envs_per_actor,
            max_restarts=0,
        ).remote(self.image, sandbox_workers)
        self._workers.append(worker)
        self._starting[worker] = worker.where.remote()
        return worker

    def _poll_starting(self, timeout: float = 0.0) -> None:
        if not self._starting:
            return
        by_ref = {ref: worker for worker, ref in self._starting.items()}
        answered, _ = self._ray.wait(list(by_ref), num_returns=len(by_ref), timeout=timeout)
        for ref in answered:
            worker = by_ref[ref]
            del self._starting[worker]
            try:
                self.nodes.append(self._ray.get(ref))
                self._ready.append(worker)
            except Exception as error:  # noqa: BLE001 (a worker that could not start)
                self._start_failures.append(_one_line(getattr(error, "cause", None) or error))
                self._forget(worker)

    def workers(self) -> List[Any]:
        """The ready worker handles; workers are started (up to `actors`) on first use and
        whenever one died."""
        while len(self._workers) < self.actors:
            if self._start_worker() is None:
                break
        self._poll_starting()
        return list(self._ready)

    def start(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """Starts the workers and waits until each is ready; returns where each runs (pid,
        node). Raises ClusterError when none can start."""
        self.workers()
        deadline = time.monotonic() + (self.start_timeout if timeout is None else timeout)
        while self._starting and time.monotonic() < deadline:
            self._poll_starting(timeout=0.5)
        if not self._ready:
            raise ClusterError(self._no_worker_message())
        return list(self.nodes[-len(self._ready):])

    def _no_worker_message(self) -> str:
        if self._start_failures:
            return (f"no FrogNano worker could start on the cluster ({self._starts} tries); "
                    f"the last failure: {self._start_failures[-1]} (is frognano installed on "
                    f"every node? {INSTALL_HINT})")
        return (f"no FrogNano worker became ready within {self.start_timeout:.0f} s: does the "
                f"cluster have {self.cpus_per_actor:g} free CPU(s) for a worker?")

    def shipment(self) -> _Shipment:
        return _Shipment(self._ray, self.shared_paths)

    # The scheduler -----------------------------------------------------------------------

    def run(self, units: Sequence[Any], call: Callable[[Any, Any], Any],
            describe: Callable[[Any], str] = str,
            progress: Optional[Callable[[int, int], None]] = None) -> Iterator[Tuple[int, Any]]:
        """Runs call(worker, unit) -> object ref for every unit and yields (index, result) in
        the order of `units`, where result is the unit's value or a UnitFailed. Workers that
        die are replaced and their units retried (max_retries each)."""
        ray = self._ray
        total = len(units)
        pending = collections.deque(range(total))
        deaths = collections.Counter()
        results: Dict[int, Any] = {}
        inflight: Dict[Any, Tuple[int, Any]] = {}
        load: Dict[Any, int] = collections.Counter()
        next_out = 0
        done = 0
        waiting_since = time.monotonic()
        try:
            while next_out < total:
                if self._cancel.is_set():
                    raise KeyboardInterrupt("the cluster's work was cancelled")
                live = self.workers()
                if not live and not inflight:
                    # Nothing runs: wait for a starting worker, within start_timeout.
                    if not self._starting or (time.monotonic() - waiting_since
                                              > self.start_timeout):
                        raise ClusterError(f"{self._no_worker_message()}; {done} of {total} "
                                           "units finished")
                    self._poll_starting(timeout=0.2)
                    continue
                waiting_since = time.monotonic()
                for worker in live:
                    while pending and load[worker] < self.envs_per_actor:
                        index = pending.popleft()
                        ref = call(worker, units[index])
                        inflight[ref] = (index, worker)
                        load[worker] += 1
                if not inflight:
                    continue
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.2)
                for ref in ready:
                    index, worker = inflight.pop(ref)
                    load[worker] -= 1
                    try:
                        results[index] = ray.get(ref)
                    except Exception as error:  # noqa: BLE001 (sorted out below)
                        if not _is_worker_death(ray, error):
                            cause = getattr(error, "cause", None) or error
                            results[index] = UnitFailed(_one_line(cause))
                        else:
                            self._worker_died(worker, error)
                            deaths[index] += 1
                            self.events.append({"unit": describe(units[index]),
                                                "worker_died": _one_line(error)})
                            if deaths[index] > self.max_retries:
                                results[index] = UnitFailed(
                                    f"it was running on {deaths[index]} workers that died "
                                    f"(retried {self.max_retries} times); last: "
                                    f"{_one_line(error)}"
                                )
                            else:
                                pending.appendleft(index)
                                continue
                    done += 1
                    if progress is not None:
                        progress(done, total)
                while next_out in results:
                    yield next_out, results.pop(next_out)
                    next_out += 1
        except BaseException:
            # Ctrl-C or a failure: stop every unit still running (finished ones were handed out).
            for worker in self._workers:
                with contextlib.suppress(Exception):
                    ray.kill(worker)
            self._workers, self._ready, self._starting = [], [], {}
            raise

    def cancel(self) -> None:
        """Stops the work in progress (from any thread): the running job raises
        KeyboardInterrupt after handing out what finished."""
        self._cancel.set()

    @contextlib.contextmanager
    def interruptible(self) -> Iterator[None]:
        """Ctrl-C cancels this cluster's work even while a native call (a trainer) runs it from
        another thread. Only in the main thread; elsewhere it does nothing."""
        import signal

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)

        def on_interrupt(signum, frame):
            self.cancel()
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, on_interrupt)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def _forget(self, worker) -> None:
        for group in (self._workers, self._ready):
            if worker in group:
                group.remove(worker)
        self._starting.pop(worker, None)
        with contextlib.suppress(Exception):
            self._ray.kill(worker)

    def _worker_died(self, worker, error) -> None:
        self._forget(worker)

    # Jobs --------------------------------------------------------------------------------

    def evaluate(self, tasks: Sequence[Any], policy: Any = None, *, max_steps: int = 30,
                 out: Optional[str] = None,
                 progress: Optional[Callable[[int, int], None]] = None,
                 on_record: Optional[Callable[[int, Dict[str, Any]], None]] = None
                 ) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
        """frognano.evaluate on the cluster: (report, records), the records in task order."""
        import frognano

        tasks = _task_dicts(tasks)
        if not tasks:
            raise frognano.InvalidArgumentError("no tasks to evaluate")
        description = policy_description(policy)
        policy_ref = self._ray.put(description)
        shipment = self.shipment()
        units = [(task, shipment.ticket(task.get("repo"))) for task in tasks]
        started = time.monotonic()
        records: List[Dict[str, Any]] = []
        failed: List[Dict[str, Any]] = []
        sink = open(out, "w") if out is not None else None
        try:
            for index, result in self.run(
                units,
                lambda worker, unit: worker.episode.remote(unit[0], unit[1], policy_ref,
                                                           max_steps),
                describe=lambda unit: str(unit[0].get("id")),
                progress=progress,
            ):
                if isinstance(result, UnitFailed):
                    failed.append({"task_id": tasks[index].get("id"), "error": str(result)})
                elif "failed" in result:
                    failed.append(result["failed"])
                else:
                    record = result["record"]
                    records.append(record)
                    if sink is not None:
                        sink.write(json.dumps(record) + "\n")
                        sink.flush()
                    if on_record is not None:
                        on_record(index, record)
        finally:
            if sink is not None:
                sink.close()
        report = frognano.eval_report(records, failed, wall_s=time.monotonic() - started,
                                      workers=self.actors * self.envs_per_actor)
        return report, records

    def rollouts(self, policy_state: Dict[str, Any], tasks: Sequence[Any],
                 env: Optional[Dict[str, Any]] = None, *,
                 progress: Optional[Callable[[int, int], None]] = None) -> List[Dict[str, Any]]:
        """A trainer's episode runner (GrpoTrainer(rollouts=...), frognano.train(rollouts=...)):
        one episode per task with the repair policy in `policy_state`, each episode seeded
        apart, max_steps from env (the trainer's environment budgets); entries {"record"} or
        {"failed"} in task order."""
        max_steps = int((env or {}).get("max_steps", 40))
        if not (isinstance(policy_state, dict) and policy_state.get("kind") == "repair"):
            raise FrognanoError(
                "a trainer's rollouts run on a cluster for the repair policy, whose state "
                "travels to the workers; train other policies' rollouts locally"
            )
        description = {"key": uuid.uuid4().hex, "reseed": True,
                       "repair": {"config": policy_state.get("config", {}),
                                  "state": policy_state}}
        base = int(policy_state.get("config", {}).get("seed", 0))
        updates = int(policy_state.get("updates", 0))
        policy_ref = self._ray.put(description)
        shipment = self.shipment()
        units = [(index, _task_dicts([task])[0]) for index, task in enumerate(tasks)]
        tickets = [shipment.ticket(task.get("repo")) for _, task in units]
        entries: List[Dict[str, Any]] = []
        for index, result in self.run(
            units,
            lambda worker, unit: worker.episode.remote(
                unit[1], tickets[unit[0]], policy_ref, max_steps,
                # Distinct per episode and per update, the same for the same run.
                (base * 1_000_003 + updates * 10_007 + unit[0]) % (1 << 63)),
            describe=lambda unit: str(unit[1].get("id")),
            progress=progress,
        ):
            if isinstance(result, UnitFailed):
                entries.append({"failed": {"task_id": units[index][1].get("id"),
                                           "error": str(result)}})
            else:
                entries.append(result)
        return entries

    def synthesize(self, repo: str, n: int, *, shards: Optional[int] = None, seed: int = 0,
                   progress: Optional[Callable[[int, int], None]] = None,
                   **options: Any) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
        """frognano.synthesize on the cluster: `shards` syntheses of the repository (default:
        one per worker) with seeds seed, seed + 1, ..., each asked for its share of n; tasks
        in shard order without duplicates, up to n. One shard gives exactly the tasks of
        frognano.synthesize(repo, n, seed=seed)."""
        if n < 0:
            raise FrognanoError(f"n must be at least 0, got {n}")
        shards = shards or self.actors
        if shards < 1:
            raise FrognanoError(f"shards must be at least 1, got {shards}")
        repo = os.path.abspath(str(repo))
        ticket = self.shipment().ticket({"kind": "bundle" if os.path.isfile(repo) else "path",
                                         "path": repo})
        shares = [n // shards + (1 if s < n % shards else 0) for s in range(shards)]
        units = [(s, share) for s, share in enumerate(shares) if share > 0]
        tasks: List[Dict[str, Any]] = []
        seen = set()
        shard_stats = []
        errors = []
        for _, result in self.run(
            units,
            lambda worker, unit: worker.synthesize.remote(
                repo, ticket, unit[1], dict(options, seed=seed + unit[0])),
            describe=lambda unit: f"synthesis shard {unit[0]}",
            progress=progress,
        ):
            if isinstance(result, UnitFailed):
                errors.append(str(result))
                continue
            shard_stats.append(result["stats"])
            for task in result["tasks"]:
                if task["id"] not in seen and len(tasks) < n:
                    seen.add(task["id"])
                    tasks.append(task)
        if errors and not shard_stats:
            raise FrognanoError(f"synthesis failed on every shard: {errors[0]}")
        stats = _sum_stats(shard_stats)
        stats["shards"] = len(units)
        stats["failed_shards"] = errors
        return tasks, stats

    def build_corpus(self, corpus: str, *, only: Optional[Sequence[str]] = None,
                     timeout: float = 180.0, retry_failed: bool = False,
                     rebuild: bool = False,
                     progress: Optional[Callable[[int, int], None]] = None,
                     on_manifest: Optional[Callable[[Dict[str, Any]], None]] = None
                     ) -> Dict[str, Any]:
        """frognano.corpus_build with one entry per unit. The corpus folder must be on a path
        every node shares (one machine, or a network file system)."""
        import frognano

        corpus = os.path.abspath(str(corpus))
        entries = frognano.corpus_entries(corpus)
        ids = [e["id"] for e in entries]
        if only:
            unknown = [i for i in only if i not in ids]
            if unknown:
                raise frognano.InvalidArgumentError(f"{unknown[0]} is not an entry of the corpus")
            ids = [i for i in ids if i in set(only)]
        options = {"timeout": timeout, "retry_failed": retry_failed, "rebuild": rebuild}
        started = time.monotonic()
        built = kept = 0
        failures = []
        for index, result in self.run(
            ids, lambda worker, entry: worker.build_entry.remote(corpus, entry, options),
            describe=str, progress=progress,
        ):
            if isinstance(result, UnitFailed):
                failures.append({"id": ids[index], "error": str(result)})
                continue
            built += result["built"]
            kept += result["kept"]
            for manifest in result["manifests"]:
                if on_manifest is not None:
                    on_manifest(manifest)
        statuses = [e["status"] for e in frognano.corpus_entries(corpus)]
        return {"built": built, "kept": kept, "ready": statuses.count("ready"),
                "failed": statuses.count("failed"), "unfinished": len(failures),
                "seconds": time.monotonic() - started, "errors": failures}


def train(config: Any = None, out: Any = None, *, address: Optional[str] = "auto",
          sandbox: Any = None, progress: Optional[Callable[[str, Dict[str, Any]], None]] = None,
          **cluster_options: Any) -> Dict[str, Any]:
    """frognano.train with the training rollouts on a Ray cluster (held-out synthesis,
    learning and evaluation stay on this machine). progress(event, data) also sees
    ("episodes", {"done", "total"}) for the cluster's rollouts."""
    import frognano

    with connect(address, **cluster_options) as cluster, cluster.interruptible():

        def count_episodes(done: int, total: int) -> None:
            if progress is not None:
                progress("episodes", {"done": done, "total": total})

        def rollouts(policy_state, tasks, env):
            return cluster.rollouts(policy_state, tasks, env, progress=count_episodes)

        return frognano._frognano.train(config, out, sandbox=sandbox, progress=progress,
                                        rollouts=rollouts)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[-1] if text else ''}".strip()


def _task_dicts(tasks: Iterable[Any]) -> List[Dict[str, Any]]:
    out = []
    for task in tasks:
        if isinstance(task, str):
            task = json.loads(task)
        if not isinstance(task, dict):
            raise FrognanoError(f"a task must be a dict or a JSON string, got {type(task).__name__}")
        out.append(task)
    return out


def _sum_stats(stats: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    total: Dict[str, Any] = {}
    for one in stats:
        for key, value in one.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    if stats and "tasks_per_minute" in total:
        total.pop("tasks_per_minute")
    return total


@contextlib.contextmanager
def connect(address: Optional[str], **options: Any) -> Iterator[Cluster]:
    """A Cluster for one job, closed afterwards."""
    cluster = Cluster(address or "auto", **options)
    try:
        yield cluster
    finally:
        cluster.close()


# ---------------------------------------------------------------------------------------------
# The driver behind the CLI's --ray: `python -m frognano.distributed` reads one JSON request
# on stdin and writes JSON lines (events) on stdout; the CLI renders them as it renders a
# single-machine run.


def _driver(request: Dict[str, Any], emit: Callable[[Dict[str, Any]], None]) -> int:
    command = request.get("command")
    options = {key: request[key] for key in ("actors", "envs_per_actor", "max_retries")
               if request.get(key) is not None}
    address = request.get("address") or "auto"

    def progress(done: int, total: int) -> None:
        emit({"event": "progress", "done": done, "total": total})

    if command == "eval":
        with connect(address, **options) as cluster:
            emit({"event": "started", "workers": cluster.actors * cluster.envs_per_actor})
            report, _ = cluster.evaluate(
                request["tasks"], request.get("policy") or "oracle",
                max_steps=int(request.get("max_steps", 30)), progress=progress,
                on_record=lambda index, record: emit(
                    {"event": "record", "index": index, "record": record}),
            )
            for failed in report["failed_tasks"]:
                emit({"event": "failed", **failed})
            emit({"event": "done", "wall_s": report["wall_s"], "workers": report["workers"],
                  "worker_deaths": cluster.events})
        return 0
    if command == "synth":
        with connect(address, **options) as cluster:
            emit({"event": "started", "workers": cluster.actors * cluster.envs_per_actor})
            tasks, stats = cluster.synthesize(
                request["repo"], int(request["n"]), shards=request.get("shards"),
                seed=int(request.get("seed", 0)), progress=progress,
                **request.get("options", {}))
            emit({"event": "done", "tasks": tasks, "stats": stats,
                  "worker_deaths": cluster.events})
        return 0
    if command == "corpus-build":
        with connect(address, shared_paths=True, **options) as cluster:
            emit({"event": "started", "workers": cluster.actors * cluster.envs_per_actor})
            summary = cluster.build_corpus(
                request["corpus"], only=request.get("only") or None,
                timeout=float(request.get("timeout", 180.0)),
                retry_failed=bool(request.get("retry_failed")),
                rebuild=bool(request.get("rebuild")), progress=progress,
                on_manifest=lambda manifest: emit({"event": "manifest", "manifest": manifest}))
            emit({"event": "done", "summary": summary, "worker_deaths": cluster.events})
        return 0
    if command == "train":
        def on_progress(event: str, data: Dict[str, Any]) -> None:
            emit({"event": event, "data": data})

        report = train(request["config"], request.get("out"), address=address,
                       progress=on_progress, **options)
        emit({"event": "done", "report": report})
        return 0
    emit({"event": "error", "message": f"unknown command {command!r}"})
    return 2


def main() -> int:
    # The events own stdout: anything else written there (Ray's or a library's prints, from
    # Python or C) goes to stderr instead.
    events = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def emit(event: Dict[str, Any]) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    try:
        request = json.load(sys.stdin)
        return _driver(request, emit)
    except KeyboardInterrupt:
        emit({"event": "error", "message": "interrupted"})
        return 130
    except (FrognanoError, ValueError, KeyError, OSError) as e:
        emit({"event": "error", "message": str(e) or type(e).__name__})
        return 1


if __name__ == "__main__":
    # Run the package's copy of this module, so that Ray pickles its classes by reference.
    from frognano.distributed import main as _main

    sys.exit(_main())
