"""The JSON-lines serve protocol and the learn CLI, as the Rust trainer runs them (a subprocess)."""

import json
import subprocess
import sys

import numpy as np
from learner_support import MODULE_PATH, make_trajectories, tl

ENV_THREADS = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}


def run_env():
    import os

    return {**os.environ, **ENV_THREADS}


class Client:
    def __init__(self):
        self.process = subprocess.Popen([sys.executable, str(MODULE_PATH), "serve"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env=run_env())

    def send_line(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline()
        assert reply, f"server died: {self.process.stderr.read()}"
        return json.loads(reply)

    def send(self, **request):
        return self.send_line(json.dumps(request))


def test_serve_survives_bad_requests(tiny_model, tmp_path):
    good = tl.build_batch(make_trajectories(seed=30, n=2))
    good_path = tl.write_batch(tmp_path / "good.safetensors", good, good["metadata"])
    bad = dict(good)
    bad["advantages"] = np.array([np.nan, 1.0], np.float32)
    bad_path = tl.write_batch(tmp_path / "bad.safetensors", bad, good["metadata"])
    client = Client()
    try:
        early = client.send(op="learn", batch=str(good_path))
        assert early["ok"] is False and "init" in early["error"]
        wrong = client.send(op="init", model=str(tiny_model), config={"learning_rat": 1})
        assert wrong == {"ok": False, "error": wrong["error"], "kind": "config"}
        assert "learning_rat" in wrong["error"]
        missing = client.send(op="init", model=str(tmp_path / "no-model"), config={})
        assert missing["ok"] is False and missing["kind"] == "model"
        init = client.send(op="init", model=str(tiny_model),
                           config={"learning_rate": 1e-3, "device": "cpu", "num_threads": 2,
                                   "max_initial_log_ratio": 0})
        assert init["ok"] is True and init["device"] == "cpu"
        assert init["parameters"] == init["trainable"] > 0

        reply = client.send(op="learn", batch=str(bad_path))
        assert reply["ok"] is False and reply["kind"] == "batch" and "advantages" in reply["error"]
        assert "\n" not in reply["error"]
        reply = client.send(op="learn", batch=str(tmp_path / "missing.safetensors"))
        assert reply["ok"] is False and reply["kind"] == "batch" and "does not exist" in reply["error"]
        assert client.send_line("this is not json")["ok"] is False
        assert client.send(op="fly")["error"] == "bad request: unknown op 'fly'"
        assert client.send(op="learn")["error"].startswith("bad request")

        stats = client.send(op="learn", batch=str(good_path))
        assert stats["ok"] is True, stats
        assert stats["stats"]["learner_tokens"] == len(good["completion_ids"])
        out = tmp_path / "logprobs.safetensors"
        assert client.send(op="logprobs", batch=str(good_path), out=str(out)) == {"ok": True}
        from safetensors.numpy import load_file

        logprobs = load_file(str(out))["logprobs"]
        assert logprobs.shape == good["completion_ids"].shape and (logprobs < 0).all()
        assert client.send(op="save", path=str(tmp_path / "ckpt.pt")) == {"ok": True}
        assert client.send(op="load", path=str(tmp_path / "ckpt.pt")) == {"ok": True}
        reply = client.send(op="load", path=str(tmp_path / "nothing.pt"))
        assert reply["ok"] is False and reply["kind"] == "io"
        assert client.send(op="save_hf", dir=str(tmp_path / "hf")) == {"ok": True}
        assert (tmp_path / "hf" / "model.safetensors").is_file()
        reply = client.send(op="export_onnx", dir=str(tmp_path / "onnx"), precisions="fp32")
        assert reply["ok"] is False and "precisions" in reply["error"]
        assert client.send(op="shutdown") == {"ok": True}
        assert client.process.wait(timeout=30) == 0
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


def test_learn_cli(tiny_model, tmp_path):
    batch = tl.build_batch(make_trajectories(seed=31, n=2))
    path = tl.write_batch(tmp_path / "batch.safetensors", batch, batch["metadata"])
    config = json.dumps({"learning_rate": 1e-3, "device": "cpu", "num_threads": 2,
                         "max_initial_log_ratio": 0})
    result = subprocess.run([sys.executable, str(MODULE_PATH), "learn", "--model", str(tiny_model),
                             "--batch", str(path), "--config", config, "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, env=run_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["learner_tokens"] == len(batch["completion_ids"]) and stats["steps"] == 4
    assert (tmp_path / "out" / "config.json").is_file()
    result = subprocess.run([sys.executable, str(MODULE_PATH), "learn", "--model", str(tiny_model),
                             "--batch", str(tmp_path / "none.safetensors")],
                            capture_output=True, text=True, env=run_env(), timeout=120)
    assert result.returncode == 1
    assert json.loads(result.stdout)["kind"] == "batch"
