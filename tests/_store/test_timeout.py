"""Store calls that don't answer (`store_timeout`): a hung load fails like a failing one, under `on_store_error`, and a
hung or failing save never holds back the run's result nor loses it; a save that answers late still lands.

The stores here wait for an event the test sets, or one that never fires, with a small timeout. What is checked is
what has happened when a run returns, never how long anything took. A save runs after its run returns, so the tests
wait for it the way a conversation's next turn does: a load of the same entry waits for it (`CheckedStore.saved`).
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Literal

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, RecordEntry, RecordStore, RecordStoreError, SQLiteRecordStore
from pydantic_ai_append._store.protocol import CheckedStore, as_async

from .test_reattach import without_metadata

pytestmark = pytest.mark.anyio

KEY = 'ctx@alice:c1'


class HungStore:
    """An async store whose first call of each action named in `hung` waits for `answer`, which the test may never
    set."""

    def __init__(self, *hung: Literal['load', 'save']) -> None:
        self.entries: dict[str, RecordEntry] = {}
        self.hung = set(hung)
        self.answer = asyncio.Event()
        self.timed_out: list[str] = []

    async def _wait(self, action: Literal['load', 'save']) -> None:
        if action in self.hung:
            self.hung.remove(action)
            try:
                await self.answer.wait()
            except asyncio.CancelledError:
                self.timed_out.append(action)
                raise

    async def load(self, key: str) -> RecordEntry | None:
        await self._wait('load')
        return self.entries.get(key)

    async def save(self, key: str, entry: RecordEntry) -> None:
        await self._wait('save')
        self.entries[key] = entry


class Chat:
    """An agent with one block, whose model calls' instructions the test sees, in the conversation `c1`."""

    def __init__(self, store: RecordStore | CheckedStore, **options: object) -> None:
        self.value = 'step 1'
        self.seen: list[str | None] = []
        context = AppendInstructions[None](id='ctx', record_store=store, tenant=lambda ctx: 'alice', **options)  # pyright: ignore[reportArgumentType]
        context.instructions(name='state')(lambda: self.value)
        self.agent = Agent(FunctionModel(self.reply), deps_type=type(None), capabilities=[context])

    def reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(info.instructions)
        return ModelResponse(parts=[TextPart('OK.')])

    async def run(self, history: list[ModelMessage] | None = None) -> list[ModelMessage]:
        result = await self.agent.run('Hi', message_history=history, conversation_id='c1')
        return result.all_messages()


async def test_a_load_that_never_answers_fails_the_run_before_the_model_is_called():
    chat = Chat(HungStore('load'), store_timeout=0.01)
    with pytest.raises(RecordStoreError) as raised:
        await chat.run(without_metadata(await Chat(HungStore()).run()))
    assert str(raised.value) == snapshot(
        "The record store failed to load the records 'ctx@alice:c1': TimeoutError('`load` gave no answer in 0.01 s (`store_timeout`)'). Fix the store, or pass `on_store_error='new_window'` to continue such a request with a new window."
    )
    assert chat.seen == []


async def test_with_new_window_a_load_that_never_answers_warns_and_the_run_goes_on():
    chat = Chat(HungStore('load'), store_timeout=0.01, on_store_error='new_window')
    with pytest.warns(UserWarning) as warned:
        history = await chat.run(without_metadata(await Chat(HungStore()).run()))
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            "The record store failed to load the records 'ctx@alice:c1': TimeoutError('`load` gave no answer in 0.01 s (`store_timeout`)'). The request goes on with a new window."
        ]
    )
    assert len(chat.seen) == 1 and [message.kind for message in history][-1] == 'response'


@pytest.mark.parametrize('on_store_error', ['raise', 'new_window'])
async def test_a_save_that_never_answers_times_out_after_the_run_returned_and_warns(on_store_error: str):
    hung = HungStore('save')
    # Given already checked, the capability calls this very object, whose saves the test waits for.
    store = as_async(hung, timeout=0.01)
    chat = Chat(store, on_store_error=on_store_error)
    history = await chat.run()
    # The run is done, its save still waiting: it can't have held the result back, and hasn't timed out yet.
    assert [message.kind for message in history] == ['request', 'response']
    assert hung.timed_out == []
    with pytest.warns(UserWarning) as warned:
        await store.saved(KEY)
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            "The record store failed to save the records 'ctx@alice:c1': TimeoutError('`save` gave no answer in 0.01 s (`store_timeout`)'). The next turn opens a new window."
        ]
    )
    assert (hung.timed_out, hung.entries) == (['save'], {})


