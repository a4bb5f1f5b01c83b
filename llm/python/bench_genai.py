"""onnxruntime-genai side of `frognano bench policy`.

Generates greedily with onnxruntime-genai on the same ONNX model folder and the same prompt token
ids as FrogNano's worker, exactly NEW tokens per row, and prints one JSON line with the same
fields: load time, peak resident memory (VmHWM) and, per batch size, prefill tokens/s, time to
first token and decode tokens/s (medians over the repeats, after one warm-up).

usage: bench_genai.py --model DIR --prompts PROMPTS.json --new-tokens N --batch-sizes 1,8
                      [--repeats 3]
PROMPTS.json: {"rows": [[token ids], ...]} with rows of equal length.
"""

import argparse
import json
import statistics
import sys
import time

import numpy as np
import onnxruntime_genai as og


def peak_rss_mb() -> float:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def timed_run(model, rows: np.ndarray, new_tokens: int) -> tuple[float, float, float]:
    """Returns (prefill seconds, time to first token, decode seconds after the first token)."""
    batch, prompt_len = rows.shape
    params = og.GeneratorParams(model)
    params.set_search_options(
        do_sample=False,
        batch_size=batch,
        max_length=prompt_len + new_tokens,
        min_length=prompt_len + new_tokens,
    )
    generator = og.Generator(model, params)
    start = time.perf_counter()
    generator.append_tokens(rows)
    prefilled = time.perf_counter()
    generator.generate_next_token()
    first = time.perf_counter()
    produced = 1
    while not generator.is_done():
        generator.generate_next_token()
        produced += 1
    end = time.perf_counter()
    if produced != new_tokens:
        raise SystemExit(f"onnxruntime-genai produced {produced} tokens, expected {new_tokens}")
    return prefilled - start, first - start, end - first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True)
    parser.add_argument("--new-tokens", type=int, required=True)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    with open(args.prompts) as f:
        all_rows = np.array(json.load(f)["rows"], dtype=np.int32)
    started = time.perf_counter()
    config = og.Config(args.model)
    config.clear_providers()  # CPU, like the FrogNano worker
    model = og.Model(config)
    load_s = time.perf_counter() - started

    batches = []
    for batch in [int(b) for b in args.batch_sizes.split(",")]:
        rows = all_rows[: min(batch, len(all_rows))]
        prefill, ttft, decode = [], [], []
        for repeat in range(args.repeats + 1):
            prefill_s, first_s, decode_s = timed_run(model, rows, args.new_tokens)
            if repeat == 0:
                continue  # warm-up
            prefill.append(rows.size / max(prefill_s, 1e-9))
            ttft.append(first_s * 1e3)
            decode.append(len(rows) * (args.new_tokens - 1) / max(decode_s, 1e-9))
        batches.append(
            {
                "batch": len(rows),
                "prompt_tokens": int(rows.shape[1]),
                "new_tokens": args.new_tokens,
                "prefill_tok_s": statistics.median(prefill),
                "ttft_ms": statistics.median(ttft),
                "decode_tok_s": statistics.median(decode),
            }
        )
    report = {
        "engine": "onnxruntime-genai " + getattr(og, "__version__", "?"),
        "load_s": load_s,
        "peak_rss_mb": peak_rss_mb(),
        "batches": batches,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
