"""FrogNano as a SkyRL (skyrl-gym) environment: register it, build dataset rows from the bundled
tasks, and play two episodes through skyrl_gym.make: one where a tiny local model writes every
reply (graded when its turn budget ends) and one where a scripted agent applies the task's true
fix and submits.

    pip install 'frognano[skyrl]'
    python examples/python/integrations/skyrl_env.py
"""

import json
import tempfile
from pathlib import Path

import skyrl_gym

import frognano
from frognano.integrations import fix_actions, skyrl

TASKS = Path(__file__).resolve().parents[2] / "tasks" / "sample.jsonl"


def play(env, prompt, policy):
    """One episode as SkyRL's generator runs it: init, then reply/step until done."""
    chat, _ = env.init(prompt)
    reward, done, turn = 0.0, False, 0
    while not done:
        action = policy(chat, turn)
        out = env.step(action)
        chat += [{"role": "assistant", "content": action}] + out["observations"]
        reward, done, turn = reward + out["reward"], out["done"], turn + 1
    metrics = env.get_metrics()
    env.close()
    return reward, metrics


def main():
    env_id = skyrl.register()
    tasks = frognano.load_tasks(TASKS)
    rows = skyrl.dataset_rows(tasks[:2])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model = frognano.LocalModel(frognano.make_tiny_model(tmp, progress=lambda message: None), intra_threads=1)

        def generated(chat, turn):
            prompt = model.encode(model.render_chat(chat, add_generation_prompt=True))
            return model.generate([prompt], max_new_tokens=16, seed=turn)[0]["text"]

        env = skyrl_gym.make(env_id, env_config={"max_turns": 3}, extras=rows[0])
        results.append(play(env, rows[0]["prompt"], generated))

    fix = [json.dumps(call) for call in fix_actions(tasks[1])] + ["submit"]  # the reference fix
    env = skyrl_gym.make(env_id, env_config={"max_turns": 10}, extras=rows[1])
    results.append(play(env, rows[1]["prompt"], lambda chat, turn: fix[turn]))

    for row, (reward, metrics) in zip(rows, results):
        print(f"{row['task_id']}: reward {reward} after {metrics['turns']} turns "
              f"({metrics['tool_errors']} tool errors)")
    resolved = sum(int(metrics["resolved"]) for _, metrics in results)
    print(f"skyrl: {len(results)} episodes, rewards {[r for r, _ in results]}, resolved {resolved}/{len(results)}")


if __name__ == "__main__":
    main()
