"""FrogNano environments in TRL's ``GRPOTrainer`` (tested with trl 1.16.0, see
``TESTED_VERSIONS``), by either of its two multi-turn hooks:

- ``environment_factory``: ``FrogNanoToolEnv`` exposes FrogNano's tool protocol as typed,
  documented methods (one per ``frognano.tool_schemas()`` tool), so a tool-calling model drives
  the repository through the trainer's own tool loop; ``get_reward()`` grades the final state
  with the task's tests in the sandbox. The tokenizer needs a tool-capable chat template.
- ``rollout_func``: ``make_rollout_func(...)`` runs whole multi-turn episodes for models that
  write the text commands of ``frognano.tool_instructions()``: token in, token out (the sampled
  ids and their log-probs as sampled; ``env_mask`` 0 on the observation tokens between turns),
  with the sandboxed reward in the ``frognano_reward`` column that ``frognano_reward`` reads.

``task_dataset(tasks)`` turns a task set into the trainer's dataset (a ``prompt`` column with the
task's opening observation, a ``task`` column with the task as JSON).

>>> from trl import GRPOConfig, GRPOTrainer
>>> from frognano.integrations.trl import frognano_reward, make_rollout_func, task_dataset
>>> tasks = "examples/tasks/sample.jsonl"
>>> trainer = GRPOTrainer(model=model, reward_funcs=frognano_reward, args=GRPOConfig(...),
...                       train_dataset=task_dataset(tasks), processing_class=tokenizer,
...                       rollout_func=make_rollout_func(tasks, max_turns=8))
>>> trainer.train()

or, for a tool-calling model:

>>> from frognano.integrations.trl import FrogNanoToolEnv, grade_environments
>>> trainer = GRPOTrainer(model=model, args=GRPOConfig(...), train_dataset=task_dataset(tasks),
...                       environment_factory=FrogNanoToolEnv.factory(max_steps=20, batched_reward=True),
...                       reward_funcs=grade_environments)   # the batch's test runs concurrently

(with AsyncGRPOTrainer, ``environment_factory=FrogNanoToolEnv.factory(max_steps=20)``: its rollout
worker grades each rollout through get_reward() in its own thread pool).
"""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import inspect
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import frognano

from ._common import (Task, Tasks, TextEpisode, first_prompts, require, shared_sandbox, task_json, task_list, task_of,
                      task_of_row)
from .curriculum import TaskSampler

trl = require("trl", "trl")
datasets = require("datasets", "trl")
import torch  # noqa: E402  (a dependency of trl)
from trl.models import unwrap_model_for_generation  # noqa: E402

__all__ = [
    "FrogNanoBatchedToolEnv",
    "FrogNanoRollout",
    "FrogNanoToolEnv",
    "ToolEnvFactory",
    "Generate",
    "frognano_reward",
    "grade_environments",
    "local_model_generate",
    "make_rollout_func",
    "task_dataset",
]

Messages = List[Dict[str, Any]]
# A generation backend: token-id prompts and a token budget -> per prompt (sampled ids, their log-probs).
Generate = Callable[[Sequence[List[int]], int], List[Tuple[List[int], List[float]]]]
# A dataset's prompt: None (the task's opening observation), a fixed text, or a text per task.
PromptSpec = Union[None, str, Callable[[Task], str]]


# Dataset -----------------------------------------------------------------------------------


def _user_texts(tasks: List[Task], prompt: PromptSpec, observation_chars: int) -> List[str]:
    """Each task's user message: its opening observation (prompt=None), a fixed text, or prompt(task)."""
    if prompt is None:
        return first_prompts(tasks, observation_chars)
    if isinstance(prompt, str):
        return [prompt] * len(tasks)
    if callable(prompt):
        texts = [prompt(task) for task in tasks]
        for text in texts:
            if not isinstance(text, str):
                raise frognano.InvalidArgumentError(f"prompt(task) must return a string, not {type(text).__name__}")
        return texts
    raise frognano.InvalidArgumentError(f"prompt must be None, a string or a callable, not {type(prompt).__name__}")


def _messages(text: str, system: Optional[str]) -> Messages:
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": text}]


