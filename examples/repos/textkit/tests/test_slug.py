import pytest

from textkit import slugify


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Hello World", "hello-world"),
        ("  Hello,   World!!  ", "hello-world"),
        ("Héllo Wörld Ça va", "hello-world-ca-va"),
        ("Python 3.9 release", "python-3-9-release"),
    ],
)
def test_slugify_basic(text, expected):
    assert slugify(text) == expected


def test_slugify_edge_cases():
    assert slugify("---") == ""
    assert slugify("日本語 text") == "text"
    assert slugify("The quick brown fox", max_length=19) == "the-quick-brown-fox"
    assert slugify("The quick brown fox", max_length=13) == "the-quick"
    assert slugify("The quick brown fox", max_length=9) == "the-quick"


def test_custom_separator():
    assert slugify("A Tale of Two Cities", separator="_") == "a_tale_of_two_cities"


@pytest.mark.parametrize(
    "max_length, expected",
    [
        (100, "the-quick-brown-fox"),
        (15, "the-quick-brown"),
        (10, "the-quick"),
        (2, "th"),
    ],
)
def test_max_length_cuts_at_word_boundary(max_length, expected):
    assert slugify("The quick brown fox", max_length=max_length) == expected
