"""A small module in the shapes mutation operators look for."""

import re

_WORD = re.compile(r"\w+")
LIMIT = 10


class Counter:
    def __init__(self, start=0):
        self.count = start
        self.seen = {}

    def add(self, word, times=1):
        if not word or times <= 0:
            raise ValueError("nothing to add")
        self.seen[word] = self.seen.get(word, 0) + times
        self.count += times
        return self.count >= LIMIT

    def top(self, n=3):
        return sorted(self.seen.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def words(text):
    out = []
    for match in _WORD.finditer(text.lower()):
        if len(match.group()) > 1 and match.group() != "the":
            out.append(match.group())
    while out and out[-1].isdigit():
        out.pop()
    return out


def test_words():
    assert words("The cat, the hat 42") == ["cat", "hat"]
