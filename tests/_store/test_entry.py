"""What a record store's entry holds: the open window's records, so its size follows the window, not the conversation.

A conversation whose rewrite-mode block changes opens a new window each time; the changes of the windows before the
open one are never sent again. The entry keeps the carriers from the open window's baseline on, and that is enough:
served by a fresh agent each turn on history loaded from JSON without any metadata (as a UI adapter gives it back),
the conversation sends the provider the same bytes as when the app keeps Pydantic AI's history whole.
"""

from __future__ import annotations

import asyncio

import httpx2
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append import (
    AppendInstructions,
    InMemoryRecordStore,
    InstructionBaselinePart,
    RecordStore,
    instruction_records,
)
from pydantic_ai_append._store.reattach import records_entry
from pydantic_ai_append.testing import PromptWire

from ..ui_chat import instructions
from .test_reattach import without_metadata

TURNS = 9
MODE_CHANGES = (3, 6)
"""The turns before which the rewrite-mode block changes, each opening a new window."""


def reply(request: httpx2.Request) -> httpx2.Response:
    """OpenAI Chat's answer, with the usage a provider reports (about four bytes a token)."""
    prompt = len(request.content) // 4
    usage = {'prompt_tokens': prompt, 'completion_tokens': 1, 'total_tokens': prompt + 1}
    message = {'role': 'assistant', 'content': 'OK.'}
    choice = {'index': 0, 'message': message, 'finish_reason': 'stop', 'logprobs': None}
    completion = {'id': 'chatcmpl-1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2'}
    return httpx2.Response(200, json={**completion, 'choices': [choice], 'usage': usage})


def agent(prompt_wire: PromptWire, turn: int, record_store: RecordStore | None) -> Agent[None]:
    """A fresh server's agent on `turn`: a todo list that changes every turn, and a mode that changes twice."""
    context = AppendInstructions[None](id='chat', record_store=record_store, windows='keep', tenant=lambda ctx: 'alice')
    context.instructions(name='todos')(lambda: '\n'.join(f'- [ ] task {n}' for n in range(turn + 1)))
    mode = sum(turn >= change for change in MODE_CHANGES)
    context.instructions(name='mode', on_change='rewrite')(lambda: f'mode {mode}')
    http_client = prompt_wire.http_client(transport=httpx2.MockTransport(reply))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
    return Agent(model, deps_type=type(None), instructions='Be brief.', capabilities=[context])


def converse(record_store: InMemoryRecordStore | None) -> tuple[list[bytes], list[ModelMessage]]:
    """Every turn, by a fresh agent: with a store, on history without metadata; without one, on history kept whole.
    The request bodies, and the history after the last turn."""
    prompt_wire = PromptWire()
    history: list[ModelMessage] = []
    try:
        for turn in range(TURNS):
            sent = without_metadata(history) if record_store is not None else history
            # A loop per turn, as a worker process may run one: the store's save ends before `asyncio.run` returns.
            run = asyncio.run(
                agent(prompt_wire, turn, record_store).run(
                    f'Message {turn}.', message_history=sent or None, conversation_id='chat-1'
                )
            )
            history = run.all_messages()
        return [exchange.request_body for exchange in prompt_wire.exchanges], history
    finally:
        prompt_wire.close()


def test_the_open_windows_records_continue_the_conversation_byte_for_byte():
    store = InMemoryRecordStore()
    bodies, _ = converse(store)
    kept, _ = converse(None)
    assert bodies == kept
    # Three windows: the first request's, and one at each change of mode.
    assert len({instructions(body) for body in bodies}) == len(MODE_CHANGES) + 1


def test_an_entry_holds_the_open_window_alone():
    _, history = converse(None)  # kept whole: every window's records
    entry = records_entry(history)
    records = instruction_records(history)
    opened = max(at for at, record in enumerate(records) if isinstance(record, InstructionBaselinePart))
    assert sum(isinstance(record, InstructionBaselinePart) for record in records) == len(MODE_CHANGES) + 1
    # The last window's baseline and its changes: one a turn after the turn that opened it.
    assert len(entry['carriers']) == len(records) - opened == TURNS - MODE_CHANGES[-1]
    assert entry['carriers'][0]['part']['metadata']['pydantic_ai_append']['kind'] == 'baseline'
