from os import PathLike
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    Final,
    Iterable,
    List,
    Literal,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
    final,
    overload,
)

# The names the native module exports.
__all__ = [
    "__version__", "SKIPPED_DIRS", "Sandbox", "TestReport", "TestResult", "setup", "cache_dir", "RepoEnv",
    "EnvPool", "evaluate", "eval_report", "load_tasks", "save_tasks", "to_swe_bench",
    "tool_instructions", "corpus_add", "corpus_entries", "corpus_build", "corpus_summary", "read_corpus_summary", "tool_schemas", "parse_action", "Synthesizer", "synthesize", "mutation_operators",
    "RepairPolicy", "repair_feature_names", "GrpoTrainer", "FrontierSynthesizer",
    "StaticCurriculum", "EasyToHard", "group_advantages", "learnability", "train",
    "LocalModel", "OnnxPolicy", "HttpPolicy", "LanguageModelPolicy", "fetch_model", "setup_inference", "make_tiny_model",
    "known_models", "convert_checkpoint", "save_token_batch", "_token_batch_raw",
    "_load_token_batch_raw", "_converter_script",
]

__version__: str
SKIPPED_DIRS: List[str]
"""Folders a sandbox's workspace never copies (VCS data, virtualenvs, caches)."""

_Path = Union[str, "PathLike[str]"]

@final
class TestResult:
    """One test's result."""

    id: Final[str]
    outcome: Final[str]
    """passed, failed, error, skipped, xfailed or xpassed."""
    duration_s: Final[float]
    message: Final[Optional[str]]
    platform: Final[Optional[str]]
    """The feature WebAssembly (WASI) lacks that made the test fail (e.g. "sockets",
    "os.umask"), or None."""

