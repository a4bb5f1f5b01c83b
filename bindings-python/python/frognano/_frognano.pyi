from os import PathLike
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

__version__: str

_Path = Union[str, "PathLike[str]"]

class TestResult:
    """One test's result."""

    @property
    def id(self) -> str: ...
    @property
    def outcome(self) -> str:
        """passed, failed, error, skipped, xfailed or xpassed."""
    @property
    def duration_s(self) -> float: ...
    @property
    def message(self) -> Optional[str]: ...

class TestReport:
    """The structured result of one sandboxed test run."""

    @property
    def outcome(self) -> str:
        """passed, failed, timeout, memory_exceeded, output_exceeded, crashed or no_tests."""
    @property
    def ok(self) -> bool: ...
    @property
    def passed(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def skipped(self) -> int: ...
    @property
    def xfailed(self) -> int: ...
    @property
    def xpassed(self) -> int: ...
    @property
    def duration_s(self) -> float: ...
    @property
    def exit_code(self) -> Optional[int]: ...
    @property
    def detail(self) -> Optional[str]: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def tests(self) -> List[TestResult]: ...
    def to_json(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...

class Sandbox:
    """A ready-to-run sandbox; safe to share between threads."""

    def __init__(
        self,
        image: Optional[str] = None,
        workers: Optional[int] = None,
        snapshot: bool = True,
        progress: Optional[Callable[[str], None]] = None,
        disk_mb: Optional[int] = None,
    ) -> None: ...
    @property
    def image(self) -> str: ...
    @property
    def workers(self) -> int: ...
    @property
    def uses_snapshot(self) -> bool: ...
    def run_tests(
        self,
        repo: _Path,
        pytest_args: Sequence[str] = ...,
        *,
        timeout: Optional[float] = None,
        memory_mb: Optional[int] = None,
        output_bytes: Optional[int] = None,
    ) -> TestReport: ...
    def run_tests_many(
        self,
        repos: Sequence[_Path],
        pytest_args: Sequence[str] = ...,
        *,
        timeout: Optional[float] = None,
        memory_mb: Optional[int] = None,
        output_bytes: Optional[int] = None,
    ) -> List[TestReport]: ...

def setup(image: Optional[str] = None, progress: Optional[Callable[[str], None]] = None) -> None: ...
def cache_dir() -> str: ...

Task = Dict[str, Any]
Action = Union[str, Dict[str, Any]]
StepTuple = Tuple[str, float, bool, bool, Dict[str, Any]]

class RepoEnv:
    def __init__(
        self,
        sandbox: Optional[Sandbox] = None,
        *,
        max_steps: int = 30,
        max_observation_chars: int = 120000,
        observation_chars: int = 6000,
    ) -> None: ...
    def reset(
        self,
        task: Optional[Union[Task, str]] = None,
        *,
        seed: Optional[int] = None,
        options: Optional[Dict[str, Any]] = None,
    ) -> Tuple[str, Dict[str, Any]]: ...
    def step(self, action: Action) -> StepTuple: ...
    def record(self) -> Optional[Dict[str, Any]]: ...
    @property
    def outcome(self) -> Optional[Dict[str, Any]]: ...
    @property
    def workspace(self) -> Optional[str]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "RepoEnv": ...
    def __exit__(self, *args: Any) -> None: ...

class EnvPool:
    def __init__(
        self,
        num_envs: int,
        sandbox: Optional[Sandbox] = None,
        *,
        workers: int = 0,
        max_steps: int = 30,
        max_observation_chars: int = 120000,
        observation_chars: int = 6000,
    ) -> None: ...
    @property
    def num_envs(self) -> int: ...
    def reset(self, tasks: Sequence[Union[Task, str]]) -> List[Tuple[str, Dict[str, Any]]]: ...
    def step(self, actions: Sequence[Optional[Action]]) -> List[Optional[StepTuple]]: ...
    def records(self) -> List[Optional[Dict[str, Any]]]: ...

def evaluate(
    tasks: Sequence[Union[Task, str]],
    policy: Any = None,
    *,
    sandbox: Optional[Sandbox] = None,
    workers: Optional[int] = None,
    max_steps: int = 30,
    out: Optional[_Path] = None,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]: ...
def load_tasks(path: _Path) -> List[Task]: ...
def save_tasks(path: _Path, tasks: Sequence[Union[Task, str]]) -> None: ...
def to_swe_bench(task: Union[Task, str]) -> Dict[str, Any]: ...
def parse_action(action: Action) -> Dict[str, Any]: ...
def tool_instructions() -> str: ...
def tool_schemas() -> List[Dict[str, Any]]: ...

class Synthesizer:
    """Makes validated bug-fix tasks from a repository whose test suite passes.

    Construction runs the repository's intake (the clean suite twice; cached by content) and
    raises SynthesisError when the suite cannot validate bugs. The same seed on the same
    repository gives the same tasks. Usable as a drop-in task synthesizer (propose/feedback).
    Used by one thread at a time; the Sandbox it runs on may be shared.
    """

    def __init__(
        self,
        repo: _Path,
        *,
        sandbox: Optional[Sandbox] = None,
        seed: int = 0,
        operators: Optional[Sequence[str]] = None,
        max_bugs: int = 1,
        scope: str = "file",
        hint_levels: Sequence[int] = (2,),
        workers: Optional[int] = None,
        reproduce: bool = True,
        select_tests: bool = True,
        max_candidates: Optional[int] = None,
        skip_unreached: bool = True,
        timeout_factor: float = 3.0,
    ) -> None: ...
    def generate(self, n: int) -> List[Task]:
        """Up to n new tasks (fewer when the repository runs out of candidate bugs)."""
    def generate_request(
        self,
        n: int,
        *,
        operators: Optional[Sequence[str]] = None,
        min_bugs: int = 1,
        max_bugs: int = 1,
        hint_levels: Optional[Sequence[int]] = None,
    ) -> List[Task]:
        """Up to n tasks with min_bugs..max_bugs bugs from the given operators and hint levels
        (None: the configured ones): one slice of a curriculum."""
    def propose(self, n: int) -> List[Task]:
        """The same as generate(n)."""
    def feedback(self, outcomes: Iterable[Any]) -> None:
        """Accepts episode outcomes and ignores them (this synthesizer does not adapt)."""
    @property
    def stats(self) -> Dict[str, Any]:
        """Counters so far, with tasks_per_minute."""
    @property
    def intake(self) -> Dict[str, Any]:
        """passing, flaky, failing, skipped, order_dependent (test ids), suite_seconds,
        content_hash."""
    @property
    def sites_per_operator(self) -> Dict[str, int]: ...
    @property
    def config(self) -> Dict[str, Any]: ...

def synthesize(
    repo: _Path,
    n: int,
    *,
    sandbox: Optional[Sandbox] = None,
    seed: int = 0,
    operators: Optional[Sequence[str]] = None,
    max_bugs: int = 1,
    scope: str = "file",
    hint_levels: Sequence[int] = (2,),
    workers: Optional[int] = None,
    reproduce: bool = True,
    select_tests: bool = True,
    max_candidates: Optional[int] = None,
    skip_unreached: bool = True,
    timeout_factor: float = 3.0,
) -> Tuple[List[Task], Dict[str, Any]]:
    """Synthesizer(repo, **kwargs).generate(n) and its stats."""
def mutation_operators() -> List[Dict[str, str]]:
    """name, family ("swe-smith" or "extra") and description of every mutation operator."""
