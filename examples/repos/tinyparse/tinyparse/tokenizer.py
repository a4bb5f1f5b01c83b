"""Tokenizer for arithmetic expressions."""

from .errors import ParseError

NUMBER = "NUMBER"
NAME = "NAME"
OP = "OP"
LPAREN = "LPAREN"
RPAREN = "RPAREN"
COMMA = "COMMA"
EOF = "EOF"

# Two-character operators must be tried before their one-character prefixes.
_TWO_CHAR_OPS = ("**", "//")
_ONE_CHAR_OPS = "+-*/%^"


class Token:
    """A single lexical token with its kind, value and source offset."""

    __slots__ = ("kind", "value", "pos")

    def __init__(self, kind, value, pos):
        self.kind = kind
        self.value = value
        self.pos = pos

    def __eq__(self, other):
        if not isinstance(other, Token):
            return NotImplemented
        return (self.kind, self.value, self.pos) == (other.kind, other.value, other.pos)

    def __repr__(self):
        return "Token(%s, %r, %d)" % (self.kind, self.value, self.pos)


def _read_number(text, start):
    """Read a numeric literal starting at ``start``.

    Returns ``(value, end)`` where ``value`` is an ``int`` when the literal
    has no fractional part or exponent and a ``float`` otherwise.
    """
    i = start
    n = len(text)
    seen_dot = False
    seen_digit = False
    while i < n and (text[i].isdigit() or text[i] == "."):
        if text[i] == ".":
            if seen_dot:
                raise ParseError("malformed number", i)
            seen_dot = True
        else:
            seen_digit = True
        i += 1
    if not seen_digit:
        raise ParseError("malformed number", start)
    is_float = seen_dot
    if i < n and text[i] in "eE":
        j = i + 1
        if j < n and text[j] in "+-":
            j += 1
        if j >= n or not text[j].isdigit():
            raise ParseError("malformed exponent", i)
        while j < n and text[j].isdigit():
            j += 1
        i = j
        is_float = True
    literal = text[start:i]
    value = float(literal) if is_float else int(literal)
    return value, i


def tokenize(text):
    """Split ``text`` into a list of tokens terminated by an EOF token."""
    tokens = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            value, end = _read_number(text, i)
            tokens.append(Token(NUMBER, value, i))
            i = end
            continue
        if ch.isalpha() or ch == "_":
            start = i
            while i < n and (text[i].isalnum() or text[i] == "_"):
                i += 1
            tokens.append(Token(NAME, text[start:i], start))
            continue
        pair = text[i:i + 2]
        if pair in _TWO_CHAR_OPS:
            # "**" is an alias for "^".
            tokens.append(Token(OP, "^" if pair == "**" else pair, i))
            i += 2
            continue
        if ch in _ONE_CHAR_OPS:
            tokens.append(Token(OP, ch, i))
            i += 1
            continue
        if ch == "(":
            tokens.append(Token(LPAREN, ch, i))
        elif ch == ")":
            tokens.append(Token(RPAREN, ch, i))
        elif ch == ",":
            tokens.append(Token(COMMA, ch, i))
        else:
            raise ParseError("unexpected character %r" % ch, i)
        i += 1
    tokens.append(Token(EOF, None, n))
    return tokens
