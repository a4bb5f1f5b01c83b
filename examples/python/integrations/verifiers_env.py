"""FrogNano as a verifiers environment, evaluated by verifiers itself (its v1 API on verifiers
0.4, the classic v0 API on 0.3; see frognano.integrations.verifiers).

This file is shaped like a v0 environment module: it exposes `load_environment`, so with its
folder on the path verifiers 0.3's `vf.load_environment("verifiers_env")` finds it (an
installed package named `frognano-env` with a `frognano_env.py` module works the same way, and
is what verifiers 0.4 loads by id). Run as a script it serves a tiny random model with
`frognano serve` (the CLI: $FROGNANO_CLI, `frognano` on the PATH, or this repository's build),
evaluates two sample tasks through verifiers' own model client and prints a summary line.
"""

import asyncio
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import frognano
from frognano.integrations import TaskSampler
from frognano.integrations import verifiers as frognano_verifiers

ROOT = pathlib.Path(__file__).resolve().parents[3]
SAMPLE_TASKS = ROOT / "examples" / "tasks" / "sample.jsonl"


def load_environment(tasks=None, max_turns: int = 2, **kwargs):
    """The environment-package entry point, defaulting to the bundled sample tasks."""
    return frognano_verifiers.load_environment(tasks or str(SAMPLE_TASKS), max_turns=max_turns, **kwargs)


def _cli() -> str:
    named = os.environ.get("FROGNANO_CLI") or shutil.which("frognano")
    if named:
        return named
    builds = [ROOT / "target" / kind / "frognano" for kind in ("release", "debug")]
    builds = [path for path in builds if path.exists()]
    if not builds:
        sys.exit("the frognano CLI was not found: build it (cargo build) or set FROGNANO_CLI")
    return str(max(builds, key=lambda path: path.stat().st_mtime))  # the newest build


def _serve(model: str, log: pathlib.Path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with log.open("w") as out:  # the server keeps its own copy of the file
        process = subprocess.Popen([_cli(), "serve", "--model", model, "--served-model-name", "tiny",
                                    "--port", str(port), "--threads", "1"],
                                   stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).read()
            return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                sys.exit(f"frognano serve did not come up: {log.read_text()[-2000:]}")
            time.sleep(0.2)


def _evaluate_v1(tasks, sampler, url):
    """verifiers 0.4: the episodes of one rollout per task, through the interception server."""
    import verifiers.v1 as vf

    env = load_environment(tasks, max_turns=2, sampler=sampler)
    ctx = vf.ModelContext(model="tiny", client=vf.EvalClientConfig(base_url=url, api_key_var="UNUSED_KEY"),
                          sampling=vf.SamplingConfig(max_tokens=12))

    async def run():
        async with env.serving():
            slots = [slot for task in env.taskset for slot in env.slots(task)]
            return await asyncio.gather(*(env.run_slot(slot, ctx) for slot in slots))

    traces = [trace for episode in asyncio.run(run()) for trace in episode.traces]
    return [trace.reward for trace in traces], [trace.rewards["resolved"].score for trace in traces]


def _evaluate_v0(tasks, sampler, url):
    """verifiers 0.3: env.evaluate with the chat-completions client."""
    import verifiers as vf
    from openai import AsyncOpenAI

    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    env = vf.load_environment("verifiers_env", tasks=tasks, max_turns=2, sampler=sampler)
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=url, api_key="unused"))
    results = asyncio.run(env.evaluate(client, "tiny", sampling_args={"max_tokens": 12}, num_examples=2,
                                       on_start=lambda *args: None, on_progress=lambda *args: None))
    outputs = results["outputs"]
    return [output["reward"] for output in outputs], [output["metrics"]["resolved"] for output in outputs]


def main() -> None:
    tasks = frognano.load_tasks(SAMPLE_TASKS)[:2]
    sampler = TaskSampler(tasks)  # the curriculum hears every graded rollout
    evaluate = _evaluate_v1 if frognano_verifiers.API == "v1" else _evaluate_v0
    with tempfile.TemporaryDirectory() as tmp:
        model = frognano.make_tiny_model(tmp, seed=0, progress=lambda message: None)
        server, url = _serve(model, pathlib.Path(tmp) / "serve.log")
        try:
            rewards, resolved = evaluate(tasks, sampler, url)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"verifiers ({frognano_verifiers.API}): {len(rewards)} rollouts, mean reward "
          f"{sum(rewards) / len(rewards):.2f}, resolved {sum(resolved):.0f}/{len(rewards)}, "
          f"sampler observed {sampler.metrics()['sampler_observed']}")


if __name__ == "__main__":
    main()
