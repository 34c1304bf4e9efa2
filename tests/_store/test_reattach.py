"""Records kept in a store and put back into history (`_store/reattach`).

Records put back into history that came through Pydantic AI's UI adapters, which drop every part's metadata.

Each conversation runs a real agent over several turns; between turns the history goes to the protocol and back, as
a chat server's client would hold it, and the entry `records_entry` made of the history before the dump stands in
for the server's record store. AG-UI needs `ag-ui-protocol`, which the dev environments don't install.

`AppendInstructions` with a record store: records put back into history that lost them, and a failing store.

A run whose history holds no record reads the conversation's entry and puts its carriers back; a run that adds a
record saves the history's. The hostile-history cases of `test_history.py` that lose records continue their
window from the store; the others are what history says, as without one. A failing store raises `RecordStoreError`
or, with `on_store_error='new_window'`, warns and lets the run go on; nothing of the run is lost either way.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import pydantic_ai.messages
import pytest
from inline_snapshot import snapshot
from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, ReinjectSystemPrompt
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import SubmitMessage, UIMessage

from pydantic_ai_append import (
    AppendInstructions,
    InMemoryRecordStore,
    RecordEntry,
    RecordStoreError,
    instruction_records,
    strip_records,
)
from pydantic_ai_append._store.protocol import as_async
from pydantic_ai_append._store.reattach import content_keys, reattach, records_entry

from ..test_history import EDITS, Built, Edit, build, outcomes

RoundTrip = Callable[[list[ModelMessage]], list[ModelMessage]]
PROMPTS = ['What is next?', 'Look it up.', 'ok', 'ok', 'Anything else?']


class Conversation:
    """An agent whose one append-mode block changes every turn, and the instructions of each model call."""

    def __init__(self, *extra: AbstractCapability[None]) -> None:
        self.turn = 0
        self.instructions: list[str | None] = []
        context = AppendInstructions[None](id='ctx', tenant=lambda ctx: 'alice')
        context.instructions(name='state')(lambda: f'- [ ] step {self.turn}')
        capabilities: list[AbstractCapability[None]] = [context, *extra]
        self.agent = Agent(
            FunctionModel(self.play),
            deps_type=type(None),
            system_prompt='You are a todo bot.',
            capabilities=capabilities,
        )
        self.agent.tool_plain(self.lookup)

    def play(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.instructions.append(info.instructions)
        if self.turn == 1 and not isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse(parts=[ToolCallPart('lookup', '{"q": "todos"}', tool_call_id='call_1')])
        return ModelResponse(parts=[TextPart(f'Answer {self.turn}.')])

    @staticmethod
    def lookup(q: str) -> str:
        return f'found {q}'

    def run(self, between: Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]]) -> list[str | None]:
        """Run every turn, passing the history through `between` (given the entry of the history before it)."""
        history: list[ModelMessage] = []
        for self.turn, prompt in enumerate(PROMPTS):
            sent = between(history, records_entry(history)) if history else None
            history = self.agent.run_sync(prompt, message_history=sent).all_messages()
        return self.instructions


def vercel_dumped(messages: list[ModelMessage]) -> list[ModelMessage]:
    dumped = [
        message.model_dump(mode='json', by_alias=True, exclude_none=True)
        for message in VercelAIAdapter.dump_messages(messages)
    ]
    client = [UIMessage.model_validate(json.loads(json.dumps(message))) for message in dumped]
    return VercelAIAdapter.load_messages(client)


def vercel_sanitized(messages: list[ModelMessage]) -> list[ModelMessage]:
    adapter = VercelAIAdapter(
        agent=Agent('test'), run_input=SubmitMessage(id='c1', messages=[]), manage_system_prompt='server'
    )
    with warnings.catch_warnings():
        # It warns that it stripped the system prompts, as a server in this mode means it to.
        warnings.filterwarnings(
            'ignore', '(Parts carrying the system voice|Client-submitted system prompts) were', UserWarning
        )
        return adapter.sanitize_messages(vercel_dumped(messages))


def agui(messages: list[ModelMessage]) -> list[ModelMessage]:
    pytest.importorskip('ag_ui')
    from ag_ui.core import Message  # pyright: ignore[reportMissingImports, reportUnknownVariableType]
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    # Untyped where `ag-ui-protocol` isn't installed, as in the dev environments pyright runs in.
    protocol: TypeAdapter[list[Any]] = TypeAdapter(list[Message])  # pyright: ignore[reportUnknownArgumentType]
    adapter: Any = AGUIAdapter
    client = protocol.validate_json(protocol.dump_json(adapter.dump_messages(messages), by_alias=True))
    return adapter.load_messages(client)


def with_reattach(round_trip: RoundTrip) -> Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]]:
    return lambda history, entry: reattach(round_trip(history), entry)


def without_reattach(round_trip: RoundTrip) -> Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]]:
    return lambda history, entry: round_trip(history)


ROUND_TRIPS = [
    pytest.param(vercel_dumped, id='vercel'),
    pytest.param(vercel_sanitized, id='vercel-server'),
    pytest.param(agui, id='ag-ui'),
]


@pytest.mark.parametrize('round_trip', ROUND_TRIPS)
def test_reattached_records_keep_the_instructions_byte_identical(round_trip: RoundTrip):
    sent = Conversation().run(with_reattach(round_trip))
    assert len(sent) == len(PROMPTS) + 1
    assert set(sent) == {sent[0]}


@pytest.mark.parametrize('round_trip', ROUND_TRIPS)
def test_without_reattach_every_turn_opens_a_window(round_trip: RoundTrip):
    sent = Conversation().run(without_reattach(round_trip))
    assert len(set(sent)) == len(PROMPTS)


def test_carriers_in_history_survive_reinject_system_prompt():
    """What the adapters' run adds with `manage_system_prompt='server'`, which drops the system prompt parts a run
    starts with: the plugin's carriers are made other parts first."""
    sent = Conversation(ReinjectSystemPrompt(replace_existing=True)).run(with_reattach(vercel_sanitized))
    assert len(set(sent)) == 1


