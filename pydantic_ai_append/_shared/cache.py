"""The package's memory across conversations: caches bounded together by one budget, and safe between threads.

The caches for the whole process (block texts, baselines, each conversation's last scan) are shared by every
conversation, in asyncio tasks and threads. Each holds at most `max_entries` entries and `max_bytes` of values (about
the memory an entry keeps alive), and together at most the memory limit (64 MiB unless
[`set_memory_limit`][pydantic_ai_append.set_memory_limit] says otherwise). Past a bound, the entries inserted first go
first, in whichever cache they are. Lookups take no lock; insertions and evictions take one.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

KeyT = TypeVar('KeyT')
ValueT = TypeVar('ValueT')

_LOCK = threading.Lock()
_POOLED = weakref.WeakSet['BoundedCache[Any, Any]']()
_ORDER = itertools.count()
_limit = 64 * 1024 * 1024

ENTRY_BYTES = 256
"""About what an entry costs besides the strings it keeps alive: its key, its tuples and its place in the cache."""


def size_of(texts: Iterable[str | None]) -> int:
    """The memory the given strings take, as `sys.getsizeof` counts it (`None` counts nothing)."""
    return sum(sys.getsizeof(text) for text in texts if text is not None)


def memory_limit() -> int:
    """The most bytes the package's caches hold together: 64 MiB unless `set_memory_limit` changed it."""
    return _limit


def set_memory_limit(max_bytes: int) -> None:
    """Set the most memory the package keeps across conversations, in bytes, for the whole process (64 MiB by default).

    It covers what `AppendInstructions` keeps to save time (block texts, baselines, history scans); a lower limit
    drops the oldest entries at once. A dropped entry costs a later request time, and changes nothing it sends.

    Raises:
        UserError: If `max_bytes` is not a positive integer.
    """
    global _limit
    if type(max_bytes) is not int or max_bytes <= 0:
        from pydantic_ai.exceptions import UserError  # here: the cassette checker imports this module, not Pydantic AI

        raise UserError(f'`set_memory_limit` takes a positive number of bytes, not {max_bytes!r}.')
    with _LOCK:
        _limit = max_bytes
        BoundedCache.evict_pooled()


class BoundedCache(Generic[KeyT, ValueT]):
    """A mapping that forgets its oldest entries past a number of entries or of bytes, its own or the package's.

    ```python
    from pydantic_ai_append._shared.cache import BoundedCache

    cache = BoundedCache[str, str](max_entries=2, max_bytes=1_000)
    for word in ('a', 'b', 'c'):
        cache.put(word, word.upper(), size=50)
    print(cache.get('a'), cache.get('c'), len(cache))
    #> None C 2
    ```
    """

    def __init__(self, *, max_entries: int, max_bytes: int, name: str | None = None, pooled: bool = False) -> None:
        """An empty cache, listed by `process_caches` as `name`, and in the memory limit if `pooled`."""
        self.max_entries = max_entries
        """The most entries the cache holds."""
        self.max_bytes = max_bytes
        """The most bytes of values the cache holds."""
        self._entries: OrderedDict[KeyT, tuple[ValueT, int, int]] = OrderedDict()
        self._bytes = 0
        if pooled:
            with _LOCK:
                _POOLED.add(self)
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
        with _LOCK:
            self._entries.clear()
            self._bytes = 0

    def items(self) -> list[tuple[KeyT, ValueT]]:
        """Every entry's key and value, oldest first."""
        with _LOCK:
            return [(key, entry[0]) for key, entry in self._entries.items()]

    def get(self, key: KeyT) -> ValueT | None:
        """The value kept for `key`, or `None`."""
        entry = self._entries.get(key)
        return entry[0] if entry is not None else None

    def setdefault(self, key: KeyT, make: Callable[[], ValueT], *, size: int) -> ValueT:
        """The value kept for `key`, or a new one from `make` (called under the lock, so quick), kept if it fits."""
        with _LOCK:
            if (entry := self._entries.get(key)) is not None:
                return entry[0]
            value = make()
            self._keep(key, value, size)
        return value

    def put(self, key: KeyT, value: ValueT, *, size: int) -> None:
        """Keep `value` for `key`, which takes `size` bytes, dropping the oldest entries until every bound holds."""
        with _LOCK:
            self._keep(key, value, size)

    def _keep(self, key: KeyT, value: ValueT, size: int) -> None:
        # Called with the lock held. A value larger than a bound on its own is not kept.
        if (previous := self._entries.pop(key, None)) is not None:
            self._bytes -= previous[1]
        if size > self.max_bytes or (self in _POOLED and size > _limit):
            return
        self._entries[key] = (value, size, next(_ORDER))
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop_oldest()
        if self in _POOLED:
            self.evict_pooled()

    def _drop_oldest(self) -> None:
        _, (_, dropped, _) = self._entries.popitem(last=False)
        self._bytes -= dropped

    @staticmethod
    def evict_pooled() -> None:
        """Drop the oldest entries of the pooled caches until they fit the memory limit together; hold the lock."""
        caches: list[BoundedCache[Any, Any]] = [cache for cache in _POOLED if cache._entries]
        while caches and sum(cache._bytes for cache in caches) > _limit:
            min(caches, key=lambda cache: next(iter(cache._entries.values()))[2])._drop_oldest()
            caches = [cache for cache in caches if cache._entries]


_PROCESS_CACHES: dict[str, BoundedCache[Any, Any]] = {}


def process_caches() -> dict[str, BoundedCache[Any, Any]]:
    """Every process-wide cache the package keeps, by name."""
    return dict(_PROCESS_CACHES)
