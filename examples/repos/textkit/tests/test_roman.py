import pytest

from textkit import from_roman, to_roman


@pytest.mark.parametrize(
    "number, numeral",
    [
        (1, "I"),
        (9, "IX"),
        (14, "XIV"),
        (1994, "MCMXCIV"),
        (2024, "MMXXIV"),
        (3999, "MMMCMXCIX"),
    ],
)
def test_round_trip(number, numeral):
    assert to_roman(number) == numeral
    assert from_roman(numeral) == number


def test_subtractive_pairs():
    assert [to_roman(n) for n in (4, 40, 90, 400, 900)] == ["IV", "XL", "XC", "CD", "CM"]
    assert [from_roman(r) for r in ("IV", "XL", "XC", "CD", "CM")] == [4, 40, 90, 400, 900]
    for bad in ("MMMM", "ABC", "XM"):
        with pytest.raises(ValueError):
            from_roman(bad)


def test_all_values_round_trip():
    assert all(from_roman(to_roman(n)) == n for n in range(1, 4000))


def test_from_roman_is_case_insensitive_and_strips():
    assert from_roman("  mcmlxxxiv ") == 1984


@pytest.mark.parametrize("bad", [0, -1, 4000])
def test_to_roman_out_of_range(bad):
    with pytest.raises(ValueError):
        to_roman(bad)


@pytest.mark.parametrize("bad", [1.0, "5", True])
def test_to_roman_type_errors(bad):
    with pytest.raises(TypeError):
        to_roman(bad)


@pytest.mark.parametrize("bad", ["", "IIII", "VX", "IC"])
def test_from_roman_rejects_invalid(bad):
    with pytest.raises(ValueError):
        from_roman(bad)
