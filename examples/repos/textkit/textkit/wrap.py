"""Greedy word wrapping."""


def wrap(text, width, break_long_words=True, justify=False):
    """Wrap ``text`` into lines no longer than ``width`` characters.

    Whitespace is collapsed.  Words longer than ``width`` are split when
    ``break_long_words`` is true, otherwise they get a line of their own.
    With ``justify`` every line but the last is padded with extra spaces
    (distributed from the left) to exactly ``width`` characters.
    """
    if width < 1:
        raise ValueError("width must be positive")
    lines = []
    line = []
    length = 0
    for word in text.split():
        while break_long_words and len(word) > width:
            if line:
                lines.append(line)
                line, length = [], 0
            lines.append([word[:width]])
            word = word[width:]
        extra = len(word) if not line else len(word) + 1
        if line and length + extra > width:
            lines.append(line)
            line, length = [], 0
            extra = len(word)
        line.append(word)
        length += extra
    if line:
        lines.append(line)
    if not justify:
        return [" ".join(words) for words in lines]
    result = [_justify(words, width) for words in lines[:-1]]
    if lines:
        result.append(" ".join(lines[-1]))
    return result


def _justify(words, width):
    if len(words) == 1:
        return words[0]
    gaps = len(words) - 1
    spaces = width - sum(len(w) for w in words)
    base, remainder = divmod(spaces, gaps)
    parts = []
    for i, word in enumerate(words[:-1]):
        parts.append(word)
        parts.append(" " * (base + (1 if i < remainder else 0)))
    parts.append(words[-1])
    return "".join(parts)
