"""frognano.integrations.verl on verl's default trainer path (``trainer.use_v1: true``): its own
AgentLoopManagerTQ starts AgentLoopWorkerTQ as a Ray actor (the local backend pickled into it),
the workers put each episode into TransferQueue, and verl's ReplayBuffer samples them as the v1
trainer does; the tags the trainer casts to int arrays (min/max_global_steps) must be ints.

Needs TransferQueue (and its msgspec, prometheus-client) and torchdata besides verl: what
``verl.trainer.ppo.v1`` imports."""

import os
import uuid

import numpy as np
import pytest

from integration_support import framework

verl = framework("verl")
tq = framework("verl", "transfer_queue")

import ray  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.v1 import AgentLoopManagerTQ  # noqa: E402
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer  # noqa: E402
from verl.utils import tensordict_utils as tu  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402

from frognano.integrations import verl as fv  # noqa: E402

GLOBAL_STEPS = 3


def v1_config(model_path):
    overrides = [
        f"actor_rollout_ref.model.path={model_path}",
        "actor_rollout_ref.rollout.name=vllm",
        "data.max_prompt_length=2048",
        "data.max_response_length=96",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
    ]
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance with TransferQueue (one storage unit), as verl's v1 trainer runs."""
    # Logical CPUs for scheduling: TransferQueue's controller and storage unit take one each.
    ray.init(num_cpus=8, include_dashboard=False, log_to_driver=False)
    try:
        tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
        yield
    finally:
        try:
            tq.close()
        finally:
            ray.shutdown()


def test_v1_agent_loop_manager_puts_graded_episodes_with_int_weight_versions(cluster, tiny_model, tasks,
                                                                           tmp_path):
    config = v1_config(tiny_model)
    assert config.trainer.use_v1 is True  # verl's default trainer
    server = fv.FrogNanoServerManager(tiny_model, intra_threads=1, global_steps=GLOBAL_STEPS)
    manager = AgentLoopManagerTQ.create(config, llm_client=server)

    # The batch as the v1 trainer submits it: dataset rows, a uid per prompt, the step number,
    # and the prompts registered in TransferQueue as pending.
    path = fv.write_parquet(tasks[:2], tmp_path / "train.parquet")
    from transformers import AutoTokenizer

    dataset = RLHFDataset(data_files=[path], tokenizer=AutoTokenizer.from_pretrained(tiny_model),
                          config=config.data, processor=None)
    batch_dict = collate_fn([dataset[i] for i in range(len(dataset))])
    batch_dict["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(dataset))], dtype=object)
    batch = tu.get_tensordict(batch_dict)
    tu.assign_non_tensor_data(batch, "global_steps", GLOBAL_STEPS)
    tq.kv_batch_put(keys=list(batch["uid"]), partition_id="train",
                    tags=[{"is_prompt": True, "status": "pending", "global_steps": GLOBAL_STEPS}] * len(batch))
    manager.generate_sequences(batch)

    buffer = ReplayBuffer("sync", config, None, "drop", {}, poll_interval=0.5)
    sampled, _ = buffer.sample(global_steps=GLOBAL_STEPS, partition_id="train", batch_size=len(batch))
    assert len(sampled.keys) == 2 * 2  # two prompts, rollout.n = 2 sessions each
    assert all(tag["status"] == "success" for tag in sampled.tags)

    # What the v1 trainer's metrics do with the tags (trainer_base._compute_metrics).
    real = np.array([not tag.get("is_padding", False) for tag in sampled.tags], dtype=bool)
    min_steps = np.array([tag["min_global_steps"] for tag in sampled.tags], dtype=int)[real]
    max_steps = np.array([tag["max_global_steps"] for tag in sampled.tags], dtype=int)[real]
    assert min_steps.tolist() == max_steps.tolist() == [GLOBAL_STEPS] * 4

    data = tq.kv_batch_get(keys=sampled.keys, partition_id=sampled.partition_id,
                           select_fields=["extra_fields", "rm_scores", "response_mask", "rollout_log_probs"])
    fields = data.pop("extra_fields").tolist()  # as the v1 trainer reads them
    by_uid = {uid: row for uid, row in zip(batch_dict["uid"], batch_dict["extra_info"])}
    for key, extra in zip(sampled.keys, fields):
        assert extra["task_id"] == by_uid[key.rsplit("_", 2)[0]]["task_id"]
        assert extra["submitted"] is True  # every episode ends graded by the sandbox
        assert extra["min_global_steps"] == extra["max_global_steps"] == GLOBAL_STEPS
    for scores, mask, logprobs in zip(data["rm_scores"], data["response_mask"], data["rollout_log_probs"]):
        assert scores.sum().item() == 0.0  # a random model's replies resolve nothing
        assert mask.sum().item() > 0 and (logprobs[mask == 0] == 0).all() and (logprobs[mask == 1] < 0).any()
