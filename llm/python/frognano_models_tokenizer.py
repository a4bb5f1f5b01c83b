"""Tokenizer: a GGUF's byte-level BPE vocabulary as a Hugging Face tokenizer.json, the smollm
pre-tokenizer, a small independent BPE tokenizer and ChatML (part of the converter,
frognano_models.py)."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from frognano_models_gguf import gguf_field


# llama.cpp token types (gguf.TokenType)
TOKEN_TYPE_NORMAL = 1
TOKEN_TYPE_CONTROL = 3
TOKEN_TYPE_USER_DEFINED = 4

# Pre-tokenizer of GGUF `tokenizer.ggml.pre = smollm` (llama.cpp): isolate every numeric
# character, then split with the GPT-2 regex.
DIGIT_SPLIT_REGEX = r"\p{N}"
GPT2_SPLIT_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
                 + list(range(ord("®"), ord("ÿ") + 1)))
    mapping, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


@dataclass
class GgufVocabulary:
    """The tokenizer part of a GGUF's metadata."""

    tokens: list[str]
    token_types: list[int]
    merges: list[str]
    bos_id: int | None
    eos_id: int | None
    unk_id: int | None
    pad_id: int | None
    chat_template: str | None
    add_bos: bool

    @classmethod
    def from_reader(cls, reader) -> GgufVocabulary:
        model = gguf_field(reader, "tokenizer.ggml.model")
        if model != "gpt2":
            raise ValueError(f"unsupported tokenizer model {model!r} (only byte-level BPE 'gpt2')")
        pre = gguf_field(reader, "tokenizer.ggml.pre", "default")
        if pre != "smollm":
            # Other pre-tokenizers need other split regexes; refuse rather than mis-tokenize.
            raise ValueError(f"unsupported pre-tokenizer {pre!r} (only 'smollm')")

        def optional_id(key):
            value = gguf_field(reader, key)
            return None if value is None else int(value)

        return cls(
            tokens=list(gguf_field(reader, "tokenizer.ggml.tokens")),
            token_types=[int(t) for t in gguf_field(reader, "tokenizer.ggml.token_type")],
            merges=list(gguf_field(reader, "tokenizer.ggml.merges")),
            bos_id=optional_id("tokenizer.ggml.bos_token_id"),
            eos_id=optional_id("tokenizer.ggml.eos_token_id"),
            unk_id=optional_id("tokenizer.ggml.unknown_token_id"),
            pad_id=optional_id("tokenizer.ggml.padding_token_id"),
            chat_template=gguf_field(reader, "tokenizer.chat_template"),
            add_bos=bool(gguf_field(reader, "tokenizer.ggml.add_bos_token", False)),
        )

    def token(self, token_id: int | None) -> str | None:
        return None if token_id is None else self.tokens[token_id]

    def added_token_ids(self) -> list[int]:
        return [i for i, kind in enumerate(self.token_types)
                if kind in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED)]


def tokenizer_json(vocab: GgufVocabulary) -> dict:
    """HF `tokenizers` JSON for a GGUF byte-level BPE vocabulary with the smollm pre-tokenizer."""
    if len(set(vocab.tokens)) != len(vocab.tokens):
        raise ValueError("duplicate tokens in the GGUF vocabulary")
    for merge in vocab.merges:
        if merge.count(" ") != 1:
            raise ValueError(f"merge {merge!r} is not two space-separated tokens")
    added = [{
        "id": i, "content": vocab.tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
        "normalized": False, "special": vocab.token_types[i] == TOKEN_TYPE_CONTROL,
    } for i in vocab.added_token_ids()]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": DIGIT_SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "Split", "pattern": {"Regex": GPT2_SPLIT_REGEX}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        ]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
            "vocab": {token: i for i, token in enumerate(vocab.tokens)},
            # "a b" strings: the merge format every tokenizers version reads.
            "merges": list(vocab.merges),
        },
    }


# \s as the regex engines see it (Unicode White_Space); str.isspace() also accepts \x1c-\x1f.
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
                        "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def _is_letter(char: str) -> bool:
    return unicodedata.category(char)[0] == "L"


def _is_number(char: str) -> bool:
    return unicodedata.category(char)[0] == "N"


def _is_other(char: str) -> bool:
    return not (char in _WHITESPACE or _is_letter(char) or _is_number(char))


