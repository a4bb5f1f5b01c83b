"""What every trainer adapter shares: the framework import check, task lists and rows, a
process-wide sandbox, and one text episode over a RepoEnv."""

from __future__ import annotations

import importlib
import asyncio
import itertools
import json
import os
import re
import threading
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import frognano

# The version of each framework the adapters are tested against (and the extra that installs it).
TESTED_VERSIONS: Dict[str, tuple] = {
    "gymnasium": ("gymnasium", "1.4.0"),
    "trl": ("trl", "1.16.0"),
    "verl": ("verl", "0.9.1"),
    "skyrl": ("skyrl-gym", "0.4.0"),
    "verifiers": ("verifiers", "0.4.0"),
    "openrlhf": ("openrlhf", "0.11.2"),
    "openenv": ("openenv-core", "0.3.0"),
    "gem": ("gem-llm", "0.1.0"),
}

Task = Dict[str, Any]
TaskLike = Union[Task, str]
Tasks = Union[str, "os.PathLike[str]", Sequence[TaskLike], Task]


def require(module: str, extra: str):
    """Imports `module` of the framework behind `frognano.integrations.<extra>`, or raises an
    ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        distribution, version = TESTED_VERSIONS[extra]
        raise ImportError(
            f"frognano.integrations.{extra} needs {distribution} (tested with {version}), which "
            f"could not be imported ({error}); install it with: pip install 'frognano[{extra}]'",
            name=module,
        ) from error


def task_list(tasks: Tasks) -> List[Task]:
    """Tasks as dicts, from a task-set path (JSONL, as frognano.load_tasks reads), one task
    dict, or a sequence of task dicts / task JSON strings. Raises TaskError on a malformed task
    and InvalidArgumentError on anything else."""
    if isinstance(tasks, (str, os.PathLike)):
        return frognano.load_tasks(tasks)
    if isinstance(tasks, Mapping):
        tasks = [tasks]
    if not isinstance(tasks, Iterable):
        raise frognano.InvalidArgumentError(
            f"tasks must be a task-set path, a task dict or a list of tasks, not {type(tasks).__name__}"
        )
    out = [task_of(item) for item in tasks]
    if not out:
        raise frognano.InvalidArgumentError("the task list is empty")
    return out


def task_of(value: Any) -> Task:
    """One task from a dict or a JSON string (a dataset row's `task` column holds one)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise frognano.TaskError(f"a task string is not JSON: {error}") from error
    if not isinstance(value, Mapping):
        raise frognano.TaskError(f"a task must be a dict or a JSON string, not {type(value).__name__}")
    task = dict(value)
    for field in ("id", "repo"):
        if field not in task:
            raise frognano.TaskError(f"the task has no `{field}` field (keys: {sorted(task)})")
    return task


def task_of_row(row: Mapping[str, Any], key: str = "task") -> Task:
    """The task a trainer's dataset row carries: its `task` column (a JSON string or a dict),
    `extra_info`/`info`/`extras` holding one, or the row itself when it is a task."""
    if not isinstance(row, Mapping):
        raise frognano.TaskError(f"a dataset row must be a dict, not {type(row).__name__}")
    if key in row and row[key] is not None:
        return task_of(row[key])
    for nested in ("extra_info", "info", "extras", "env_extras", "label"):
        inner = row.get(nested)
        if isinstance(inner, str) and inner.lstrip().startswith("{"):
            try:
                inner = json.loads(inner)
            except json.JSONDecodeError:
                continue
        if isinstance(inner, Mapping) and (key in inner or "repo" in inner):
            return task_of_row(inner, key) if key in inner else task_of(inner)
    if "id" in row and "repo" in row:
        return task_of(row)
    raise frognano.TaskError(
        f"the row carries no task: expected a `{key}` column (the task as JSON) or extra_info/"
        f"info/extras holding one; the row's keys are {sorted(row)}"
    )


def task_json(task: TaskLike) -> str:
    """A task as the compact JSON string dataset columns carry."""
    return json.dumps(task_of(task), separators=(",", ":"), sort_keys=True)


_SANDBOX_LOCK = threading.Lock()
_SANDBOX: Optional["frognano.Sandbox"] = None


def shared_sandbox() -> "frognano.Sandbox":
    """One Sandbox for the process (created on first use; sandboxes are thread-safe)."""
    global _SANDBOX
    with _SANDBOX_LOCK:
        if _SANDBOX is None:
            _SANDBOX = frognano.Sandbox()
        return _SANDBOX


class TextEpisode:
    """One episode of a task in a RepoEnv driven by text actions, as the text-in/text-out
    trainers (SkyRL, OpenRLHF, verifiers, TRL's environment_factory) want it.

    Malformed actions are not exceptions: the environment answers them with an error
    observation and the episode goes on. `finish()` grades the final repository (submits when
    the agent did not), so every episode's reward comes from a sandboxed test run."""

    def __init__(self, task: TaskLike, *, sandbox: Optional["frognano.Sandbox"] = None,
                 max_steps: int = 30, observation_chars: int = 6000):
        self.task = task_of(task)
        self.env = frognano.RepoEnv(sandbox or shared_sandbox(), max_steps=max_steps,
                                    observation_chars=observation_chars)
        self.observation, self.info = self.env.reset(self.task)
        self.reward = 0.0
        self.done = False
        self.steps = 0
        self.last_info: Dict[str, Any] = dict(self.info)

    def step(self, action: Union[str, Mapping[str, Any]]):
        """Applies one action; returns (observation, reward, done, info). After the end it
        returns the end's observation again with done=True."""
        if self.done:
            return "The episode has ended.", 0.0, True, dict(self.last_info)
        if not isinstance(action, (str, Mapping)):
            action = str(action)
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        self.reward += float(reward)
        self.done = bool(terminated or truncated)
        self.last_info = info
        return observation, float(reward), self.done, info

    def finish(self) -> float:
        """Grades the episode if it is still open (a submit) and returns its total reward."""
        if not self.done:
            self.step("submit")
        return self.reward

    @property
    def resolved(self) -> bool:
        outcome = self.env.outcome
        return bool(outcome and outcome.get("resolved"))

    @property
    def outcome(self) -> Optional[Dict[str, Any]]:
        return self.env.outcome

    def record(self) -> Optional[Dict[str, Any]]:
        return self.env.record()

    def close(self) -> None:
        self.env.close()


def first_prompts(tasks: Tasks, observation_chars: int = 6000,
                  sandbox: Optional["frognano.Sandbox"] = None) -> List[str]:
    """The opening observation of each task (its problem statement, a map of its repository and
    the tool instructions), as the first user message of a chat, in order.

    One RepoEnv renders them all: it reads each repository once, and a reset to another task of
    the same repository rewrites only the files the tasks' bugs touch, so a dataset of N tasks
    costs one workspace copy per repository instead of N. (The bindings have no call that
    renders the observation without a workspace.)"""
    items = task_list(tasks)
    env = frognano.RepoEnv(sandbox or shared_sandbox(), observation_chars=observation_chars)
    try:
        return [env.reset(task)[0] for task in items]
    finally:
        env.close()


def first_prompt(task: TaskLike, observation_chars: int = 6000,
                 sandbox: Optional["frognano.Sandbox"] = None) -> str:
    """The opening observation of a task (its problem statement and the tool instructions), as
    the first user message of a chat; for many tasks, `first_prompts` is cheaper."""
    return first_prompts([task_of(task)], observation_chars, sandbox)[0]


class LocalGenerator:
    """A frognano.LocalModel behind the vLLM-style engines the frameworks expect (verl's server
    manager, OpenRLHF's llm_engine): one prompt of token ids per request, sampling options as
    vLLM names them, generation in a thread. A request without a seed samples with seed + its
    request number, so a run is reproducible and repeated prompts are sampled afresh."""

    def __init__(self, model: Union["frognano.LocalModel", str, "os.PathLike[str]"], *, seed: int = 0,
                 intra_threads: int = 0):
        self.model = model if isinstance(model, frognano.LocalModel) else frognano.LocalModel(
            model, intra_threads=intra_threads)
        self.seed = int(seed)
        self.context_length = int(self.model.config.get("context_length") or 0)
        self._requests = itertools.count()
        self._lock = threading.Lock()

    def next_seed(self) -> int:
        with self._lock:
            return self.seed + next(self._requests)

    async def generate(self, prompt_ids: Sequence[int], *, max_tokens: int, temperature: float = 1.0,
                       top_k: int = 0, top_p: float = 1.0, seed: Optional[int] = None, stop: Any = None,
                       stop_token_ids: Optional[Sequence[int]] = None) -> Dict[str, Any]:
        """LocalModel.generate's result for one prompt, at most max_tokens new tokens (fewer
        when the context has less room; InvalidArgumentError when it has none)."""
        prompt = [int(t) for t in prompt_ids]
        if self.context_length:
            room = self.context_length - len(prompt)
            if room < 1:
                raise frognano.InvalidArgumentError(
                    f"a prompt of {len(prompt)} tokens leaves no room in the model's context of "
                    f"{self.context_length}")
            max_tokens = min(int(max_tokens), room)
        options = dict(
            max_new_tokens=max(1, int(max_tokens)),
            temperature=float(temperature),
            top_k=max(0, int(top_k or 0)),  # vLLM writes -1 for "no top-k"
            top_p=float(1.0 if top_p is None else top_p),
            seed=int(self.next_seed() if seed is None else seed),
            stop=stop or None,
            stop_token_ids=[int(t) for t in (stop_token_ids or [])] or None,
        )
        return (await asyncio.to_thread(self.model.generate, [prompt], **options))[0]


# Unified diffs as environment actions ---------------------------------------------------------

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def _diff_path(header: str) -> Optional[str]:
    path = header.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def patch_actions(diff: str) -> List[Dict[str, Any]]:
    """The environment actions (JSON tool calls) that apply a unified diff: one ``edit`` per
    hunk (its old lines replaced by its new lines), ``create`` for a new file, ``insert`` for a
    hunk without old lines. Text around the diff is ignored; [] when there is no diff."""
    lines = diff.splitlines()
    actions: List[Dict[str, Any]] = []
    old_path = new_path = None
    seen_header = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old_path, new_path = _diff_path(line[4:]), _diff_path(lines[i + 1][4:])
            seen_header = True
            i += 2
            continue
        match = _HUNK.match(line)
        if not (match and seen_header):
            i += 1
            continue
        old_start = int(match.group(1))
        old_count = int(match.group(2)) if match.group(2) is not None else 1
        new_count = int(match.group(4)) if match.group(4) is not None else 1
        old: List[str] = []
        new: List[str] = []
        old_eof = new_eof = False  # "\ No newline at end of file" after the last line of a side
        last = " "
        i += 1
        while i < len(lines) and (len(old) < old_count or len(new) < new_count or lines[i].startswith("\\")):
            body = lines[i]
            tag, rest = (body[:1], body[1:]) if body else (" ", "")  # a bare empty line: blank context
            if tag == "\\":
                old_eof = old_eof or last in " -"
                new_eof = new_eof or last in " +"
            elif tag == " ":
                old.append(rest)
                new.append(rest)
            elif tag == "-":
                old.append(rest)
            elif tag == "+":
                new.append(rest)
            else:
                break
            last = tag
            i += 1
        old_text = "".join(part + "\n" for part in old)
        new_text = "".join(part + "\n" for part in new)
        if old_eof and old_text:
            old_text = old_text[:-1]
        if new_eof and new_text:
            new_text = new_text[:-1]
        if old_path is None and new_path is not None:
            actions.append({"name": "create", "arguments": {"path": new_path, "content": new_text}})
        elif not old:
            actions.append({"name": "insert", "arguments": {"path": new_path or old_path, "line": old_start,
                                                            "text": new_text}})
        else:
            # A deleted file (+++ /dev/null) is emptied: the environment has no delete.
            actions.append({"name": "edit", "arguments": {"path": old_path or new_path, "search": old_text,
                                                          "replace": new_text}})
    return actions


def reverse_patch(diff: str) -> str:
    """A unified diff with its sides swapped (a task's bug_patch reversed is its true fix)."""
    out, lines, i = [], diff.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            out += ["--- " + lines[i + 1][4:], "+++ " + line[4:]]
            i += 2
            continue
        hunk = _HUNK.match(line)
        if hunk:
            old = hunk.group(1) + (f",{hunk.group(2)}" if hunk.group(2) is not None else "")
            new = hunk.group(3) + (f",{hunk.group(4)}" if hunk.group(4) is not None else "")
            out.append(f"@@ -{new} +{old} @@{line[hunk.end():]}")
        elif line[:1] in ("+", "-"):
            out.append({"+": "-", "-": "+"}[line[0]] + line[1:])
        else:
            out.append(line)
        i += 1
    return "\n".join(out) + "\n"


def fix_actions(task: TaskLike) -> List[Dict[str, Any]]:
    """The task's reference fix (its bug_patch reversed) as environment tool calls: what a
    perfect agent would do, for demos and for checking a grading path end to end."""
    return patch_actions(reverse_patch(task_of(task)["bug_patch"]))
