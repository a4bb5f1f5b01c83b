"""Least-recently-used cache built on a doubly linked list."""

_MISSING = object()


class _Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key=None, value=None):
        self.key = key
        self.value = value
        self.prev = None
        self.next = None


class LRUCache:
    """Mapping with a fixed capacity that evicts the least recently used key.

    ``on_evict`` (optional) is called as ``on_evict(key, value)`` whenever an
    entry is evicted to make room.
    """

    def __init__(self, capacity, on_evict=None):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.on_evict = on_evict
        self.hits = 0
        self.misses = 0
        self._map = {}
        self._head = _Node()  # sentinel: head.next is most recent
        self._tail = _Node()  # sentinel: tail.prev is least recent
        self._head.next = self._tail
        self._tail.prev = self._head

    def __len__(self):
        return len(self._map)

    def __contains__(self, key):
        # Membership tests do not count as a use.
        return key in self._map

    def _unlink(self, node):
        node.prev.next = node.next
        node.next.prev = node.prev

    def _push_front(self, node):
        node.prev = self._head
        node.next = self._head.next
        self._head.next.prev = node
        self._head.next = node

    def get(self, key, default=None):
        node = self._map.get(key)
        if node is None:
            self.misses += 1
            return default
        self.hits += 1
        self._unlink(node)
        self._push_front(node)
        return node.value

    def put(self, key, value):
        node = self._map.get(key)
        if node is not None:
            node.value = value
            self._unlink(node)
            self._push_front(node)
            return
        if len(self._map) >= self.capacity:
            oldest = self._tail.prev
            self._unlink(oldest)
            del self._map[oldest.key]
            if self.on_evict is not None:
                self.on_evict(oldest.key, oldest.value)
        node = _Node(key, value)
        self._map[key] = node
        self._push_front(node)

    def pop(self, key, default=_MISSING):
        node = self._map.pop(key, None)
        if node is None:
            if default is _MISSING:
                raise KeyError(key)
            return default
        self._unlink(node)
        return node.value

    def keys(self):
        """Keys from most to least recently used."""
        out = []
        node = self._head.next
        while node is not self._tail:
            out.append(node.key)
            node = node.next
        return out

    def resize(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        while len(self._map) > capacity:
            oldest = self._tail.prev
            self._unlink(oldest)
            del self._map[oldest.key]
            if self.on_evict is not None:
                self.on_evict(oldest.key, oldest.value)

    def hit_rate(self):
        total = self.hits + self.misses
        if total == 0:
            return 0.0
        return self.hits / total
