"""The tenant in a record store's key (`_store/tenant`), through a hand-written server: history kept as role and text.

The server names each run's user with `tenant=`; a client that sends another user's conversation id and messages
gets a window of its own. Without a tenant the first entry read or written warns, once per capability. The UI
adapters' side is in `test_reattach_ui_adapters.py`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, InMemoryRecordStore, NoTenantWarning, RecordEntry, RecordStore


@dataclass
class Account:
    """The deps: the user the server authenticated, and their notes, which the block shows."""

    user: str
    notes: list[str] = field(default_factory=list[str])


def user_of(ctx: RunContext[Account]) -> str:
    return ctx.deps.user


class DictStore:
    """A store that shows its keys."""

    def __init__(self) -> None:
        self.entries: dict[str, RecordEntry] = {}

    async def load(self, key: str) -> RecordEntry | None:
        return self.entries.get(key)

    async def save(self, key: str, entry: RecordEntry) -> None:
        self.entries[key] = entry


class Server:
    """A chat server that keeps each conversation as (role, text) rows, and the instructions each request sent."""

    def __init__(self, store: RecordStore, *, named: bool = True) -> None:
        self.sent: list[str | None] = []
        tenant = user_of if named else None
        self.context = AppendInstructions[Account](id='assistant', record_store=store, tenant=tenant)
        self.context.instructions(name='notes')(lambda ctx: f'notes of {ctx.deps.user}: ' + '; '.join(ctx.deps.notes))
        self.agent = Agent(FunctionModel(self.reply), deps_type=Account, capabilities=[self.context])

    def reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(info.instructions)
        return ModelResponse(parts=[TextPart('Noted.')])

    def turn(self, account: Account, conversation_id: str, rows: list[tuple[str, str]]) -> None:
        """One turn on the rows the client sent, the new prompt last, as the UI adapters run one."""
        history = [
            ModelRequest(parts=[UserPromptPart(text)]) if role == 'user' else ModelResponse(parts=[TextPart(text)])
            for role, text in rows
        ]
        self.agent.run_sync(message_history=history, conversation_id=conversation_id, deps=account)


def test_another_users_conversation_id_and_messages_get_a_window_of_their_own():
    store = InMemoryRecordStore()
    server = Server(store)
    alice = Account('alice', ['lives in Lisbon'])
    server.turn(alice, 'chat-1', [('user', 'Hi')])
    alice.notes.append('likes tea')
    server.turn(alice, 'chat-1', [('user', 'Hi'), ('assistant', 'Noted.'), ('user', 'I like tea.')])
    server.turn(Account('mallory'), 'chat-1', [('user', 'Hi')])
    assert server.sent[2] == snapshot("""\
<context id="capability:assistant:notes">
notes of mallory: \n\
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""")
    # Alice's window is still hers, and her entry is apart from mallory's.
    server.turn(alice, 'chat-1', [('user', 'Hi'), ('assistant', 'Noted.'), ('user', 'I like tea.')])
    assert server.sent[3] == server.sent[0]
    assert len(store) == 2


def test_tenants_are_kept_apart_whatever_their_names_hold():
    # Written plainly, `a:b` and chat `c` would share the key of `a` and chat `b:c`.
    store = DictStore()
    server = Server(store)
    server.turn(Account('a:b', ['secret']), 'c', [('user', 'Hi')])
    server.turn(Account('a'), 'b:c', [('user', 'Hi')])
    assert server.sent[1] is not None and 'secret' not in server.sent[1]
    assert list(store.entries) == snapshot(['assistant@a%3Ab:c', 'assistant@a:b:c'])


def test_a_store_without_a_tenant_warns_once_per_capability_when_it_gives_a_run_records():
    store = InMemoryRecordStore()
    server = Server(store, named=False)
    later = [('user', 'Hi'), ('assistant', 'Noted.'), ('user', 'More.')]
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter('always')
        # A first turn saves its records and reads none: nothing another user could be given yet.
        server.turn(Account('alice'), 'chat-1', [('user', 'Hi')])
        server.turn(Account('bob'), 'chat-2', [('user', 'Hello')])
        assert warned == []
        server.turn(Account('alice'), 'chat-1', later)
        server.turn(Account('bob'), 'chat-2', [('user', 'Hello'), ('assistant', 'Noted.'), ('user', 'More.')])
    assert [warning.category for warning in warned] == [NoTenantWarning]
    # Another capability on the same store warns at the first entry it gives a run.
    with pytest.warns(NoTenantWarning, match="`AppendInstructions` 'assistant' keys its record store by conversation"):
        Server(store, named=False).turn(Account('alice'), 'chat-1', later)


def test_a_tenant_that_is_not_a_name_is_refused():
    server = Server(InMemoryRecordStore())
    with pytest.raises(UserError) as raised:
        server.turn(Account(''), 'chat-1', [('user', 'Hi')])
    assert str(raised.value) == snapshot(
        "`AppendInstructions` 'assistant' option `tenant` returned '' for conversation 'chat-1'; it must return a non-empty string naming the run's tenant."
    )
    assert server.sent == []


def test_bad_tenant_options_are_refused():
    with pytest.raises(UserError) as raised:
        AppendInstructions[None](id='ctx', tenant='alice')  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == snapshot(
        "`AppendInstructions` option `tenant` takes a function of the run naming its tenant, such as `lambda ctx: ctx.deps.user_id`, or `None`, not 'alice'."
    )
    with pytest.raises(UserError) as raised:
        AppendInstructions.from_spec('ctx', tenant='alice')
    assert str(raised.value) == snapshot(
        "`AppendInstructions` option `tenant` can't come from a spec: a tenant is named by a Python function of the run. Build the capability in Python and pass it in `capabilities=` of `Agent.from_spec` or `Agent.from_file` instead."
    )
