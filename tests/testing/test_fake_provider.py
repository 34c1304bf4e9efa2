"""The fake provider (`pydantic_ai_append.testing.fake_provider`), live on loopback: it serves real Pydantic AI model classes and provider
SDKs, and refuses what it can't answer with a message saying why.

Every wire claim of the package rests on it, so it is shown working on its own first.
"""

from __future__ import annotations

import json

import httpx2
import pytest
from anthropic import AsyncAnthropic, BadRequestError
from anthropic.types import TextBlockParam
from dirty_equals import IsPositiveInt
from inline_snapshot import snapshot
from pydantic_ai import Agent

from pydantic_ai_append.testing import Api, WireCapture, WireConversation, assert_prefix_stable
from pydantic_ai_append.testing.fake_provider import FakeProvider, FakeRequest, Text, ToolCalls, Turn, openai_chat_model

from ..fake_models import MODEL_FACTORIES, get_time, get_weather, live_loopback


def alternating_script(request: FakeRequest) -> Turn:
    # Call a tool until the last input holds a tool result, then answer: enough for any number of runs.
    raw = json.dumps(request.json.get('messages') or request.json.get('input'))
    last_result = max(raw.rfind('"tool"'), raw.rfind('tool_result'), raw.rfind('function_call_output'))
    return Text('It is noon.') if last_result > raw.rfind('What time') else ToolCalls([('get_time', {})])


@live_loopback
@pytest.mark.anyio
@pytest.mark.parametrize('api', list(MODEL_FACTORIES))
async def test_fake_provider_serves_agent_runs(api: Api):
    capture = WireCapture()
    with FakeProvider(script=alternating_script) as server:
        async with capture.http_client() as http_client:
            agent = Agent(MODEL_FACTORIES[api](server.url, http_client=http_client), tools=[get_time])
            result = await agent.run('What time is it?')
            async with agent.run_stream('What time is it now?') as stream:
                streamed = await stream.get_output()
    assert (result.output, streamed, server.errors) == ('It is noon.', 'It is noon.', [])
    assert server.requests == [exchange.request_body for exchange in capture.exchanges]
    assert [exchange.response_body for exchange in server.exchanges] == [
        exchange.response_body for exchange in capture.exchanges
    ]
    assert len(server.requests) == 4
    conversation = capture.conversation(api)
    assert WireConversation.from_exchanges(api, server.exchanges).requests == conversation.requests
    # The streamed run is a new conversation, so its first request opens a new window.
    assert_prefix_stable(conversation.requests, new_windows=(2,))


@live_loopback
@pytest.mark.anyio
async def test_fake_provider_parallel_tool_calls():
    script = [ToolCalls([('get_time', {}), ('get_weather', {'city': 'Paris'})]), Text('Noon and sunny.')]
    with FakeProvider(script=script) as server:
        # No client passed: the helper's own keeps no idle connection, so leaving it unclosed leaks nothing.
        agent = Agent(openai_chat_model(server.url), tools=[get_time, get_weather])
        result = await agent.run('Time and weather in Paris?')
    assert result.output == 'Noon and sunny.'
    tool_results = json.loads(server.requests[1])['messages'][2:]
    assert tool_results == snapshot(
        [
            {'role': 'tool', 'tool_call_id': 'call_fake_0_0', 'content': '12:00'},
            {'role': 'tool', 'tool_call_id': 'call_fake_0_1', 'content': 'Sunny in Paris'},
        ]
    )