def edited(history: list[ModelMessage], entry: dict[str, Any]) -> list[ModelMessage]:
    loaded = vercel_dumped(history)
    if len(loaded) == 8:
        first = loaded[0]
        assert isinstance(first, ModelRequest)
        parts = [UserPromptPart('What is first?') if isinstance(part, UserPromptPart) else part for part in first.parts]
        loaded[0] = ModelRequest(parts=parts)
    return reattach(loaded, entry)


def dropped(history: list[ModelMessage], entry: dict[str, Any]) -> list[ModelMessage]:
    loaded = vercel_dumped(history)
    first = loaded[0].parts
    once = len(loaded) == 8 and any(isinstance(part, UserPromptPart) and part.content == PROMPTS[0] for part in first)
    return reattach(loaded[2:] if once else loaded, entry)


@pytest.mark.parametrize('between', [edited, dropped])
def test_an_edit_or_a_dropped_message_opens_a_window_there(
    between: Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]],
):
    sent = Conversation().run(between)
    # Calls: turn 1, turn 2 (a tool call and after it), turn 3; the edit comes before turn 4.
    assert set(sent[:4]) == {sent[0]}
    assert sent[4] != sent[0]
    assert sent[5] == sent[4]


def test_an_empty_entry_leaves_no_records_and_no_remnants():
    first = Conversation().agent.run_sync('Hi').all_messages()
    loaded = vercel_dumped(first)
    assert records_entry(loaded) == {'format': 1, 'carriers': []}
    for entry in [{}, {'format': 99, 'carriers': records_entry(first)['carriers']}, records_entry(loaded)]:
        restored = reattach(loaded, entry)
        assert instruction_records(restored) == []
        assert [part for message in restored for part in message.parts if isinstance(part, SystemPromptPart)] == [
            SystemPromptPart('You are a todo bot.', timestamp=loaded[0].parts[0].timestamp)  # pyright: ignore
        ]