@final
class TestReport:
    """The structured result of one sandboxed test run."""

    outcome: Final[str]
    """passed, failed, timeout, memory_exceeded, output_exceeded, crashed or no_tests."""
    ok: Final[bool]
    passed: Final[int]
    failed: Final[int]
    errors: Final[int]
    skipped: Final[int]
    xfailed: Final[int]
    xpassed: Final[int]
    duration_s: Final[float]
    exit_code: Final[Optional[int]]
    detail: Final[Optional[str]]
    interrupted: Final[Optional[str]]
    """The test running when the run stopped early (a crash or a limit), if any."""
    stdout: Final[str]
    stderr: Final[str]
    tests: Final[List[TestResult]]
    profile: Final[Optional[Dict[str, Any]]]
    """Where the run's time went, phase by phase (seconds), or None."""
    def to_json(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class Sandbox:
    """A ready-to-run sandbox; safe to share between threads."""

    def __new__(
        cls,
        image: Optional[str] = None,
        workers: Optional[int] = None,
        snapshot: bool = True,
        progress: Optional[Callable[[str], None]] = None,
        disk_mb: Optional[int] = None,
        layer_snapshots: bool = False,
    ) -> Sandbox: ...
    image: Final[str]
    workers: Final[int]
    uses_snapshot: Final[bool]
    def run_tests(
        self,
        repo: _Path,
        pytest_args: Sequence[str] = ...,
        *,
        timeout: Optional[float] = None,
        memory_mb: Optional[int] = None,
        output_bytes: Optional[int] = None,
        shards: int = 1,
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

_Task = Dict[str, Any]
_Action = Union[str, Dict[str, Any]]
_StepTuple = Tuple[str, float, bool, bool, Dict[str, Any]]

@final
class RepoEnv:
    def __new__(
        cls,
        sandbox: Optional[Sandbox] = None,
        *,
        max_steps: int = 30,
        max_observation_chars: int = 120000,
        observation_chars: int = 6000,
    ) -> RepoEnv: ...
    def reset(
        self,
        task: Optional[Union[_Task, str]] = None,
        *,
        seed: Optional[int] = None,
        options: Optional[Dict[str, Any]] = None,
    ) -> Tuple[str, Dict[str, Any]]: ...
    def step(self, action: _Action) -> _StepTuple: ...
    def record(self) -> Optional[Dict[str, Any]]: ...
    outcome: Final[Optional[Dict[str, Any]]]
    workspace: Final[Optional[str]]
    def close(self) -> None: ...
    def __enter__(self) -> RepoEnv: ...
    def __exit__(self, _exc_type: Any, _exc: Any, _tb: Any) -> None: ...

@final
class EnvPool:
    def __new__(
        cls,
        num_envs: int,
        sandbox: Optional[Sandbox] = None,
        *,
        workers: int = 0,
        max_steps: int = 30,
        max_observation_chars: int = 120000,
        observation_chars: int = 6000,
    ) -> EnvPool: ...
    num_envs: Final[int]
    def reset(
        self, tasks: Sequence[Optional[Union[_Task, str]]]
    ) -> List[Optional[Tuple[str, Dict[str, Any]]]]:
        """Environment i gets tasks[i]; a None task leaves its environment alone (entry None)."""
    def step(self, actions: Sequence[Optional[_Action]]) -> List[Optional[_StepTuple]]: ...
    def records(self) -> List[Optional[Dict[str, Any]]]: ...

def evaluate(
    tasks: Sequence[Union[_Task, str]],
    policy: Any = None,
    *,
    sandbox: Optional[Sandbox] = None,
    workers: Optional[int] = None,
    max_steps: int = 30,
    out: Optional[_Path] = None,
) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]: ...
def eval_report(
    records: Sequence[Dict[str, Any]],
    failed_tasks: Optional[Sequence[Dict[str, Any]]] = None,
    *,
    steps: Optional[int] = None,
    wall_s: float = 0.0,
    workers: int = 0,
) -> Dict[str, Any]:
    """The report evaluate returns, from episode records gathered elsewhere."""
def load_tasks(path: _Path) -> List[_Task]: ...
def save_tasks(path: _Path, tasks: Sequence[Union[_Task, str]]) -> None: ...
def save_token_batch(batch: Dict[str, Any], path: _Path) -> None: ...
def _token_batch_raw(batch: Dict[str, Any]) -> Dict[str, Any]: ...
def _load_token_batch_raw(path: _Path) -> Dict[str, Any]: ...
def to_swe_bench(task: Union[_Task, str]) -> Dict[str, Any]: ...
def parse_action(action: _Action) -> Dict[str, Any]: ...
def tool_instructions() -> str: ...
def tool_schemas() -> List[Dict[str, Any]]: ...

@final
class Synthesizer:
    """Makes validated bug-fix tasks from a repository whose test suite passes.

    Construction runs the repository's intake (the clean suite twice; cached by content) and
    raises SynthesisError when the suite cannot validate bugs. The same seed on the same
    repository gives the same tasks. Usable as a drop-in task synthesizer (propose/feedback).
    Used by one thread at a time; the Sandbox it runs on may be shared.
    """

    def __new__(
        cls,
        repo: _Path,
        *,
        sandbox: Optional[Sandbox] = None,
        seed: int = 0,
        operators: Optional[Sequence[str]] = None,
        max_bugs: int = 1,
        scope: str = "file",
        hint_levels: Sequence[int] = ...,  # default (2,)
        workers: Optional[int] = None,
        reproduce: bool = True,
        select_tests: bool = True,
        max_candidates: Optional[int] = None,
        skip_unreached: bool = True,
        timeout_factor: float = 3.0,
    ) -> Synthesizer: ...
    def generate(self, n: int) -> List[_Task]:
        """Up to n new tasks (fewer when the repository runs out of candidate bugs)."""
    def generate_request(
        self,
        n: int,
        *,
        operators: Optional[Sequence[str]] = None,
        min_bugs: int = 1,
        max_bugs: int = 1,
        hint_levels: Optional[Sequence[int]] = None,
    ) -> List[_Task]:
        """Up to n tasks with min_bugs..max_bugs bugs from the given operators and hint levels
        (None: the configured ones): one slice of a curriculum."""
    def propose(self, n: int) -> List[_Task]:
        """The same as generate(n)."""
    def feedback(self, outcomes: Iterable[Any]) -> None:
        """Accepts episode outcomes and ignores them (this synthesizer does not adapt)."""
    stats: Final[Dict[str, Any]]
    """Counters so far, with tasks_per_minute."""
    intake: Final[Dict[str, Any]]
    """passing, flaky, failing, skipped, order_dependent (test ids), suite_seconds,
    content_hash."""
    sites_per_operator: Final[Dict[str, int]]
    config: Final[Dict[str, Any]]

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
) -> Tuple[List[_Task], Dict[str, Any]]:
    """Synthesizer(repo, **kwargs).generate(n) and its stats."""
