import pytest

from textkit import wrap


def test_wrap_lorem(lorem):
    lines = wrap(lorem, 30)
    assert lines == [
        "Lorem ipsum dolor sit amet,",
        "consectetur adipiscing elit,",
        "sed do eiusmod tempor",
        "incididunt ut labore et dolore",
        "magna aliqua.",
    ]
    assert all(len(line) <= 30 for line in lines)
    assert " ".join(lines) == lorem


def test_exact_fit_stays_on_one_line():
    assert wrap("aaa bbb", 7) == ["aaa bbb"]
    assert wrap("aaa bbb", 6) == ["aaa", "bbb"]


def test_whitespace_collapsed_and_empty_input():
    assert wrap("  one \n\t two  ", 20) == ["one two"]
    assert wrap("", 10) == []
    assert wrap("   ", 10) == []


def test_long_words_are_broken():
    assert wrap("ab abcdefghij cd", 4) == ["ab", "abcd", "efgh", "ij", "cd"]


def test_text_after_broken_word_continues_normally():
    assert wrap("xx abcdefg cd", 5) == ["xx", "abcde", "fg cd"]


def test_width_one():
    assert wrap("ab c", 1) == ["a", "b", "c"]


def test_long_words_kept_when_not_breaking():
    assert wrap("ab abcdefghij cd", 4, break_long_words=False) == ["ab", "abcdefghij", "cd"]


def test_justify():
    lines = wrap("a bb ccc dd e fffff", 9, justify=True)
    assert lines == ["a  bb ccc", "dd      e", "fffff"]
    assert all(len(line) == 9 for line in lines[:-1])


def test_justify_distributes_remainder_from_left():
    assert wrap("w x y z q", 8, justify=True) == ["w  x y z", "q"]
    assert wrap("aa b c d", 9, justify=True) == ["aa b c d"]
    assert wrap("aaaa bb c dddddd", 10, justify=True) == ["aaaa  bb c", "dddddd"]
    assert wrap("aaaa bb c dddddd", 11, justify=True) == ["aaaa  bb  c", "dddddd"]


def test_justify_single_word_line_unpadded():
    assert wrap("abcdef ghi", 6, justify=True) == ["abcdef", "ghi"]


@pytest.mark.parametrize("width", [0, -5])
def test_invalid_width(width):
    with pytest.raises(ValueError):
        wrap("text", width)
