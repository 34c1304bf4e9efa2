"""The process-wide caches' storage: bounded by memory as well as by entry count, and safe to share between threads.

The plugin keeps a few caches for the whole process, because the same history objects come back on every request
of a conversation: records decoded from their stored dicts, and the rendered text of each change. One agent
serves many conversations at once, in asyncio tasks and in threads, so each cache is shared by all of them.

Each cache holds at most `max_entries` entries and about `max_bytes` of the values it keeps (sizes as
`sys.getsizeof` gives them, summed over the strings an entry holds, the key's included where the entry keeps
them alive). When either bound is passed, the entries inserted first are dropped first (a hit doesn't renew an
entry: a window delivers all of its changes on every request, so use order and insertion order agree); a value
larger than `max_bytes` on its own is computed every time and never kept.
Lookups take no lock (a `dict` read is atomic); insertions and evictions take one.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

__all__ = ('BoundedCache', 'size_of')

KeyT = TypeVar('KeyT')
ValueT = TypeVar('ValueT')


def size_of(texts: Iterable[str | None]) -> int:
    """The memory the given strings take, as `sys.getsizeof` counts it (`None` counts nothing)."""
    return sum(sys.getsizeof(text) for text in texts if text is not None)


class BoundedCache(Generic[KeyT, ValueT]):
    """A mapping that forgets its oldest entries past a number of entries or a number of bytes.

    ```python
    from pydantic_ai_append._cache import BoundedCache

    cache = BoundedCache[str, str](max_entries=2, max_bytes=1_000)
    for word in ('a', 'b', 'c'):
        cache.put(word, word.upper(), size=50)
    print(cache.get('a'), cache.get('c'), len(cache))
    #> None C 2
    ```
    """

    def __init__(self, *, max_entries: int, max_bytes: int) -> None:
        """Make an empty cache.

        Args:
            max_entries: The most entries it holds.
            max_bytes: The most bytes of values it holds, by the sizes given to `put`.
        """
        self.max_entries = max_entries
        """The most entries the cache holds."""
        self.max_bytes = max_bytes
        """The most bytes of values the cache holds."""
        self._entries: OrderedDict[KeyT, tuple[ValueT, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The bytes of values held now, by the sizes given to `put`."""
        return self._bytes

    def get(self, key: KeyT) -> ValueT | None:
        """The value kept for `key`, or `None`."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def put(self, key: KeyT, value: ValueT, *, size: int) -> None:
        """Keep `value` for `key`, dropping the oldest entries until both bounds hold again.

        Args:
            key: The key.
            value: The value.
            size: The bytes `value` takes; a value larger than `max_bytes` is not kept.
        """
        if size > self.max_bytes:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._bytes -= previous[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped
