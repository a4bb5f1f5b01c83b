"""A list that keeps its elements sorted, using :mod:`bisect`."""

from bisect import bisect_left, bisect_right, insort


class SortedList:
    """Sorted sequence allowing duplicates, with O(log n) searches."""

    def __init__(self, iterable=()):
        self._items = sorted(iterable)

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __getitem__(self, index):
        return self._items[index]

    def __repr__(self):
        return "SortedList(%r)" % (self._items,)

    def __eq__(self, other):
        if isinstance(other, SortedList):
            return self._items == other._items
        return NotImplemented

    def __contains__(self, value):
        i = bisect_left(self._items, value)
        return i < len(self._items) and self._items[i] == value

    def add(self, value):
        insort(self._items, value)

    def update(self, values):
        for value in values:
            self.add(value)

    def remove(self, value):
        i = bisect_left(self._items, value)
        if i == len(self._items) or self._items[i] != value:
            raise ValueError("%r not in list" % (value,))
        del self._items[i]

    def discard(self, value):
        try:
            self.remove(value)
            return True
        except ValueError:
            return False

    def pop(self, index=-1):
        if not self._items:
            raise IndexError("pop from empty SortedList")
        return self._items.pop(index)

    def index(self, value):
        i = bisect_left(self._items, value)
        if i < len(self._items) and self._items[i] == value:
            return i
        raise ValueError("%r not in list" % (value,))

    def count(self, value):
        return bisect_right(self._items, value) - bisect_left(self._items, value)

    def rank(self, value):
        """Number of elements strictly less than ``value``."""
        return bisect_left(self._items, value)

    def floor(self, value):
        """Largest element <= value, or None."""
        i = bisect_right(self._items, value)
        return self._items[i - 1] if i > 0 else None

    def ceiling(self, value):
        """Smallest element >= value, or None."""
        i = bisect_left(self._items, value)
        return self._items[i] if i < len(self._items) else None

    def lower(self, value):
        """Largest element strictly < value, or None."""
        i = bisect_left(self._items, value)
        return self._items[i - 1] if i > 0 else None

    def higher(self, value):
        """Smallest element strictly > value, or None."""
        i = bisect_right(self._items, value)
        return self._items[i] if i < len(self._items) else None

    def irange(self, minimum=None, maximum=None, inclusive=(True, True)):
        """Iterate over elements between ``minimum`` and ``maximum``.

        ``None`` bounds are open-ended; ``inclusive`` selects whether each
        bound itself is included.
        """
        items = self._items
        if minimum is None:
            lo = 0
        elif inclusive[0]:
            lo = bisect_left(items, minimum)
        else:
            lo = bisect_right(items, minimum)
        if maximum is None:
            hi = len(items)
        elif inclusive[1]:
            hi = bisect_right(items, maximum)
        else:
            hi = bisect_left(items, maximum)
        for i in range(lo, hi):
            yield items[i]

    def median(self):
        n = len(self._items)
        if n == 0:
            raise ValueError("median of empty SortedList")
        mid = n // 2
        if n % 2 == 1:
            return self._items[mid]
        return (self._items[mid - 1] + self._items[mid]) / 2