def test_reattach_puts_back_exactly_what_was_there():
    conversation = Conversation()
    conversation.run(with_reattach(vercel_dumped))
    full = conversation.agent.run_sync('Done?').all_messages()
    restored = reattach(vercel_dumped(full), records_entry(full))
    assert instruction_records(restored) == instruction_records(full)
    assert [[type(part) for part in message.parts] for message in restored] == [
        [type(part) for part in message.parts] for message in full
    ]


def retry(content: str, **tool: str) -> RetryPromptPart:  # pyright: ignore[reportDeprecated]
    """A retry as 2.58 writes them; 2.68 deprecates the part, and writes other parts that load the same."""
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', '`RetryPromptPart` is deprecated')
        return RetryPromptPart(content, **tool)  # pyright: ignore[reportArgumentType, reportDeprecated]


def test_keys_are_kept_by_a_round_trip_and_chained():
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart('Be kind.'), UserPromptPart('ok')]),
        ModelResponse(parts=[TextPart('a'), TextPart('b'), ToolCallPart('t', '{"b": 2, "a": 1}', tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('t', {'r': [1, 2]}, tool_call_id='c1')]),
        ModelResponse(parts=[ToolCallPart('u', 'not json', tool_call_id='c2'), ToolCallPart('v', None, 'c3')]),
        ModelRequest(parts=[ToolReturnPart('u', 'bad', tool_call_id='c2'), ToolReturnPart('v', 1, 'c3')]),
        ModelResponse(parts=[TextPart('ok')]),
        ModelRequest(
            parts=[UserPromptPart(['x', ImageUrl('https://e.com/a.png'), BinaryContent(b'a', media_type='image/png')])]
        ),
        ModelResponse(parts=[TextPart('')]),
        ModelRequest(parts=[UserPromptPart('ok')]),
    ]
    keys = content_keys(history)
    assert content_keys(vercel_dumped(history)) == keys
    assert len(set(keys)) == len(keys)
    # A tool result is keyed by its call alone (AG-UI changes its type); another call is another key.
    assert content_keys([*history[:2], ModelRequest(parts=[ToolReturnPart('t', '{"r": [1, 2]}', 'c1')])])[2] == keys[2]
    assert content_keys([*history[:2], ModelRequest(parts=[ToolReturnPart('t', {'r': [1, 2]}, 'c9')])])[2] != keys[2]
    split = [history[0], ModelRequest(parts=[UserPromptPart('more')])]
    assert content_keys(split)[0] == content_keys(split)[1]


def test_other_user_content_and_retries_without_a_tool_are_keyed():
    history: Sequence[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(['x', CachePoint()]), retry('try again')]),
    ]
    assert content_keys(history) != content_keys([ModelRequest(parts=[UserPromptPart(['x'])])])


def test_retries_keep_their_keys_on_2_68():
    """2.58's adapters load a retry as the text it sends the model, which opens a new window there."""
    if not hasattr(pydantic_ai.messages, 'RetryFeedbackPart'):
        pytest.skip('2.58 has no RetryFeedbackPart')
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('hi')]),
        ModelResponse(parts=[ToolCallPart('u', {}, tool_call_id='c2')]),
        ModelRequest(parts=[retry('bad', tool_name='u', tool_call_id='c2')]),
        ModelResponse(parts=[TextPart('a')]),
        ModelRequest(parts=[retry('try again')]),
    ]
    assert content_keys(vercel_dumped(history)) == content_keys(history)


