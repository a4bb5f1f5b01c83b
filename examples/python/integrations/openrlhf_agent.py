"""FrogNano as an OpenRLHF agent: load frognano.integrations.openrlhf the way
``--train.agent_func_path`` loads it, then run OpenRLHF's multi-turn executor on two bundled
tasks with a tiny local model standing in for vLLM (LocalEngine keeps vLLM's contract), and
show what OpenRLHF would train on: the token ids, the action ranges, the log-probs and the
sandbox-graded reward.

    pip install 'frognano[openrlhf]'
    python examples/python/integrations/openrlhf_agent.py

For training, pass the printed path as --train.agent_func_path to openrlhf.cli.train_ppo_ray,
with a prompt dataset written from dataset_rows(tasks) (--data.input_key input
--data.label_key label --data.apply_chat_template).
"""

import asyncio
import importlib.util
import json
import tempfile
from pathlib import Path

from transformers import AutoTokenizer

import frognano
from frognano.integrations import openrlhf

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "sample.jsonl"


def load_agent_module(path):
    """What OpenRLHF does with --train.agent_func_path (it then calls AgentExecutor())."""
    spec = importlib.util.spec_from_file_location("agent_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def rollouts(executor, rows, tokenizer, engine):
    prompts = [tokenizer.apply_chat_template(row["input"], tokenize=False, add_generation_prompt=True)
               for row in rows]
    return await asyncio.gather(*[
        executor.execute(prompt, row["label"], openrlhf.LocalSamplingParams(temperature=1.0, logprobs=0),
                         4096, tokenizer, engine)
        for prompt, row in zip(prompts, rows)])


def main():
    print(f"--train.agent_func_path {openrlhf.__file__}")
    agent = load_agent_module(openrlhf.__file__)
    # Three turns per episode; OpenRLHF itself would use AgentExecutor() as it is.
    executor = agent.AgentExecutor(type("ShortAgent", (agent.AgentInstance,), {"max_turns": 3}))
    rows = openrlhf.dataset_rows(frognano.load_tasks(TASKS)[:2])
    with tempfile.TemporaryDirectory() as tmp:
        model = frognano.make_tiny_model(tmp, progress=lambda message: None)
        tokenizer = AutoTokenizer.from_pretrained(model)
        engine = openrlhf.LocalEngine(model, max_new_tokens=16, intra_threads=1)
        results = asyncio.run(rollouts(executor, rows, tokenizer, engine))
    for row, result in zip(rows, results):
        actions = sum(end - start for start, end in result["action_ranges"])
        print(f"{json.loads(row['label'])['id']}: {len(result['observation_tokens'])} tokens, "
              f"{len(result['action_ranges'])} replies ({actions} model tokens), reward {result['reward']}, "
              f"logs {result['extra_logs']}")
    resolved = sum(int(result["extra_logs"]["resolved"]) for result in results)
    print(f"openrlhf: {len(results)} samples, rewards {[r['reward'] for r in results]}, "
          f"resolved {resolved}/{len(results)}")


if __name__ == "__main__":
    main()