def corpus_add(corpus: _Path, specs: Sequence[str]) -> List[str]:
    """Adds specs to a corpus (created when needed); returns their entry ids."""
def corpus_entries(corpus: _Path) -> List[Dict[str, Any]]:
    """id, spec and status ("ready", "failed" or None) of every entry."""
def corpus_build(
    corpus: _Path,
    *,
    only: Optional[Sequence[str]] = None,
    jobs: int = 0,
    timeout: float = 180.0,
    retry_failed: bool = False,
    rebuild: bool = False,
    sandbox: Optional[Sandbox] = None,
    progress: Optional[Callable[[str, str], None]] = None,
) -> Dict[str, Any]:
    """Builds the unfinished entries; returns the counts and the manifests it finished."""
def corpus_summary(corpus: _Path, out: Optional[_Path] = None) -> Dict[str, Any]:
    """Writes the built entries' summary (default: summary.jsonl in the corpus); path and entries."""
def read_corpus_summary(path: _Path) -> List[Dict[str, Any]]:
    """The entries of a corpus summary, one dict per entry."""
def mutation_operators() -> List[Dict[str, str]]:
    """name, family ("swe-smith" or "extra") and description of every mutation operator."""

# Training ------------------------------------------------------------------------------------

@final
class RepairPolicy:
    """The learnable repair policy: runs the tests, reads the code near the failures, chooses
    among candidate repairs with a softmax over features and learned weights, and learns from
    batches by policy gradient with Adam. Hand the same object to a GrpoTrainer and inspect it
    during and after training (it is shared, not copied)."""

    def __new__(
        cls,
        seed: int = 0,
        *,
        max_attempts: Optional[int] = None,  # default 8
        view_chunk: Optional[int] = None,  # default 100
        max_file_lines: Optional[int] = None,  # default 1200
        max_candidates: Optional[int] = None,  # default 40
        temperature: Optional[float] = None,  # default 1.0
        greedy: Optional[bool] = None,  # default False
        learning_rate: Optional[float] = None,  # default 0.1
        entropy_bonus: Optional[float] = None,  # default 0.0
        ratio_cap: Optional[float] = None,  # default 2.0
    ) -> RepairPolicy: ...
    def act(self, contexts: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Per context ({task_id, initial, history}) a dict {"action", "logprobs", "decision"};
        a repair choice's decision is {"chosen", "operator", "temperature", "features"} with
        features[i] = [[index, value], ...] for candidate i."""
    def learn(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        """One policy-gradient step from a TrainingBatch dict; returns decisions, grad_norm,
        mean_entropy."""
    def state(self) -> Dict[str, Any]: ...
    def load_state(self, state: Dict[str, Any]) -> None: ...
    def set_weights(self, weights: Union[Dict[str, float], Sequence[float]]) -> None:
        """A dict name -> weight (the others keep theirs) or every weight in feature order."""
    weights: Final[Dict[str, float]]
    """The weights by feature name, in the order of repair_feature_names()."""
    config: Final[Dict[str, Any]]
    updates: Final[int]
    def set_greedy(self, greedy: bool) -> None: ...

def repair_feature_names() -> List[str]:
    """The RepairPolicy's feature names, in weight order (the indices of sparse features)."""

class _TaskSource(Protocol):
    """What a trainer draws tasks from (any object with these methods will do)."""

    def propose(self, n: int) -> List[_Task]: ...
    def feedback(self, outcomes: Iterable[Dict[str, Any]]) -> None:
        """Outcome dicts (task_id, resolved, ...) or episode records."""
    def metrics(self) -> Dict[str, Any]: ...
    def state(self) -> Dict[str, Any]: ...
    def load_state(self, state: Dict[str, Any]) -> None: ...

@final
class FrontierSynthesizer(_TaskSource):
    """Online task synthesis at the frontier of learnability (families of operator x bug count
    x hint level, Thompson sampling on a score peaking at target_success, background synthesis
    while rollouts run). Construction runs each repository's intake."""

    def __new__(
        cls,
        sandbox: Optional[Sandbox],
        repos: Sequence[_Path],
        *,
        seed: int = 0,
        operators: Optional[Sequence[str]] = None,
        bug_counts: Optional[Sequence[int]] = None,  # default (1, 2)
        hint_levels: Optional[Sequence[int]] = None,  # default (2,)
        target_success: Optional[float] = None,  # default 0.5
        decay: Optional[float] = None,  # default 0.8
        exploration: Optional[float] = None,  # default 0.1
        buffer: Optional[int] = None,  # default 2
        buffered_families: Optional[int] = None,  # default 4
        max_uses: Optional[int] = None,  # default 4
        max_idle: Optional[int] = None,  # default 12
        max_wait_s: Optional[float] = None,  # default 600.0
        prior_strength: Optional[float] = None,  # default 4.0
        cold_start: Optional[bool] = None,  # default True
        exclude: Optional[Iterable[Union[str, _Task]]] = None,
        synth_workers: int = 1,
    ) -> FrontierSynthesizer: ...
    families: Final[List[Dict[str, Any]]]

@final
class StaticCurriculum(_TaskSource):
    """Uniform sampling from a fixed task set."""

    def __new__(cls, tasks: Sequence[Union[_Task, str]], seed: int = 0) -> StaticCurriculum: ...
    tasks: Final[List[_Task]]
    def __len__(self) -> int: ...

@final
class EasyToHard(_TaskSource):
    """A fixed task set opened from the easiest fraction to all of it over `iterations`."""

    def __new__(
        cls,
        tasks: Sequence[Union[_Task, str]],
        iterations: int,
        start_fraction: float = 0.3,
        seed: int = 0,
    ) -> EasyToHard: ...
    def open_fraction(self, call: int) -> float: ...

@final
class GrpoTrainer:
    """The group-advantage trainer. policy: a RepairPolicy or any object with act(contexts)
    and learn(batch) (state()/load_state(state) optional). synthesizer: a
    FrontierSynthesizer, StaticCurriculum, EasyToHard, a list of tasks, or any object with
    propose(n) and feedback(outcomes) (metrics()/state()/load_state(state) optional)."""

    def __new__(
        cls,
        sandbox: Optional[Sandbox],
        policy: Any,
        synthesizer: Any,
        *,
        tasks_per_iteration: Optional[int] = None,  # default 5
        group_size: Optional[int] = None,  # default 4
        estimator: str = "grpo",
        drop_zero_variance: Optional[bool] = None,  # default True
        workers: Optional[int] = None,  # default 0
        max_steps: Optional[int] = None,  # default 40
        metrics_file: Optional[_Path] = None,
        format_reward: Optional[float] = None,
        rollouts: Optional[Callable[[Dict[str, Any], List[_Task], Dict[str, Any]], List[Dict[str, Any]]]] = None,
    ) -> GrpoTrainer: ...
    def iterate(self) -> Dict[str, Any]:
        """One iteration; returns {iteration, resolved_rate, rollouts, extra}."""
    def evaluate(self, policy: Any, tasks: Sequence[Union[_Task, str]]) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]: ...
    def save_checkpoint(self, path: _Path) -> None: ...
    def resume(self, path: _Path) -> None: ...
    history: Final[List[Dict[str, Any]]]
    iteration: Final[int]
    last_batch: Final[Optional[Dict[str, Any]]]
    config: Final[Dict[str, Any]]
    policy: Final[Any]
    synthesizer: Final[Any]