def test_carriers_go_back_in_their_places():
    """Beside a system prompt of the user's and each other, where the adapters keep none of them in place."""

    A, B = '<context id="a">\n1\n</context>', '<context id="b">\n2\n</context>'

    def carrier(text: str) -> SystemPromptPart:
        return SystemPromptPart(text, metadata={'pydantic_ai_append': {'kind': text}})

    parts = [SystemPromptPart('Be kind.'), carrier(''), UserPromptPart('hi'), carrier(A), carrier(B)]
    history: list[ModelMessage] = [ModelRequest(parts=parts)]
    loaded = [
        ModelRequest(
            parts=[
                SystemPromptPart(part.content) if isinstance(part, SystemPromptPart) and part.metadata else part
                for part in parts
            ]
        )
    ]
    assert reattach(loaded, records_entry(history)) == history


@pytest.mark.parametrize('case', ['metadata-dropped', 'stripped', 'remnant-planted', 'text-edited-last'])
def test_records_lost_from_history_come_back_from_the_store(case: str):
    edits: dict[str, Edit] = {**EDITS, 'stripped': lambda built: strip_records(built.history)}
    built: list[Built] = []
    for signed in (False, True):
        store = Store()
        built.append(build(signed=signed, record_store=store))
        # What a server behind a UI saved after the history's last turn.
        store.entries['todos@alice:c1'] = records_entry(built[-1].history)
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
    """An agent with one block, whose value and whose model calls' instructions the test sees; its runs are alice's."""

    def __init__(self, store: Store, capability_id: str = 'ctx', **options: Any) -> None:
        self.value = 'step 1'
        self.seen: list[str | None] = []
        # Given already checked, the capability calls this very object, whose saves the test can wait for.
        self.store = as_async(store)
        self.key = f'{capability_id}@alice:conversation-1'
        context = AppendInstructions[None](
            id=capability_id, record_store=self.store, tenant=lambda ctx: 'alice', **options
        )
        context.instructions(name='state')(lambda: self.value)
        self.agent = Agent(FunctionModel(self.reply), deps_type=type(None), capabilities=[context])

    def reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(info.instructions)
        return ModelResponse(parts=[TextPart('OK.')])

    def run(self, history: list[ModelMessage] | None = None) -> list[ModelMessage]:
        messages = self.agent.run_sync('Hi', message_history=history, conversation_id='conversation-1').all_messages()
        # The save runs after the run returns its result; the next turn would wait for it, the test waits here.
        asyncio.get_event_loop().run_until_complete(self.store.saved(self.key))
        return messages


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
    history = chat.run()  # no history, in a conversation the app named: its first turn, saved
    assert store.saves == 1
    history = chat.run(without_metadata(history))  # put back, and nothing added
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
    assert list(store.entries) == ['ctx@alice:conversation-1']
    assert len(set(chat.seen)) == 1


def test_two_capabilities_on_one_conversation_keep_their_entries_apart():
    store = Store()
    chat, other = Chat(store), Chat(store, capability_id='titles')
    history = chat.run(without_metadata(chat.run()))
    other.run(without_metadata(history))  # another agent on the same conversation, whose records are its own
    chat.value = 'step 2'
    chat.run(without_metadata(history))
    assert sorted(store.entries) == ['ctx@alice:conversation-1', 'titles@alice:conversation-1']
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
    assert (raised.value.key, raised.value.action) == ('ctx@alice:conversation-1', 'load')
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
            "The record store failed to load the records 'ctx@alice:conversation-1': ConnectionError('the database is down'). The request goes on with a new window."
        ]
    )
    assert chat.seen[-1] is not None and 'step 2' in chat.seen[-1] and chat.seen[0] != chat.seen[-1]


@pytest.mark.parametrize('on_store_error', ['raise', 'new_window'])
def test_a_failed_save_warns_and_the_run_returns_its_result(on_store_error: Literal['raise', 'new_window']):
    chat = Chat(Store('save'), on_store_error=on_store_error)
    with pytest.warns(UserWarning) as warned:
        history = chat.run()
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            "The record store failed to save the records 'ctx@alice:conversation-1': ConnectionError('the database is down'). The next turn opens a new window."
        ]
    )
    assert [message.kind for message in history] == ['request', 'response']


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
