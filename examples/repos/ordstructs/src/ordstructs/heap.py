"""Indexed binary min-heap used as a priority queue."""


class PriorityQueue:
    """Min-priority queue of hashable items.

    Items with equal priority are popped in insertion order.  Each item may
    appear at most once; its priority can be changed with :meth:`update`.
    """

    def __init__(self):
        self._heap = []      # list of [priority, sequence, item]
        self._index = {}     # item -> position in self._heap
        self._counter = 0

    def __len__(self):
        return len(self._heap)

    def __bool__(self):
        return bool(self._heap)

    def __contains__(self, item):
        return item in self._index

    def push(self, item, priority):
        if item in self._index:
            raise KeyError("item already queued: %r" % (item,))
        entry = [priority, self._counter, item]
        self._counter += 1
        self._heap.append(entry)
        self._index[item] = len(self._heap) - 1
        self._sift_up(len(self._heap) - 1)

    def peek(self):
        if not self._heap:
            raise IndexError("peek from empty queue")
        priority, _, item = self._heap[0]
        return item, priority

    def pop(self):
        if not self._heap:
            raise IndexError("pop from empty queue")
        return self._remove_at(0)

    def remove(self, item):
        if item not in self._index:
            raise KeyError(item)
        return self._remove_at(self._index[item])[1]

    def priority(self, item):
        return self._heap[self._index[item]][0]

    def update(self, item, priority):
        """Change the priority of ``item`` (either direction)."""
        pos = self._index[item]
        old = self._heap[pos][0]
        self._heap[pos][0] = priority
        if priority < old:
            self._sift_up(pos)
        elif priority > old:
            self._sift_down(pos)

    def drain(self):
        """Pop every item, returning them in priority order."""
        out = []
        while self._heap:
            out.append(self.pop()[0])
        return out

    # -- internals -----------------------------------------------------
    def _remove_at(self, pos):
        last = len(self._heap) - 1
        self._swap(pos, last)
        priority, _, item = self._heap.pop()
        del self._index[item]
        if pos < len(self._heap):
            self._sift_down(pos)
            self._sift_up(pos)
        return item, priority

    def _less(self, i, j):
        a, b = self._heap[i], self._heap[j]
        return (a[0], a[1]) < (b[0], b[1])

    def _swap(self, i, j):
        heap = self._heap
        heap[i], heap[j] = heap[j], heap[i]
        self._index[heap[i][2]] = i
        self._index[heap[j][2]] = j

    def _sift_up(self, pos):
        while pos > 0:
            parent = (pos - 1) // 2
            if not self._less(pos, parent):
                break
            self._swap(pos, parent)
            pos = parent

    def _sift_down(self, pos):
        size = len(self._heap)
        while True:
            left = 2 * pos + 1
            right = left + 1
            smallest = pos
            if left < size and self._less(left, smallest):
                smallest = left
            if right < size and self._less(right, smallest):
                smallest = right
            if smallest == pos:
                return
            self._swap(pos, smallest)
            pos = smallest

    def is_valid(self):
        """Check the heap invariant and the position index (for debugging)."""
        for pos in range(1, len(self._heap)):
            if self._less(pos, (pos - 1) // 2):
                return False
        return all(self._heap[p][2] == item for item, p in self._index.items())
