"""The default record store: each conversation's records in this process's memory, bounded and expiring."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import timedelta

from .protocol import DEFAULT_TTL, RecordEntry, check_bounds


class InMemoryRecordStore:
    """The records of each conversation, in this process's memory: the default store, forgotten on restart.

    Safe to share between asyncio tasks and threads. Holds at most `max_entries` entries and `max_bytes` of their JSON
    text, dropping those written longest ago first; an entry larger than `max_bytes` on its own fails to save. Its
    clock is monotonic, so the time of day changing expires nothing.

    ```python
    import asyncio

    from pydantic_ai_append import InMemoryRecordStore

    store = InMemoryRecordStore(max_entries=2)


    for key in ('a', 'b', 'c'):
        asyncio.run(store.save(key, {'format': 1, 'carriers': []}))
    print(asyncio.run(store.load('a')), asyncio.run(store.load('c')))
    #> None {'format': 1, 'carriers': []}
    ```
    """

    def __init__(
        self,
        *,
        ttl: timedelta = DEFAULT_TTL,
        max_entries: int = 10_000,
        max_bytes: int = 64 * 1024 * 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """An empty store whose entries expire `ttl` after their last write, by `clock` (in seconds).

        Raises:
            UserError: If `ttl` or a bound is not positive.
        """
        check_bounds(ttl, max_entries=max_entries, max_bytes=max_bytes)
        self.ttl = ttl
        """How long after its last write an entry is kept."""
        self.max_entries = max_entries
        """The most entries the store holds."""
        self.max_bytes = max_bytes
        """The most bytes of JSON text the store holds."""
        self._clock = clock
        self._lock = threading.Lock()
        # Oldest write first. An entry is kept as its JSON text: a caller changing the dict it saved or loaded
        # changes nothing kept, and the text's length is the size the bounds count.
        self._entries: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    async def load(self, key: str) -> RecordEntry | None:
        """The entry last saved for `key`, or `None` if there is none or it expired."""
        with self._lock:
            self._drop_expired()
            kept = self._entries.get(key)
        return json.loads(kept[0]) if kept is not None else None

    async def save(self, key: str, entry: RecordEntry) -> None:
        """Keep `entry` for `key`, dropping expired entries, then the oldest past a bound.

        Raises:
            TypeError: If `entry` is not JSON-able.
            ValueError: If `entry`'s JSON text is larger than `max_bytes`.
        """
        text = json.dumps(entry)  # ASCII, so its length is its size in bytes
        if len(text) > self.max_bytes:
            raise ValueError(f'An entry of {len(text)} bytes is larger than `max_bytes` ({self.max_bytes}).')
        with self._lock:
            self._drop(key)
            self._entries[key] = (text, self._clock())
            self._bytes += len(text)
            self._drop_expired()
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def _drop_expired(self) -> None:
        # Called with the lock held; the entries written longest ago are first.
        oldest = self._clock() - self.ttl.total_seconds()
        while self._entries and next(iter(self._entries.values()))[1] < oldest:
            self._drop(next(iter(self._entries)))

    def _drop(self, key: str) -> None:
        if (kept := self._entries.pop(key, None)) is not None:
            self._bytes -= len(kept[0])


PROCESS_STORE = InMemoryRecordStore()
"""The store `AppendInstructions` uses unless given another: one for the process, shared by every agent's capability,
each under keys of its own id."""
