import pytest

from textkit import closest, levenshtein, similarity


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("kitten", "sitting", 3),
        ("flaw", "lawn", 2),
        ("", "abc", 3),
        ("abc", "acb", 2),
        ("intention", "execution", 5),
    ],
)
def test_levenshtein(a, b, expected):
    assert levenshtein(a, b) == expected
    assert levenshtein(b, a) == expected


def test_levenshtein_edge_cases():
    assert levenshtein("abc", "") == 3
    assert levenshtein("same", "same") == 0
    assert levenshtein("a", "b") == 1
    assert levenshtein("ab", "ba") == 2
    assert levenshtein("abcde", "abXde") == 1


def test_levenshtein_with_cutoff():
    assert levenshtein("kitten", "sitting", max_distance=3) == 3
    assert levenshtein("kitten", "sitting", max_distance=2) == 3
    assert levenshtein("a", "abcdef", max_distance=4) == 5
    assert levenshtein("abcdef", "uvwxyz", max_distance=1) == 2
    assert levenshtein("abc", "abd", max_distance=1) == 1
    assert levenshtein("abc", "abcde", max_distance=2) == 2


def test_similarity():
    assert similarity("", "") == 1.0
    assert similarity("abcd", "abcd") == 1.0
    assert similarity("abcd", "abcf") == 0.75
    assert similarity("ab", "wxyz") == 0.0


def test_closest():
    words = ["apple", "apply", "ample", "maple"]
    assert closest("appel", words) == "apple"
    assert closest("xyz", words) is None
    assert closest("aply", ["apply", "ply"]) == "apply"
    assert closest("", []) is None


def test_closest_cutoff_is_inclusive_and_ties_keep_first():
    # similarity("abcd", "abxx") == 0.5
    assert closest("abcd", ["abxx"], cutoff=0.5) == "abxx"
    assert closest("abcd", ["abxx"], cutoff=0.51) is None
    assert closest("abcd", ["abcx", "abxd", "abcd"]) == "abcd"
    assert closest("abcd", ["abcx", "abxd"]) == "abcx"
