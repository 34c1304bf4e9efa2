"""`RedisRecordStore` on its own, against a real `redis-server` each test starts (`redis_server.py`): what it keeps,
Redis's own expiry, its bounds with many writers at once, and its failures. Through an agent behind a UI adapter, with
several server processes and Redis going away, in `test_redis_agent.py`.

The store is called as `AppendInstructions` calls it, through `as_async`. Expiry is Redis's, on Redis's clock, so it
can't be moved by hand: the test that waits for an entry to expire waits for what Redis does, never for a time.
"""

from __future__ import annotations

import asyncio
import gc
import re
import subprocess
import sys
import textwrap
import threading
import warnings
import weakref
from datetime import timedelta

import pytest
import redis
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from pydantic_ai_append import RecordEntry, RecordStore, RecordStoreError, RedisRecordStore
from pydantic_ai_append._store.protocol import as_async

from .redis_server import RedisServer, loopback
from .test_protocol import entry

pytestmark = [pytest.mark.anyio, loopback]

ENTRIES = 'pydantic-ai-append:entries'


async def test_a_redis_store_gives_back_the_entry_last_saved_under_its_prefix(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url)
    checked = as_async(store)
    assert await checked.load('a') is None
    saved = entry(1)
    await checked.save('a', saved)
    await checked.save('b', entry(2))
    saved['carriers'].clear()  # changes nothing kept
    assert await checked.load('a') == entry(1)
    await checked.save('a', entry(3))
    assert (await checked.load('a'), await checked.load('b'), await checked.load('c')) == (entry(3), entry(2), None)
    await store.aclose()
    with redis_server.client() as client:
        assert sorted(client.keys()) == snapshot(
            [b'pydantic-ai-append:entries', b'pydantic-ai-append:entry:a', b'pydantic-ai-append:entry:b']
        )


async def test_an_entry_has_redis_ttl_from_its_last_write_and_a_load_does_not_extend_it(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url, prefix='app:', ttl=timedelta(hours=1))
    await store.save('a', entry(1))
    with redis_server.client() as client:
        written = client.pttl('app:entry:a')
        assert 0 < written <= 3_600_000
        assert 0 < client.pttl('app:entries') <= 3_600_000
        await store.load('a')
        assert client.pttl('app:entry:a') <= written
    await store.aclose()


async def test_redis_drops_an_entry_its_ttl_after_the_last_write(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url, ttl=timedelta(milliseconds=200))
    await store.save('a', entry(1))
    with redis_server.client() as client:
        for _ in range(600):  # until Redis has expired it: its clock, not the test's
            if not client.exists('pydantic-ai-append:entry:a'):
                break
            await asyncio.sleep(0.05)
    assert await store.load('a') is None
    await store.aclose()


async def test_past_max_entries_the_entry_written_longest_ago_goes(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url, max_entries=2)
    await store.save('a', entry(1))
    await store.save('b', entry(2))
    await store.save('a', entry(3))  # now `b` was written longest ago
    await store.save('c', entry(4))
    assert [await store.load(name) for name in 'abc'] == [entry(3), None, entry(4)]
    await store.aclose()
    with redis_server.client() as client:
        assert client.zrange(ENTRIES, 0, -1) == [b'pydantic-ai-append:entry:a', b'pydantic-ai-append:entry:c']


async def test_an_entry_larger_than_max_entry_bytes_fails_to_save_and_the_one_before_stays(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url, max_entry_bytes=200)
    checked = as_async(store)
    await checked.save('a', {'text': 'a'})
    with pytest.raises(RecordStoreError) as raised:
        await checked.save('a', {'text': 'a' * 1_000})
    assert str(raised.value.__cause__) == snapshot('An entry of 1012 bytes is larger than `max_entry_bytes` (200).')
    assert await checked.load('a') == {'text': 'a'}
    await store.aclose()


async def test_an_entry_that_is_not_json_fails_to_save_and_writes_nothing(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url)
    with pytest.raises(RecordStoreError) as raised:
        await as_async(store).save('a', {'when': timedelta(1)})
    assert isinstance(raised.value.__cause__, TypeError)
    await store.aclose()
    with redis_server.client() as client:
        assert client.keys() == []


