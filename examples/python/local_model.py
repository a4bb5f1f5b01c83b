"""A local language model on ONNX Runtime: a chat reply with its per-token log-probabilities,
then one step of an OnnxPolicy in the repository environment.

Run: python examples/python/local_model.py [MODEL]   (after `pip install frognano` or a built
wheel). MODEL is a model folder or a registry name such as smollm2-135m (fetched and converted
on first use); without it a tiny randomly initialised model is made in a temporary folder, so
the replies are gibberish but every call is exercised in a second or two.
"""

import sys
import tempfile
from pathlib import Path

import frognano

TASKS = Path(__file__).resolve().parents[1] / "tasks" / "sample.jsonl"


def main():
    with tempfile.TemporaryDirectory(prefix="frognano-tiny-") as scratch:
        if len(sys.argv) > 1:
            run(sys.argv[1])
        else:
            run(frognano.make_tiny_model(scratch, progress=lambda message: None))


def run(model_arg):
    model = frognano.LocalModel(model_arg)
    config = model.config
    print(f"model: {model.path} ({config['num_layers']} layers, vocabulary {config['vocab_size']}, "
          f"context {config['context_length']})")

    # A chat reply, greedy: the text, then each token with its log-probability.
    messages = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
    reply = model.chat(messages, max_new_tokens=24, temperature=0)
    print("reply:", repr(reply["text"]))
    for token, logprob in list(zip(reply["token_ids"], reply["logprobs"]))[:8]:
        piece = model.decode([token], skip_special=False)
        print(f"  {token:6d} {piece!r:14} logprob {logprob:8.4f}")
    timing = model.last_timing
    seconds = timing["prefill_s"] + timing["decode_s"]
    print(f"finish: {reply['finish_reason']}, {reply['prompt_tokens']} prompt tokens, "
          f"{timing['generated_tokens']} generated in {seconds:.3f} s")

    # Sampling is reproducible from the seed: two rows of one batch, drawn twice.
    options = dict(max_new_tokens=8, temperature=0.8, top_p=0.95, seed=3)
    first = model.generate(["def add(a, b):", "import os"], **options)
    assert model.generate(["def add(a, b):", "import os"], **options) == first

    # One step of a policy backed by the same model folder in the agent environment: the
    # episode's first observation becomes the user's message, the reply is the action.
    policy = frognano.OnnxPolicy(model.path, generation={"max_new_tokens": 32})
    task = frognano.load_tasks(TASKS)[0]
    with frognano.RepoEnv(frognano.Sandbox(), max_steps=4) as env:
        observation, _ = env.reset(task)
        context = {"task_id": task["id"], "initial": {"text": observation}, "history": []}
        [output] = policy.act([context])
        print("action:", repr(output["action"][:80]), f"({len(output['token_ids'])} tokens, "
              f"sum logprob {sum(output['logprobs']):.2f})")
        observation, reward, terminated, truncated, _ = env.step(output["action"])
        print("observation:", observation.splitlines()[0][:100] if observation else "")
        print("reward", reward, "terminated", terminated, "truncated", truncated)


if __name__ == "__main__":
    main()
