import math

import pytest

from tinyparse import BinOp, Call, EvaluationError, Num, ParseError, UnaryOp, Var, evaluate, parse


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("-7 // 2", -4),
        ("2 ^ 3 ^ 2", 512),
        ("-2 ^ 2", -4),
    ],
)
def test_evaluate_arithmetic(text, expected):
    result = evaluate(text)
    assert result == expected
    assert type(result) is type(expected)


def test_evaluate_more_operators():
    assert evaluate("10 - 4 - 3") == 3
    assert evaluate("100 / 10 / 5") == 2
    assert evaluate("17 % 5") == 2
    assert evaluate("2 ^ -1") == 0.5
    assert evaluate("7 // 2") == 3
    assert evaluate("2 ** 10") == 1024
    assert evaluate("(-2) ^ 2") == 4
    assert evaluate("--3") == 3
    assert evaluate("+-3") == -3
    assert evaluate("8 - -2") == 10
    assert evaluate("2 * 3 % 4") == 2
    assert evaluate("1.5 * 4") == 6.0


def test_exact_integer_division_stays_int():
    assert evaluate("9 / 3") == 3
    assert isinstance(evaluate("9 / 3"), int)
    assert isinstance(evaluate("9.0 / 3"), float)


def test_variables_are_looked_up_in_env():
    assert evaluate("x * y + z", {"x": 3, "y": 4, "z": -2}) == 10


def test_env_overrides_constants():
    assert evaluate("pi", {"pi": 3}) == 3
    assert evaluate("2 * pi") == pytest.approx(2 * math.pi)
    assert evaluate("e") == pytest.approx(math.e)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("abs(-5)", 5),
        ("floor(-2.5)", -3),
        ("round(2.567, 2)", 2.57),
        ("max(abs(-9), 3 * 2)", 9),
    ],
)
def test_builtin_functions(text, expected):
    assert evaluate(text) == expected


def test_variadic_and_rounding_functions():
    assert evaluate("sqrt(16)") == 4.0
    assert evaluate("sqrt(0)") == 0.0
    assert evaluate("round(3.14159, 1 + 1.0)") == 3.14
    assert evaluate("ceil(2.1)") == 3
    assert evaluate("floor(2.7)") == 2
    assert evaluate("round(7.5)") == 8
    assert evaluate("min(4, 2, 8)") == 2
    assert evaluate("max(4, 2, 8)") == 8
    assert evaluate("max(1)") == 1


class TestParseTree:
    def test_precedence_structure(self):
        assert parse("1 + 2 * x") == BinOp("+", Num(1), BinOp("*", Num(2), Var("x")))

    def test_left_associativity(self):
        assert parse("a - b - c") == BinOp("-", BinOp("-", Var("a"), Var("b")), Var("c"))

    def test_power_is_right_associative(self):
        assert str(parse("a ^ b ^ c")) == "(a ^ (b ^ c))"

    def test_unary_binds_looser_than_power(self):
        assert parse("-x ^ 2") == UnaryOp("-", BinOp("^", Var("x"), Num(2)))

    def test_call_with_arguments(self):
        assert parse("max(a, 1 + b)") == Call("max", [Var("a"), BinOp("+", Num(1), Var("b"))])

    def test_call_without_arguments(self):
        assert parse("f()") == Call("f", [])

    def test_str_round_trip(self):
        tree = parse("2 * (x + 1) // -y")
        assert str(tree) == "((2 * (x + 1)) // (-y))"
        assert parse(str(tree)) == tree

    def test_variables_collects_names_but_not_constants(self):
        assert parse("a * pi + max(b, a, 2) - -c").variables() == {"a", "b", "c"}

    def test_repr_and_call_str(self):
        tree = parse("f(-x, 2) + 1")
        assert repr(tree) == "BinOp('+', Call('f', [UnaryOp('-', Var('x')), Num(2)]), Num(1))"
        assert str(tree) == "(f((-x), 2) + 1)"

    def test_nodes_compare_by_type_and_fields(self):
        assert Num(1) != Var("1")
        assert Num(1) == Num(1)
        assert Num(1) != Num(2)


@pytest.mark.parametrize(
    "text, position",
    [
        ("1 +", 3),
        ("1 2", 2),
        ("* 3", 0),
    ],
)
def test_parse_errors(text, position):
    with pytest.raises(ParseError) as info:
        parse(text)
    assert info.value.position == position


def test_parse_error_positions_inside_calls():
    with pytest.raises(ParseError, match="unexpected end of input"):
        parse("1 +")
    with pytest.raises(ParseError, match="unexpected token"):
        parse("1 + )")
    with pytest.raises(ParseError) as info:
        parse("(1 + 2")
    assert info.value.position == 6
    with pytest.raises(ParseError) as info:
        parse("f(1,")
    assert info.value.position == 4
    with pytest.raises(ParseError) as info:
        parse("f(1 2)")
    assert info.value.position == 4
    with pytest.raises(ParseError) as info:
        parse(")")
    assert info.value.position == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("1 / 0", "division by zero"),
        ("5 % 0", "modulo by zero"),
        ("nope + 1", "undefined variable 'nope'"),
        ("frob(1)", "unknown function 'frob'"),
        ("min()", "min() takes at least 1 argument(s), got 0"),
    ],
)
def test_evaluation_errors(text, message):
    with pytest.raises(EvaluationError) as info:
        evaluate(text)
    assert message in str(info.value)


def test_more_evaluation_errors():
    with pytest.raises(EvaluationError, match="division by zero"):
        evaluate("1 // (2 - 2)")
    with pytest.raises(EvaluationError, match=r"round\(\) takes 1 to 2 argument\(s\), got 0"):
        evaluate("round()")
    assert evaluate("0 ^ 0") == 1
    with pytest.raises(EvaluationError, match="negative power"):
        evaluate("0 ^ -1")
    with pytest.raises(EvaluationError, match="sqrt of negative"):
        evaluate("sqrt(-1)")
    with pytest.raises(EvaluationError, match=r"abs\(\) takes 1 argument\(s\), got 2"):
        evaluate("abs(1, 2)")
    for name in ("sqrt", "floor", "ceil"):
        with pytest.raises(EvaluationError, match="takes 1 argument"):
            evaluate("%s(4, 1)" % name)