def task_dataset(tasks: Tasks, *, prompt: PromptSpec = None, system: Optional[str] = None,
                 observation_chars: int = 6000) -> "datasets.Dataset":
    """A GRPOTrainer dataset of tasks: a `prompt` column (chat messages, the user message being
    the task's opening observation: problem statement, files and the tool instructions) and a
    `task` column (the task as JSON, what `FrogNanoToolEnv.reset` and the rewards read).

    tasks: a task-set path (JSONL), a task dict, or a list of task dicts / JSON strings.
    prompt: None for the opening observation, a fixed text for every row (e.g. "" with
    FrogNanoToolEnv, whose reset() then supplies the observation), or a callable task -> text.
    system: an optional system message before it."""
    rows = task_list(tasks)
    return datasets.Dataset.from_dict({
        "prompt": [_messages(text, system) for text in _user_texts(rows, prompt, observation_chars)],
        "task": [task_json(task) for task in rows],
    })


# environment_factory -------------------------------------------------------------------------


def _tool(method: Callable[..., str]) -> Callable[..., str]:
    """A tool method whose malformed calls (a missing or unknown argument, which Python itself
    would reject) still reach the environment, so the agent gets its error observation."""
    signature = inspect.signature(method)
    names = [name for name in signature.parameters if name != "self"]

    @functools.wraps(method)
    def call(self: "FrogNanoToolEnv", *args: Any, **kwargs: Any) -> str:
        try:
            signature.bind(self, *args, **kwargs)
        except TypeError:
            return self._act(method.__name__, {**dict(zip(names, args)), **kwargs}, keep_none=True)
        return method(self, *args, **kwargs)

    return call


