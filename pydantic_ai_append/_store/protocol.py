"""The server-side record store: each conversation's records kept where a client can't write them, or lose them.

A window's records travel in the `metadata` of carrier parts in message history (`_history`). The history an app
gets back from a client may have lost them: a UI adapter that drops part metadata, a client that strips system
prompts, records forged or missing. Read back from that history alone, such a conversation opens a new window on
every request. A record store keeps each window's records on the server, and `AppendInstructions` reads them back
from it when the history has lost them. A client can only send history, so it can't write records in the store.

The store keeps one entry per key: a JSON-able dict the capability writes whole, and reads back whole. The key is
the capability's id, the run's tenant and its conversation id, `<capability id>@<tenant>:<conversation id>`, so two
agents on one conversation keep theirs apart, and no tenant reads another's (`tenant`); without a tenant it is
`<capability id>:<conversation id>`. A store doesn't look inside an entry beyond measuring its size; the capability
checks what it reads as it checks history.

Expiry: an entry expires `ttl` (7 days unless set) after its last write, and reads as missing from then on. Reads
don't extend it: an entry is written when the conversation's records change, and an expired one only opens a new
window. Each store is also bounded, dropping the entries written longest ago first.

Four stores come with the package:

- `InMemoryRecordStore`: the default, for one process; forgotten on restart.
- `SQLiteRecordStore`: a file, shared by the processes of one machine, and kept across restarts.
- `RedisRecordStore`: a Redis, shared by server processes on several machines (the `redis` extra).
- Your own, for another database: implement `RecordStore` (two `async` methods) or `SyncRecordStore` (the same two,
  plain), and pass it to the capability as `record_store`. `save` writes the entry whole, in one step (a Redis
  `SET`, a Postgres `INSERT ... ON CONFLICT (key) DO UPDATE`); `load` returns it, or `None`. Expiry is the
  database's own job (Redis `SET ... EX`, a scheduled `DELETE` of old rows); a store that never expires entries is
  correct, only unbounded. Raise from either method when the database fails: a failed load raises
  `RecordStoreError` (or opens a new window, if so configured), and a failed save warns.

Each call has a timeout (`store_timeout`, 5 seconds unless set): a call that gives no answer by then fails like one
that raised. A load comes before the run's first request, so it holds the turn until it answers or times out. A save
comes after the run, and doesn't hold it: it runs in a task of the run's event loop while the run returns its result,
and a later load of the same entry from that loop waits for it first, so a conversation's next turn reads what the
turn before it saved.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Literal, Protocol, TypeAlias, cast

from pydantic_ai.exceptions import UserError

RecordEntry: TypeAlias = dict[str, Any]
"""What a store keeps for one conversation: a JSON-able dict, opaque to the store, written and read back whole."""

OnStoreError: TypeAlias = Literal['raise', 'new_window']
"""What a failing store does to a request: raise `RecordStoreError`, or let it continue with a new window."""

DEFAULT_TTL = timedelta(days=7)
"""How long after its last write an entry is kept by default."""

DEFAULT_STORE_TIMEOUT = 5.0
"""How long, in seconds, the capability waits for a store's `load` or `save` unless told otherwise: far longer than
a working store takes (microseconds in memory, milliseconds for SQLite or Redis), and as long as SQLite waits for
another writer's lock."""


class RecordStore(Protocol):
    """A store of each conversation's records, with `async` methods: what the capability calls.

    A user's own store needs only the two methods; this one keeps its entries in a dict:

    ```python
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from pydantic_ai_append import AppendInstructions, RecordEntry, strip_records


    class DictStore:
        def __init__(self) -> None:
            self.entries: dict[str, RecordEntry] = {}

        async def load(self, key: str) -> RecordEntry | None:
            return self.entries.get(key)

        async def save(self, key: str, entry: RecordEntry) -> None:
            self.entries[key] = entry


    store = DictStore()
    # In a server, the tenant is the authenticated user: `lambda ctx: ctx.deps.user_id`.
    context = AppendInstructions[None](id='ctx', record_store=store, tenant=lambda ctx: 'alice')
    context.instructions(name='state')(lambda: 'step 1')
    agent = Agent(TestModel(), capabilities=[context])
    first = agent.run_sync('Hi', conversation_id='conversation-1')  # saved after the run returns its result
    # The next turn, its history without records as a UI adapter loads it, waits for that save, and reads it.
    agent.run_sync('And now?', message_history=strip_records(first.all_messages()), conversation_id='conversation-1')
    print(list(store.entries), len(store.entries['ctx@alice:conversation-1']['carriers']))
    #> ['ctx@alice:conversation-1'] 1
    ```
    """

    async def load(self, key: str, /) -> RecordEntry | None:
        """The entry last saved for `key`, or `None` if there is none (or it expired)."""

    async def save(self, key: str, entry: RecordEntry, /) -> None:
        """Keep `entry` for `key` in place of any before it, whole or not at all."""


