"""Local language models: LocalModel and OnnxPolicy on a tiny randomly initialised model (made
once per session through the same conversion as the real ones)."""

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import frognano

TASKS = Path(__file__).resolve().parents[2] / "examples" / "tasks" / "sample.jsonl"
PROMPTS = ["x", "print the sum of 12 and 30", "a longer prompt about fixing a failing test in a parser"]


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-model")
    fp32 = frognano.make_tiny_model(root, seed=0, progress=lambda message: None)
    assert Path(fp32) == root / "fp32"
    return root


@pytest.fixture(scope="session")
def tiny(tiny_root):
    return tiny_root / "fp32"


@pytest.fixture(scope="session")
def model(tiny):
    return frognano.LocalModel(tiny, intra_threads=1)


def greedy(model, prompts, n=12, **options):
    return model.generate(prompts, max_new_tokens=n, temperature=0, stop_token_ids=[], **options)


def log_softmax(row, index):
    top = max(row)
    return row[index] - top - math.log(sum(math.exp(v - top) for v in row))


def test_config_and_path(model, tiny):
    config = model.config
    assert config["vocab_size"] == 448
    assert config["context_length"] > 0
    assert config["eos_token_ids"]
    assert {"num_layers", "num_kv_heads", "head_dim", "pad_token_id"} <= set(config)
    assert Path(model.path) == tiny
    assert model.has_chat_template
    assert model.runtime_library and "onnxruntime" in model.runtime_library
    assert "LocalModel(" in repr(model)


def test_greedy_generation_of_token_prompts_follows_the_full_logits(model):
    prompt = model.encode("def add(a, b): return a - b")
    [out] = greedy(model, [prompt], n=10)
    assert out["finish_reason"] == "length"
    assert out["prompt_tokens"] == len(prompt)
    assert len(out["token_ids"]) == len(out["logprobs"]) == 10
    assert out["text"] == model.decode(out["token_ids"])
    assert greedy(model, [prompt], n=10) == [out]
    rows = model.full_logits(prompt + out["token_ids"][:-1])
    assert len(rows) == len(prompt) + 9 and len(rows[0]) == model.config["vocab_size"]
    for i, (token, logprob) in enumerate(zip(out["token_ids"], out["logprobs"])):
        row = rows[len(prompt) - 1 + i]
        assert row.index(max(row)) == token, i
        assert abs(log_softmax(row, token) - logprob) < 2e-3, i
    data, shape = model.full_logits(prompt, as_bytes=True)
    assert shape == (len(prompt), model.config["vocab_size"]) and len(data) == 4 * shape[0] * shape[1]
    assert model.last_timing["generated_tokens"] == 10


def test_text_prompts_are_encoded_with_the_tokenizer(model):
    text = "<|im_start|>user\nhello<|im_end|>\n"
    ids = model.encode(text)
    assert ids and all(isinstance(i, int) for i in ids)
    assert model.decode(ids, skip_special=False) == text
    assert greedy(model, [text]) == greedy(model, [ids])


def test_a_batch_gives_each_row_what_it_gets_alone(model):
    batched = greedy(model, PROMPTS)
    assert len({row["prompt_tokens"] for row in batched}) == 3
    for prompt, row in zip(PROMPTS, batched):
        [single] = greedy(model, [prompt])
        assert row["token_ids"] == single["token_ids"]
        assert all(abs(a - b) < 1e-3 for a, b in zip(row["logprobs"], single["logprobs"]))


def test_seeded_sampling_is_reproducible(model):
    options = dict(max_new_tokens=16, temperature=1.0, top_k=50, top_p=0.95, stop_token_ids=[])
    first = model.generate(PROMPTS, seed=7, **options)
    assert model.generate(PROMPTS, seed=7, **options) == first
    other = model.generate(PROMPTS, seed=8, **options)
    assert [r["token_ids"] for r in other] != [r["token_ids"] for r in first]
    for row in first + other:
        assert len(row["logprobs"]) == len(row["token_ids"]) == 16
        assert all(math.isfinite(lp) and lp <= 0.0 for lp in row["logprobs"])


