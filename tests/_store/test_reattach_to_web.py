"""A window kept behind `agent.to_web()`, driven through its HTTP API as its page drives it.

`to_web()` serves one protocol, Vercel AI's, at `POST /api/chat` (on 2.58 as on 2.68; it has no AG-UI endpoint), and
runs each request through `VercelAIAdapter.dispatch_request` with the one `deps` it was given. The client here does
what the page's AI SDK does: it sends the chat's id and its whole history as UI messages, and keeps the assistant
message it builds from the response's event stream. So no record comes back from the client, and every turn's window
is the one the default record store kept. The server's state (the `deps` every run shares) changes between turns, and
a tool changes it within one: each change reaches the model appended, with the instructions and every earlier byte of
the prefix unchanged.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import pytest
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from starlette.routing import Mount, Route

from pydantic_ai_append import InMemoryRecordStore, NoTenantWarning, RecordStore
from pydantic_ai_append._store.memory import PROCESS_STORE
from pydantic_ai_append._wire.segments import segments
from pydantic_ai_append.testing import PromptWire, assert_prefix_stable

from ..ui_chat import TURNS, Board, chat_agent, instructions, model_views, prompt
from .test_reattach_ui_adapters import assert_one_window


def assistant_message(stream: str, turn: int) -> dict[str, Any]:
    """The assistant message the page's AI SDK builds from a `/api/chat` event stream: each step's text, each tool
    call with its result, and the message metadata."""
    parts: list[dict[str, Any]] = []
    message: dict[str, Any] = {'id': f'assistant-{turn}', 'role': 'assistant', 'parts': parts}
    for line in stream.splitlines():
        if not line.startswith('data: {'):
            continue  # the blank line between events, and the closing `data: [DONE]`
        chunk = json.loads(line.removeprefix('data: '))
        match chunk['type']:
            case 'start-step':
                parts.append({'type': 'step-start'})
            case 'text-start':
                parts.append({'type': 'text', 'text': '', 'state': 'done'})
            case 'text-delta':
                parts[-1]['text'] += chunk['delta']
            case 'tool-input-available':
                call = {'toolCallId': chunk['toolCallId'], 'state': 'input-available', 'input': chunk['input']}
                parts.append({'type': f'tool-{chunk["toolName"]}', **call})
            case 'tool-output-available':
                (call,) = [part for part in parts if part.get('toolCallId') == chunk['toolCallId']]
                call.update(state='output-available', output=chunk['output'])
            case 'message-metadata':
                message['metadata'] = chunk['messageMetadata']
            case _:
                pass
    return message


async def browse(app: Any, board: Board, chat_id: str, turns: int = TURNS, regenerated: int | None = None) -> None:
    """Each turn of one chat through `app`'s `/api/chat`, in one event loop as a server runs; `board`, the server's
    state, set to each turn's before it is sent. On turn `regenerated` the page asks again for the answer before."""
    client: list[dict[str, Any]] = []
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url='http://localhost:7932') as http:
        for turn in range(turns):
            board.turn, board.looked_up = turn, False
            if turn == regenerated:
                answer = client.pop()
                body = {'id': chat_id, 'trigger': 'regenerate-message', 'messageId': answer['id'], 'messages': client}
            else:
                client.append({'id': f'user-{turn}', 'role': 'user', 'parts': [{'type': 'text', 'text': prompt(turn)}]})
                body = {'id': chat_id, 'trigger': 'submit-message', 'messages': client}
            response = await http.post('/api/chat', json=body)
            assert response.status_code == 200, response.text
            client.append(assistant_message(response.text, turn))


def sent_through_to_web(
    chat_id: str, record_store: RecordStore | None, turns: int = TURNS, regenerated: int | None = None, **options: Any
) -> list[bytes]:
    """Every request body of the turns of one chat (`browse`) through `agent.to_web()`, its agent `chat_agent`'s with
    `options`."""
    prompt_wire = PromptWire()
    try:
        board = Board(0)
        agent = chat_agent(prompt_wire, record_store, **options)
        asyncio.run(browse(agent.to_web(deps=board), board, chat_id, turns, regenerated))
        return [exchange.request_body for exchange in prompt_wire.exchanges]
    finally:
        prompt_wire.close()


def test_the_default_store_keeps_one_window_behind_to_web():
    # `PROCESS_STORE` is `record_store`'s default: the one `InMemoryRecordStore` of the process.
    bodies = sent_through_to_web('to-web-default-store', PROCESS_STORE)
    assert_one_window(bodies)
    # The last request holds the first turn's values in its instructions and the last turn's appended after them.
    assert 'task 0 of alice' in instructions(bodies[-1])
    assert model_views(bodies[-1]) == {'todos': Board(TURNS - 1).todos, 'notes': Board(TURNS - 1).notes}


def test_without_a_store_every_turn_behind_to_web_opens_a_window():
    bodies = sent_through_to_web('to-web-no-store', None)
    assert len({instructions(body) for body in bodies}) == TURNS


def test_a_regenerated_answer_continues_the_window():
    # The page's regenerate button: the history without the last answer, the same chat id, the server's state moved on.
    bodies = sent_through_to_web('to-web-regenerate', InMemoryRecordStore(), turns=5, regenerated=4)
    *before, replaced, again = bodies
    assert len({instructions(body) for body in bodies}) == 1
    assert model_views(replaced) == {'todos': Board(3).todos, 'notes': Board(3).notes}
    assert model_views(again) == {'todos': Board(4).todos, 'notes': Board(4).notes}
    # The regenerated request starts with the request before the one it replaces, byte for byte.
    assert_prefix_stable([segments('openai-chat', body) for body in [*before, again]])


def test_to_web_naming_no_tenant_is_warned():
    # Every run of `to_web()` gets the same deps: the tenant can't tell users apart, so a deployment names its one user.
    with pytest.warns(NoTenantWarning):
        bodies = sent_through_to_web('to-web-no-tenant', InMemoryRecordStore(), tenant=None)
    assert_one_window(bodies)


def test_to_web_takes_chats_at_one_endpoint():
    # `/api/chat`, Vercel AI's (the turns above), on 2.58 as on 2.68: a release that adds an AG-UI endpoint should get
    # those turns on it too.
    app = Agent(TestModel()).to_web()
    (api,) = [route for route in app.routes if isinstance(route, Mount)]
    posts = [route.path for route in api.routes if isinstance(route, Route) and 'POST' in (route.methods or ())]
    assert posts == ['/chat']
