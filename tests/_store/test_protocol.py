"""What a record store is (`_store.protocol`), on both of the package's stores: what each keeps, for how long,
within which bounds, and how a failing or a user's own store is called.

These call the stores the way `AppendInstructions` does, through `as_async`, since what they keep is only the
capability's opaque entry: each store is shown to give back the entry last saved, whole, from asyncio tasks and
threads, and to expire and bound what it keeps. Clocks are injected, so nothing sleeps. What only one store does is
in `test_memory.py` and `test_sqlite.py`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError

from pydantic_ai_append import (
    InMemoryRecordStore,
    RecordEntry,
    RecordStore,
    RecordStoreError,
    SQLiteRecordStore,
    SyncRecordStore,
)
from pydantic_ai_append._store.protocol import as_async

DAY = 24 * 3600


@dataclass
class Clock:
    """A clock the test moves by hand."""

    now: float = 1_000.0

    def __call__(self) -> float:
        return self.now


def entry(n: int = 0) -> RecordEntry:
    """An entry of the shape the capability writes."""
    carrier = {'part_kind': 'system-prompt', 'content': '', 'metadata': {'pydantic_ai_append': {'v': 1, 'n': n}}}
    return {'v': 1, 'carriers': [{'key': f'key-{n}', 'message': n, 'part': 0, 'carrier': carrier}]}


StoreFactory = Callable[[Path, Clock, int], RecordStore]


def in_memory(path: Path, clock: Clock, max_entries: int) -> RecordStore:
    return as_async(InMemoryRecordStore(clock=clock, max_entries=max_entries))


def in_sqlite(path: Path, clock: Clock, max_entries: int) -> RecordStore:
    return as_async(SQLiteRecordStore(path / 'records.sqlite', clock=clock, max_entries=max_entries))


STORES = pytest.mark.parametrize('make', [in_memory, in_sqlite], ids=['memory', 'sqlite'])

pytestmark = pytest.mark.anyio


@STORES
async def test_a_store_gives_back_the_entry_last_saved(make: StoreFactory, tmp_path: Path):
    store = make(tmp_path, Clock(), 10)
    assert await store.load('a') is None
    await store.save('a', entry(1))
    await store.save('b', entry(2))
    assert await store.load('a') == entry(1)
    await store.save('a', entry(3))
    assert (await store.load('a'), await store.load('b'), await store.load('c')) == (entry(3), entry(2), None)


@STORES
async def test_an_entry_changed_after_saving_or_loading_changes_nothing_kept(make: StoreFactory, tmp_path: Path):
    store = make(tmp_path, Clock(), 10)
    saved = entry(1)
    await store.save('a', saved)
    saved['carriers'].clear()
    loaded = await store.load('a')
    assert loaded is not None
    loaded['v'] = 99
    assert await store.load('a') == entry(1)


@STORES
async def test_an_entry_expires_a_ttl_after_its_last_write_and_reads_do_not_extend_it(
    make: StoreFactory, tmp_path: Path
):
    clock = Clock()
    store = make(tmp_path, clock, 10)
    await store.save('a', entry(1))
    await store.save('b', entry(2))
    clock.now += 7 * DAY
    assert await store.load('a') == entry(1)  # exactly 7 days: still kept
    await store.save('b', entry(3))
    clock.now += 1
    assert (await store.load('a'), await store.load('b')) == (None, entry(3))
    clock.now += 7 * DAY
    assert await store.load('b') is None


@STORES
async def test_past_max_entries_the_entry_written_longest_ago_goes_first(make: StoreFactory, tmp_path: Path):
    clock = Clock()
    store = make(tmp_path, clock, 2)
    await store.save('a', entry(1))
    await store.save('b', entry(2))
    await store.save('a', entry(3))  # now `b` was written longest ago
    await store.save('c', entry(4))
    assert [await store.load(name) for name in 'abc'] == [entry(3), None, entry(4)]


@STORES
async def test_many_tasks_and_threads_writing_at_once_lose_no_write(make: StoreFactory, tmp_path: Path):
    store = make(tmp_path, Clock(), 1_000)

    async def write(name: str, n: int) -> None:
        await store.save(name, entry(n))
        await store.save(name, entry(n + 1))

    async with anyio.create_task_group() as tasks:
        for n in range(50):
            tasks.start_soon(write, f'task-{n}', n)

    def write_in_thread(thread: int) -> None:
        for n in range(20):
            asyncio.run(write(f'thread-{thread}-{n}', n))

    threads = [threading.Thread(target=write_in_thread, args=(thread,)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loaded = [await store.load(f'task-{n}') for n in range(50)]
    loaded += [await store.load(f'thread-{thread}-{n}') for thread in range(4) for n in range(20)]
    assert loaded == [entry(n + 1) for n in range(50)] + [entry(n + 1) for _ in range(4) for n in range(20)]


@dataclass
class FailingStore:
    """A user's store whose database is down."""

    async def load(self, conversation_id: str) -> RecordEntry | None:
        raise ConnectionError('connection refused')

    async def save(self, conversation_id: str, entry: RecordEntry) -> None:
        raise ConnectionError('connection refused')


