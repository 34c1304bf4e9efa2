"""`InMemoryRecordStore` on its own: expired entries dropped on a write, and its bound in bytes. What every store keeps,
and for how long, is in `test_protocol.py`.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append import InMemoryRecordStore, RecordStoreError
from pydantic_ai_append._store.protocol import as_async

from .test_protocol import Clock, entry

pytestmark = pytest.mark.anyio


async def test_expired_entries_leave_the_memory_store_on_a_write():
    clock = Clock()
    store = InMemoryRecordStore(clock=clock, ttl=timedelta(hours=1))
    for name in 'abc':
        await store.save(name, entry())
    clock.now += 3601
    await store.save('d', entry())
    assert len(store) == 1


async def test_the_memory_store_keeps_at_most_max_bytes_and_refuses_a_larger_entry():
    size = len('{"text": ""}') + 100
    store = InMemoryRecordStore(max_bytes=2 * size + 10)
    for name in 'abc':
        await store.save(name, {'text': name * 100})
    assert (len(store), await store.load('a')) == (2, None)
    with pytest.raises(RecordStoreError) as raised:
        await as_async(store).save('d', {'text': 'd' * 1_000})
    assert str(raised.value.__cause__) == snapshot('An entry of 1012 bytes is larger than `max_bytes` (234).')
    assert (len(store), await store.load('c')) == (2, {'text': 'c' * 100})
