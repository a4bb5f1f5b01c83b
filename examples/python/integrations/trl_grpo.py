"""One GRPO step of TRL's GRPOTrainer on a FrogNano task, on the CPU: a tiny random model writes
text commands (frognano.tool_instructions()) in multi-turn episodes run by the FrogNano
rollout_func, and the reward is the task's tests run in the sandbox.

With --tools it goes through TRL's environment_factory instead: FrogNanoToolEnv's methods are the
model's tools (the tiny tokenizer is given a tool-capable chat template for that).

Run: python examples/python/integrations/trl_grpo.py [--tools]   (needs pip install 'frognano[trl]')
"""

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import frognano  # noqa: E402
from frognano.integrations import TaskSampler  # noqa: E402
from frognano.integrations.trl import FrogNanoToolEnv, frognano_reward, make_rollout_func, task_dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "sample.jsonl"


def main():
    tools = "--tools" in sys.argv[1:]
    tasks = frognano.load_tasks(TASKS)[:1]
    sampler = TaskSampler(tasks)  # told every graded outcome
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = frognano.make_tiny_model(Path(tmp) / "model", seed=0, progress=lambda message: None)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        args = GRPOConfig(output_dir=str(Path(tmp) / "out"), max_steps=1, per_device_train_batch_size=2,
                          num_generations=2, max_completion_length=16 if tools else 256, bf16=False,
                          use_cpu=True, report_to="none", logging_steps=1, gradient_checkpointing=False,
                          save_strategy="no", max_tool_calling_iterations=2)
        if tools:
            from trl.chat_template_utils import qwen2_5_chat_template

            tokenizer.chat_template = qwen2_5_chat_template  # ChatML with tool calls, which TRL can parse
            trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer,
                                  train_dataset=task_dataset(tasks, prompt=""),  # reset() supplies the task
                                  environment_factory=FrogNanoToolEnv.factory(sampler=sampler, max_steps=4,
                                                                              observation_chars=800))
        else:
            rollout = make_rollout_func(tasks, max_turns=3, max_turn_tokens=8, observation_chars=200,
                                        sampler=sampler)
            trainer = GRPOTrainer(model=model, reward_funcs=frognano_reward, args=args, processing_class=tokenizer,
                                  train_dataset=task_dataset(tasks), rollout_func=rollout)
        trainer.train()
        logged = trainer.state.log_history[0]
        if tools:
            outcomes = [env.outcome for env in trainer.environments]
            reward_key, turns = "rewards/FrogNanoToolEnv/mean", sum(o["steps"] for o in outcomes)
        else:
            outcomes = [r["outcome"] for r in rollout.last_rollouts]
            reward_key, turns = "rewards/frognano_reward/mean", sum(len(r["turns"]) for r in rollout.last_rollouts)
        resolved = sum(o["resolved"] for o in outcomes)
        print(f"trl {'environment_factory' if tools else 'rollout_func'}: step {trainer.state.global_step}, "
              f"{len(outcomes)} rollouts of {tasks[0]['id']}, {turns} turns, resolved {resolved}/{len(outcomes)}, "
              f"reward mean {logged[reward_key]:.3f}, loss {logged['loss']:.4f}, "
              f"outcomes observed {sampler.metrics()['sampler_observed']}")


if __name__ == "__main__":
    main()
