"""Set of disjoint half-open integer intervals ``[start, end)``."""

from bisect import bisect_left, bisect_right


class IntervalSet:
    """Maintains sorted, non-overlapping, non-adjacent intervals."""

    def __init__(self, intervals=()):
        self._starts = []
        self._ends = []
        for start, end in intervals:
            self.add(start, end)

    def __iter__(self):
        return iter(zip(self._starts, self._ends))

    def __len__(self):
        return len(self._starts)

    def __repr__(self):
        return "IntervalSet(%r)" % (list(self),)

    @staticmethod
    def _check(start, end):
        if end < start:
            raise ValueError("interval end %r precedes start %r" % (end, start))

    def add(self, start, end):
        """Add ``[start, end)``, merging with overlapping or touching intervals."""
        self._check(start, end)
        if start == end:
            return
        # First interval whose end reaches start, last whose start <= end.
        lo = bisect_left(self._ends, start)
        hi = bisect_right(self._starts, end)
        if lo < hi:
            start = min(start, self._starts[lo])
            end = max(end, self._ends[hi - 1])
        self._starts[lo:hi] = [start]
        self._ends[lo:hi] = [end]

    def remove(self, start, end):
        """Remove ``[start, end)``, splitting intervals as needed."""
        self._check(start, end)
        if start == end:
            return
        lo = bisect_right(self._ends, start)
        hi = bisect_left(self._starts, end)
        if lo >= hi:
            return
        new_starts = []
        new_ends = []
        if self._starts[lo] < start:
            new_starts.append(self._starts[lo])
            new_ends.append(start)
        if self._ends[hi - 1] > end:
            new_starts.append(end)
            new_ends.append(self._ends[hi - 1])
        self._starts[lo:hi] = new_starts
        self._ends[lo:hi] = new_ends

    def __contains__(self, point):
        i = bisect_right(self._starts, point) - 1
        return i >= 0 and point < self._ends[i]

    def overlaps(self, start, end):
        """True if any stored interval intersects ``[start, end)``."""
        self._check(start, end)
        if start == end:
            return False
        i = bisect_right(self._ends, start)
        return i < len(self._starts) and self._starts[i] < end

    def total_length(self):
        return sum(e - s for s, e in zip(self._starts, self._ends))

    def span(self):
        if not self._starts:
            return None
        return self._starts[0], self._ends[-1]

    def gaps(self, start, end):
        """Sub-intervals of ``[start, end)`` not covered by the set."""
        self._check(start, end)
        result = []
        cursor = start
        for s, e in self:
            if e <= cursor:
                continue
            if s >= end:
                break
            if s > cursor:
                result.append((cursor, s))
            cursor = max(cursor, e)
        if cursor < end:
            result.append((cursor, end))
        return result