class FrogNanoToolEnv:
    """A TRL `environment_factory` environment: one FrogNano task per rollout, its tools as
    methods (TRL turns every public method into a tool from its type hints and docstring).

    reset(**row) starts the task of a dataset row (its `task` column, a JSON string or dict;
    with a sampler and a row without a task, the sampler's next task). get_reward() grades the
    final repository with the task's tests (submitting when the agent did not) and reports the
    outcome to the sampler. Malformed tool calls get the environment's error observation.

    Configure it with `FrogNanoToolEnv.factory(...)` (a zero-argument callable for the trainer);
    `FrogNanoToolEnv` itself is one with the defaults. Both pickle, as AsyncGRPOTrainer's
    rollout worker needs (it runs the environments in a spawned process; a sampler there is
    that process's copy, and outcomes it hears stay there); an environment pickles as its
    settings while no episode runs.

    GRPOTrainer (synchronous) calls get_reward() of one environment after the other, so the
    sandboxed test runs of a batch go in series: give it `factory(batched_reward=True)` and
    `reward_funcs=grade_environments`, which grades the whole batch concurrently.
    AsyncGRPOTrainer already runs each rollout's get_reward() in its thread pool."""

    def __init__(self, *, sandbox: Optional["frognano.Sandbox"] = None, max_steps: int = 30,
                 observation_chars: int = 6000, sampler: Optional[TaskSampler] = None):
        self._sandbox = sandbox
        self._max_steps = max_steps
        self._observation_chars = observation_chars
        self._sampler = sampler
        self._episode: Optional[TextEpisode] = None
        self._reward: Optional[float] = None

    @classmethod
    def factory(cls, *, sandbox: Optional["frognano.Sandbox"] = None, max_steps: int = 30,
                observation_chars: int = 6000, sampler: Optional[TaskSampler] = None,
                batched_reward: bool = False) -> "ToolEnvFactory":
        """A zero-argument factory of environments with these settings, for `environment_factory`
        (it pickles; a sandbox travels as its image and worker count).
        sampler: a TaskSampler told every graded outcome (and drawn from for rows without a task;
        give it repeat=num_generations so that a group shares its task). batched_reward: make
        FrogNanoBatchedToolEnv environments, which leave grading to `grade_environments`."""
        env_class = FrogNanoBatchedToolEnv if batched_reward and cls.get_reward is not None else cls
        return ToolEnvFactory(env_class, sandbox=sandbox, max_steps=max_steps,
                              observation_chars=observation_chars, sampler=sampler)

    def __reduce__(self):
        if self._episode is not None and not self._episode.done:
            raise TypeError(f"a {type(self).__name__} pickles between episodes only (one is running)")
        return (_rebuild_env, (type(self), _SandboxSpec.of(self._sandbox), self._max_steps, self._observation_chars,
                               self._sampler))

    # Episode ---------------------------------------------------------------------------------

    def reset(self, **row: Any) -> Optional[str]:
        """Starts the row's task; returns its opening observation for the trainer to append to
        the last user message, or None when that message already holds the task's problem
        statement (a `task_dataset` prompt)."""
        if self._sampler is not None and not _row_has_task(row):
            task = next(self._sampler)
        else:
            task = task_of_row(row)
        if self._episode is not None:
            self._episode.close()
        self._reward = None
        self._episode = TextEpisode(task, sandbox=self._sandbox, max_steps=self._max_steps,
                                    observation_chars=self._observation_chars)
        shown = _last_user_text(row.get("prompt"))
        statement = str(task.get("problem_statement", "")).strip()
        if shown and (self._episode.observation in shown or (statement and statement in shown)):
            return None
        return ("\n\n" if shown and not shown[-1].isspace() else "") + self._episode.observation

    def get_reward(self) -> float:
        """The episode's reward from the sandboxed test run of the final repository (computed
        once; later calls return it again)."""
        return self._grade()

    def _grade(self) -> float:
        episode = self._require_episode()
        if self._reward is None:
            self._reward = float(episode.finish())
            if self._sampler is not None:
                outcome = episode.outcome or {"task_id": episode.task["id"], "reward": self._reward}
                self._sampler.observe(outcome)
        return self._reward

    @property
    def task(self) -> Optional[Task]:
        return self._episode.task if self._episode is not None else None

    @property
    def outcome(self) -> Optional[Dict[str, Any]]:
        """The graded outcome (task_id, resolved, reward, steps, ...) once the episode ended."""
        return self._episode.outcome if self._episode is not None else None

    @property
    def resolved(self) -> bool:
        return self._episode is not None and self._episode.resolved

    @property
    def grading(self) -> Optional[Dict[str, Any]]:
        """The grading test run (run_outcome, per test its expectation and outcome) once graded."""
        return self._episode.last_info.get("grading") if self._episode is not None else None

    def _require_episode(self) -> TextEpisode:
        if self._episode is None:
            raise frognano.EpisodeError("no episode is running: the trainer calls reset(**row) first")
        return self._episode

    def _act(self, name: str, arguments: Mapping[str, Any], keep_none: bool = False) -> str:
        if not keep_none:  # optional arguments left out, as the schemas have it
            arguments = {key: value for key, value in arguments.items() if value is not None}
        observation, _reward, _done, _info = self._require_episode().step({"name": name, "arguments": dict(arguments)})
        return observation

    # Tools (frognano.tool_schemas(), in its order) -------------------------------------------

    @_tool
    def view(self, path: str, start_line: Optional[int] = None, end_line: Optional[int] = None) -> str:
        """Show a file with line numbers, or list a directory.

        Args:
            path: path relative to the repository root
            start_line: first line to show (1-based)
            end_line: last line to show

        Returns:
            The file's lines with their numbers, or the directory listing.
        """
        return self._act("view", {"path": path, "start_line": start_line, "end_line": end_line})

    @_tool
    def list(self, path: Optional[str] = None) -> str:
        """List a directory two levels deep.

        Args:
            path: path relative to the repository root (default: the root)

        Returns:
            The directory tree.
        """
        return self._act("list", {"path": path})

    @_tool
    def search(self, pattern: str, path: Optional[str] = None) -> str:
        """Search the repository's files with a regular expression.

        Args:
            pattern: the regular expression
            path: path relative to the repository root to search under (default: everything)

        Returns:
            The matching lines with their files and line numbers.
        """
        return self._act("search", {"pattern": pattern, "path": path})

    @_tool
    def edit(self, path: str, search: str, replace: str) -> str:
        """Replace text that occurs exactly once in a file.

        Args:
            path: path relative to the repository root
            search: the exact existing text
            replace: the new text

        Returns:
            What changed, or why nothing did.
        """
        return self._act("edit", {"path": path, "search": search, "replace": replace})

    @_tool
    def create(self, path: str, content: str) -> str:
        """Create a new file.

        Args:
            path: path relative to the repository root
            content: the file's content

        Returns:
            Whether the file was created.
        """
        return self._act("create", {"path": path, "content": content})

    @_tool
    def insert(self, path: str, line: int, text: str) -> str:
        """Insert text after a line (0 = top of the file).

        Args:
            path: path relative to the repository root
            line: the line to insert after (0 = top of the file)
            text: the lines to insert

        Returns:
            What changed, or why nothing did.
        """
        return self._act("insert", {"path": path, "line": line, "text": text})

    @_tool
    def replace_function(self, source: str, name: Optional[str] = None, path: Optional[str] = None) -> str:
        """Replace a whole function or method with a new definition of the same name.

        Args:
            source: the whole new definition, from its def line
            name: the function's name (default: the one source defines)
            path: path relative to the repository root (needed when several files define it)

        Returns:
            What changed, or why nothing did.
        """
        return self._act("replace_function", {"source": source, "name": name, "path": path})

    @_tool
    def replace_lines(self, source: str, path: Optional[str] = None) -> str:
        """Replace the lines of a file that the given lines resemble most (write the fixed lines; they take the old lines' indentation).

        Args:
            source: the fixed lines (1 to 12)
            path: path relative to the repository root (default: the file they match best)

        Returns:
            What changed, or why nothing did.
        """
        return self._act("replace_lines", {"source": source, "path": path})

    @_tool
    def undo(self) -> str:
        """Revert the last edit, insertion or creation.

        Returns:
            What was reverted.
        """
        return self._act("undo", {})

    @_tool
    def run_tests(self, tests: Optional[List[str]] = None) -> str:
        """Run the tests: all, or the named pytest ids / files.

        Args:
            tests: pytest ids or test files to run (default: all of them)

        Returns:
            The test report: passing and failing tests with their errors.
        """
        return self._act("run_tests", {"tests": tests})

    @_tool
    def submit(self) -> str:
        """Finish; the fix is graded by the tests.

        Returns:
            The grading: whether the task is resolved.
        """
        return self._act("submit", {})