async def test_a_save_that_answers_late_lands_and_the_next_turn_reads_it():
    hung = HungStore('save')
    store = as_async(hung)  # the default timeout, which the save never reaches
    chat = Chat(store)
    history = await chat.run()
    assert hung.entries == {}  # the result is back, and the save still waits
    hung.answer.set()
    chat.value = 'step 2'
    # The next turn's load waits for the save, and reads it: the same window, step 2 appended.
    await chat.run(without_metadata(history))
    assert list(hung.entries) == [KEY]
    assert len(chat.seen) == 2 and chat.seen[0] == chat.seen[1]


async def test_a_turn_with_sqlites_write_lock_held_elsewhere_returns_and_saves_once_it_is_free(tmp_path: Path):
    path = tmp_path / 'records.sqlite'
    store = as_async(SQLiteRecordStore(path))
    chat = Chat(store)
    history = await chat.run()
    await store.saved(KEY)
    first = SQLiteRecordStore(path).load(KEY)
    with closing(sqlite3.connect(path, isolation_level=None)) as other:
        other.execute('BEGIN IMMEDIATE')  # another process writing
        chat.value = 'step 2'
        # The load reads past the lock (WAL); the save waits for it, after the run has returned.
        history = await chat.run(without_metadata(history))
        assert SQLiteRecordStore(path).load(KEY) == first
        other.execute('COMMIT')
    await store.saved(KEY)
    assert SQLiteRecordStore(path).load(KEY) != first
    assert len(chat.seen) == 2 and chat.seen[0] == chat.seen[1]


async def test_saves_of_one_entry_land_in_the_order_they_were_made():
    hung = HungStore('save')
    store = as_async(hung)
    store.save_later(KEY, {'turn': 1})  # waits for `answer`
    store.save_later(KEY, {'turn': 2})  # waits for the first
    hung.answer.set()
    await store.saved(KEY)
    assert hung.entries == {KEY: {'turn': 2}}


async def test_a_stores_own_timeout_is_its_error_not_store_timeout():
    class SlowDatabase:
        async def load(self, key: str) -> RecordEntry | None:
            raise TimeoutError('the database timed out')

        async def save(self, key: str, entry: RecordEntry) -> None:
            raise NotImplementedError

    with pytest.raises(RecordStoreError) as raised:
        await as_async(SlowDatabase()).load(KEY)
    assert repr(raised.value.__cause__) == "TimeoutError('the database timed out')"


def test_an_event_loop_closed_before_an_async_save_ends_warns():
    """`asyncio.run` per turn: the loop cancels what still runs when it closes."""
    hung = HungStore('save')
    store = as_async(hung)

    async def turn() -> None:
        store.save_later(KEY, {'turn': 1})

    with pytest.warns(UserWarning) as warned:
        asyncio.run(turn())
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            "The event loop closed before the record store saved the records 'ctx@alice:c1'. The next turn opens a new window; keep the loop running until the save ends."
        ]
    )
    assert hung.timed_out == ['save']


async def test_a_blocking_saves_thread_ends_its_write_when_the_save_is_cancelled():
    written = threading.Event()
    go_on = threading.Event()

    class BlockingStore:
        def load(self, key: str) -> RecordEntry | None:
            return None

        def save(self, key: str, entry: RecordEntry) -> None:
            go_on.wait()
            written.set()

    store = as_async(BlockingStore())
    saving = store.save_later(KEY, {'turn': 1})  # its thread starts at once; the task a loop would cancel
    saving.cancel()
    go_on.set()
    await store.saved(KEY)
    assert saving.cancelled()
    await asyncio.to_thread(written.wait)  # no warning: the thread wrote


async def test_a_save_running_in_another_event_loop_is_not_waited_for():
    """Two event loops (threads, each with its own) share the capability's store: each waits for its own saves."""
    hung = HungStore('save')
    store = as_async(hung)
    store.save_later(KEY, {'loop': 'this'})  # waits for `answer`, in this loop
    while 'save' in hung.hung:  # until this loop's save is the one that hangs, not the other's
        await asyncio.sleep(0)

    async def other_loop() -> RecordEntry | None:
        store.save_later(KEY, {'loop': 'other'})  # not after this loop's save
        await store.saved(KEY)
        return await store.load(KEY)

    assert await asyncio.to_thread(asyncio.run, other_loop()) == {'loop': 'other'}
    hung.answer.set()
    await store.saved(KEY)
    assert hung.entries == {KEY: {'loop': 'this'}}


@pytest.mark.parametrize('timeout', [0, -1, math.nan, math.inf, True, '5', None])
def test_store_timeout_takes_a_positive_number_of_seconds(timeout: object):
    with pytest.raises(UserError) as raised:
        AppendInstructions[None](id='ctx', store_timeout=timeout)  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == (
        f'`AppendInstructions` option `store_timeout` takes a positive number of seconds, such as 5, not {timeout!r}.'
    )


def test_a_spec_sets_store_timeout():
    assert AppendInstructions.from_spec('ctx', store_timeout=0.5).store_timeout == 0.5