def test_stop_strings_cut_the_text(model):
    for prompt in PROMPTS + ["hello world", "import os"]:
        [full] = greedy(model, [prompt], n=16)
        text = full["text"]
        stops = [text[i:i + 2] for i in range(1, len(text) - 1) if text[i:i + 2].isascii() and text[i:i + 2].isprintable()]
        if stops:
            break
    else:
        pytest.skip("no ASCII text in the tiny model's replies")
    stop = stops[0]
    for given in (stop, [stop, "\x00never"]):
        [cut] = greedy(model, [prompt], n=16, stop=given)
        assert cut["finish_reason"] == "stop"
        assert cut["text"] == text[: text.index(stop)]
        assert cut["token_ids"] == full["token_ids"][: len(cut["token_ids"])]


def test_chat_renders_the_chat_template(model):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    rendered = model.render_chat(messages)
    assert "<|im_start|>system\nBe brief.<|im_end|>" in rendered
    assert "<|im_start|>user\nhi<|im_end|>" in rendered
    assert rendered.endswith("<|im_start|>assistant\n")
    assert not model.render_chat(messages, add_generation_prompt=False).endswith("assistant\n")
    reply = model.chat(messages, max_new_tokens=6, temperature=0)
    assert isinstance(reply, dict)
    assert reply["prompt_tokens"] == len(model.encode(rendered))
    [by_text] = model.generate([rendered], max_new_tokens=6, temperature=0)
    assert reply == by_text
    replies = model.chat([messages, [{"role": "user", "content": "bye"}]], max_new_tokens=6, temperature=0)
    assert isinstance(replies, list) and len(replies) == 2
    assert replies[0]["token_ids"] == reply["token_ids"]
    assert model.chat([], max_new_tokens=4) == []


@pytest.mark.parametrize(
    "options, match",
    [
        ({"temperature": -1.0}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_p": 0.0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": -3}, "max_new_tokens"),
        ({"top_k": -1}, "top_k"),
        ({"seed": -1}, "seed"),
        ({"stop": [""]}, "stop"),
        ({"stop_token_ids": [-2]}, "stop token"),
    ],
)
def test_invalid_options_raise(model, options, match):
    with pytest.raises(frognano.InvalidArgumentError, match=match):
        model.generate(["x"], **options)
    with pytest.raises(ValueError):
        model.chat([{"role": "user", "content": "x"}], **options)


def test_invalid_prompts_raise(model):
    with pytest.raises(frognano.InvalidArgumentError, match="outside the vocabulary"):
        model.generate([[1, 99999]])
    with pytest.raises(frognano.InvalidArgumentError, match="empty"):
        model.generate([[]])
    with pytest.raises(frognano.InvalidArgumentError, match="out of range"):
        model.generate([[-1]])
    with pytest.raises(TypeError, match="list"):
        model.generate("a bare string")
    with pytest.raises(TypeError, match="prompt 1"):
        model.generate(["ok", [1.5]])
    with pytest.raises(frognano.InvalidArgumentError, match="role"):
        model.chat([{"role": "user"}])
    with pytest.raises(TypeError):
        model.chat("hello")
    with pytest.raises(frognano.InvalidArgumentError, match="vocabulary"):
        model.full_logits([5000])
    assert model.generate([]) == []


def test_missing_or_broken_model_folders_raise_inference_errors(tiny, tiny_root, tmp_path):
    with pytest.raises(frognano.InferenceError, match="not a model folder"):
        frognano.LocalModel(tmp_path / "missing")
    with pytest.raises(frognano.InferenceError, match="fp32"):
        frognano.LocalModel(tiny_root)
    with pytest.raises(frognano.InferenceError, match="known"):
        frognano.LocalModel("no-such-model")
    broken = tmp_path / "broken"
    shutil.copytree(tiny, broken)
    (broken / "tokenizer.json").unlink()
    with pytest.raises(frognano.InferenceError, match="tokenizer"):
        frognano.LocalModel(broken)
    assert issubclass(frognano.InferenceError, frognano.FrognanoError)
    with pytest.raises(frognano.InferenceError, match="unknown model"):
        frognano.fetch_model("no-such-model")
    assert "smollm2-135m" in frognano.known_models()


