import pytest

from ordstructs import LRUCache


@pytest.fixture
def cache():
    c = LRUCache(3)
    for key in "abc":
        c.put(key, key.upper())
    return c


class TestLRUCache:
    def test_recency_order(self, cache):
        assert cache.keys() == ["c", "b", "a"]
        cache.get("a")
        assert cache.keys() == ["a", "c", "b"]

    def test_evicts_least_recently_used(self, cache):
        cache.get("a")
        cache.put("d", "D")
        assert "b" not in cache
        assert cache.keys() == ["d", "a", "c"]
        assert len(cache) == 3

    def test_put_existing_updates_and_refreshes(self, cache):
        cache.put("a", "alpha")
        cache.put("d", "D")
        assert cache.get("a") == "alpha"
        assert "b" not in cache
        assert len(cache) == 3

    def test_contains_does_not_refresh(self, cache):
        assert "a" in cache
        cache.put("d", "D")
        assert "a" not in cache

    def test_hit_and_miss_counters(self, cache):
        assert cache.hit_rate() == 0.0
        cache.get("a")
        cache.get("zz")
        cache.get("b")
        cache.get("yy", "dflt")
        assert (cache.hits, cache.misses) == (2, 2)
        cache.get("c")
        assert cache.hit_rate() == pytest.approx(0.6)

    def test_get_default(self, cache):
        assert cache.get("missing") is None
        assert cache.get("missing", 0) == 0

    def test_pop(self, cache):
        assert cache.pop("b") == "B"
        assert cache.keys() == ["c", "a"]
        assert cache.pop("b", "gone") == "gone"
        with pytest.raises(KeyError):
            cache.pop("b")

    def test_on_evict_callback_and_resize(self):
        evicted = []
        c = LRUCache(4, on_evict=lambda k, v: evicted.append((k, v)))
        for i in range(6):
            c.put(i, i * i)
        assert evicted == [(0, 0), (1, 1)]
        c.resize(2)
        assert evicted == [(0, 0), (1, 1), (2, 4), (3, 9)]
        assert c.keys() == [5, 4]
        assert c.capacity == 2

    def test_capacity_one(self):
        c = LRUCache(1)
        c.put("x", 1)
        c.put("y", 2)
        assert c.keys() == ["y"]
        assert c.get("x") is None
        big = LRUCache(3)
        for key in "abc":
            big.put(key, 0)
        big.resize(1)
        assert big.keys() == ["c"]


@pytest.mark.parametrize("capacity", [0, -3])
def test_invalid_capacity(capacity):
    with pytest.raises(ValueError):
        LRUCache(capacity)
    with pytest.raises(ValueError):
        LRUCache(2).resize(capacity)
