"""frognano.integrations.openrlhf against the real OpenRLHF agent classes: the module loaded the
way --train.agent_func_path loads it, MultiTurnAgentExecutor.execute run with a tokenizer from
transformers and an engine with vLLM's contract over the tiny local model (token-exact action
ranges and log-probs), rewards from the sandboxed grading, chat rendering, bad labels."""

import asyncio
import importlib.util
import json

import pytest
from integration_support import framework, run_example

framework("openrlhf", "openrlhf.utils.agent")
import torch  # noqa: E402
from openrlhf.utils.agent import AgentExecutorBase, AgentInstanceBase, MultiTurnAgentExecutor  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import frognano  # noqa: E402
from frognano.integrations import fix_actions, openrlhf  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    return AutoTokenizer.from_pretrained(str(tiny_model))


class Recording:
    """Keeps what the engine returned, to compare with what the executor assembled."""

    def __init__(self, engine):
        self.engine, self.outputs = engine, []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        output = await self.engine.generate(prompt_token_ids, sampling_params, multi_modal_data=multi_modal_data)
        self.outputs.append((list(prompt_token_ids), output.outputs[0]))
        return output


@pytest.fixture()
def engine(tiny_model):
    return Recording(openrlhf.LocalEngine(tiny_model, max_new_tokens=16, seed=7, intra_threads=1))


def executor_for(module, **settings):
    instance_cls = type("Instance", (module.AgentInstance,), settings)
    return module.AgentExecutor(instance_cls)


OWN_AGENT_FILE = """
from frognano.integrations import openrlhf

class Agent(openrlhf.AgentInstance):
    max_turns = 10

class AgentExecutor(openrlhf.AgentExecutor):
    def __init__(self):
        super().__init__(Agent)
"""


