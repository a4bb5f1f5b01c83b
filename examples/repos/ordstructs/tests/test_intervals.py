import pytest

from ordstructs import IntervalSet


class TestAdd:
    def test_disjoint_intervals_sorted(self):
        s = IntervalSet([(30, 35), (0, 5), (10, 12)])
        assert list(s) == [(0, 5), (10, 12), (30, 35)]
        assert len(s) == 3

    def test_overlapping_merge(self, intervals):
        intervals.add(15, 35)
        assert list(intervals) == [(10, 40), (50, 60)]

    def test_touching_intervals_merge(self, intervals):
        intervals.add(20, 30)
        assert list(intervals) == [(10, 40), (50, 60)]

    def test_cover_everything(self, intervals):
        intervals.add(0, 100)
        assert list(intervals) == [(0, 100)]

    def test_inside_existing_is_noop(self, intervals):
        intervals.add(12, 18)
        assert list(intervals) == [(10, 20), (30, 40), (50, 60)]

    def test_gap_insert_and_empty_interval(self, intervals):
        intervals.add(22, 25)
        intervals.add(45, 45)
        assert list(intervals) == [(10, 20), (22, 25), (30, 40), (50, 60)]

    def test_reversed_interval_rejected(self):
        with pytest.raises(ValueError):
            IntervalSet().add(5, 4)


@pytest.mark.parametrize(
    "start, end, expected",
    [
        (12, 15, [(10, 12), (15, 20), (30, 40), (50, 60)]),
        (10, 20, [(30, 40), (50, 60)]),
        (15, 55, [(10, 15), (55, 60)]),
        (20, 30, [(10, 20), (30, 40), (50, 60)]),
        (0, 100, []),
        (40, 50, [(10, 20), (30, 40), (50, 60)]),
    ],
)
def test_remove(intervals, start, end, expected):
    intervals.remove(start, end)
    assert list(intervals) == expected


@pytest.mark.parametrize(
    "point, expected",
    [(9, False), (10, True), (19, True), (20, False), (35, True), (60, False), (-1, False)],
)
def test_contains(intervals, point, expected):
    assert (point in intervals) is expected


def test_overlaps(intervals):
    assert intervals.overlaps(19, 21)
    assert not intervals.overlaps(20, 30)
    assert not intervals.overlaps(0, 10)
    assert intervals.overlaps(0, 11)
    assert intervals.overlaps(55, 70)
    assert not intervals.overlaps(60, 70)
    assert not intervals.overlaps(15, 15)


def test_total_length_and_span(intervals):
    assert intervals.total_length() == 30
    assert intervals.span() == (10, 60)
    assert IntervalSet().span() is None
    assert IntervalSet().total_length() == 0


def test_gaps(intervals):
    assert intervals.gaps(0, 70) == [(0, 10), (20, 30), (40, 50), (60, 70)]
    assert intervals.gaps(15, 35) == [(20, 30)]
    assert intervals.gaps(12, 18) == []
    assert intervals.gaps(41, 45) == [(41, 45)]
    assert intervals.gaps(10, 25) == [(20, 25)]
    assert intervals.gaps(0, 20) == [(0, 10)]


def test_repr():
    assert repr(IntervalSet([(1, 2)])) == "IntervalSet([(1, 2)])"