def test_an_explicit_runtime_must_be_the_loaded_one(model, tiny, tmp_path):
    with pytest.raises(frognano.InferenceError, match="already loaded"):
        frognano.LocalModel(tiny, runtime_library=tmp_path / "libonnxruntime.so.9")


def run_python(code, env):
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_interpreters_onnxruntime_package_is_preferred(model, tiny, tmp_path):
    loaded = Path(model.runtime_library)
    package = tmp_path / "site" / "onnxruntime"
    (package / "capi").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('found without being imported')\n")
    (package / "capi" / loaded.name).symlink_to(loaded)
    env = {k: v for k, v in os.environ.items() if k not in ("FROGNANO_ORT_LIBRARY", "ORT_DYLIB_PATH")}
    env["PYTHONPATH"] = str(tmp_path / "site")
    code = f"import frognano; print(frognano.LocalModel({str(tiny)!r}).runtime_library)"
    assert Path(run_python(code, env)) == package / "capi" / loaded.name
    env["FROGNANO_ORT_LIBRARY"] = str(loaded)
    assert Path(run_python(code, env)) == loaded


def context(text, history=()):
    return {"task_id": "t", "initial": {"text": text}, "history": list(history)}


def test_onnx_policy_acts_on_contexts(tiny):
    policy = frognano.OnnxPolicy(tiny, generation={"max_new_tokens": 8}, system_prompt="You fix bugs.")
    assert policy.config["generation"]["max_new_tokens"] == 8
    assert policy.config["generation"]["temperature"] == 0.0
    turn = {"action": {"type": "text", "text": "test"}, "observation": {"text": "1 failed"}}
    contexts = [context("Fix the failing test."), context("Fix the failing test.", [turn])]
    outputs = policy.act(contexts)
    assert len(outputs) == 2
    for ctx, out in zip(contexts, outputs):
        assert isinstance(out["action"], str)
        assert 1 <= len(out["token_ids"]) == len(out["logprobs"]) <= 8
        assert all(math.isfinite(lp) and lp <= 0.0 for lp in out["logprobs"])
        assert out["decision"]["prompt_tokens"] == len(policy.prompt_ids(ctx))
    assert policy.act(contexts[:1])[0]["token_ids"] == outputs[0]["token_ids"]
    messages = policy.messages(contexts[1])
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"] == "You fix bugs."
    with pytest.raises(frognano.InvalidArgumentError, match="generation"):
        frognano.OnnxPolicy(tiny, generation={"temprature": 0.5})
    with pytest.raises(frognano.InvalidArgumentError, match="top_p"):
        frognano.OnnxPolicy(tiny, generation={"top_p": 0})
    with pytest.raises(TypeError):
        policy.act(context("a single dict"))


def test_onnx_policy_in_evaluate_and_the_trainer(tiny, sandbox):
    tasks = frognano.load_tasks(TASKS)[:1]
    policy = frognano.OnnxPolicy(tiny, generation={"max_new_tokens": 6})
    for given in (policy, f"onnx:{tiny}"):
        summary, records = frognano.evaluate(tasks, given, sandbox=sandbox, max_steps=2)
        assert summary["episodes"] == 1 and summary["resolved"] == 0
        assert len(records[0]["steps"]) <= 2
    with pytest.raises(frognano.InvalidArgumentError, match="does not learn"):
        frognano.GrpoTrainer(sandbox, policy, tasks)
    # A policy failing during the rollout (no prompt fits in 1 token) is an InferenceError.
    cramped = frognano.OnnxPolicy(tiny, max_prompt_tokens=1)
    with pytest.raises(frognano.InvalidArgumentError, match="prompt"):
        cramped.act([context("Fix the failing test.")])
    with pytest.raises(frognano.InferenceError, match="onnx policy"):
        frognano.evaluate(tasks, cramped, sandbox=sandbox, max_steps=2)
    with pytest.raises(frognano.InferenceError, match="not a model folder"):
        frognano.evaluate(tasks, "onnx:no/such/model/folder", sandbox=sandbox, max_steps=2)
