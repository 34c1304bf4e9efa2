"""`WireCapture` under cassette replay: one recorded conversation per API, replayed with the network blocked and
checked with the prefix checker, which is the pattern the package's wire tests follow.

To record the cassettes again: `uv run pytest tests/testing/test_capture.py --no-cov --record-mode=rewrite
--allowed-hosts=127.0.0.1`.
"""

from __future__ import annotations

import json

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModelSettings
from pydantic_ai.settings import ModelSettings

from fake_provider import FakeProvider, Text, ToolCalls
from pydantic_ai_append.testing import Api, Segment, WireCapture, assert_prefix_stable

from ..fake_models import MODEL_FACTORIES, get_time, get_weather

RECORDED_SCRIPT = [ToolCalls([('get_time', {})]), ToolCalls([('get_weather', {'city': 'Paris'})]), Text('Done.')]


async def run_recorded(api: Api, settings: ModelSettings | None = None) -> WireCapture:
    """Run one agent conversation through a capturing client; vcrpy records or replays it underneath."""
    capture = WireCapture()
    # Replaying, the server is never reached (the network is blocked), but it still gives the run a URL.
    with FakeProvider(script=RECORDED_SCRIPT) as server:
        async with capture.http_client() as http_client:
            model = MODEL_FACTORIES[api](server.url, http_client=http_client)
            agent = Agent(model, tools=[get_time, get_weather], instructions='Answer in one word.')
            result = await agent.run('What time is it, and the weather in Paris?', model_settings=settings)
    assert result.output == 'Done.'
    # Recording, the server saw exactly what the client sent; replaying, it saw nothing.
    assert server.requests in ([], [exchange.request_body for exchange in capture.exchanges])
    return capture


def message_count(request: list[Segment]) -> int:
    return sum(segment.kind == 'message' for segment in request)


@pytest.mark.vcr
@pytest.mark.anyio
async def test_recorded_anthropic_conversation():
    capture = await run_recorded('anthropic')
    requests = capture.conversation('anthropic').requests
    # Counted by kind: releases differ in how many system blocks they send (2.68 adds a framing one).
    assert [message_count(request) for request in requests] == [1, 3, 5]
    assert_prefix_stable(requests)


@pytest.mark.vcr
@pytest.mark.anyio
async def test_recorded_openai_chat_conversation():
    capture = await run_recorded('openai-chat')
    requests = capture.conversation('openai-chat').requests
    assert [message_count(request) for request in requests] == [2, 4, 6]
    assert_prefix_stable(requests)


@pytest.mark.vcr
@pytest.mark.anyio
async def test_recorded_openai_responses_conversation():
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    capture = await run_recorded('openai-responses', settings)
    sent = [json.loads(exchange.request_body) for exchange in capture.exchanges]
    assert [(request.get('previous_response_id'), len(request['input'])) for request in sent] == [
        (None, 1),
        ('resp_fake_0000', 1),
        ('resp_fake_0001', 1),
    ]
    requests = capture.conversation('openai-responses').requests
    assert [[segment.kind for segment in request] for request in requests][2] == snapshot(
        ['tool', 'tool', 'instructions', 'input', 'output', 'input', 'output', 'input']
    )
    assert_prefix_stable(requests)