class FrogNanoBatchedToolEnv(FrogNanoToolEnv):
    """A FrogNanoToolEnv that does not own its reward (no get_reward, so TRL adds no reward
    column for it): `grade_environments` grades a batch of them at once. Made by
    `FrogNanoToolEnv.factory(batched_reward=True)`."""

    get_reward = None  # type: ignore[assignment]


def grade_environments(prompts: Optional[List[Any]] = None, completions: Optional[List[Any]] = None,
                       environments: Optional[Sequence[Any]] = None, **kwargs: Any) -> List[Optional[float]]:
    """A GRPOTrainer reward function (``reward_funcs=grade_environments`` with
    ``environment_factory=FrogNanoToolEnv.factory(batched_reward=True)``): grades every
    FrogNano environment of the batch concurrently, one thread per sandboxed test run (the
    bindings release the GIL while the sandbox runs), as many at once as the shared sandbox
    has workers. Returns each environment's reward (None for other environments). Graded
    outcomes reach the environments' sampler as with get_reward()."""
    if environments is None:
        raise frognano.InvalidArgumentError(
            "grade_environments reads the trainer's environments: pass environment_factory=FrogNanoToolEnv.factory("
            "batched_reward=True) to the GRPOTrainer")
    envs = [env if isinstance(env, FrogNanoToolEnv) and env._episode is not None else None for env in environments]
    pending = [env for env in envs if env is not None and env._reward is None]
    workers = min(len(pending), max(1, shared_sandbox().workers))
    if workers > 1:
        with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="frognano-grade") as pool:
            list(pool.map(lambda env: env._grade(), pending))
    else:
        for env in pending:
            env._grade()
    return [None if env is None else env._reward for env in envs]


class _SandboxSpec:
    """A Sandbox as its settings, to pickle (frognano.Sandbox itself does not)."""

    def __init__(self, image: str, workers: int, snapshot: bool):
        self.image, self.workers, self.snapshot = image, workers, snapshot

    @classmethod
    def of(cls, sandbox: Optional["frognano.Sandbox"]) -> Optional["_SandboxSpec"]:
        return None if sandbox is None else cls(sandbox.image, sandbox.workers, sandbox.uses_snapshot)

    def build(self) -> "frognano.Sandbox":
        return frognano.Sandbox(self.image, workers=self.workers, snapshot=self.snapshot)


