"""`AppendInstructions` with a record store: records put back into history that lost them, and a failing store.

A run whose history holds no record reads the conversation's entry and puts its carriers back; a run that adds a
record saves the history's. The hostile-history cases of `test_hostile_history.py` that lose records continue their
window from the store; the others are what history says, as without one. A failing store raises `RecordStoreError`
or, with `on_store_error='new_window'`, warns and lets the run go on; nothing of the run is lost either way.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, InMemoryRecordStore, RecordEntry, RecordStoreError, strip_records
from pydantic_ai_append._store.reattach import records_entry

from .test_hostile_history import EDITS, Built, Edit, build, outcomes


@pytest.mark.parametrize('case', ['metadata-dropped', 'stripped', 'remnant-planted', 'text-edited-last'])
def test_records_lost_from_history_come_back_from_the_store(case: str):
    edits: dict[str, Edit] = {**EDITS, 'stripped': lambda built: strip_records(built.history)}
    built: list[Built] = []
    for signed in (False, True):
        store = Store()
        built.append(build(signed=signed, record_store=store))
        # What a server behind a UI saved after the history's last turn.
        store.entries['todos:c1'] = records_entry(built[-1].history)
    expected = snapshot(
        {
            'metadata-dropped': 'continued: full v0, diff v1, diff v2 | nothing',
            'stripped': 'continued: full v0, diff v1, diff v2 | nothing',
            # History that holds records is read as it is, as without a store: the store isn't asked.
            'remnant-planted': 'new',
            'text-edited-last': 'new',
        }
    )[case]
    assert outcomes(edits[case], built[0], built[1]) == expected


class Store:
    """A blocking store that counts its calls, and fails the ones named in `failing`."""

    def __init__(self, *failing: str) -> None:
        self.entries: dict[str, RecordEntry] = {}
        self.failing = set(failing)
        self.saves = 0

    def load(self, conversation_id: str) -> RecordEntry | None:
        if 'load' in self.failing:
            raise ConnectionError('the database is down')
        return self.entries.get(conversation_id)

    def save(self, conversation_id: str, entry: RecordEntry) -> None:
        if 'save' in self.failing:
            raise ConnectionError('the database is down')
        self.saves += 1
        self.entries[conversation_id] = entry


class Chat:
    """An agent with one block, whose value and whose model calls' instructions the test sees."""

    def __init__(self, store: Store, capability_id: str = 'ctx', **options: Any) -> None:
        self.value = 'step 1'
        self.seen: list[str | None] = []
        context = AppendInstructions[None](id=capability_id, record_store=store, **options)
        context.instructions(name='state')(lambda: self.value)
        self.agent = Agent(FunctionModel(self.reply), deps_type=type(None), capabilities=[context])

    def reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(info.instructions)
        return ModelResponse(parts=[TextPart('OK.')])

    def run(self, history: list[ModelMessage] | None = None) -> list[ModelMessage]:
        return self.agent.run_sync('Hi', message_history=history, conversation_id='conversation-1').all_messages()


def without_metadata(messages: list[ModelMessage]) -> list[ModelMessage]:
    """`messages` as a UI adapter gives them back: every part's metadata gone."""
    dumped = ModelMessagesTypeAdapter.dump_python(messages, mode='json')
    for message in dumped:
        for part in message['parts']:
            part.pop('metadata', None)
    return ModelMessagesTypeAdapter.validate_python(dumped)


def test_a_run_uses_the_store_only_when_its_history_came_without_records():
    store = Store()
    chat = Chat(store)
    history = chat.run()  # no history: nothing to keep the records for
    assert store.saves == 0
    history = chat.run(without_metadata(history))  # lost, and nothing stored: a new window, saved
    assert store.saves == 1
    chat.value = 'step 2'
    history = chat.run(history)  # history kept with its records: the store isn't needed
    assert store.saves == 1
    history = chat.run(without_metadata(history))  # put back from the store (step 1), and step 2 sent again
    assert store.saves == 2
    history = chat.run(without_metadata(history))  # put back, and nothing added
    assert store.saves == 2
    chat.value = 'step 3'
    chat.run(without_metadata(history))
    assert store.saves == 3
    assert list(store.entries) == ['ctx:conversation-1']
    assert len(set(chat.seen)) == 1


def test_two_capabilities_on_one_conversation_keep_their_entries_apart():
    store = Store()
    chat, other = Chat(store), Chat(store, capability_id='titles')
    history = chat.run(without_metadata(chat.run()))
    other.run(without_metadata(history))  # another agent on the same conversation, whose records are its own
    chat.value = 'step 2'
    chat.run(without_metadata(history))
    assert sorted(store.entries) == ['ctx:conversation-1', 'titles:conversation-1']
    assert len(set(chat.seen)) == 1


def lost_history(chat: Chat) -> list[ModelMessage]:
    """A conversation behind a UI after two turns: its records saved, the history without them."""
    return without_metadata(chat.run(without_metadata(chat.run())))


def test_a_failed_load_raises_before_the_model_is_called():
    store = Store()
    chat = Chat(store)
    history = lost_history(chat)
    store.failing.add('load')
    with pytest.raises(RecordStoreError) as raised:
        chat.run(history)
    assert (raised.value.key, raised.value.action) == ('ctx:conversation-1', 'load')
    assert isinstance(raised.value.__cause__, ConnectionError)
    assert len(chat.seen) == 2


def test_with_new_window_a_failed_load_warns_and_the_run_opens_a_window():
    store = Store()
    chat = Chat(store, on_store_error='new_window')
    history = lost_history(chat)
    store.failing.add('load')
    chat.value = 'step 2'
    with pytest.warns(UserWarning) as warned:
        chat.run(history)
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            "The record store failed to load the records 'ctx:conversation-1': ConnectionError('the database is down'). The request goes on with a new window."
        ]
    )
    assert chat.seen[-1] is not None and 'step 2' in chat.seen[-1] and chat.seen[0] != chat.seen[-1]


@pytest.mark.parametrize('on_store_error', ['raise', 'new_window'])
def test_a_failed_save_warns_and_the_run_returns_its_result(on_store_error: Literal['raise', 'new_window']):
    chat = Chat(Store('save'), on_store_error=on_store_error)
    history = chat.run()
    with pytest.warns(UserWarning) as warned:
        history = chat.run(without_metadata(history))
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            "The record store failed to save the records 'ctx:conversation-1': ConnectionError('the database is down'). The next turn opens a new window."
        ]
    )
    assert [message.kind for message in history] == ['request', 'response', 'request', 'response']


def test_bad_store_options_are_refused():
    with pytest.raises(UserError) as raised:
        AppendInstructions[None](id='ctx', record_store='records.sqlite')  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == snapshot(
        "`AppendInstructions` option `record_store` takes a `RecordStore` or `SyncRecordStore` (anything with `load` and `save`), or `None`, not 'records.sqlite'."
    )
    with pytest.raises(UserError) as raised:
        AppendInstructions[None](id='ctx', on_store_error='ignore')  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == snapshot(
        "`AppendInstructions` option `on_store_error` takes 'raise' or 'new_window', not 'ignore'."
    )


def test_a_spec_sets_on_store_error_but_not_a_store():
    assert AppendInstructions.from_spec('ctx', on_store_error='new_window').on_store_error == 'new_window'
    with pytest.raises(UserError) as raised:
        AppendInstructions.from_spec('ctx', record_store=InMemoryRecordStore())
    assert 'record_store' in str(raised.value) and 'a store is a Python object' in str(raised.value)
