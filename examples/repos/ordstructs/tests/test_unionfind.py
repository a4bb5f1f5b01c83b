import pytest

from ordstructs import UnionFind


@pytest.fixture
def uf():
    return UnionFind(range(8))


def test_initial_singletons(uf):
    assert len(uf) == 8
    assert uf.components == 8
    assert all(uf.find(i) == i for i in range(8))
    assert uf.size_of(3) == 1


def test_union_merges_and_counts(uf):
    assert uf.union(0, 1) is True
    assert uf.union(2, 3) is True
    assert uf.union(1, 3) is True
    assert uf.union(0, 2) is False
    assert uf.components == 5
    assert uf.size_of(3) == 4
    assert uf.connected(0, 3)
    assert not uf.connected(0, 4)


def test_union_by_size_keeps_larger_root(uf):
    uf.union(6, 7)
    assert uf.find(7) == 6  # equal sizes: first argument's root wins
    uf.union(0, 1)
    uf.union(0, 2)
    root = uf.find(0)
    uf.union(5, 0)
    assert uf.find(5) == root
    assert uf.size_of(5) == 4


def test_path_compression_flattens_chain():
    uf = UnionFind()
    for i in range(5):
        uf.add(i)
    # Build a chain manually through unions of singletons onto a growing set.
    for i in range(1, 5):
        uf.union(i, i - 1)
    root = uf.find(4)
    assert all(uf._parent[i] == root for i in range(5))


def test_groups(uf):
    uf.union(6, 1)
    uf.union(4, 2)
    uf.union(2, 7)
    assert uf.groups() == [[0], [1, 6], [2, 4, 7], [3], [5]]


def test_add_and_missing(uf):
    assert uf.add(3) is False
    assert uf.add("x") is True
    assert "x" in uf
    assert uf.components == 9
    with pytest.raises(KeyError):
        uf.find("missing")