def _rebuild_env(env_class: type, sandbox: Optional[_SandboxSpec], max_steps: int, observation_chars: int,
                 sampler: Optional[TaskSampler]) -> FrogNanoToolEnv:
    return env_class(sandbox=sandbox.build() if sandbox is not None else None, max_steps=max_steps,
                     observation_chars=observation_chars, sampler=sampler)


class ToolEnvFactory:
    """`FrogNanoToolEnv.factory(...)`: calling it makes an environment with its settings. It
    pickles (the sandbox as its settings; a copy builds one sandbox for its environments)."""

    def __init__(self, env_class: type, *, sandbox: Optional["frognano.Sandbox"], max_steps: int,
                 observation_chars: int, sampler: Optional[TaskSampler]):
        self.env_class = env_class
        self.sandbox = sandbox
        self.max_steps = max_steps
        self.observation_chars = observation_chars
        self.sampler = sampler

    def __call__(self) -> FrogNanoToolEnv:
        return self.env_class(sandbox=self.sandbox, max_steps=self.max_steps,
                              observation_chars=self.observation_chars, sampler=self.sampler)

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["sandbox"] = _SandboxSpec.of(self.sandbox)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        if isinstance(self.sandbox, _SandboxSpec):
            self.sandbox = self.sandbox.build()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.env_class.__name__}, max_steps={self.max_steps}, "
                f"observation_chars={self.observation_chars}, sampler={self.sampler!r})")


def _row_has_task(row: Mapping[str, Any]) -> bool:
    try:
        task_of_row(row)
    except frognano.TaskError:
        return row.get("task") is not None  # a malformed task is an error, not a reason to draw
    return True


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):  # content blocks
        return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    return ""


def _last_user_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for message in reversed(prompt):
            if isinstance(message, Mapping) and message.get("role") == "user":
                return _content_text(message.get("content"))
    return ""


# rollout_func ------------------------------------------------------------------------------


def local_model_generate(model: Union["frognano.LocalModel", str], *, temperature: float = 1.0,
                         top_k: int = 0, top_p: float = 1.0, seed: int = 0) -> Generate:
    """A generation backend over a frognano.LocalModel (ONNX Runtime): the rollouts sample from
    it instead of the trainer's model. It does not see the trainer's weight updates (off-policy:
    reload it, or let TRL's importance sampling correct), and its tokenizer must be the trainer's."""
    if not isinstance(model, frognano.LocalModel):
        model = frognano.LocalModel(model)
    calls = [0]

    def generate(prompt_ids: Sequence[List[int]], max_new_tokens: int) -> List[Tuple[List[int], List[float]]]:
        calls[0] += 1  # a new seed per call: the same prompt again is sampled afresh
        outs = model.generate([list(ids) for ids in prompt_ids], max_new_tokens=max_new_tokens,
                              temperature=temperature, top_k=top_k, top_p=top_p, seed=seed * 1_000_003 + calls[0])
        return [(list(out["token_ids"]), [float(x) for x in out["logprobs"]]) for out in outs]

    return generate


def _trainer_generate(trainer: Any) -> Generate:
    """Sampling from the trainer's own model with its generation settings (HF generate with
    scores): the log-prob of each sampled id under the distribution it was sampled from."""
    if getattr(trainer, "generation_config", None) is None:
        raise frognano.InvalidArgumentError(
            "the trainer generates with vLLM, which the FrogNano rollout_func does not drive: pass "
            "make_rollout_func(..., generate=...) a generation backend (e.g. local_model_generate)")
    tokenizer = _tokenizer_of(trainer)
    eos = set(trainer.eos_token_ids)

    def generate(prompt_ids: Sequence[List[int]], max_new_tokens: int) -> List[Tuple[List[int], List[float]]]:
        config = copy.deepcopy(trainer.generation_config)
        config.max_new_tokens = max_new_tokens
        config.output_scores = True
        config.return_dict_in_generate = True
        width = max(len(ids) for ids in prompt_ids)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + list(ids) for ids in prompt_ids])
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in prompt_ids])
        device = trainer.accelerator.device
        with unwrap_model_for_generation(
            trainer.model_wrapped, trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            generation_kwargs=getattr(trainer, "generation_kwargs", None),
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as model, torch.no_grad():
            out = model.generate(input_ids=input_ids.to(device), attention_mask=attention.to(device),
                                 generation_config=config)
        sampled = out.sequences[:, width:].cpu()
        logps = torch.stack([torch.log_softmax(score.float(), dim=-1) for score in out.scores], dim=1).cpu()
        chosen = logps.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)
        results = []
        for row in range(sampled.size(0)):
            ids = sampled[row].tolist()
            end = next((i + 1 for i, token in enumerate(ids) if token in eos), len(ids))  # then padding
            results.append((ids[:end], chosen[row, :end].tolist()))
        return results

    return generate


