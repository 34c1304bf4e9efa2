"""The process-wide caches' storage: bounded by memory as well as by entry count, and safe to share between threads.

The plugin keeps a few caches for the whole process, because the same history objects come back on every request
of a conversation: records decoded from their stored dicts, and the rendered text of each change. One agent
serves many conversations at once, in asyncio tasks and in threads, so each cache is shared by all of them.

Each cache holds at most `max_entries` entries and about `max_bytes` of the values it keeps (sizes as
`sys.getsizeof` gives them, summed over the strings an entry holds, the key's included where the entry keeps
them alive). When either bound is passed, the entries inserted first are dropped first (a hit doesn't renew an
entry: a window delivers all of its changes on every request, so use order and insertion order agree); a value
larger than `max_bytes` on its own is computed every time and never kept.
Lookups take no lock (a `dict` read is atomic); insertions and evictions take one, so two threads evicting at once
never drop the same entry twice. Every cache made with a `name` is listed by `process_caches`, so a test (or an
operator) can see what the process holds.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar, cast

__all__ = ('BoundedCache', 'content_key', 'process_caches', 'size_of')

KeyT = TypeVar('KeyT')
ValueT = TypeVar('ValueT')


def size_of(texts: Iterable[str | None]) -> int:
    """The memory the given strings take, as `sys.getsizeof` counts it (`None` counts nothing)."""
    return sum(sys.getsizeof(text) for text in texts if text is not None)


_FLAT = frozenset({str, int, type(None)})
"""The value types a flat mapping's content key holds as they are, with its types alongside."""


class _Uncacheable(Exception):
    """A value whose content `content_key` can't express: it is never kept."""


def content_key(value: object) -> Hashable | None:
    """A hashable value equal for two JSON-able values only if their contents are the same, types included.

    Caches of what is derived from a stored dict (a record's check, its decoding) are keyed by this, never by the
    dict's identity: a dict edited in place gets another key, so what was derived from it before is not reused.
    Types are part of the key because `1`, `1.0` and `True` compare equal but encode differently. A flat mapping of
    strings, integers and `None` (what a change record is) is keyed at the cost of three tuples; anything else is
    walked. `None` for a value that isn't made of dicts with string keys, lists, strings, numbers, booleans and
    `None`: it is never cached.

    ```python
    from pydantic_ai_append._cache import content_key

    print(content_key({'v': 1}) == content_key({'v': 1}), content_key({'v': 1}) == content_key({'v': True}))
    #> True False
    ```
    """
    if type(value) is dict:
        mapping = cast('dict[object, object]', value)
        values = tuple(mapping.values())
        types = tuple(map(type, values))
        if _FLAT.issuperset(types) and _KEYS.issuperset(map(type, mapping)):
            return (tuple(mapping), values, types)
    try:
        return _walked(cast('object', value))
    except (_Uncacheable, RecursionError):
        # Nested past what the interpreter walks (or holding itself): no JSON load gives that, so it isn't kept.
        return None


_KEYS = frozenset({str})
_SCALARS = frozenset({int, float, bool})


def _walked(value: object) -> Hashable:
    kind = type(value)
    if kind is str or value is None:
        return cast('Hashable', value)
    if kind in _SCALARS:
        return (kind, value)
    if kind is list:
        return (list, tuple(_walked(item) for item in cast('list[object]', value)))
    if kind is dict:
        mapping = cast('dict[object, object]', value)
        if not _KEYS.issuperset(map(type, mapping)):
            raise _Uncacheable
        return (dict, tuple((name, _walked(item)) for name, item in mapping.items()))
    raise _Uncacheable


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
