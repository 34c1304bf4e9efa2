"""The process-wide caches' storage: bounded by memory as well as by entry count, and safe to share between threads.

The package keeps a few caches for the whole process (the texts of the blocks the model was sent, the guard's and
the verifier's per-conversation state). One agent serves many conversations at once, in asyncio tasks and in
threads, so each cache is shared by all of them.

Each cache holds at most `max_entries` entries and about `max_bytes` of the values it keeps (sizes as
`sys.getsizeof` gives them, summed over the strings an entry holds, the key's included where the entry keeps
them alive). When either bound is passed, the entries inserted first are dropped first (a hit doesn't renew an
entry); a value larger than `max_bytes` on its own is never kept.
Lookups take no lock (a `dict` read is atomic); insertions and evictions take one, so two threads evicting at once
never drop the same entry twice. Every cache made with a `name` is listed by `process_caches`, so a test (or an
operator) can see what the process holds.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

__all__ = ('BoundedCache', 'process_caches', 'size_of')

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

    def __init__(self, *, max_entries: int, max_bytes: int, name: str | None = None) -> None:
        """Make an empty cache.

        Args:
            max_entries: The most entries it holds.
            max_bytes: The most bytes of values it holds, by the sizes given to `put`.
            name: The name `process_caches` lists it by, for a cache kept for the whole process.
        """
        self.max_entries = max_entries
        """The most entries the cache holds."""
        self.max_bytes = max_bytes
        """The most bytes of values the cache holds."""
        self._entries: OrderedDict[KeyT, tuple[ValueT, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        if name is not None:
            _PROCESS_CACHES[name] = self

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The bytes of values held now, by the sizes given to `put`."""
        return self._bytes

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def items(self) -> list[tuple[KeyT, ValueT]]:
        """Every entry's key and value, oldest first."""
        with self._lock:
            return [(key, value) for key, (value, _) in self._entries.items()]

    def get(self, key: KeyT) -> ValueT | None:
        """The value kept for `key`, or `None`."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def setdefault(self, key: KeyT, make: Callable[[], ValueT], *, size: int) -> ValueT:
        """The value kept for `key`, or a new one from `make`, kept; two threads asking at once get the same value.

        Args:
            key: The key.
            make: Makes the value when none is kept; called under the cache's lock, so it must be quick.
            size: The bytes a new value takes; a value larger than `max_bytes` is returned but not kept.
        """
        with self._lock:
            if (entry := self._entries.get(key)) is not None:
                return entry[0]
            value = make()
            if size <= self.max_bytes:
                self._keep(key, value, size)
        return value

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
            self._keep(key, value, size)

    def _keep(self, key: KeyT, value: ValueT, size: int) -> None:
        # Called with the lock held.
        previous = self._entries.pop(key, None)
        if previous is not None:
            self._bytes -= previous[1]
        self._entries[key] = (value, size)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self._bytes -= dropped


_PROCESS_CACHES: dict[str, BoundedCache[Any, Any]] = {}


def process_caches() -> dict[str, BoundedCache[Any, Any]]:
    """Every process-wide cache the package keeps, by name."""
    return dict(_PROCESS_CACHES)