async def test_a_failing_store_raises_an_error_naming_the_conversation_and_the_cause():
    store = as_async(FailingStore())
    with pytest.raises(RecordStoreError) as loading:
        await store.load('conversation-7')
    assert str(loading.value) == snapshot(
        "The record store failed to load the records 'conversation-7': "
        "ConnectionError('connection refused'). Fix the store, or pass `on_store_error='new_window'` to continue "
        'such a request with a new window.'
    )
    assert isinstance(loading.value, UserError)
    assert isinstance(loading.value.__cause__, ConnectionError)
    with pytest.raises(RecordStoreError) as saving:
        await store.save('conversation-7', entry())
    assert (saving.value.key, saving.value.action) == ('conversation-7', 'save')


@STORES
async def test_an_entry_that_is_not_json_fails_to_save(make: StoreFactory, tmp_path: Path):
    store = make(tmp_path, Clock(), 10)
    with pytest.raises(RecordStoreError) as raised:
        await store.save('a', {'when': timedelta(1)})
    assert isinstance(raised.value.__cause__, TypeError)
    assert await store.load('a') is None


@dataclass
class SyncDictStore:
    """A user's own store with blocking methods, which records the threads it is called in."""

    entries: dict[str, RecordEntry]
    threads: set[int]

    def load(self, conversation_id: str) -> RecordEntry | None:
        self.threads.add(threading.get_ident())
        return self.entries.get(conversation_id)

    def save(self, conversation_id: str, entry: RecordEntry) -> None:
        self.threads.add(threading.get_ident())
        self.entries[conversation_id] = entry


@dataclass
class AsyncDictStore:
    """A user's own store with `async` methods."""

    entries: dict[str, RecordEntry]

    async def load(self, conversation_id: str) -> RecordEntry | None:
        return self.entries.get(conversation_id)

    async def save(self, conversation_id: str, entry: RecordEntry) -> None:
        self.entries[conversation_id] = entry


async def test_a_users_sync_store_runs_in_a_worker_thread():
    sync_store: SyncRecordStore = SyncDictStore({}, set())
    store = as_async(sync_store)
    await store.save('a', entry(1))
    assert await store.load('a') == entry(1)
    assert isinstance(sync_store, SyncDictStore)
    assert sync_store.threads and threading.get_ident() not in sync_store.threads


async def test_a_users_async_store_is_awaited_in_the_event_loop():
    async_store: RecordStore = AsyncDictStore({})
    store = as_async(async_store)
    await store.save('a', entry(1))
    assert await store.load('a') == entry(1)
    assert as_async(store) is store


async def test_a_store_loading_something_other_than_a_dict_fails():
    store = as_async(AsyncDictStore({'a': ['not', 'a', 'dict']}))  # pyright: ignore[reportArgumentType]
    with pytest.raises(RecordStoreError) as raised:
        await store.load('a')
    assert str(raised.value.__cause__) == snapshot('`load` returned list, not a dict or `None`')


def test_the_packages_stores_satisfy_the_protocols(tmp_path: Path):
    # Checked by pyright: the assignments fail type checking if a store stops matching its protocol.
    memory: RecordStore = InMemoryRecordStore()
    sqlite: SyncRecordStore = SQLiteRecordStore(tmp_path / 'records.sqlite')
    assert (memory, sqlite) == (memory, sqlite)


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'ttl': timedelta(0)}, 'A record store takes a positive `ttl`, not datetime.timedelta(0).'),
        ({'max_entries': 0}, 'A record store takes a positive whole number for `max_entries`, not 0.'),
        ({'max_bytes': True}, 'A record store takes a positive whole number for `max_bytes`, not True.'),
    ],
)
def test_a_store_refuses_bounds_that_are_not_positive(options: dict[str, object], message: str):
    with pytest.raises(UserError) as raised:
        InMemoryRecordStore(**options)  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == message
