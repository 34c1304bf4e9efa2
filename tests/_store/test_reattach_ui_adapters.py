"""A window kept behind Pydantic AI's UI adapters, through their real run path, over ten turns with a tool loop.

The client holds only what the adapter dumps (no part metadata), so every record the agent reads back comes from the
server's record store. On every turn the instructions are byte-identical, each block's value as the model reads it
is the turn's, and each request starts with the previous one, byte for byte. Without a store (or with the store
emptied) each turn opens a new window; two worker processes sharing one SQLite file keep one window between them.
The server names each turn's user as the tenant: another user who sends a chat's id and first message gets a window
of their own.
AG-UI runs where `ag-ui-protocol` is installed (the dev environments have it).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from pydantic_ai_append import InMemoryRecordStore, NoTenantWarning, RecordStore, SQLiteRecordStore, SyncRecordStore
from pydantic_ai_append._wire.segments import segments
from pydantic_ai_append.testing import PromptWire, assert_prefix_stable

from ..ui_chat import (
    TOOL_TURNS,
    TURNS,
    Board,
    Protocol,
    SystemPrompt,
    chat_agent,
    converse,
    instructions,
    model_views,
    serve,
    shared_store_turn,
)

PROTOCOLS = [pytest.param('vercel', id='vercel'), pytest.param('ag-ui', id='ag-ui')]
SYSTEM_PROMPTS = [pytest.param('server', id='server-prompt'), pytest.param('client', id='client-prompt')]


@pytest.fixture(params=PROTOCOLS)
def protocol(request: pytest.FixtureRequest) -> Protocol:
    if request.param == 'ag-ui':
        pytest.importorskip('ag_ui')
    return request.param


def in_process(
    prompt_wire: PromptWire,
    record_store: RecordStore | SyncRecordStore | None,
    protocol: Protocol,
    system_prompt: SystemPrompt,
    conversation_store: Any = None,
) -> Any:
    """A server in this process: one agent, every turn, its request bodies taken from `prompt_wire`."""
    agent = chat_agent(prompt_wire, record_store)

    def turn_server(turn: int, client: list[Any]) -> tuple[list[Any], list[bytes]]:
        before = len(prompt_wire.exchanges)
        client = asyncio.run(serve(agent, protocol, 'chat-1', client, turn, system_prompt, conversation_store))
        return client, [exchange.request_body for exchange in prompt_wire.exchanges[before:]]

    return turn_server


def sent(
    record_store: RecordStore | SyncRecordStore | None,
    protocol: Protocol,
    system_prompt: SystemPrompt = 'server',
    *,
    between: Callable[[int], None] = lambda turn: None,
    conversation_store: Any = None,
) -> list[bytes]:
    """Every request body of the ten turns through a server in this process."""
    prompt_wire = PromptWire()
    try:
        server = in_process(prompt_wire, record_store, protocol, system_prompt, conversation_store)
        return converse(server, between=between)
    finally:
        prompt_wire.close()


def requests_per_turn() -> list[int]:
    return [2 if turn in TOOL_TURNS else 1 for turn in range(TURNS)]


def assert_one_window(bodies: list[bytes]) -> None:
    """One window over every turn: the same instructions, each block's value the turn's, the prefix kept."""
    assert len(bodies) == sum(requests_per_turn())
    assert len({instructions(body) for body in bodies}) == 1
    # Each turn's requests, the second of a tool turn after the tool ticked its task off.
    boards = [Board(turn, looked_up=bool(at)) for turn, count in enumerate(requests_per_turn()) for at in range(count)]
    assert [model_views(body) for body in bodies] == [{'todos': board.todos, 'notes': board.notes} for board in boards]
    assert_prefix_stable([segments('openai-chat', body) for body in bodies])


@pytest.mark.parametrize('system_prompt', SYSTEM_PROMPTS)
def test_one_window_over_ten_turns_through_the_adapter(protocol: Protocol, system_prompt: SystemPrompt):
    assert_one_window(sent(InMemoryRecordStore(), protocol, system_prompt))


def test_the_default_store_keeps_the_window(protocol: Protocol):
    from pydantic_ai_append._store.memory import PROCESS_STORE

    assert_one_window(sent(PROCESS_STORE, protocol))


def test_without_a_store_every_turn_opens_a_window(protocol: Protocol):
    bodies = sent(None, protocol)
    # The first request of each turn states the blocks afresh: one instruction text per turn (the tool loop's second
    # request continues its turn's window, whose records the run still holds).
    assert len({instructions(body) for body in bodies}) == TURNS


def test_a_store_emptied_between_turns_opens_a_new_window_and_no_error(protocol: Protocol, tmp_path: Path):
    path = tmp_path / 'records.sqlite'

    def empty(turn: int) -> None:
        if turn == 4:
            with closing(sqlite3.connect(path)) as connection, connection:
                connection.execute('DELETE FROM records')

    bodies = sent(SQLiteRecordStore(path), protocol, between=empty)
    first = [instructions(body) for body in bodies]
    at = sum(requests_per_turn()[:4])
    assert len(set(first[:at])) == 1 and len(set(first[at:])) == 1 and first[0] != first[at]
    assert model_views(bodies[-1]) == {'todos': Board(TURNS - 1).todos, 'notes': Board(TURNS - 1).notes}
    assert_prefix_stable([segments('openai-chat', body) for body in bodies], new_windows=[at])


@pytest.fixture
def two_processes() -> Iterator[tuple[ProcessPoolExecutor, ProcessPoolExecutor]]:
    context = multiprocessing.get_context('spawn')
    with ProcessPoolExecutor(1, mp_context=context) as first, ProcessPoolExecutor(1, mp_context=context) as second:
        yield first, second


def test_two_processes_sharing_one_sqlite_store_alternate_turns(
    protocol: Protocol, tmp_path: Path, two_processes: tuple[ProcessPoolExecutor, ProcessPoolExecutor]
):
    path = str(tmp_path / 'records.sqlite')

    def turn_server(turn: int, client: list[Any]) -> tuple[list[Any], list[bytes]]:
        with warnings.catch_warnings():
            # Logfire, configured by other tests of this process, says its configuration doesn't go to the workers.
            warnings.filterwarnings('ignore', 'The Logfire configuration cannot be pickled', UserWarning)
            future = two_processes[turn % 2].submit(shared_store_turn, path, protocol, client, turn)
        return future.result()

    assert_one_window(converse(turn_server))


@pytest.mark.parametrize(
    'record_store', [pytest.param(None, id='no-record-store'), pytest.param(InMemoryRecordStore(), id='record-store')]
)
def test_history_in_the_adapters_conversation_store_keeps_the_window(
    protocol: Protocol, record_store: InMemoryRecordStore | None
):
    # Pydantic AI 2.68 keeps the history on the server, records and all; under `manage_system_prompt='server'` its
    # `ReinjectSystemPrompt` would drop them from the history each run starts with.
    conversation_store = pytest.importorskip('pydantic_ai.conversation_store')
    store = conversation_store.InMemoryConversationStore()
    assert_one_window(sent(record_store, protocol, conversation_store=store))


def run_turns(agent: Any, prompt_wire: PromptWire, protocol: Protocol, turns: list[tuple[str, str, int]]) -> list[Any]:
    """Each turn `(user, chat id, turn)` served in order, each user's client keeping its chats' histories; the
    request bodies of each turn."""
    clients: dict[tuple[str, str], list[Any]] = {}
    sent_by_turn: list[Any] = []
    for user, chat_id, turn in turns:
        before = len(prompt_wire.exchanges)
        client = clients.get((user, chat_id), [])
        clients[user, chat_id] = asyncio.run(serve(agent, protocol, chat_id, client, turn, 'server', user=user))
        sent_by_turn.append([exchange.request_body for exchange in prompt_wire.exchanges[before:]])
    return sent_by_turn


@pytest.mark.parametrize('signing_key', [pytest.param(None, id='unsigned'), pytest.param('server-secret', id='signed')])
def test_another_users_chat_id_and_first_message_get_a_window_of_their_own(protocol: Protocol, signing_key: str | None):
    prompt_wire = PromptWire()
    try:
        agent = chat_agent(prompt_wire, InMemoryRecordStore(), signing_key=signing_key)
        alice = [('alice', 'chat-1', turn) for turn in range(3)]
        # Mallory sends alice's chat id and alice's first message as her own first turn, then a chat of her own.
        *_, replayed, fresh, alice_next = run_turns(
            agent,
            prompt_wire,
            protocol,
            [*alice, ('mallory', 'chat-1', 0), ('mallory', 'chat-2', 0), ('alice', 'chat-1', 3)],
        )
    finally:
        prompt_wire.close()
    (body,) = replayed
    assert b'alice' not in body
    assert model_views(body) == {'todos': Board(0, user='mallory').todos, 'notes': Board(0).notes}
    assert replayed == fresh
    # Alice's window is hers still: her next turn carries it on.
    assert instructions(alice_next[0]) != instructions(body)
    assert model_views(alice_next[0]) == {'todos': Board(3).todos, 'notes': Board(3).notes}
    assert 'task 0 of alice' in instructions(alice_next[0])


def test_a_server_naming_no_tenant_is_warned_once(protocol: Protocol):
    prompt_wire = PromptWire()
    try:
        agent = chat_agent(prompt_wire, InMemoryRecordStore(), tenant=None)
        with pytest.warns(NoTenantWarning) as warned:
            run_turns(
                agent, prompt_wire, protocol, [('alice', 'chat-1', 0), ('alice', 'chat-1', 1), ('bob', 'chat-2', 0)]
            )
    finally:
        prompt_wire.close()
    assert [str(warning.message) for warning in warned] == [
        (
            "`AppendInstructions` 'chat' keys its record store by conversation id alone: a client that sends another "
            "user's conversation id and first message gets that user's records. Pass `tenant=`, a function of the run "
            "naming its authenticated user (as a UI adapter's `conversation_scope`)."
        )
    ]