def _tokenizer_of(trainer: Any) -> Any:
    processing_class = trainer.processing_class
    return getattr(processing_class, "tokenizer", processing_class)


def _as_messages(prompt: Any) -> Messages:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [dict(message) for message in prompt]


def _template_ids(tokenizer: Any, messages: Messages, add_generation_prompt: bool,
                  kwargs: Mapping[str, Any]) -> List[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True,
                                        return_dict=False, **kwargs)
    if isinstance(ids, Mapping):
        ids = ids["input_ids"]
    return list(ids)


class _Turns:
    """The chat-template tokens of an observation turn: what follows the model's reply (its end
    of turn when the model did not write it, the user message, the next assistant header)."""

    def __init__(self, tokenizer: Any, template_kwargs: Mapping[str, Any]):
        self.tokenizer = tokenizer
        self.kwargs = dict(template_kwargs)
        self.eos = tokenizer.eos_token_id

    def observation_ids(self, observation: str, reply_ended: bool) -> List[int]:
        head = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
        prefix = _template_ids(self.tokenizer, head, False, self.kwargs)
        full = _template_ids(self.tokenizer, head + [{"role": "user", "content": observation}], True, self.kwargs)
        # Cut the assistant turn after its end-of-turn token (the model's own when it wrote one).
        ends = [i for i, token in enumerate(prefix) if token == self.eos]
        closer: List[int] = []
        if ends:
            closer = prefix[ends[-1]:ends[-1] + 1]
            prefix = prefix[:ends[-1] + 1]
        if full[:len(prefix)] != prefix:
            raise frognano.InvalidArgumentError(
                "the chat template does not render earlier messages the same when a message follows; "
                "the observation tokens cannot be appended to the model's tokens")
        suffix = full[len(prefix):]
        return suffix if reply_ended or not closer else closer + suffix


