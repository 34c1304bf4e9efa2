"""Lost records named as lost records behind Pydantic AI's UI adapters, by `assert_prefix_stable`, `transcript` and
`check` alike, whether the server has no record store or its store misses (an entry evicted, another conversation id).

The adapters drop the records and, with them, the changes the plugin had delivered in the history, so the next turn
both states the blocks again and leaves out messages. Those messages are all the plugin's changes, which no compaction
leaves out alone; but a window the plugin opens by price stops sending them too, so where re-reading them could have
cost as much as a new window, the cause says it may be either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.vercel_ai import VercelAIAdapter

from pydantic_ai_append import AppendInstructions, CachePrices, InMemoryRecordStore, RecordStore, instruction_records
from pydantic_ai_append._wire.segments import Segment, segments
from pydantic_ai_append.testing import Api, PromptWire, assert_prefix_stable, transcript

from ..check_helpers import CHAT, interaction, run, write_cassette
from ..ui_chat import Board, Protocol, chat_agent, reply, serve
from .test_causes import Deps, agent, todos, why_and_fix

Miss = Literal['no-record-store', 'evicted', 'another-conversation-id']
TURNS = 4
"""Turns 0 to 3: turn 2 calls a tool, whose result ticks its task off, a change delivered after the result."""
EARLIER_WINDOWS = (1, 2, 3)
"""The requests before turn 3's (request 4), allowed to open a window: without a store, turns 0 to 2 open one each."""


@pytest.fixture(params=['vercel', 'ag-ui'])
def protocol(request: pytest.FixtureRequest) -> Protocol:
    if request.param == 'ag-ui':
        pytest.importorskip('ag_ui')
    return request.param


def status_agent(prompt_wire: PromptWire, record_store: RecordStore | None) -> Agent[Board]:
    """A server's agent whose one block says `busy` while the turn's tool has run, `idle` otherwise."""
    context = AppendInstructions[Board](id='chat', record_store=record_store)

    @context.instructions(name='status')
    def status(ctx: RunContext[Board]) -> str:  # pyright: ignore[reportUnusedFunction]
        return 'busy' if ctx.deps.looked_up else 'idle'

    http_client = prompt_wire.http_client(transport=httpx2.MockTransport(reply))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
    agent = Agent(model, deps_type=Board, capabilities=[context])

    @agent.tool
    def lookup(ctx: RunContext[Board], q: str) -> int:  # pyright: ignore[reportUnusedFunction]
        ctx.deps.looked_up = True
        return len(q)

    return agent


def conversation(
    protocol: Protocol, miss: Miss, server_agent: Callable[[PromptWire, RecordStore | None], Agent[Board]] = chat_agent
) -> list[bytes]:
    """Every request body of chat `chat-1`'s four turns, through the adapter, where turn 3 finds no records."""
    # A store of one entry: another chat's turn on the same server evicts `chat-1`'s.
    store = None if miss == 'no-record-store' else InMemoryRecordStore(max_entries=1)
    prompt_wire = PromptWire()
    try:
        agent = server_agent(prompt_wire, store)
        client: list[Any] = []
        bodies: list[bytes] = []
        for turn in range(TURNS):
            if turn == 3 and miss == 'evicted':
                asyncio.run(serve(agent, protocol, 'chat-2', [], 0, 'server'))
            chat_id = 'chat-1b' if turn == 3 and miss == 'another-conversation-id' else 'chat-1'
            before = len(prompt_wire.exchanges)
            client = asyncio.run(serve(agent, protocol, chat_id, client, turn, 'server'))
            bodies.extend(exchange.request_body for exchange in prompt_wire.exchanges[before:])
        return bodies
    finally:
        prompt_wire.close()


def told(text: str) -> list[str]:
    """The `why:` and `fix:` lines of a diagnostic's text."""
    return [line.strip() for line in text.splitlines() if line.strip().startswith(('why: ', 'fix: '))]


def by_assertion(requests: Sequence[Sequence[Segment]]) -> list[str]:
    with pytest.raises(AssertionError) as error:
        assert_prefix_stable(requests, new_windows=EARLIER_WINDOWS)
    return told(str(error.value))


def by_transcript(requests: Sequence[Sequence[Segment]]) -> list[str]:
    return told(transcript(requests).split('\n\nrequest 4: ')[1])


