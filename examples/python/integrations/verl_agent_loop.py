"""FrogNano's agent loop inside verl's AgentLoopWorker, locally on the CPU.

Writes two bundled sample tasks as a verl parquet dataset, registers the loop through its
YAML config, and lets verl's own AgentLoopWorker run one rollout batch with a tiny random
model served by FrogNanoServerManager (frognano.LocalModel): multi-turn episodes, token in /
token out, graded by the tasks' tests in the sandbox. Then grades the first task's true fix
with compute_score, the custom reward function. Needs: pip install 'frognano[verl]'.
"""

import asyncio
import os
import tempfile
from pathlib import Path

import frognano
from frognano.integrations import reverse_patch, task_json
from frognano.integrations import verl as fv

import verl
from hydra import compose, initialize_config_dir
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "sample.jsonl"


def main() -> None:
    tasks = frognano.load_tasks(TASKS)[:2]
    with tempfile.TemporaryDirectory() as tmp:
        model = frognano.make_tiny_model(tmp, seed=0, progress=lambda message: None)
        data = fv.write_parquet(tasks, Path(tmp) / "train.parquet")
        overrides = [
            f"actor_rollout_ref.model.path={model}",
            "actor_rollout_ref.rollout.name=vllm",  # the backend verl would launch; not used here
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
            # The loop's registration, passing it a cap on each reply.
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path="
            f"{fv.write_agent_loop_config(Path(tmp) / 'agent_loops.yaml', max_tokens_per_turn=24)}",
            "data.max_prompt_length=2048",
            "data.max_response_length=512",
        ]
        config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            config = compose(config_name="ppo_trainer", overrides=overrides)

        server = fv.FrogNanoServerManager(model, intra_threads=1)
        worker = AgentLoopWorker(config, llm_client=server)
        dataset = RLHFDataset(data_files=[data], tokenizer=worker.tokenizer, config=config.data, processor=None)
        batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
        out = asyncio.run(worker.generate_sequences(batch))

    mask = out.batch["response_mask"]
    valid = out.batch["attention_mask"][:, out.batch["prompts"].shape[1]:]
    resolved = sum(bool(r) for r in out.non_tensor_batch["resolved"])
    info = {"task": task_json(tasks[0])}
    fixed = fv.compute_score("frognano", reverse_patch(tasks[0]["bug_patch"]), tasks[0]["id"], info)
    empty = fv.compute_score("frognano", "", tasks[0]["id"], info)
    print(f"verl agent loop: {len(tasks)} episodes, {int(mask.sum())} model tokens, "
          f"{int((valid - mask).sum())} observation tokens, resolved {resolved}/{len(tasks)}; "
          f"compute_score(true fix)={fixed}, compute_score(empty)={empty}")


if __name__ == "__main__":
    main()
