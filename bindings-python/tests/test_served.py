"""HttpPolicy against a real `frognano serve` (the CLI, serving the tiny model on loopback):
actions with log-probs and token ids, episodes through evaluate (an HttpPolicy object and the
openai:URL@MODEL spec), and clear errors for bad options, a server that is not there and a
wrong model name."""

import pathlib

import pytest

import frognano
from serving import cli_path, free_port, frognano_serve

ROOT = pathlib.Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "tasks" / "sample.jsonl"
CONTEXT = {"task_id": "t", "initial": {"text": "Fix the bug in add()."}, "history": []}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cli = cli_path()
    if cli is None:
        pytest.fail("the CLI is not built (cargo build --workspace), or set FROGNANO_CLI")
    model = frognano.make_tiny_model(tmp_path_factory.mktemp("tiny"), seed=0,
                                     progress=lambda message: None)
    with frognano_serve(cli, model) as url:
        yield url


def test_a_served_model_acts_with_logprobs_and_token_ids(server):
    policy = frognano.HttpPolicy(server, "tiny",
                                 generation={"max_new_tokens": 8, "temperature": 1.0, "seed": 3})
    assert policy.models() == ["tiny"]
    assert policy.config["generation"]["max_new_tokens"] == 8
    assert policy.config["generation"]["top_p"] == 1.0  # the rest of generation's defaults
    outputs = policy.act([CONTEXT, CONTEXT])
    assert len(outputs) == 2
    for output in outputs:
        assert isinstance(output["action"], str)
        assert "error" not in output
        assert 0 < len(output["token_ids"]) == len(output["logprobs"]) <= 8
        assert all(lp <= 0.0 for lp in output["logprobs"])
        assert len(output["prompt_ids"]) > 10
        assert output["decision"]["attempts"] == 1
    with pytest.raises(TypeError):
        policy.act(CONTEXT)


def test_evaluate_runs_episodes_through_the_server(server):
    tasks = frognano.load_tasks(TASKS)[:2]
    policy = frognano.HttpPolicy(server, "tiny", generation={"max_new_tokens": 8})
    summary, records = frognano.evaluate(tasks, policy, max_steps=2)
    assert summary["episodes"] == 2 and summary["failed_episodes"] == 0
    steps = [step for record in records for step in record["steps"]]
    assert steps and all(step["token_ids"] for step in steps)
    # The same through the spec string every surface takes.
    summary, _ = frognano.evaluate(tasks[:1], f"openai:{server}@tiny", max_steps=1)
    assert summary["episodes"] == 1


def test_bad_options_and_unreachable_servers_are_clear_errors(server):
    with pytest.raises(frognano.InvalidArgumentError, match="concurency"):
        frognano.HttpPolicy(server, "tiny", concurency=4)
    with pytest.raises(frognano.InvalidArgumentError, match="base_url"):
        frognano.HttpPolicy("not a url", "tiny")
    with pytest.raises(frognano.InferenceError, match="serves: tiny"):
        frognano.HttpPolicy(server, "no-such-model")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(frognano.InferenceError, match="cannot reach"):
        frognano.HttpPolicy(dead, "tiny", retries=0)
    # Without the check, each episode's request fails on its own.
    policy = frognano.HttpPolicy(dead, "tiny", check=False, retries=0)
    outputs = policy.act([CONTEXT])
    assert "cannot reach" in outputs[0]["error"]
