"""A chat server behind Pydantic AI's UI adapters, and the client that talks to it, for
`_store/test_reattach_ui_adapters.py`.

The server runs one agent turn per client request through the adapter's own run path (`run_stream`), as an
endpoint does: the client sends its whole history in the protocol's shape, the adapter loads it (dropping every
part's metadata), and the agent's `AppendInstructions` puts its records back from the record store. The client
keeps what the adapter dumps of the run's history, as JSON, which is all a browser holds. The model is OpenAI Chat
over a mock transport, so each request body is what the provider would get.

A turn's function is importable by a worker process (`ProcessPoolExecutor` with `spawn`), given the SQLite file the
processes share.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
from pydantic import TypeAdapter
from pydantic_ai import Agent, AgentRunResult, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import SubmitMessage, UIMessage

from pydantic_ai_append import AppendInstructions, RecordStore, SQLiteRecordStore, SyncRecordStore
from pydantic_ai_append._store.protocol import OnStoreError
from pydantic_ai_append.testing import PromptWire

Protocol = Literal['vercel', 'ag-ui']
SystemPrompt = Literal['client', 'server']
TURNS = 10
TOOL_TURNS = frozenset({2, 5, 8})
"""The turns whose prompt makes the model call a tool, then answer from its result."""
BLOCK = re.compile(r'<context id="capability:chat:(\w+)">\n(.*?)\n</context>', re.DOTALL)


@dataclass
class Board:
    """The deps: what the blocks show on a turn."""

    turn: int
    looked_up: bool = False
    """Whether the turn's tool ran: it ticks the task off, a change after the tool's result."""
    user: str = 'alice'
    """The authenticated user the server runs the turn for: the agent's tenant, and the owner of the tasks."""

    @property
    def todos(self) -> str:
        return f'- [{"x" if self.looked_up else " "}] task {self.turn} of {self.user}'

    @property
    def notes(self) -> str:
        return f'note {self.turn // 3}'


def prompt(turn: int) -> str:
    return 'Look it up.' if turn in TOOL_TURNS else f'Message {turn}.'


def reply(request: httpx2.Request) -> httpx2.Response:
    """OpenAI Chat, streamed as the adapters ask: a tool call for a prompt asking for one, else a text answer."""
    messages = json.loads(request.content)['messages']
    last = next(message for message in reversed(messages) if message['role'] != 'system')
    delta: dict[str, Any] = {'role': 'assistant', 'content': f'Answer {len(messages)}.'}
    if last['role'] == 'user' and last['content'] == 'Look it up.':
        function = {'name': 'lookup', 'arguments': '{"q": "todos"}'}
        delta = {'role': 'assistant', 'tool_calls': [{'index': 0, 'id': f'call_{len(messages)}', 'type': 'function', 'function': function}]}  # fmt: skip
    chunk: dict[str, Any] = {'id': 'c1', 'object': 'chat.completion.chunk', 'created': 0, 'model': 'gpt-5.2'}
    events: list[dict[str, Any]] = [
        {**chunk, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]},
        {**chunk, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': 'stop'}]},
    ]
    body = ''.join(f'data: {json.dumps(event)}\n\n' for event in events) + 'data: [DONE]\n\n'
    return httpx2.Response(200, content=body.encode(), headers={'content-type': 'text/event-stream'})


def by_user(ctx: RunContext[Board]) -> str:
    """The tenant of a turn: the user the server authenticated."""
    return ctx.deps.user


def chat_agent(
    prompt_wire: PromptWire,
    record_store: RecordStore | SyncRecordStore | None,
    tenant: Callable[[RunContext[Board]], str] | None = by_user,
    signing_key: str | None = None,
    on_store_error: OnStoreError = 'raise',
) -> Agent[Board]:
    """The server's agent: two append-mode blocks (one changes every turn, one every third) and a tool."""
    context = AppendInstructions[Board](
        id='chat', record_store=record_store, tenant=tenant, signing_key=signing_key, on_store_error=on_store_error
    )

    @context.instructions(name='todos')
    def todos(ctx: RunContext[Board]) -> str:  # pyright: ignore[reportUnusedFunction]
        return ctx.deps.todos

    @context.instructions(name='notes')
    def notes(ctx: RunContext[Board]) -> str:  # pyright: ignore[reportUnusedFunction]
        return ctx.deps.notes

    http_client = prompt_wire.http_client(transport=httpx2.MockTransport(reply))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
    agent = Agent(model, deps_type=Board, instructions='Be brief.', capabilities=[context])

    @agent.tool
    def lookup(ctx: RunContext[Board], q: str) -> int:  # pyright: ignore[reportUnusedFunction]
        ctx.deps.looked_up = True
        # Not a string: AG-UI gives it back as one, `'5'`, and the next turn's history holds that.
        return len(q)

    return agent