class FrogNanoRollout:
    """A TRL `rollout_func`: multi-turn episodes of the text tool protocol, token in, token out.

    Each prompt it is handed (TRL's sampler repeats each dataset row num_generations times, so
    a group's rollouts share their task) is found among the tasks it was built with, and one
    episode is run: the model's reply (sampled ids kept as sampled) is the action, the
    environment's observation is appended as chat-template tokens (env_mask 0, logprob 0.0),
    until the episode ends, max_turns, or the trainer's max_completion_length; then the final
    repository is graded by its tests in the sandbox. The returned dict has prompt_ids,
    completion_ids, logprobs and env_mask, plus per completion frognano_reward, task_id,
    frognano_resolved and frognano_turns (these reach the reward functions).

    `last_rollouts` holds the last batch's episodes (task_id, reward, resolved, outcome, the
    grading test run, and per turn the sampled ids, their log-probs, the action text, the
    observation and the token ids it was appended as)."""

    def __init__(self, tasks: Union[Tasks, "datasets.Dataset"], *, generate: Optional[Generate] = None,
                 sandbox: Optional["frognano.Sandbox"] = None, max_turns: int = 8,
                 max_turn_tokens: Optional[int] = None, max_steps: int = 30, observation_chars: int = 6000,
                 prompt: PromptSpec = None, sampler: Optional[TaskSampler] = None, workers: int = 1):
        if max_turns < 1 or workers < 1 or (max_turn_tokens is not None and max_turn_tokens < 1):
            raise frognano.InvalidArgumentError("max_turns, max_turn_tokens and workers must be at least 1")
        self.generate = generate
        self.sandbox = sandbox
        self.max_turns = max_turns
        self.max_turn_tokens = max_turn_tokens
        self.max_steps = max_steps
        self.observation_chars = observation_chars
        self.sampler = sampler
        self.workers = workers
        self.last_rollouts: List[Dict[str, Any]] = []
        self._tasks = self._index(tasks, prompt)

    def _index(self, tasks: Any, prompt: PromptSpec) -> Dict[str, Task]:
        """The tasks by the text of their prompt's last user message."""
        if isinstance(tasks, datasets.Dataset):
            pairs = [(_last_user_text(row.get("prompt")), task_of_row(row)) for row in tasks]
        else:
            items = task_list(tasks)
            pairs = list(zip(_user_texts(items, prompt, self.observation_chars), items))
        index: Dict[str, Task] = {}
        for text, task in pairs:
            known = index.setdefault(text, task)
            if known["id"] != task["id"]:
                raise frognano.InvalidArgumentError(
                    f"tasks {known['id']} and {task['id']} have the same prompt, so a rollout could not tell "
                    f"which one to run: give them distinct prompts")
        return index

    def task_for(self, prompt: Any) -> Task:
        """The task of a prompt (chat messages or text) handed to the rollout: the task whose
        prompt it is, or else the one task whose problem statement it contains."""
        text = _last_user_text(prompt)
        task = self._tasks.get(text)
        if task is None:
            found = {t["id"]: t for t in self._tasks.values()
                     if str(t.get("problem_statement", "")).strip() and str(t["problem_statement"]).strip() in text}
            if len(found) == 1:
                task = next(iter(found.values()))
            else:
                raise frognano.TaskError(
                    f"a rollout prompt is not one of the {len(self._tasks)} tasks this rollout_func was made with "
                    f"({'several match' if found else 'none matches'}; its user message begins {text[:80]!r}): "
                    f"build the dataset with task_dataset(tasks) and pass make_rollout_func the same tasks, or the "
                    f"dataset itself")
        return task

    def _map(self, function: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
        if self.workers == 1 or len(items) < 2:
            return [function(item) for item in items]
        with concurrent.futures.ThreadPoolExecutor(min(self.workers, len(items))) as pool:
            return list(pool.map(function, items))

    def __call__(self, prompts: List[Any], trainer: Any) -> Dict[str, List[Any]]:
        tokenizer = _tokenizer_of(trainer)
        template_kwargs = getattr(trainer, "chat_template_kwargs", None) or {}
        turns = _Turns(tokenizer, template_kwargs)
        generate = self.generate or _trainer_generate(trainer)
        budget = int(trainer.max_completion_length)
        eos = set(getattr(trainer, "eos_token_ids", None) or [tokenizer.eos_token_id])

        tasks = [self.task_for(prompt) for prompt in prompts]
        episodes = self._map(lambda task: TextEpisode(task, sandbox=self.sandbox, max_steps=self.max_steps,
                                                      observation_chars=self.observation_chars), tasks)
        prompt_ids = [_template_ids(tokenizer, _as_messages(prompt), True, template_kwargs) for prompt in prompts]
        completion_ids: List[List[int]] = [[] for _ in prompts]
        logprobs: List[List[float]] = [[] for _ in prompts]
        env_mask: List[List[int]] = [[] for _ in prompts]
        history: List[List[Dict[str, Any]]] = [[] for _ in prompts]
        try:
            active = list(range(len(prompts)))
            for turn in range(self.max_turns):
                if not active:
                    break
                room = {i: budget - len(completion_ids[i]) for i in active}
                limit = max(room.values())
                if self.max_turn_tokens is not None:
                    limit = min(limit, self.max_turn_tokens)
                sampled = generate([prompt_ids[i] + completion_ids[i] for i in active], limit)
                if len(sampled) != len(active):
                    raise frognano.InvalidArgumentError(
                        f"the generate backend returned {len(sampled)} generations for {len(active)} prompts")
                replies = {}
                for i, (ids, lps) in zip(active, sampled):
                    ids, lps = list(ids)[:room[i]], [float(x) for x in lps][:room[i]]
                    if len(lps) != len(ids):
                        raise frognano.InvalidArgumentError(
                            "the generate backend returned log-probs and ids of different lengths")
                    completion_ids[i] += ids
                    logprobs[i] += lps
                    env_mask[i] += [1] * len(ids)
                    # The action is the reply's text; its ids stay as sampled (never re-tokenized).
                    replies[i] = (ids, lps, tokenizer.decode(ids, skip_special_tokens=True))
                steps = self._map(lambda i: episodes[i].step(replies[i][2]), active)
                still = []
                for i, (observation, _reward, done, _info) in zip(active, steps):
                    ids, lps, action = replies[i]
                    record = {"token_ids": ids, "logprobs": lps, "action": action, "observation": observation,
                              "observation_ids": []}
                    history[i].append(record)
                    if done or turn + 1 == self.max_turns:
                        continue
                    obs_ids = turns.observation_ids(observation, bool(ids) and ids[-1] in eos)
                    if len(completion_ids[i]) + len(obs_ids) + 1 > budget:
                        continue  # no room for the observation and a reply: the episode ends here
                    record["observation_ids"] = obs_ids
                    completion_ids[i] += obs_ids
                    logprobs[i] += [0.0] * len(obs_ids)
                    env_mask[i] += [0] * len(obs_ids)
                    still.append(i)
                active = still
            rewards = self._map(lambda episode: float(episode.finish()), episodes)
            self.last_rollouts = [
                {"task_id": task["id"], "reward": reward, "resolved": episode.resolved, "outcome": episode.outcome,
                 "grading": episode.last_info.get("grading"), "turns": turns_of}
                for task, reward, episode, turns_of in zip(tasks, rewards, episodes, history)
            ]
        finally:
            for episode in episodes:
                episode.close()
        if self.sampler is not None:
            self.sampler.observe([rollout["outcome"] or {"task_id": rollout["task_id"], "reward": rollout["reward"]}
                                  for rollout in self.last_rollouts])
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": logprobs,
            "env_mask": env_mask,
            "frognano_reward": rewards,
            "task_id": [task["id"] for task in tasks],
            "frognano_resolved": [rollout["resolved"] for rollout in self.last_rollouts],
            "frognano_turns": [len(turns_of) for turns_of in history],
        }