def group_advantages(rewards: Sequence[float], estimator: str = "grpo") -> List[float]:
    """grpo: (r - mean) / (sample std + 1e-6); dr_grpo: r - mean; rloo: r - mean of the others."""
def learnability(p: float, target: float = 0.5) -> float:
    """The frontier's score of success rate p, 1.0 at the target (4 p (1 - p) for 0.5)."""
def train(
    config: Optional[Union[Dict[str, Any], _Path]] = None,
    out: Optional[_Path] = None,
    *,
    sandbox: Optional[Sandbox] = None,
    progress: Optional[Callable[[str, Dict[str, Any]], None]] = None,
    rollouts: Optional[Callable[[Dict[str, Any], List[_Task], Dict[str, Any]], List[Dict[str, Any]]]] = None,
) -> Dict[str, Any]:
    """The whole training job (frognano train): held-out synthesis, training, evaluation.
    Returns the TrainReport as a dict."""

# Local language models -----------------------------------------------------------------------

_Generation = Dict[str, Any]
"""{"token_ids": List[int], "logprobs": List[float], "text": str,
"finish_reason": "eos" | "stop" | "length", "prompt_tokens": int}"""
_Message = Dict[str, str]

@final
class LocalModel:
    """A local decoder language model on ONNX Runtime with its tokenizer and chat template.

    model: a model folder (model.onnx, config.json, tokenizer.json) or a registry name such as
    "smollm2-135m" (int4) or "smollm2-135m:fp32", fetched and converted on first use. Calls
    release the GIL; calls from several threads run one at a time. Raises InferenceError when
    the model or ONNX Runtime cannot be loaded."""

    def __new__(
        cls,
        model: Union[str, "PathLike[str]"],
        *,
        intra_threads: int = 0,
        runtime_library: Optional[_Path] = None,
        progress: Optional[Callable[[str], None]] = None,
    ) -> LocalModel: ...
    def generate(
        self,
        prompts: Sequence[Union[str, Sequence[int]]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Optional[Union[str, Sequence[str]]] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
    ) -> List[_Generation]:
        """Continues each prompt (raw text or token ids), all rows in one batch; temperature 0
        is greedy; row r samples from a generator seeded by (seed, r)."""
    @overload
    def chat(
        self,
        messages: Sequence[_Message],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Optional[Union[str, Sequence[str]]] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
    ) -> _Generation:
        """The reply to one conversation, rendered with the chat template."""
    @overload
    def chat(
        self,
        messages: Sequence[Sequence[_Message]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_k: int = 0,
        top_p: float = 1.0,
        seed: int = 0,
        stop: Optional[Union[str, Sequence[str]]] = None,
        stop_token_ids: Optional[Sequence[int]] = None,
    ) -> List[_Generation]:
        """The replies to several conversations, in one batch."""
    def encode(self, text: str) -> List[int]: ...
    def decode(self, ids: Sequence[int], skip_special: bool = True) -> str: ...
    def render_chat(self, messages: Sequence[_Message], add_generation_prompt: bool = True) -> str: ...
    @overload
    def full_logits(self, ids: Sequence[int], *, as_bytes: Literal[False] = False) -> List[List[float]]:
        """Logits of every position (seq x vocab), computed without a cache."""
    @overload
    def full_logits(self, ids: Sequence[int], *, as_bytes: Literal[True]) -> Tuple[bytes, Tuple[int, int]]:
        """The same as native-order float32 bytes and their shape (seq, vocab)."""
    config: Final[Dict[str, Any]]
    """num_layers, num_kv_heads, head_dim, vocab_size, context_length, eos_token_ids,
    bos_token_id, pad_token_id, model_file."""
    path: Final[str]
    has_chat_template: Final[bool]
    last_timing: Final[Optional[Dict[str, Any]]]
    """prefill_s, decode_s, first_token_s, prompt_tokens, generated_tokens, decode_steps."""
    runtime_library: Final[Optional[str]]

@final
class OnnxPolicy:
    """A local chat model acting through the environment's tool protocol; usable wherever a
    policy is taken (evaluate, GrpoTrainer.evaluate, an agent loop). It does not learn.

    generation: a dict of LocalModel.generate's options (default: greedy, 384 tokens)."""

    def __new__(
        cls,
        model: Union[str, "PathLike[str]"],
        *,
        generation: Optional[Dict[str, Any]] = None,
        system_prompt: Optional[str] = None,
        max_prompt_tokens: int = 0,
        intra_threads: int = 0,
        runtime_library: Optional[_Path] = None,
        progress: Optional[Callable[[str], None]] = None,
    ) -> OnnxPolicy: ...
    def act(self, contexts: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Per context a dict {"action" (the reply text), "logprobs", "token_ids", "decision"}."""
    def messages(self, context: Dict[str, Any]) -> List[_Message]: ...
    def prompt_ids(self, context: Dict[str, Any]) -> List[int]: ...
    def reload(self, model: _Path) -> None: ...
    config: Final[Dict[str, Any]]
    path: Final[str]

@final
class LanguageModelPolicy:
    """A language model that learns (the policy of `frognano train`'s language-model jobs):
    act rolls out in ONNX Runtime (or through rollout_server), learn(batch) updates the weights
    in a PyTorch learner process and hands them back; state/load_state are learner checkpoints.
    Hand it to GrpoTrainer as its policy. learner: a dict or LearnerConfig; generation: over
    temperature 1, 192 new tokens (greedy refused); python: the learner's interpreter (default:
    this one, with the frognano[torch] extra); work_dir default: a temporary folder."""

    def __new__(
        cls,
        model: Union[str, "PathLike[str]"],
        learner: Optional[Any] = None,
        *,
        work_dir: Optional[_Path] = None,
        generation: Optional[Dict[str, Any]] = None,
        system_prompt: Optional[str] = None,
        max_prompt_tokens: int = 0,
        intra_threads: int = 0,
        python: Optional[_Path] = None,
        rollout_server: Optional[Dict[str, Any]] = None,
        runtime_library: Optional[_Path] = None,
        progress: Optional[Callable[[str], None]] = None,
    ) -> LanguageModelPolicy: ...
    def act(self, contexts: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]: ...
    def learn(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        """loss, updated, updates, handback_s (after an update), rollout_tokens_per_s, ..."""
    def state(self) -> Dict[str, Any]: ...
    def load_state(self, state: Dict[str, Any]) -> None: ...
    updates: Final[int]
    weights: Final["Path"]
    start: Final[str]
    work_dir: Final[str]
    learner_info: Final[Dict[str, Any]]
    config: Final[Dict[str, Any]]

@final
class HttpPolicy:
    """A model behind an OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp's server,
    frognano serve) acting through the environment's tool protocol; usable wherever a policy is
    taken. It does not learn. options: api, tool_calls, api_key_env, generation, logprobs,
    system_prompt, max_prompt_chars, max_prompt_tokens (completions with chat_template_dir),
    concurrency, timeout_s, connect_timeout_s, retries, backoff_s, max_reply_bytes,
    chat_template_dir, token_id_prompts, extra_body."""

    def __new__(
        cls, base_url: str, model: str, *, check: bool = True, **options: Any
    ) -> HttpPolicy: ...
    def act(self, contexts: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Per context a dict {"action", "logprobs", "token_ids", "prompt_ids", "decision"},
        plus "error" when the server could not be asked."""
    def models(self) -> Optional[List[str]]: ...
    config: Final[Dict[str, Any]]
    base_url: Final[str]

def fetch_model(name: str, progress: Optional[Callable[[str], None]] = None) -> str:
    """Fetches and converts a registry model; returns its cache folder (int4/, fp32/ inside),
    or the model folder of "NAME:PRECISION"."""
def known_models() -> List[str]: ...
def _converter_script() -> str: ...
def convert_checkpoint(
    checkpoint: _Path,
    out: _Path,
    precisions: Optional[Sequence[str]] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> Dict[str, Any]: ...
def setup_inference(progress: Optional[Callable[[str], None]] = None) -> Dict[str, str]:
    """Installs the inference environment; returns dir, python and runtime_library."""
def make_tiny_model(
    out_dir: _Path, seed: int = 0, progress: Optional[Callable[[str], None]] = None
) -> str:
    """Writes a tiny random model into out_dir/fp32 and out_dir/int4; returns the fp32 folder."""
