import pytest

from ordstructs import SortedList


def test_construction_sorts(numbers):
    assert list(numbers) == [1, 3, 3, 5, 7, 9, 11]
    assert len(numbers) == 7
    assert numbers[0] == 1
    assert numbers[-1] == 11
    assert repr(SortedList([2, 1])) == "SortedList([1, 2])"


def test_add_and_update_keep_order(numbers):
    numbers.add(4)
    numbers.update([0, 12, 6])
    assert list(numbers) == [0, 1, 3, 3, 4, 5, 6, 7, 9, 11, 12]


def test_contains(numbers):
    assert 7 in numbers
    assert 8 not in numbers
    assert 12 not in numbers
    assert 0 not in numbers
    assert numbers.floor(1) == 1
    assert numbers.lower(3) == 1


def test_remove_and_discard(numbers):
    numbers.remove(3)
    assert list(numbers) == [1, 3, 5, 7, 9, 11]
    assert numbers.discard(3) is True
    assert numbers.discard(3) is False
    with pytest.raises(ValueError):
        numbers.remove(4)
    with pytest.raises(ValueError):
        numbers.remove(100)


def test_pop(numbers):
    assert numbers.pop() == 11
    assert numbers.pop(0) == 1
    assert len(numbers) == 5
    with pytest.raises(IndexError):
        SortedList().pop()


def test_index_and_count(numbers):
    assert numbers.index(3) == 1
    assert numbers.index(11) == 6
    assert numbers.count(3) == 2
    assert numbers.count(4) == 0
    with pytest.raises(ValueError):
        numbers.index(4)
    with pytest.raises(ValueError):
        numbers.index(12)


@pytest.mark.parametrize(
    "value, rank, floor, ceiling, lower, higher",
    [
        (0, 0, None, 1, None, 1),
        (3, 1, 3, 3, 1, 5),
        (4, 3, 3, 5, 3, 5),
        (11, 6, 11, 11, 9, None),
        (20, 7, 11, None, 11, None),
    ],
)
def test_neighbour_queries(numbers, value, rank, floor, ceiling, lower, higher):
    assert numbers.rank(value) == rank
    assert numbers.floor(value) == floor
    assert numbers.ceiling(value) == ceiling
    assert numbers.lower(value) == lower
    assert numbers.higher(value) == higher


@pytest.mark.parametrize(
    "minimum, maximum, inclusive, expected",
    [
        (3, 9, (True, True), [3, 3, 5, 7, 9]),
        (3, 9, (False, True), [5, 7, 9]),
        (3, 9, (True, False), [3, 3, 5, 7]),
        (3, 9, (False, False), [5, 7]),
        (None, 4, (True, True), [1, 3, 3]),
        (8, None, (True, True), [9, 11]),
        (6, 6, (True, True), []),
    ],
)
def test_irange(numbers, minimum, maximum, inclusive, expected):
    assert list(numbers.irange(minimum, maximum, inclusive)) == expected


def test_median():
    assert SortedList([4, 1, 7]).median() == 4
    assert SortedList([4, 1, 7, 10]).median() == 5.5
    assert SortedList([2]).median() == 2
    assert SortedList([9, 1, 5, 3, 7]).median() == 5
    with pytest.raises(ValueError):
        SortedList().median()


def test_equality():
    assert SortedList([3, 1, 2]) == SortedList([1, 2, 3])
    assert SortedList([1, 2]) != SortedList([1, 2, 2])
    assert SortedList([1]) != [1]