def by_check(bodies: list[bytes], path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    file = write_cassette(path, [interaction(CHAT, body.decode()) for body in bodies])
    allowed = [option for request in EARLIER_WINDOWS for option in ('--allow-new-window', str(request))]
    status, out, _ = run(capsys, str(file), *allowed)
    assert status == 1
    return told(out)


@pytest.mark.parametrize('miss', ['no-record-store', 'evicted', 'another-conversation-id'])
def test_each_diagnostic_names_lost_records_behind_an_adapter(
    protocol: Protocol, miss: Miss, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    bodies = conversation(protocol, miss)
    requests = [segments('openai-chat', body) for body in bodies]
    said = by_assertion(requests)
    assert said == snapshot(
        [
            "why: the blocks were stated again with their current values (block `capability:chat:todos` first), the changes the plugin had delivered are gone from the history, and nothing else changed: the history lost the plugin's records and no record store put them back (`record_store=None`, or its entry for this conversation was evicted, expired or saved under another `conversation_id`), so a new window opened",
            "fix: behind a UI adapter or a store of role and text, keep a record store (`record_store=`: the process's `InMemoryRecordStore` by default; across processes `SQLiteRecordStore` or your own, with room and time for every open conversation) and pass every run of a conversation the same `conversation_id` (the adapters pass the chat's id); elsewhere pass on the history Pydantic AI returns (docs/behind-a-ui.md)",
        ]
    )
    assert by_transcript(requests) == said
    assert by_check(bodies, tmp_path / 'chat.yaml', capsys) == said


def test_lost_records_where_the_new_window_states_the_same_values(
    protocol: Protocol, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # Turn 3 starts `idle`, as the window did: without records, its new window states what the old one did, and only
    # the change to `busy` after turn 2's tool is gone, as a history processor that dropped it would leave it.
    bodies = conversation(protocol, 'no-record-store', status_agent)
    requests = [segments('openai-chat', body) for body in bodies]
    said = by_assertion(requests)
    assert said == snapshot(
        [
            "why: the changes the plugin had delivered are gone from the history in request 4, and nothing else changed: the history lost the plugin's records and no record store put them back (`record_store=None`, or its entry for this conversation was evicted, expired or saved under another `conversation_id`), so a new window opened and states the same values; or a history processor dropped them",
            "fix: behind a UI adapter or a store of role and text, keep a record store (`record_store=`: the process's `InMemoryRecordStore` by default; across processes `SQLiteRecordStore` or your own, with room and time for every open conversation) and pass every run of a conversation the same `conversation_id` (the adapters pass the chat's id); elsewhere pass on the history Pydantic AI returns (docs/behind-a-ui.md); if a history processor dropped them, keep history append-only (docs/guard.md)",
        ]
    )
    assert by_transcript(requests) == said
    assert by_check(bodies, tmp_path / 'chat.yaml', capsys) == said


@pytest.mark.anyio
@pytest.mark.parametrize('api', ['anthropic', 'openai-responses'])
async def test_changes_wrapped_in_system_tags_or_sent_as_items_lost_through_an_adapter(
    prompt_wire: PromptWire, api: Api
):
    # Anthropic has no mid-conversation system messages, so a change goes `<system>`-wrapped in the user turn; the
    # Responses API sends it as an input item. The history goes through the Vercel AI adapter's round trip.
    the_agent = agent(prompt_wire, todos(stored=False), api=api)
    deps = Deps()
    messages = (await the_agent.run('What is next?', deps=deps)).all_messages()
    deps.todos.append('write the docs')
    messages = (await the_agent.run('And then?', deps=deps, message_history=messages)).all_messages()
    deps.todos.append('ship')
    through_the_adapter = VercelAIAdapter.load_messages(VercelAIAdapter.dump_messages(messages))
    await the_agent.run('Go on.', deps=deps, message_history=through_the_adapter)
    assert why_and_fix(prompt_wire)[0] == snapshot(
        "why: the blocks were stated again with their current values (block `capability:todos:state` first), the changes the plugin had delivered are gone from the history, and nothing else changed: the history lost the plugin's records and no record store put them back (`record_store=None`, or its entry for this conversation was evicted, expired or saved under another `conversation_id`), so a new window opened"
    )


NOTES = [f'note {number}: a fact the agent keeps about the project it works on' for number in range(12)]
TASK = 'Work through the project. ' + ' '.join(f'step{number}' for number in range(300))


def replied_with_usage(request: httpx2.Request) -> httpx2.Response:
    """OpenAI Chat's answer, with usage: the price rule sizes a request by it (about four bytes a token)."""
    tokens = len(request.content) // 4
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    usage = {'prompt_tokens': tokens, 'completion_tokens': 2, 'total_tokens': tokens + 2}
    return httpx2.Response(
        200,
        json={'id': 'c1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': [choice],
              'usage': usage},
    )  # fmt: skip


@pytest.mark.anyio
async def test_a_window_opened_by_price_is_not_blamed_on_lost_records_alone(prompt_wire: PromptWire):
    # A cache that halves the price, so the window gives way within a few turns, its records kept all along.
    context = AppendInstructions[int](id='agent', windows=CachePrices(input=1, cache_read=0.5, cache_write=1))

    @context.instructions(name='notes')
    def notes(ctx: RunContext[int]) -> str:  # pyright: ignore[reportUnusedFunction]
        return '\n'.join(NOTES[: 4 + ctx.deps])

    client = prompt_wire.http_client(transport=httpx2.MockTransport(replied_with_usage))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=client))
    the_agent = Agent(model, deps_type=int, capabilities=[context])
    messages = (await the_agent.run(TASK, deps=0)).all_messages()
    for turn in range(1, 8):
        messages = (await the_agent.run(f'turn {turn}', deps=turn, message_history=messages)).all_messages()
    # Its records were kept all along: two baselines, the second where the price opened a window.
    kinds = [type(record).__name__ for record in instruction_records(messages)]
    assert [at for at, kind in enumerate(kinds) if kind == 'InstructionBaselinePart'] == snapshot([0, 6])
    assert why_and_fix(prompt_wire) == snapshot(
        [
            "why: the blocks were stated again with their current values (block `capability:agent:notes` first), the changes the plugin had delivered are gone from the history, and nothing else changed: either the plugin opened a new window by price (re-reading its changes had cost about as much as writing the request again), or the history lost the plugin's records and no record store put them back (`record_store=None`, or its entry for this conversation was evicted, expired or saved under another `conversation_id`), so a new window opened",
            "fix: if the price opened it (`windows='price'`, the default), the move is expected; otherwise behind a UI adapter or a store of role and text, keep a record store (`record_store=`: the process's `InMemoryRecordStore` by default; across processes `SQLiteRecordStore` or your own, with room and time for every open conversation) and pass every run of a conversation the same `conversation_id` (the adapters pass the chat's id); elsewhere pass on the history Pydantic AI returns (docs/behind-a-ui.md)",
            '(only if request 6 is meant to open a new window, pass new_windows=(6,))',
        ]
    )