def make_rollout_func(tasks: Union[Tasks, "datasets.Dataset"], *, generate: Optional[Generate] = None,
                      sandbox: Optional["frognano.Sandbox"] = None, max_turns: int = 8,
                      max_turn_tokens: Optional[int] = None, max_steps: int = 30, observation_chars: int = 6000,
                      prompt: PromptSpec = None, sampler: Optional[TaskSampler] = None,
                      workers: int = 1) -> FrogNanoRollout:
    """A `rollout_func` for GRPOTrainer over these tasks (the task set the dataset was built from
    with task_dataset(tasks, prompt=...), the same `prompt`, or that dataset itself).

    generate: the generation backend (default: the trainer's model with its sampling settings;
    local_model_generate(...) for a frognano.LocalModel). max_turns: model replies per episode;
    max_turn_tokens: tokens per reply (default: what is left of max_completion_length);
    max_steps, observation_chars: the RepoEnv's; sampler: a TaskSampler told every outcome;
    workers: threads stepping and grading the episodes."""
    return FrogNanoRollout(tasks, generate=generate, sandbox=sandbox, max_turns=max_turns,
                           max_turn_tokens=max_turn_tokens, max_steps=max_steps,
                           observation_chars=observation_chars, prompt=prompt, sampler=sampler, workers=workers)


def frognano_reward(prompts: Optional[List[Any]] = None, completions: Optional[List[Any]] = None,
                    frognano_reward: Optional[List[float]] = None, task_id: Optional[List[str]] = None,
                    task: Optional[List[Any]] = None, **kwargs: Any) -> List[Optional[float]]:
    """A GRPOTrainer reward function: the sandboxed reward of each rollout, which a FrogNano
    rollout_func (make_rollout_func) put in the `frognano_reward` column. When the rows also
    carry their task, each rollout is checked to have run its row's task."""
    if frognano_reward is None:
        raise frognano.InvalidArgumentError(
            "frognano_reward reads the `frognano_reward` column that the rollout_func of make_rollout_func "
            "returns; pass rollout_func=make_rollout_func(tasks) to the GRPOTrainer (with environment_factory="
            "FrogNanoToolEnv the environment's get_reward() is the reward and no reward function is needed)")
    if task_id is not None and task is not None:
        for ran, row_task in zip(task_id, task):
            if row_task is not None and task_of(row_task)["id"] != ran:
                raise frognano.TaskError(f"a rollout ran task {ran} for a row of task {task_of(row_task)['id']}")
    return [None if reward is None else float(reward) for reward in frognano_reward]