class SyncRecordStore(Protocol):
    """A store of each conversation's records whose methods block: the capability runs them in a worker thread.

    A store calling a blocking client (`sqlite3`, `psycopg`, `redis.Redis`) implements this one:

    ```python
    import threading

    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from pydantic_ai_append import AppendInstructions, RecordEntry, strip_records


    class DictStore:
        def __init__(self) -> None:
            self.entries: dict[str, RecordEntry] = {}
            self.lock = threading.Lock()  # its methods run in worker threads

        def load(self, key: str) -> RecordEntry | None:
            with self.lock:
                return self.entries.get(key)

        def save(self, key: str, entry: RecordEntry) -> None:
            with self.lock:
                self.entries[key] = entry


    store = DictStore()
    context = AppendInstructions[None](id='ctx', record_store=store, tenant=lambda ctx: 'alice')
    context.instructions(name='state')(lambda: 'step 1')
    agent = Agent(TestModel(), capabilities=[context])
    first = agent.run_sync('Hi', conversation_id='conversation-1')  # saved after the run returns its result
    # The next turn, its history without records as a UI adapter loads it, waits for that save, and reads it.
    agent.run_sync('And now?', message_history=strip_records(first.all_messages()), conversation_id='conversation-1')
    print(list(store.entries))
    #> ['ctx@alice:conversation-1']
    ```
    """

    def load(self, key: str, /) -> RecordEntry | None:
        """The entry last saved for `key`, or `None` if there is none (or it expired)."""

    def save(self, key: str, entry: RecordEntry, /) -> None:
        """Keep `entry` for `key` in place of any before it, whole or not at all."""


class RecordStoreError(UserError):
    """A record store failed to load or save a conversation's records; the store's own error is its `__cause__`.

    It subclasses [`UserError`][pydantic_ai.exceptions.UserError], as the store is the app's to fix.
    """

    key: str
    """The entry the store failed to load or save: `<capability id>@<tenant>:<conversation id>`."""

    action: Literal['load', 'save']
    """What the store failed to do."""

    def __init__(self, key: str, action: Literal['load', 'save'], cause: BaseException) -> None:
        self.key = key
        self.action = action
        self.failure = f'The record store failed to {action} the records {key!r}: {_described(cause)}.'
        """What failed, without the advice the message adds."""
        super().__init__(
            f"{self.failure} Fix the store, or pass `on_store_error='new_window'` to continue such a request with a "
            'new window.'
        )


def _described(error: BaseException) -> str:
    """`error` as `repr` names it, or by its type and message where its `repr` leaves the message out (redis-py 8's
    errors: `network:ConnectionError`).
    """
    named = repr(error)
    return named if str(error) in named else f'{type(error).__name__}({str(error)!r})'


