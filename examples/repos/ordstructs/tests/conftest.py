import pytest

from ordstructs import IntervalSet, SortedList


@pytest.fixture
def numbers():
    return SortedList([5, 1, 9, 3, 7, 3, 11])


@pytest.fixture
def intervals():
    return IntervalSet([(10, 20), (30, 40), (50, 60)])
