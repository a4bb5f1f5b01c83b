"""Disjoint-set forest with path compression and union by size."""


class UnionFind:
    def __init__(self, elements=()):
        self._parent = {}
        self._size = {}
        self.components = 0
        for element in elements:
            self.add(element)

    def __len__(self):
        return len(self._parent)

    def __contains__(self, element):
        return element in self._parent

    def add(self, element):
        """Add ``element`` as a singleton set; return False if already present."""
        if element in self._parent:
            return False
        self._parent[element] = element
        self._size[element] = 1
        self.components += 1
        return True

    def find(self, element):
        if element not in self._parent:
            raise KeyError(element)
        root = element
        while self._parent[root] != root:
            root = self._parent[root]
        # Path compression: point every node on the path directly at root.
        while self._parent[element] != root:
            self._parent[element], element = root, self._parent[element]
        return root

    def union(self, a, b):
        """Merge the sets of ``a`` and ``b``; return True if they were separate."""
        root_a = self.find(a)
        root_b = self.find(b)
        if root_a == root_b:
            return False
        if self._size[root_a] < self._size[root_b]:
            root_a, root_b = root_b, root_a
        self._parent[root_b] = root_a
        self._size[root_a] += self._size[root_b]
        del self._size[root_b]
        self.components -= 1
        return True

    def connected(self, a, b):
        return self.find(a) == self.find(b)

    def size_of(self, element):
        return self._size[self.find(element)]

    def groups(self):
        """Return the sets as a list of sorted lists, ordered by first element."""
        buckets = {}
        for element in self._parent:
            buckets.setdefault(self.find(element), []).append(element)
        return sorted((sorted(members) for members in buckets.values()), key=lambda g: g[0])