@live_loopback
@pytest.mark.anyio
async def test_fake_provider_anthropic_json_reply():
    # Pydantic AI always streams from Anthropic, so the SDK is called directly for a non-streamed reply.
    with FakeProvider(script=[ToolCalls([('get_time', {})])]) as server:
        async with httpx2.AsyncClient() as http_client:
            client = AsyncAnthropic(base_url=server.url, api_key='fake', http_client=http_client)
            message = await client.messages.create(
                model='claude-sonnet-4-6', max_tokens=100, messages=[{'role': 'user', 'content': 'Time?'}]
            )
    assert (message.id, message.stop_reason, [block.type for block in message.content]) == (
        'msg_fake_0000',
        'tool_use',
        ['tool_use'],
    )
    assert json.loads(server.exchanges[0].response_body) == snapshot(
        {
            'id': 'msg_fake_0000',
            'type': 'message',
            'role': 'assistant',
            'model': 'claude-sonnet-4-6',
            'content': [{'type': 'tool_use', 'id': 'toolu_fake_0_0', 'name': 'get_time', 'input': {}}],
            'stop_reason': 'tool_use',
            'stop_sequence': None,
            'usage': {
                'input_tokens': IsPositiveInt(),
                'cache_creation_input_tokens': 0,
                'cache_read_input_tokens': 0,
                'cache_creation': {'ephemeral_5m_input_tokens': 0, 'ephemeral_1h_input_tokens': 0},
                'service_tier': 'standard',
                'output_tokens': IsPositiveInt(),
            },
        }
    )


@live_loopback
@pytest.mark.anyio
async def test_fake_provider_refusals():
    with FakeProvider(script=[Text('only one')]) as server:
        async with httpx2.AsyncClient(base_url=server.url) as client:
            not_found = await client.post('/v1/embeddings', content=b'{}')
            not_json = await client.post('/v1/messages', content=b'not json')
            answered = await client.post('/v1/chat/completions', json={'model': 'm', 'messages': [], 'stream': True})
            exhausted = await client.post('/v1/chat/completions', json={'model': 'm', 'messages': []})
    assert [r.status_code for r in (not_found, not_json, answered, exhausted)] == [404, 400, 200, 400]
    assert not_json.json()['error']['type'] == 'invalid_request_error'
    # Without `stream_options.include_usage` a real server sends no usage chunk, and neither does the fake.
    assert answered.text.endswith('"finish_reason":"stop","logprobs":null}]}\n\ndata: [DONE]\n\n')
    assert 'usage' not in answered.text
    assert server.errors == snapshot(
        [
            "FakeProvider does not serve '/v1/embeddings'",
            "request body is not JSON: b'not json'",
            'FakeProvider script is exhausted: request 3 to /v1/chat/completions has no turn left; add one to the script',
        ]
    )
    assert len(server.requests) == 4


@live_loopback
@pytest.mark.anyio
async def test_fake_provider_refuses_an_anthropic_request_the_api_refuses():
    # Five `cache_control` breakpoints, one more than Anthropic takes: the SDK raises the API's error, with its words.
    system: list[TextBlockParam] = [
        {'type': 'text', 'text': f'Rule {n}.', 'cache_control': {'type': 'ephemeral'}} for n in range(5)
    ]
    with FakeProvider(script=[Text('unused')]) as server:
        async with httpx2.AsyncClient() as http_client:
            client = AsyncAnthropic(base_url=server.url, api_key='fake', http_client=http_client)
            with pytest.raises(BadRequestError, match='A maximum of 4 blocks with cache_control may be provided'):
                await client.messages.create(
                    model='claude-sonnet-4-6',
                    max_tokens=100,
                    system=system,
                    messages=[{'role': 'user', 'content': 'Hi'}],
                )
    assert (server.errors, server.exchanges) == (
        ['A maximum of 4 blocks with cache_control may be provided. Found 5.'],
        [],
    )


@live_loopback
@pytest.mark.anyio
async def test_fake_provider_script_function_errors_are_refusals():
    def script(request: FakeRequest) -> Turn:
        raise ValueError(f'no reply for request {request.index}')

    with FakeProvider(script=script) as server:
        async with httpx2.AsyncClient(base_url=server.url) as client:
            response = await client.post('/v1/responses', json={'model': 'm', 'input': 'Hi'})
    assert (response.status_code, server.errors) == (
        400,
        ["FakeProvider script raised ValueError('no reply for request 0')"],
    )


def test_fake_provider_url_needs_a_running_server():
    with pytest.raises(RuntimeError, match='FakeProvider is not running'):
        _ = FakeProvider().url
