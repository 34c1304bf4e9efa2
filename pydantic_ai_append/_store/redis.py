"""`RedisRecordStore`: a record store in Redis, for server processes on several machines behind a load balancer.

What a record store is, and the protocol this one implements (`RecordStore`), are in `_store`. The client is the
`redis` package's asyncio one, imported when a store is made, so the package needs it only with the `redis` extra.
"""

from __future__ import annotations

import asyncio
import json
import math
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic_ai.exceptions import UserError

from .protocol import DEFAULT_TTL, RecordEntry, check_bounds

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

# One step, so a save is whole or absent and the bound holds with many servers writing at once: the entry with its
# expiry, its place in the index of entries by the time of their last write (Redis's clock, which every server
# shares), then the index cut to what is neither expired nor past `max_entries`, deleting the entries cut for the
# bound. MULTI/EXEC can't do it: which entries to delete is read in the same step. A score is at least one more than
# the highest so far, so entries written in the same millisecond still go in the order they were written.
_SAVE = """
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local newest = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]
if newest and tonumber(newest) >= now then now = tonumber(newest) + 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now, KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - tonumber(ARGV[2])))
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if over > 0 then
    local oldest = redis.call('ZPOPMIN', KEYS[2], over)
    for at = 1, #oldest, 2 do redis.call('DEL', oldest[at]) end
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
"""


class RedisRecordStore:
    """The records of each conversation, in Redis: shared by every server process that reaches it, on any machine.

    A `RecordStore` on the `redis` package's asyncio client (the `redis` extra), for a Redis server of release 5 or
    later (not a cluster). An entry is its JSON text under `<prefix>entry:<key>`, written with Redis's own expiry
    (`SET ... PX`), so Redis drops it `ttl` after its last write; a read doesn't extend it. A save is one Lua script,
    atomic: it writes the entry, and keeps the most recent `max_entries` in a sorted set, `<prefix>entries`, deleting
    those written longest ago past the bound. An entry whose JSON is larger than `max_entry_bytes` fails to save, and
    the one before it stays. What Redis itself holds at most is its own `maxmemory`; every key the store writes
    expires, so a `volatile-*` eviction policy applies to them.

    A `redis.asyncio` client belongs to the event loop it connects in, so the store makes one from `url` for each
    event loop that calls it; `aclose` closes the running loop's, as a server shutting down does. A loop closed
    without it (`asyncio.run` per call) has its client dropped when the next loop's is made. Failures are the
    client's errors (a Redis that is down refuses the connection at once), and a Redis that hangs is bounded by the
    capability's `store_timeout`. A save that times out after Redis took its command may still land: whole, as the
    script is one step.

    ```python
    from datetime import timedelta

    from pydantic_ai_append import AppendInstructions, RedisRecordStore

    store = RedisRecordStore('redis://localhost:6379/0', ttl=timedelta(days=1))  # connects on its first call
    context = AppendInstructions[None](id='todos', record_store=store, tenant=lambda ctx: 'alice')
    print(store.entry_key('todos@alice:chat-1'))
    #> pydantic-ai-append:entry:todos@alice:chat-1
    ```
    """

    def __init__(
        self,
        url: str = 'redis://localhost:6379/0',
        *,
        prefix: str = 'pydantic-ai-append:',
        ttl: timedelta = DEFAULT_TTL,
        max_entries: int = 100_000,
        max_entry_bytes: int = 16 * 1024 * 1024,
        **client_options: Any,
    ) -> None:
        """A store in the Redis at `url` (`redis://`, `rediss://` or `unix://`), its keys under `prefix`.

        Args:
            url: Where Redis is, with its database, credentials and options, as `redis.asyncio.Redis.from_url`
                reads it.
            prefix: What every key the store writes starts with, to keep them apart from other keys in the database.
            ttl: How long after its last write an entry is kept.
            max_entries: The most entries the store keeps.
            max_entry_bytes: The largest entry's JSON text, in bytes.
            **client_options: More options for `redis.asyncio.Redis.from_url`, such as `retry` or `ssl_ca_certs`.

        Raises:
            UserError: If the `redis` package isn't installed, or `ttl` or a bound is not positive.
        """
        check_bounds(ttl, max_entries=max_entries, max_entry_bytes=max_entry_bytes)
        try:
            import redis.asyncio
        except ImportError as error:
            raise UserError(
                '`RedisRecordStore` needs the `redis` package: install `pydantic-ai-append[redis]`.'
            ) from error
        self.url = url
        """Where Redis is."""
        self.prefix = prefix
        """What every key the store writes starts with."""
        self.ttl = ttl
        """How long after its last write an entry is kept."""
        self.max_entries = max_entries
        """The most entries the store keeps."""
        self.max_entry_bytes = max_entry_bytes
        """The largest entry's JSON text, in bytes."""
        self._client_class = redis.asyncio.Redis
        self._client_options = client_options
        # A client, and the save script registered with it, per event loop: a client's connections can't move. Held
        # strongly (a client refers to its loop) until the loop is found closed.
        self._clients: dict[asyncio.AbstractEventLoop, tuple[Redis, AsyncScript]] = {}

    def entry_key(self, key: str) -> str:
        """The Redis key of the entry the capability names `key`."""
        return f'{self.prefix}entry:{key}'

    def _client(self) -> tuple[Redis, AsyncScript]:
        loop = asyncio.get_running_loop()
        if (made := self._clients.get(loop)) is None:
            # A loop closed without `aclose` (`asyncio.run` per call) leaves its client: dropped, not kept for ever;
            # its connections close as Python collects them.
            for other in list(self._clients):  # a copy: another thread may add its loop's meanwhile
                if other.is_closed():
                    self._clients.pop(other, None)
            # redis-py leaves the options of `from_url` untyped.
            client = self._client_class.from_url(self.url, **self._client_options)  # pyright: ignore[reportUnknownMemberType]
            made = self._clients[loop] = (client, client.register_script(_SAVE))
        return made

    async def load(self, key: str) -> RecordEntry | None:
        """The entry last saved for `key`, or `None` if there is none or it expired."""
        client, _ = self._client()
        text: bytes | str | None = await client.get(self.entry_key(key))
        return json.loads(text) if text is not None else None

    async def save(self, key: str, entry: RecordEntry) -> None:
        """Keep `entry` for `key` in one step, deleting the entries written longest ago past `max_entries`.

        Raises:
            TypeError: If `entry` is not JSON-able.
            ValueError: If `entry`'s JSON text is larger than `max_entry_bytes`.
            redis.RedisError: If Redis fails; nothing is written then.
        """
        text = json.dumps(entry)  # ASCII, so its length is its size in bytes
        if len(text) > self.max_entry_bytes:
            raise ValueError(
                f'An entry of {len(text)} bytes is larger than `max_entry_bytes` ({self.max_entry_bytes}).'
            )
        _, script = self._client()
        ttl = math.ceil(self.ttl / timedelta(milliseconds=1))
        await script(keys=[self.entry_key(key), f'{self.prefix}entries'], args=[text, ttl, self.max_entries])

    async def aclose(self) -> None:
        """Close the connections of the running event loop's client, if it has one."""
        made = self._clients.pop(asyncio.get_running_loop(), None)
        if made is not None:
            await made[0].aclose()
