import pytest

from tinyparse import ParseError, Token, tokenize
from tinyparse.tokenizer import COMMA, EOF, LPAREN, NAME, NUMBER, OP, RPAREN


def kinds_values(text):
    return [(t.kind, t.value) for t in tokenize(text)]


def test_simple_expression_tokens_and_positions():
    assert tokenize("1 + x2") == [
        Token(NUMBER, 1, 0),
        Token(OP, "+", 2),
        Token(NAME, "x2", 4),
        Token(EOF, None, 6),
    ]


def test_empty_input_yields_only_eof():
    assert tokenize("   ") == [Token(EOF, None, 3)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("42", 42),
        (".25", 0.25),
        ("2.5E-2", 0.025),
    ],
)
def test_number_literals(text, expected):
    tokens = tokenize(text)
    assert tokens[0].kind == NUMBER
    assert tokens[0].value == expected
    assert type(tokens[0].value) is type(expected)
    assert tokens[1].kind == EOF


def test_more_number_forms():
    assert [t.value for t in tokenize(".5*x")] == [0.5, "*", "x", None]
    assert [t.value for t in tokenize("2e3+1")] == [2000.0, "+", 1, None]
    with pytest.raises(ParseError) as info:
        tokenize("1+.")
    assert info.value.position == 2
    assert tokenize("3.5")[0].value == 3.5
    assert tokenize("6e+1")[0].value == 60.0
    assert tokenize("7.")[0].value == 7.0
    assert tokenize("1e3")[0].value == 1000.0
    assert isinstance(tokenize("1e3")[0].value, float)
    with pytest.raises(ParseError):
        tokenize("3e")
    with pytest.raises(ParseError):
        tokenize("a # b")


def test_two_character_operators():
    assert kinds_values("a//b**c") == [
        (NAME, "a"),
        (OP, "//"),
        (NAME, "b"),
        (OP, "^"),
        (NAME, "c"),
        (EOF, None),
    ]


def test_punctuation_kinds():
    assert [t.kind for t in tokenize("f(a, b)")] == [NAME, LPAREN, NAME, COMMA, NAME, RPAREN, EOF]


def test_identifier_with_underscores_and_digits():
    assert kinds_values("_tmp_1*x") == [(NAME, "_tmp_1"), (OP, "*"), (NAME, "x"), (EOF, None)]


@pytest.mark.parametrize(
    "text, position",
    [("1 $ 2", 2), ("1..2", 2), ("4e+", 1)],
)
def test_tokenizer_errors_report_position(text, position):
    with pytest.raises(ParseError) as info:
        tokenize(text)
    assert info.value.position == position
    assert "(at %d)" % position in str(info.value)


def test_token_repr_and_inequality():
    token = Token(OP, "+", 3)
    assert repr(token) == "Token(OP, '+', 3)"
    assert token != Token(OP, "+", 4)
    assert token != "+"
