from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

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
