"""The `prompt_wire` fixture (a `WireCapture` inside) under cassette replay: one recorded conversation per API,
replayed with the network blocked, pinned as a transcript and checked with the prefix checker, which is the pattern
the package's wire tests follow and the one its docs give users.

To record the cassettes again: `uv run pytest tests/testing/test_capture.py --no-cov --record-mode=rewrite
--allowed-hosts=127.0.0.1`.
"""

from __future__ import annotations

import json

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModelSettings
from pydantic_ai.settings import ModelSettings

from pydantic_ai_append.testing import Api, PromptWire, Segment, WireCapture
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls

from ..fake_models import MODEL_FACTORIES, get_time, get_weather

RECORDED_SCRIPT = [ToolCalls([('get_time', {})]), ToolCalls([('get_weather', {'city': 'Paris'})]), Text('Done.')]


# Pydantic AI 2.68 tells Anthropic models what `<system>` means in their system prompt; 2.58 has no such text and
# ignores the setting. Without it, every release sends the same bodies, so one transcript holds for all of them.
NO_FRAMING = ModelSettings(framing_announcement='never')


async def run_recorded(prompt_wire: PromptWire, api: Api, settings: ModelSettings | None = None) -> None:
    """Run one agent conversation through the fixture's client; vcrpy records or replays it underneath."""
    # Replaying, the server is never reached (the network is blocked), but it still gives the run a URL.
    with FakeProvider(script=RECORDED_SCRIPT) as server:
        model = MODEL_FACTORIES[api](server.url, http_client=prompt_wire.http_client())
        agent = Agent(model, tools=[get_time, get_weather], instructions='Answer in one word.')
        result = await agent.run('What time is it, and the weather in Paris?', model_settings=settings)
    assert result.output == 'Done.'
    # Recording, the server saw exactly what the client sent; replaying, it saw nothing.
    assert server.requests in ([], [exchange.request_body for exchange in prompt_wire.exchanges])


def message_count(request: list[Segment]) -> int:
    return sum(segment.kind == 'message' for segment in request)


@pytest.mark.vcr
@pytest.mark.anyio
async def test_recorded_anthropic_conversation(prompt_wire: PromptWire):
    await run_recorded(prompt_wire, 'anthropic', NO_FRAMING)
    assert [message_count(request) for request in prompt_wire.requests()] == [1, 3, 5]
    prompt_wire.assert_prefix_stable()
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 461 bytes
+ tool get_time: Get the current time.
+     input_schema: {"additionalProperties":false,"properties":{},"type":"object"}
+ tool get_weather: Get the weather in a city.
+     input_schema: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
+ system: Answer in one word.
+ user: What time is it, and the weather in Paris?

request 1: reuses 461 of 705 bytes
  tool get_time: Get the current time.
      input_schema: {"additionalProperties":false,"properties":{},"type":"object"}
  tool get_weather: Get the weather in a city.
      input_schema: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
  system: Answer in one word.
  user: What time is it, and the weather in Paris?
