"""`tiny`: a small random llama GGUF (SmolLM2's metadata keys and tensor types), written and
converted for fast tests (part of the converter, frognano_models.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from frognano_models_common import LAYOUTS, _gguf, log
from frognano_models_convert import convert
from frognano_models_tokenizer import (CHATML_TEMPLATE, TOKEN_TYPE_CONTROL, TOKEN_TYPE_NORMAL,
                                       bytes_to_unicode)


TINY_CORPUS = """\
The quick brown fox jumps over the lazy dog. A small model learns to write code, one token at a time.
def reverse_string(text):
    return text[::-1]

def add(a, b):
    return a + b

class Counter:
    def __init__(self):
        self.count = 0

    def increment(self):
        self.count += 1
        return self.count

for index in range(10):
    print(index, reverse_string("hello world"))

The agent reads the task, edits the file, runs the tests and reports the result.
If the tests fail, the agent reads the error message and tries again.
"""

TINY_HPARAMS = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128,
                "context": 4096, "rope_base": 10000.0, "eps": 1e-5, "merges": 300}
TINY_SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def learn_bpe_merges(text: str, count: int) -> list[tuple[str, str]]:
    """Greedy byte-level BPE training on text (ties broken lexicographically, deterministic)."""
    byte_to_char = bytes_to_unicode()
    # A rough stdlib stand-in for the pre-tokenizer: merges only need to be plausible.
    words: dict[tuple[str, ...], int] = {}
    for piece in re.findall(r" ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+", text):
        symbols = tuple(byte_to_char[b] for b in piece.encode("utf-8"))
        words[symbols] = words.get(symbols, 0) + 1
    merges: list[tuple[str, str]] = []
    known = set(byte_to_char.values())
    while len(merges) < count:
        pairs: dict[tuple[str, str], int] = {}
        for word, frequency in words.items():
            for pair in zip(word, word[1:], strict=False):
                pairs[pair] = pairs.get(pair, 0) + frequency
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        merged_symbol = best[0] + best[1]
        new_words = {}
        for word, frequency in words.items():
            out, index = [], 0
            while index < len(word):
                if index + 1 < len(word) and (word[index], word[index + 1]) == best:
                    out.append(merged_symbol)
                    index += 2
                else:
                    out.append(word[index])
                    index += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + frequency
        words = new_words
        if merged_symbol not in known:  # a second route to an existing token adds nothing
            known.add(merged_symbol)
            merges.append(best)
    return merges


def write_tiny_gguf(path: Path, seed: int) -> None:
    """A 2-layer random llama GGUF with SmolLM2's metadata keys and tensor types."""
    gguf = _gguf()
    quant = gguf.GGMLQuantizationType
    hp = TINY_HPARAMS
    head_dim = hp["hidden"] // hp["heads"]
    byte_to_char = bytes_to_unicode()
    merges = learn_bpe_merges(TINY_CORPUS, hp["merges"])
    tokens = list(TINY_SPECIAL_TOKENS) + [byte_to_char[b] for b in range(256)]
    tokens += [first + second for first, second in merges]
    token_types = [TOKEN_TYPE_CONTROL] * len(TINY_SPECIAL_TOKENS)
    token_types += [TOKEN_TYPE_NORMAL] * (len(tokens) - len(TINY_SPECIAL_TOKENS))
    vocab_size = len(tokens)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_type("model")
    writer.add_name("FrogNano tiny random llama")
    writer.add_block_count(hp["layers"])
    writer.add_context_length(hp["context"])
    writer.add_embedding_length(hp["hidden"])
    writer.add_feed_forward_length(hp["ffn"])
    writer.add_head_count(hp["heads"])
    writer.add_head_count_kv(hp["kv_heads"])
    writer.add_rope_freq_base(hp["rope_base"])
    writer.add_layer_norm_rms_eps(hp["eps"])
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_1)
    writer.add_vocab_size(vocab_size)
    writer.add_rope_dimension_count(head_dim)
    writer.add_add_space_prefix(False)
    writer.add_add_bos_token(False)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("smollm")
    writer.add_token_list(tokens)
    writer.add_token_types(token_types)
    writer.add_token_merges([f"{first} {second}" for first, second in merges])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_chat_template(CHATML_TEMPLATE)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def add_quantized(name, values, qtype):
        writer.add_tensor(name, gguf.quants.quantize(values, qtype), raw_dtype=qtype)

    hidden, ffn, heads, kv_heads = hp["hidden"], hp["ffn"], hp["heads"], hp["kv_heads"]
    # Embedding std 0.4 gives (tied) logits with std ~ 0.4 * sqrt(hidden) ~ 3: clear argmaxes.
    add_quantized("token_embd.weight", normal((vocab_size, hidden), 0.4), quant.Q8_0)
    for layer in range(hp["layers"]):
        p = f"blk.{layer}."
        writer.add_tensor(p + "attn_norm.weight", 1.0 + normal((hidden,), 0.1))
        # Q/K std 0.2: attention scores of order 1-3, so the attention pattern (and thus rotary)
        # really shapes the output. Rows are random, so they are "already" in GGUF order.
        add_quantized(p + "attn_q.weight", normal((heads * head_dim, hidden), 0.2), quant.Q4_1)
        add_quantized(p + "attn_k.weight", normal((kv_heads * head_dim, hidden), 0.2), quant.Q4_1)
        add_quantized(p + "attn_v.weight", normal((kv_heads * head_dim, hidden), hidden ** -0.5), quant.Q4_1)
        add_quantized(p + "attn_output.weight", normal((hidden, heads * head_dim), hidden ** -0.5),
                      quant.Q4_1)
        writer.add_tensor(p + "ffn_norm.weight", 1.0 + normal((hidden,), 0.1))
        add_quantized(p + "ffn_gate.weight", normal((ffn, hidden), hidden ** -0.5), quant.Q4_1)
        add_quantized(p + "ffn_up.weight", normal((ffn, hidden), hidden ** -0.5), quant.Q4_1)
        add_quantized(p + "ffn_down.weight", normal((hidden, ffn), ffn ** -0.5), quant.Q4_1)
    writer.add_tensor("output_norm.weight", 1.0 + normal((hidden,), 0.1))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def make_tiny(out_dir: Path, seed: int, int4_method: str = "gguf",
              layouts: list[str] | tuple[str, ...] = LAYOUTS) -> dict:
    started = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    gguf_path = out_dir / "tiny.gguf"
    log(f"writing {gguf_path}")
    write_tiny_gguf(gguf_path, seed)
    summary = convert(gguf_path, out_dir, ["fp32", "int4"], int4_method, layouts)
    summary.update({"command": "tiny", "gguf": str(gguf_path),
                    "seconds": round(time.perf_counter() - started, 2)})
    return summary
