"""Conversions between identifier naming conventions."""


def split_words(name):
    """Split an identifier in any common style into lower-case words.

    Handles ``snake_case``, ``kebab-case``, ``camelCase``, ``PascalCase``,
    acronyms (``HTTPServer`` -> ``http``, ``server``) and digit runs.
    """
    words = []
    current = ""
    n = len(name)
    for i, ch in enumerate(name):
        if not ch.isalnum():
            if current:
                words.append(current)
            current = ""
            continue
        if current:
            prev = name[i - 1]
            nxt = name[i + 1] if i + 1 < n else ""
            boundary = (
                (ch.isupper() and prev.islower())
                or (ch.isupper() and prev.isupper() and nxt.islower())
                or (ch.isdigit() != prev.isdigit())
            )
            if boundary:
                words.append(current)
                current = ""
        current += ch
    if current:
        words.append(current)
    return [w.lower() for w in words]


def to_snake(name):
    return "_".join(split_words(name))


def to_kebab(name):
    return "-".join(split_words(name))


def to_pascal(name):
    return "".join(w[:1].upper() + w[1:] for w in split_words(name))


def to_camel(name):
    words = split_words(name)
    if not words:
        return ""
    return words[0] + "".join(w[:1].upper() + w[1:] for w in words[1:])
