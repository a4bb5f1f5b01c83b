import pytest

from ordstructs import PriorityQueue


def make_queue(pairs):
    pq = PriorityQueue()
    for item, priority in pairs:
        pq.push(item, priority)
    return pq


def test_pops_in_priority_order():
    pq = make_queue([("c", 3), ("a", 1), ("e", 5), ("b", 2), ("d", 4)])
    assert [pq.pop() for _ in range(5)] == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]
    assert len(pq) == 0
    assert not pq


def test_equal_priorities_are_fifo():
    pq = make_queue([("first", 1), ("second", 1), ("third", 1), ("zero", 0)])
    assert pq.drain() == ["zero", "first", "second", "third"]


def test_peek_does_not_remove():
    pq = make_queue([("x", 2), ("y", -1)])
    assert pq.peek() == ("y", -1)
    assert len(pq) == 2
    assert "y" in pq


def test_empty_queue_errors():
    pq = PriorityQueue()
    with pytest.raises(IndexError, match="peek"):
        pq.peek()
    with pytest.raises(IndexError, match="pop"):
        pq.pop()


def test_duplicate_push_rejected():
    pq = make_queue([("a", 1)])
    with pytest.raises(KeyError):
        pq.push("a", 5)


@pytest.mark.parametrize(
    "item, new_priority, expected",
    [
        ("d", 0, ["d", "a", "b", "c", "e"]),
        ("a", 10, ["b", "c", "d", "e", "a"]),
        ("c", 2, ["a", "b", "c", "d", "e"]),
        ("b", 4, ["a", "c", "b", "d", "e"]),  # ties keep insertion order
    ],
)
def test_update_priority(item, new_priority, expected):
    pq = make_queue([("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)])
    pq.update(item, new_priority)
    assert pq.priority(item) == new_priority
    assert pq.is_valid()
    assert pq.drain() == expected


def test_update_compares_against_old_priority():
    pq = make_queue([("a", 10), ("b", 7), ("c", 8)])
    pq.update("a", 5)
    assert pq.is_valid()
    assert pq.pop() == ("a", 5)
    pq.update("c", 8)
    assert pq.drain() == ["b", "c"]


def test_remove_from_middle_keeps_heap_valid():
    pq = make_queue([(n, (n * 7) % 11) for n in range(11)])
    assert pq.remove(4) == (4 * 7) % 11
    assert 4 not in pq
    assert pq.is_valid()
    assert pq.drain() == sorted((n for n in range(11) if n != 4), key=lambda n: (n * 7) % 11)


def test_remove_missing_item():
    with pytest.raises(KeyError):
        PriorityQueue().remove("ghost")


def test_heap_sort_of_many_items():
    values = [(i * 37) % 101 for i in range(60)]
    pq = make_queue([(i, v) for i, v in enumerate(values)])
    assert pq.is_valid()
    popped = [pq.pop()[1] for _ in range(len(values))]
    assert popped == sorted(values)


def test_remove_last_and_only_items():
    pq = make_queue([("a", 1), ("b", 2)])
    assert pq.remove("b") == 2
    assert pq.remove("a") == 1
    assert len(pq) == 0
    pq.push("a", 3)
    assert pq.peek() == ("a", 3)