def load_agent_file(path):
    """What OpenRLHF does with --train.agent_func_path: exec the file as "agent_module"."""
    spec = importlib.util.spec_from_file_location("agent_module", str(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def agent_module():
    return load_agent_file(openrlhf.__file__)


def test_agent_func_path_loading(agent_module, tmp_path):
    assert issubclass(agent_module.AgentExecutor, AgentExecutorBase)
    assert issubclass(agent_module.AgentExecutor, MultiTurnAgentExecutor)
    executor = agent_module.AgentExecutor()  # OpenRLHF instantiates it with no arguments
    assert issubclass(executor.agent_instance_cls, AgentInstanceBase)
    # The module docstring's recipe for a file of one's own with other settings.
    own = tmp_path / "agent.py"
    own.write_text(OWN_AGENT_FILE)
    executor = load_agent_file(own).AgentExecutor()
    assert issubclass(executor.agent_instance_cls, openrlhf.AgentInstance)
    assert executor.agent_instance_cls.max_turns == 10


def test_execute_is_token_exact_and_graded(agent_module, engine, tokenizer, tasks):
    row = openrlhf.dataset_rows(tasks[:1])[0]
    assert row["input"][0]["role"] == "user" and json.loads(row["label"]) == tasks[0]
    # What OpenRLHF's PromptDataset makes of the row with --data.apply_chat_template.
    prompt = tokenizer.apply_chat_template(row["input"], tokenize=False, add_generation_prompt=True)
    params = openrlhf.LocalSamplingParams(temperature=1.0, logprobs=0)
    result = asyncio.run(executor_for(agent_module, max_turns=3).execute(
        prompt, row["label"], params, 4096, tokenizer, engine))

    tokens, ranges, logprobs = result["observation_tokens"], result["action_ranges"], result["rollout_log_probs"]
    prompt_ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
    assert tokens[:len(prompt_ids)] == prompt_ids and ranges[0][0] == len(prompt_ids)
    assert len(ranges) == len(engine.outputs) == 3 and len(logprobs) == len(tokens)
    in_action = [False] * len(tokens)
    for (start, end), (request_ids, output) in zip(ranges, engine.outputs):
        # The model's own ids, as generated, where the executor says the actions are.
        assert request_ids == tokens[:start]
        assert tokens[start:end] == output.token_ids and end - start == 16
        assert logprobs[start:end] == [lp[t].logprob for t, lp in zip(output.token_ids, output.logprobs)]
        assert all(lp < 0 for lp in logprobs[start:end])
        in_action[start:end] = [True] * (end - start)
    assert all(lp == 0.0 for lp, action in zip(logprobs, in_action) if not action)
    for (_, end), (start, _) in zip(ranges, ranges[1:]):
        # Feedback: the cut-off reply's turn closed, the error observation as the next user turn.
        feedback = tokenizer.decode(tokens[end:start], skip_special_tokens=False)
        assert feedback.startswith("<|im_end|>\n<|im_start|>user\nNo command found")
        assert feedback.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert ranges[-1][1] == len(tokens)  # done: no feedback after the last reply
    # The turn budget ended the episode: graded by the sandboxed test run, unresolved.
    assert result["reward"] == 0.0 and float(result["scores"]) == 0.0 and result["truncated"]
    assert result["extra_logs"] == {"resolved": 0.0, "turns": 3.0, "tool_errors": 3.0, "test_runs": 0.0,
                                    "submitted": 0.0}
    assert all(isinstance(v, float) for v in result["extra_logs"].values())


def test_marker_prompt_and_token_budget_cut(agent_module, engine, tokenizer, tasks):
    row = openrlhf.dataset_rows(tasks[2:3], marker=True)[0]
    assert row["input"] == openrlhf.TASK_MARKER
    opening = openrlhf.render_opening(frognano.integrations.first_prompt(tasks[2]), tokenizer)
    budget = len(tokenizer(text=opening, add_special_tokens=False)["input_ids"]) + 40
    result = asyncio.run(executor_for(agent_module, max_turns=5).execute(
        row["input"], row["label"], openrlhf.LocalSamplingParams(logprobs=None), budget, tokenizer, engine))
    # The marker became the chat-rendered opening observation.
    assert tokenizer.decode(result["observation_tokens"][:result["action_ranges"][0][0]],
                            skip_special_tokens=False) == opening
    assert result["rollout_log_probs"] is None and len(result["action_ranges"]) == 1
    # max_len ran out after one reply and its feedback: the executor graded the episode itself.
    logs = result["extra_logs"]
    assert logs["turns"] == 1.0 and logs["submitted"] == 1.0 and logs["test_runs"] == 0.0
    assert result["reward"] == 0.0 and float(result["scores"]) == 0.0


def test_instance_resolves_with_the_true_fix(tokenizer, tasks):
    instance_cls = type("Instance", (openrlhf.AgentInstance,), {"tokenizer": tokenizer, "max_turns": 10})

    async def episode():
        instance = instance_cls()
        label = openrlhf.dataset_rows(tasks[4:5])[0]["label"]
        # A marker inside a rendered prompt is filled with the observation text.
        marked = tokenizer.apply_chat_template([{"role": "user", "content": openrlhf.TASK_MARKER}],
                                               tokenize=False, add_generation_prompt=True)
        reset = await instance.reset({"observation": marked, "label": label})
        assert reset["observation"] == openrlhf.render_opening(instance.episode.observation, tokenizer)
        steps = []
        for action in [json.dumps(a) for a in fix_actions(tasks[4])] + ["submit"]:
            steps.append(await instance.step({"observation_text": "", "action_text": action, "label": label,
                                              "sampling_params": None}))
        instance.close()
        return steps

    steps = asyncio.run(episode())
    for step in steps[:-1]:
        assert not step["done"] and float(step["rewards"]) == 0.0
        assert step["environment_feedback"].startswith("\n<|im_start|>user\n")  # the reply ended at EOS
    last = steps[-1]
    assert isinstance(last["rewards"], torch.Tensor) and isinstance(last["scores"], torch.Tensor)
    assert last["done"] and float(last["rewards"]) == 1.0 and float(last["scores"]) == 1.0
    assert last["environment_feedback"] == "" and last["extra_logs"]["resolved"] == 1.0


def test_feedback_follows_the_chat_template(tokenizer):
    first, reply, second = "Fix it.", "view a.py", "1 | x = 1"
    whole = tokenizer.apply_chat_template(
        [{"role": "user", "content": first}, {"role": "assistant", "content": reply},
         {"role": "user", "content": second}], tokenize=False, add_generation_prompt=True)
    opening = openrlhf.render_opening(first, tokenizer)
    eos = tokenizer.eos_token_id
    stopped = openrlhf.render_feedback(second, tokenizer, tokenizer.encode(reply, add_special_tokens=False) + [eos])
    assert opening + reply + tokenizer.eos_token + stopped == whole
    cut = openrlhf.render_feedback(second, tokenizer, tokenizer.encode(reply, add_special_tokens=False))
    assert opening + reply + cut == whole
    assert openrlhf.render_feedback(second) == "\n<|im_start|>user\n1 | x = 1<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize("label, message", [
    ("", "has no label"), (None, "has no label"), ("{oops", "not JSON"), ('{"id": "x"}', "no `repo` field"),
])
def test_bad_labels_raise_task_errors(agent_module, engine, tokenizer, label, message):
    with pytest.raises(frognano.TaskError, match=message):
        asyncio.run(agent_module.AgentExecutor().execute(
            "hi", label, openrlhf.LocalSamplingParams(), 4096, tokenizer, engine))
    assert engine.outputs == []


def test_example_runs():
    out = run_example("openrlhf_agent.py")
    assert "openrlhf: 2 samples" in out and "resolved 0/2" in out