def gpt2_split(text: str) -> list[str]:
    """Hand-written matcher for GPT2_SPLIT_REGEX (the standard library `re` has no \\p{L}).

    Alternatives are tried in the regex's order at every position, so the pieces are the same.
    """
    pieces, i, n = [], 0, len(text)
    while i < n:
        char = text[i]
        if char == "'":
            suffix = next((s for s in _CONTRACTIONS if text.startswith(s, i + 1)), None)
            if suffix is not None:
                pieces.append(text[i:i + 1 + len(suffix)])
                i += 1 + len(suffix)
                continue
        start = i + 1 if char == " " and i + 1 < n else i
        matched = False
        for char_class in (_is_letter, _is_number, _is_other):
            if char_class(text[start]):
                end = start + 1
                while end < n and char_class(text[end]):
                    end += 1
                pieces.append(text[i:end])
                i, matched = end, True
                break
        if matched:
            continue
        # Here text[i] is whitespace: \s+(?!\S) keeps the last space for the next word, \s+ else.
        end = i
        while end < n and text[end] in _WHITESPACE:
            end += 1
        if end < n and end - i > 1:
            end -= 1
        pieces.append(text[i:end])
        i = end
    return pieces


def pretokenize(text: str) -> list[str]:
    """The smollm pre-tokenizer: isolate numeric characters, then the GPT-2 split."""
    pieces, run_start = [], 0
    for index, char in enumerate(text):
        if _is_number(char):
            if run_start < index:
                pieces.extend(gpt2_split(text[run_start:index]))
            pieces.append(char)
            run_start = index + 1
    if run_start < len(text):
        pieces.extend(gpt2_split(text[run_start:]))
    return pieces


class ByteLevelBpeTokenizer:
    """A small, independent byte-level BPE tokenizer over a tokenizer.json (smollm layout).

    Used by `check` and `generate`, and as a cross-check of the `tokenizers` library's reading of
    the same file. Added tokens are matched literally (longest first) before pre-tokenization.
    """

    def __init__(self, vocab: dict[str, int], merges: list[str], added_tokens: dict[str, int]):
        self.vocab = vocab
        self.id_to_token = {i: token for token, i in vocab.items()}
        self.id_to_token.update({i: token for token, i in added_tokens.items()})
        self.merge_rank = {tuple(merge.split(" ")): rank for rank, merge in enumerate(merges)}
        self.added_tokens = added_tokens
        self.byte_to_char = bytes_to_unicode()
        self.char_to_byte = {char: byte for byte, char in self.byte_to_char.items()}
        ordered = sorted(added_tokens, key=len, reverse=True)
        self._added_pattern = (re.compile("(" + "|".join(map(re.escape, ordered)) + ")")
                               if ordered else None)
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def from_file(cls, path: Path) -> ByteLevelBpeTokenizer:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        merges = [m if isinstance(m, str) else " ".join(m) for m in data["model"]["merges"]]
        added = {entry["content"]: entry["id"] for entry in data.get("added_tokens", [])}
        return cls(data["model"]["vocab"], merges, added)

    def _bpe(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        symbols = [self.byte_to_char[b] for b in piece.encode("utf-8")]
        while len(symbols) > 1:
            # The lowest-ranked adjacent pair (leftmost on ties) is merged next.
            rank, position = min((self.merge_rank.get(pair, math.inf), index)
                                 for index, pair in enumerate(zip(symbols, symbols[1:], strict=False)))
            if rank == math.inf:
                break
            first, second = symbols[position], symbols[position + 1]
            merged, index = [], 0
            while index < len(symbols):  # merge every occurrence of this pair, left to right
                if index + 1 < len(symbols) and symbols[index] == first and symbols[index + 1] == second:
                    merged.append(first + second)
                    index += 2
                else:
                    merged.append(symbols[index])
                    index += 1
            symbols = merged
        ids = [self.vocab[symbol] for symbol in symbols]
        self._cache[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Token ids for text; added/special tokens written in the text are recognised."""
        segments = self._added_pattern.split(text) if self._added_pattern else [text]
        ids: list[int] = []
        for index, segment in enumerate(segments):
            if index % 2 == 1:
                ids.append(self.added_tokens[segment])
            elif segment:
                for piece in pretokenize(segment):
                    ids.extend(self._bpe(piece))
        return ids

    def decode(self, ids: list[int]) -> str:
        data = bytearray()
        for token_id in ids:
            token = self.id_to_token[token_id]
            if token in self.added_tokens:
                data.extend(token.encode("utf-8"))
            else:
                data.extend(self.char_to_byte[char] for char in token)
        return data.decode("utf-8", errors="replace")


def default_system_prompt(chat_template: str | None) -> str | None:
    """The system message a ChatML template inserts when none is given (SmolLM2's does), if any."""
    match = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", chat_template or "", re.DOTALL)
    return match.group(1) if match else None


def render_chatml(messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
    """ChatML as the GGUF templates render it when a system message is given."""
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")