def _agui_types() -> tuple[Any, Any]:
    from ag_ui.core import Message, RunAgentInput  # pyright: ignore[reportMissingImports, reportUnknownVariableType]

    return TypeAdapter(list[Message]), RunAgentInput  # pyright: ignore[reportUnknownArgumentType]


async def serve(
    agent: Agent[Board],
    protocol: Protocol,
    chat_id: str,
    client: list[Any],
    turn: int,
    system_prompt: SystemPrompt,
    conversation_store: Any = None,
    user: str = 'alice',
) -> list[Any]:
    """One turn for `user`: the client's history and new prompt through the adapter's run path; the client's history
    after.

    With a `conversation_store` (Pydantic AI 2.68's), the server keeps the history, and the client sends only its
    new message.
    """
    results: list[AgentRunResult[Any]] = []
    options: dict[str, Any] = {'manage_system_prompt': system_prompt}
    if conversation_store is not None:
        client, options['conversation_store'] = [], conversation_store
    if protocol == 'vercel':
        new_message = {'id': f'user-{turn}', 'role': 'user', 'parts': [{'type': 'text', 'text': prompt(turn)}]}
        messages = [UIMessage.model_validate(message) for message in [*client, new_message]]
        adapter: Any = VercelAIAdapter(agent=agent, run_input=SubmitMessage(id=chat_id, messages=messages), **options)
    else:
        from pydantic_ai.ui.ag_ui import AGUIAdapter

        protocol_messages, run_input = _agui_types()
        new_message = {'id': f'user-{turn}', 'role': 'user', 'content': prompt(turn)}
        loaded = protocol_messages.validate_python([*client, new_message])
        run = run_input(
            thread_id=chat_id,
            run_id=f'run-{turn}',
            state=None,
            messages=loaded,
            tools=[],
            context=[],
            forwarded_props=None,
        )
        adapter = AGUIAdapter(agent=agent, run_input=run, **options)
    with warnings.catch_warnings():
        # Under 'server', the adapters warn that they strip the client's system prompts, as such a server means them to.
        warnings.filterwarnings(
            'ignore', '(Parts carrying the system voice|Client-submitted system prompts)', UserWarning
        )
        async for _ in adapter.run_stream(deps=Board(turn, user=user), on_complete=results.append):
            pass
    (result,) = results
    return dumped(protocol, result)


def dumped(protocol: Protocol, result: AgentRunResult[Any]) -> list[Any]:
    """What the client holds after a run: the adapter's dump of its history, as JSON."""
    if protocol == 'vercel':
        return [
            message.model_dump(mode='json', by_alias=True, exclude_none=True)
            for message in VercelAIAdapter.dump_messages(result.all_messages())
        ]
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    protocol_messages, _ = _agui_types()
    return json.loads(protocol_messages.dump_json(AGUIAdapter.dump_messages(result.all_messages()), by_alias=True))


def converse(
    turn_server: Callable[[int, list[Any]], tuple[list[Any], list[bytes]]],
    *,
    between: Callable[[int], None] = lambda turn: None,
) -> list[bytes]:
    """Every turn through `turn_server` (the turn and the client's history, to its new history and the request
    bodies the turn sent), calling `between` before each turn after the first; every request body, in order."""
    client: list[Any] = []
    bodies: list[bytes] = []
    for turn in range(TURNS):
        if turn:
            between(turn)
        client, sent = turn_server(turn, client)
        bodies.extend(sent)
    return bodies


def shared_store_turn(path: str, protocol: Protocol, client: list[Any], turn: int) -> tuple[list[Any], list[bytes]]:
    """A turn served by a fresh agent on the SQLite store at `path`, as a worker process runs it."""
    prompt_wire = PromptWire()
    try:
        agent = chat_agent(prompt_wire, SQLiteRecordStore(Path(path)))
        client = asyncio.run(serve(agent, protocol, 'chat-1', client, turn, 'server'))
        return client, [exchange.request_body for exchange in prompt_wire.exchanges]
    finally:
        prompt_wire.close()


def model_views(body: bytes) -> dict[str, str]:
    """Each block's value as the model reads it from a request: the last element with its id in the system text."""
    system = [message['content'] for message in json.loads(body)['messages'] if message['role'] == 'system']
    return {name: value for text in system for name, value in BLOCK.findall(text)}


def instructions(body: bytes) -> str:
    """The request's system messages before its first other message: the instructions, with the window's prefix."""
    messages = json.loads(body)['messages']
    first = next(at for at, message in enumerate(messages) if message['role'] != 'system')
    return '\n\n'.join(message['content'] for message in messages[:first])