async def test_many_tasks_and_event_loops_writing_at_once_lose_no_write(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url)

    async def write(name: str, n: int) -> None:
        await store.save(name, entry(n))
        await store.save(name, entry(n + 1))

    await asyncio.gather(*(write(f'task-{n}', n) for n in range(50)))

    async def write_in_own_loop(thread: int) -> None:
        # A client of this loop's own: one made in another loop can't be used here.
        await asyncio.gather(*(write(f'thread-{thread}-{n}', n) for n in range(20)))
        await store.aclose()

    threads = [threading.Thread(target=asyncio.run, args=(write_in_own_loop(thread),)) for thread in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loaded = [await store.load(f'task-{n}') for n in range(50)]
    loaded += [await store.load(f'thread-{thread}-{n}') for thread in range(4) for n in range(20)]
    assert loaded == [entry(n + 1) for n in range(50)] + [entry(n + 1) for _ in range(4) for n in range(20)]
    await store.aclose()


def test_an_event_loop_closed_without_aclose_is_not_kept_by_the_store(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(store.save('a', entry(1)))
    loop.close()  # its client's connection still open
    closed = weakref.ref(loop)
    del loop

    async def load() -> RecordEntry | None:
        try:
            return await store.load('a')  # a client of this loop's own; the closed loop's is dropped
        finally:
            await store.aclose()

    with warnings.catch_warnings():
        # The connection of the dropped client, closed as Python collects it, says it wasn't closed first.
        warnings.simplefilter('ignore', ResourceWarning)
        assert asyncio.run(load()) == entry(1)
        gc.collect()
    assert closed() is None


WRITER = textwrap.dedent("""
    import asyncio
    import sys
    from pydantic_ai_append import RedisRecordStore

    url, prefix = sys.argv[1], sys.argv[2]

    async def main():
        store = RedisRecordStore(url, max_entries=50)
        await asyncio.gather(*(store.save(f'{prefix}-{n}', {'n': n}) for n in range(100)))
        await store.aclose()

    asyncio.run(main())
""")


def test_processes_writing_at_once_keep_max_entries_and_each_kept_entry_whole(redis_server: RedisServer):
    writers = [
        subprocess.Popen([sys.executable, '-c', WRITER, redis_server.url, prefix]) for prefix in ('first', 'second')
    ]
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    with redis_server.client() as client:
        indexed = sorted(client.zrange(ENTRIES, 0, -1))
        kept = sorted(client.keys('pydantic-ai-append:entry:*'))
        # The index and the entries agree: the entries cut for the bound went with their places, in one step.
        assert (len(indexed), indexed) == (50, kept)
        for key in kept:
            name, _, n = key.decode().removeprefix('pydantic-ai-append:entry:').partition('-')
            assert name in ('first', 'second') and client.get(key) == f'{{"n": {n}}}'.encode()


async def test_a_redis_nobody_answers_on_fails_the_call_with_the_clients_error(redis_server: RedisServer):
    url = redis_server.url
    redis_server.stop()
    store = RedisRecordStore(url, retry=Retry(NoBackoff(), 0))
    checked = as_async(store)
    with pytest.raises(RecordStoreError) as loading:
        await checked.load('a')
    with pytest.raises(RecordStoreError) as saving:
        await checked.save('a', entry(1))
    assert [type(error.value.__cause__) for error in (loading, saving)] == [redis.ConnectionError] * 2
    # Named with redis-py's message, which its errors' `repr` leaves out.
    assert re.fullmatch(
        rf"The record store failed to load the records 'a': ConnectionError\(.Error \d+ connecting to "
        rf'127\.0\.0\.1:{redis_server.port}\. .*\)\. Fix the store, .*',
        str(loading.value),
    )
    await store.aclose()


async def test_a_redis_that_hangs_times_out_by_store_timeout(redis_server: RedisServer):
    store = RedisRecordStore(redis_server.url)
    checked = as_async(store, timeout=0.2)
    await checked.save('a', entry(1))
    redis_server.hang()
    with pytest.raises(RecordStoreError) as raised:
        await checked.load('a')
    assert repr(raised.value.__cause__) == snapshot("TimeoutError('`load` gave no answer in 0.2 s (`store_timeout`)')")
    redis_server.resume()
    assert await checked.load('a') == entry(1)  # a new connection, once it answers again
    await store.aclose()


def test_without_the_redis_package_the_store_names_the_extra(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, 'redis.asyncio', None)  # what `import redis.asyncio` finds without it
    with pytest.raises(UserError) as raised:
        RedisRecordStore()
    assert str(raised.value) == snapshot(
        '`RedisRecordStore` needs the `redis` package: install `pydantic-ai-append[redis]`.'
    )


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({'ttl': timedelta(0)}, 'A record store takes a positive `ttl`, not datetime.timedelta(0).'),
        ({'max_entries': 0}, 'A record store takes a positive whole number for `max_entries`, not 0.'),
        ({'max_entry_bytes': 1.5}, 'A record store takes a positive whole number for `max_entry_bytes`, not 1.5.'),
    ],
)
def test_a_redis_store_refuses_bounds_that_are_not_positive(options: dict[str, object], message: str):
    with pytest.raises(UserError) as raised:
        RedisRecordStore(**options)  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == message


def test_the_redis_store_is_a_record_store():
    # Checked by pyright: the assignment fails type checking if the store stops matching the protocol.
    store: RecordStore = RedisRecordStore()
    assert isinstance(store, RedisRecordStore)
