"""Roman numeral conversion (1..3999)."""

_NUMERALS = (
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
)
_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(number):
    if not isinstance(number, int) or isinstance(number, bool):
        raise TypeError("expected an int")
    if number < 1 or number > 3999:
        raise ValueError("roman numerals cover 1..3999, got %d" % number)
    out = []
    for value, symbol in _NUMERALS:
        count, number = divmod(number, value)
        out.append(symbol * count)
    return "".join(out)


def from_roman(text):
    """Parse a canonical roman numeral, rejecting non-standard forms."""
    s = text.strip().upper()
    if not s:
        raise ValueError("empty numeral")
    total = 0
    for i, ch in enumerate(s):
        if ch not in _VALUES:
            raise ValueError("invalid roman digit %r" % ch)
        value = _VALUES[ch]
        if i + 1 < len(s) and _VALUES.get(s[i + 1], 0) > value:
            total -= value
        else:
            total += value
    # Round-tripping rejects forms like "IIII", "VX" or "IC".
    if total < 1 or total > 3999 or to_roman(total) != s:
        raise ValueError("non-canonical roman numeral %r" % text)
    return total