def checked_store(store: object, on_store_error: object, timeout: object) -> CheckedStore | None:
    """The options `record_store`, `on_store_error` and `store_timeout` of `AppendInstructions` checked, and the store
    `as_async`.

    Raises:
        UserError: If the store has no `load` and `save`, `on_store_error` is neither option, or `timeout` is not a
            positive number of seconds.
    """
    if store is not None and not all(callable(getattr(store, method, None)) for method in ('load', 'save')):
        raise UserError(
            '`AppendInstructions` option `record_store` takes a `RecordStore` or `SyncRecordStore` (anything with '
            f'`load` and `save`), or `None`, not {store!r}.'
        )
    if on_store_error not in ('raise', 'new_window'):
        raise UserError(
            f"`AppendInstructions` option `on_store_error` takes 'raise' or 'new_window', not {on_store_error!r}."
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise UserError(
            f'`AppendInstructions` option `store_timeout` takes a positive number of seconds, such as 5, not '
            f'{timeout!r}.'
        )
    return as_async(cast('RecordStore', store), float(timeout)) if store is not None else None


def as_async(store: RecordStore | SyncRecordStore, timeout: float = DEFAULT_STORE_TIMEOUT) -> CheckedStore:
    """`store` as the capability calls it: async, its blocking methods run in a worker thread, each call given
    `timeout` seconds, its failures raised as `RecordStoreError`.

    A store whose `load` is an `async def` is taken for a `RecordStore`, any other for a `SyncRecordStore`.
    """
    if isinstance(store, CheckedStore):
        return store
    return CheckedStore(store, inspect.iscoroutinefunction(store.load), timeout)


class CheckedStore:
    """A user's store as the capability calls it (`as_async`), with the saves it has running in the background."""

    def __init__(self, store: RecordStore | SyncRecordStore, is_async: bool, timeout: float) -> None:
        self.store = store
        self.is_async = is_async
        self.timeout = timeout
        # The save of each key still running in each event loop, so the loop's next load of the key waits for it, and
        # its next save follows it (another loop's tasks can't be awaited). Held here so a task isn't collected while
        # it runs; it removes itself when done.
        self._saving: dict[tuple[asyncio.AbstractEventLoop, str], asyncio.Task[None]] = {}

    async def _call(self, action: Literal['load', 'save'], key: str, *args: Any) -> Any:
        method: Callable[..., Any] = getattr(self.store, action)
        # A thread isn't stopped by a timeout or a cancellation: the call runs to its end, so a write is whole or
        # absent either way.
        return await self._answer(
            action, method(key, *args) if self.is_async else asyncio.to_thread(method, key, *args)
        )

    async def _answer(self, action: Literal['load', 'save'], call: Awaitable[Any]) -> Any:
        """What `call` answers, within the timeout."""
        scope = asyncio.timeout(self.timeout)
        try:
            async with scope:
                return await call
        except TimeoutError as error:
            if not scope.expired():
                raise  # the store's own
            raise TimeoutError(f'`{action}` gave no answer in {self.timeout:g} s (`store_timeout`)') from error

    async def load(self, key: str) -> RecordEntry | None:
        await self.saved(key)
        try:
            entry: object = await self._call('load', key)
            if entry is not None and not isinstance(entry, dict):
                raise TypeError(f'`load` returned {type(entry).__name__}, not a dict or `None`')
        except Exception as error:
            raise RecordStoreError(key, 'load', error) from error
        return cast('RecordEntry | None', entry)

    async def save(self, key: str, entry: RecordEntry) -> None:
        try:
            await self._call('save', key, entry)
        except Exception as error:
            raise RecordStoreError(key, 'save', error) from error

    def save_later(self, key: str, entry: RecordEntry) -> asyncio.Task[None]:
        """Save `entry` for `key` in a task of the running event loop, and return the task; a failure warns, as the run
        that made the entry has returned its result by then.

        An async store's save follows the save of `key` still running in the loop. A blocking store's starts in its
        thread at once: a loop closed right after the run (`asyncio.run`) cancels tasks that haven't run yet, but waits
        for its threads.
        """
        loop = asyncio.get_running_loop()
        if self.is_async:
            saving = self._save_after(self._saving.get((loop, key)), key, entry)
        else:
            started = loop.run_in_executor(None, cast('SyncRecordStore', self.store).save, key, entry)
            # Shielded: cancelling the executor's future would drop the call if no thread has taken it yet.
            saving = self._save_in_thread(key, asyncio.shield(started))
        task = loop.create_task(saving)
        self._saving[loop, key] = task
        task.add_done_callback(functools.partial(self._forget, (loop, key)))
        return task

    def _forget(self, saving: tuple[asyncio.AbstractEventLoop, str], task: asyncio.Task[None]) -> None:
        if self._saving.get(saving) is task:
            del self._saving[saving]

    async def _save_after(self, earlier: asyncio.Task[None] | None, key: str, entry: RecordEntry) -> None:
        if earlier is not None:
            await asyncio.wait([earlier])
        try:
            await self.save(key, entry)
        except RecordStoreError as error:
            warnings.warn(f'{error.failure} The next turn opens a new window.', UserWarning, stacklevel=1)
        except asyncio.CancelledError:
            warnings.warn(
                f'The event loop closed before the record store saved the records {key!r}. The next turn opens a new '
                'window; keep the loop running until the save ends.',
                UserWarning,
                stacklevel=1,
            )
            raise

    async def _save_in_thread(self, key: str, started: Awaitable[None]) -> None:
        try:
            try:
                await self._answer('save', started)
            except Exception as error:
                raise RecordStoreError(key, 'save', error) from error
        except RecordStoreError as error:
            warnings.warn(f'{error.failure} The next turn opens a new window.', UserWarning, stacklevel=1)

    async def saved(self, key: str) -> None:
        """Wait for the save of `key` still running in this event loop, if any: it ends within its timeout."""
        saving = self._saving.get((asyncio.get_running_loop(), key))
        if saving is not None:
            await asyncio.wait([saving])


def check_bounds(ttl: timedelta, **bounds: int) -> None:
    if ttl <= timedelta(0):
        raise UserError(f'A record store takes a positive `ttl`, not {ttl!r}.')
    for name, value in bounds.items():
        if type(value) is not int or value <= 0:
            raise UserError(f'A record store takes a positive whole number for `{name}`, not {value!r}.')