+ assistant: get_time({}) [call#1]
+ user: result [call#1]: 12:00
+         is_error: false

request 2: reuses 705 of 975 bytes
  tool get_time: Get the current time.
      input_schema: {"additionalProperties":false,"properties":{},"type":"object"}
  tool get_weather: Get the weather in a city.
      input_schema: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
  system: Answer in one word.
  user: What time is it, and the weather in Paris?
  assistant: get_time({}) [call#1]
  user: result [call#1]: 12:00
          is_error: false
+ assistant: get_weather({"city":"Paris"}) [call#2]
+ user: result [call#2]: Sunny in Paris
+         is_error: false
""")


@pytest.mark.vcr
@pytest.mark.anyio
async def test_recorded_openai_chat_conversation(prompt_wire: PromptWire):
    await run_recorded(prompt_wire, 'openai-chat')
    assert [message_count(request) for request in prompt_wire.requests()] == [2, 4, 6]
    prompt_wire.assert_prefix_stable()
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 513 bytes
+ tool get_time: Get the current time.
+     parameters: {"additionalProperties":false,"properties":{},"type":"object"}
+ tool get_weather: Get the weather in a city.
+     parameters: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
+     strict: true
+ system: Answer in one word.
+ user: What time is it, and the weather in Paris?

request 1: reuses 513 of 716 bytes
  tool get_time: Get the current time.
      parameters: {"additionalProperties":false,"properties":{},"type":"object"}
  tool get_weather: Get the weather in a city.
      parameters: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
      strict: true
  system: Answer in one word.
  user: What time is it, and the weather in Paris?
+ assistant: get_time({}) [call#1]
+ tool [call#1]: 12:00

request 2: reuses 716 of 949 bytes
  tool get_time: Get the current time.
      parameters: {"additionalProperties":false,"properties":{},"type":"object"}
  tool get_weather: Get the weather in a city.
      parameters: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
      strict: true
  system: Answer in one word.
  user: What time is it, and the weather in Paris?
  assistant: get_time({}) [call#1]
  tool [call#1]: 12:00
+ assistant: get_weather({"city":"Paris"}) [call#2]
+ tool [call#2]: Sunny in Paris
""")


@pytest.mark.vcr
@pytest.mark.anyio
async def test_recorded_openai_responses_conversation(prompt_wire: PromptWire):
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    await run_recorded(prompt_wire, 'openai-responses', settings)
    sent = [json.loads(exchange.request_body) for exchange in prompt_wire.exchanges]
    assert [(request.get('previous_response_id'), len(request['input'])) for request in sent] == [
        (None, 1),
        ('resp_fake_0000', 1),
        ('resp_fake_0001', 1),
    ]
    requests = prompt_wire.requests()
    assert [[segment.kind for segment in request] for request in requests][2] == snapshot(
        ['tool', 'tool', 'instructions', 'input', 'output', 'input', 'output', 'input']
    )
    prompt_wire.assert_prefix_stable()
    # Each request sends only its new input; the transcript shows the input the provider puts before it.
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 474 bytes
+ tool get_time: Get the current time.
+     parameters: {"additionalProperties":false,"properties":{},"type":"object"}
+     strict: false
+ tool get_weather: Get the weather in a city.
+     parameters: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
+     strict: true
+ instructions: Answer in one word.
+ user: What time is it, and the weather in Paris?

request 1: reuses 474 of 673 bytes
  tool get_time: Get the current time.
      parameters: {"additionalProperties":false,"properties":{},"type":"object"}
      strict: false
  tool get_weather: Get the weather in a city.
      parameters: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
      strict: true
  instructions: Answer in one word.
  user: What time is it, and the weather in Paris?
+ function_call (output): get_time({}) [call#1]
+     id: id#1
+     status: completed
+ function_call_output [call#1]: 12:00

request 2: reuses 673 of 902 bytes
  tool get_time: Get the current time.
      parameters: {"additionalProperties":false,"properties":{},"type":"object"}
      strict: false
  tool get_weather: Get the weather in a city.
      parameters: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
      strict: true
  instructions: Answer in one word.
  user: What time is it, and the weather in Paris?
  function_call (output): get_time({}) [call#1]
      id: id#1
      status: completed
  function_call_output [call#1]: 12:00
+ function_call (output): get_weather({"city":"Paris"}) [call#2]
+     id: id#2
+     status: completed
+ function_call_output [call#2]: Sunny in Paris
""")


# --- WireCapture with a transport of the caller's


@pytest.mark.anyio
async def test_wire_capture_wraps_a_given_transport():
    def echo(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={'echo': json.loads(request.content)})

    capture = WireCapture()
    async with capture.http_client(transport=httpx2.MockTransport(echo), base_url='https://fake.test') as client:
        response = await client.post('/v1/chat/completions', json={'messages': []})
    assert response.json() == {'echo': {'messages': []}}
    # The handler's response is read as it is built, so its body is kept whole rather than through the stream.
    assert [(e.method, e.path, e.request_body, e.response_body) for e in capture.exchanges] == snapshot(
        [('POST', '/v1/chat/completions', b'{"messages":[]}', b'{"echo":{"messages":[]}}')]
    )
    assert capture.conversation('openai-chat').requests == [[]]
