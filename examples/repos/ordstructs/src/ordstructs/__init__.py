"""ordstructs: ordered and indexed data structures."""

from .heap import PriorityQueue
from .intervals import IntervalSet
from .lru import LRUCache
from .sortedlist import SortedList
from .unionfind import UnionFind

__all__ = ["IntervalSet", "LRUCache", "PriorityQueue", "SortedList", "UnionFind"]
__version__ = "1.2.0"
