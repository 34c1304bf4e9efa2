"""Tests of the wire test infrastructure itself: the fake provider, the prefix checker and cassette replay.

Every wire claim of the package rests on these three, so they are shown working on their own first: the
checker on hand-written bodies (the only way to pin its exact splitting and messages), the fake provider
through real Pydantic AI model classes, and one recorded conversation per API replayed with the network
blocked, which is the pattern the package's wire tests follow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from anthropic import AsyncAnthropic
from dirty_equals import IsPositiveInt
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIResponsesModelSettings
from pydantic_ai.settings import ModelSettings

from fake_provider import (
    FakeProvider,
    FakeRequest,
    Text,
    ToolCalls,
    Turn,
    anthropic_model,
    openai_chat_model,
    openai_responses_model,
)
from pydantic_ai_append.testing import (
    Api,
    PrefixReuse,
    Segment,
    WireCapture,
    WireConversation,
    assert_prefix_stable,
    prefix_reuse,
    segments,
)

from .wire import CassetteCheck, loopback_as_fake_host

ModelFactory = Callable[..., Model]

MODEL_FACTORIES: Mapping[Api, ModelFactory] = {
    'anthropic': anthropic_model,
    'openai-chat': openai_chat_model,
    'openai-responses': openai_responses_model,
}

# Tests that talk to the live fake provider need loopback even when the suite runs with `--block-network`.
live_loopback = pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])


def get_time() -> str:
    """Get the current time."""
    return '12:00'


def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f'Sunny in {city}'


def body(value: object) -> bytes:
    # Spaces after separators, as a client might send them, so the tests show that segments re-encode.
    return json.dumps(value, ensure_ascii=False).encode()


# --- segments ---


def test_anthropic_segments_drop_cache_control_and_keep_key_order():
    request: dict[str, Any] = {
        'model': 'claude-sonnet-4-6',
        'max_tokens': 1024,
        'tools': [
            {'name': 'get_time', 'description': 'Get the time.', 'input_schema': {'type': 'object'}},
            {
                'name': 'get_weather',
                'input_schema': {'type': 'object'},
                'cache_control': {'type': 'ephemeral'},
            },
        ],
        'system': [
            {'type': 'text', 'text': 'Be brief.'},
            {'type': 'text', 'text': 'Café rules apply.', 'cache_control': {'type': 'ephemeral', 'ttl': '5m'}},
        ],
        'messages': [
            {'role': 'user', 'content': [{'type': 'text', 'text': 'Hi', 'cache_control': {'type': 'ephemeral'}}]},
            {'role': 'assistant', 'content': [{'type': 'tool_use', 'id': 't1', 'name': 'get_time', 'input': {}}]},
        ],
    }
    assert segments('anthropic', body(request)) == snapshot(
        [
            Segment(
                kind='tool',
                data=b'{"name":"get_time","description":"Get the time.","input_schema":{"type":"object"}}',
            ),
            Segment(kind='tool', data=b'{"name":"get_weather","input_schema":{"type":"object"}}'),
            Segment(kind='system', data=b'{"type":"text","text":"Be brief."}'),
            Segment(kind='system', data='{"type":"text","text":"Café rules apply."}'.encode()),
            Segment(kind='message', data=b'{"role":"user","content":[{"type":"text","text":"Hi"}]}'),
            Segment(
                kind='message',
                data=b'{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_time","input":{}}]}',
            ),
        ]
    )


def test_anthropic_moved_cache_control_keeps_segments():
    marker = {'cache_control': {'type': 'ephemeral'}}
    on_system = {
        'system': [{'type': 'text', 'text': 'Be brief.', **marker}],
        'messages': [{'role': 'user', 'content': 'Hi'}],
    }
    on_message = {
        'system': [{'type': 'text', 'text': 'Be brief.'}],
        'messages': [{'role': 'user', 'content': 'Hi', **marker}],
    }
    assert segments('anthropic', body(on_system)) == segments('anthropic', body(on_message))


def test_anthropic_string_system_is_one_segment():
    request = {'system': 'Be brief.', 'messages': [{'role': 'user', 'content': 'Hi'}]}
    assert segments('anthropic', body(request)) == snapshot(
        [
            Segment(kind='system', data=b'"Be brief."'),
            Segment(kind='message', data=b'{"role":"user","content":"Hi"}'),
        ]
    )


def test_openai_chat_segments():
    request: dict[str, Any] = {
        'model': 'gpt-5.2',
        'messages': [
            {'role': 'system', 'content': 'Be brief.'},
            {
                'role': 'user',
                'content': [{'type': 'text', 'text': 'Hi', 'prompt_cache_breakpoint': {'mode': 'explicit'}}],
            },
        ],
        'tools': [{'type': 'function', 'function': {'name': 'get_time', 'parameters': {}}}],
    }
    assert segments('openai-chat', body(request)) == snapshot(
        [
            Segment(kind='tool', data=b'{"type":"function","function":{"name":"get_time","parameters":{}}}'),
            Segment(kind='message', data=b'{"role":"system","content":"Be brief."}'),
            Segment(kind='message', data=b'{"role":"user","content":[{"type":"text","text":"Hi"}]}'),
        ]
    )


def test_openai_responses_segments():
    request: dict[str, Any] = {
        'model': 'gpt-5.2',
        'input': [{'role': 'user', 'content': 'Hi'}],
        'instructions': 'Be brief.',
        'tools': [{'type': 'function', 'name': 'get_time', 'parameters': {}}],
    }
    assert segments('openai-responses', body(request)) == snapshot(
        [
            Segment(kind='tool', data=b'{"type":"function","name":"get_time","parameters":{}}'),
            Segment(kind='instructions', data=b'"Be brief."'),
            Segment(kind='input', data=b'{"role":"user","content":"Hi"}'),
        ]
    )
    assert segments('openai-responses', body({'input': 'Hi'})) == snapshot([Segment(kind='input', data=b'"Hi"')])


def test_segments_reject_a_body_that_is_not_an_object():
    with pytest.raises(TypeError, match='openai-chat request body is not a JSON object'):
        segments('openai-chat', b'[]')


# --- previous_response_id ---

TOOLS: list[dict[str, Any]] = [{'type': 'function', 'name': 'get_time', 'parameters': {}}]


def responses_stream(*events: dict[str, Any]) -> bytes:
    return b''.join(f'event: {e["type"]}\ndata: {json.dumps(e)}\n\n'.encode() for e in events)


def chained_exchanges(third_instructions: str = 'Be brief.') -> list[tuple[bytes, bytes]]:
    first = body({'instructions': 'Be brief.', 'input': [{'role': 'user', 'content': 'Time?'}], 'tools': TOOLS})
    first_reply = body({'id': 'resp_1', 'output': [{'type': 'function_call', 'call_id': 'c1', 'name': 'get_time'}]})
    second = body(
        {
            'previous_response_id': 'resp_1',
            'instructions': 'Be brief.',
            'input': [{'type': 'function_call_output', 'call_id': 'c1', 'output': '12:00'}],
            'tools': TOOLS,
        }
    )
    # Streamed, with a stray non-JSON data line, as the second reply: the terminal event holds the response.
    second_reply = responses_stream(
        {'type': 'response.created', 'response': {'id': 'resp_2', 'output': []}},
        {'type': 'response.output_text.delta', 'delta': 'It is'},
        {'type': 'response.completed', 'response': {'id': 'resp_2', 'output': [{'type': 'message', 'text': 'Noon'}]}},
    ).replace(b'\n\n', b'\n\ndata: [DONE]\n\n', 1)
    third = body(
        {
            'previous_response_id': 'resp_2',
            'instructions': third_instructions,
            'input': [{'role': 'user', 'content': 'Thanks'}],
            'tools': TOOLS,
        }
    )
    return [(first, first_reply), (second, second_reply), (third, b'{"error": {"message": "no reply"}}')]


def test_responses_previous_response_id_is_reconstructed():
    conversation = WireConversation('openai-responses')
    for request_body, response_body in chained_exchanges():
        conversation.add(request_body, response_body)
    assert conversation.requests[2] == snapshot(
        [
            Segment(kind='tool', data=b'{"type":"function","name":"get_time","parameters":{}}'),
            Segment(kind='instructions', data=b'"Be brief."'),
            Segment(kind='input', data=b'{"role":"user","content":"Time?"}'),
            Segment(kind='output', data=b'{"type":"function_call","call_id":"c1","name":"get_time"}'),
            Segment(kind='input', data=b'{"type":"function_call_output","call_id":"c1","output":"12:00"}'),
            Segment(kind='output', data=b'{"type":"message","text":"Noon"}'),
            Segment(kind='input', data=b'{"role":"user","content":"Thanks"}'),
        ]
    )
    assert_prefix_stable(conversation.requests)


def test_responses_reconstruction_still_catches_changed_instructions():
    conversation = WireConversation('openai-responses')
    for request_body, response_body in chained_exchanges(third_instructions='Be verbose.'):
        conversation.add(request_body, response_body)
    with pytest.raises(AssertionError, match=r'segment is 1 \(instructions'):
        assert_prefix_stable(conversation.requests)


def test_responses_stream_without_a_response_registers_nothing():
    conversation = WireConversation('openai-responses')
    truncated = b'data: 7\n\n' + responses_stream({'type': 'response.output_text.delta', 'delta': 'It is'})
    conversation.add(body({'input': [{'role': 'user', 'content': 'Time?'}]}), truncated)
    with pytest.raises(AssertionError, match=r"names previous_response_id 'resp_1', .* \(known: \[\]\)"):
        conversation.add(body({'previous_response_id': 'resp_1', 'input': []}))


def test_responses_unknown_previous_response_id_fails():
    conversation = WireConversation('openai-responses')
    with pytest.raises(AssertionError, match="names previous_response_id 'resp_9'"):
        conversation.add(body({'previous_response_id': 'resp_9', 'input': []}))


# --- the checker ---


def conversation_of(*message_lists: list[dict[str, Any]]) -> list[list[Segment]]:
    return [segments('openai-chat', body({'messages': messages})) for messages in message_lists]


USER = {'role': 'user', 'content': 'What is the time in Paris, please? I need it for a meeting.'}


def test_prefix_divergence_names_request_segment_and_bytes():
    requests = conversation_of(
        [USER],
        [USER, {'role': 'assistant', 'content': 'Noon.'}],
        [{**USER, 'content': 'What is the time in Berlin, please? I need it for a meeting.'}],
    )
    with pytest.raises(AssertionError) as error:
        assert_prefix_stable(requests)
    assert str(error.value) == snapshot("""\
request 2 does not extend request 1 byte for byte: first divergent segment is 0 (message in request 1, message in request 2), at byte 46 of it
  request 1: …":"user","content":"What is the time in Paris, please? I need it for a meeting."}
  request 2: …":"user","content":"What is the time in Berlin, please? I need it for a meeting."}
(if request 2 opens a new window, pass new_windows=(2,))\
""")
    assert_prefix_stable(requests, new_windows=(2,))


def test_prefix_divergence_when_a_request_drops_segments():
    requests = conversation_of([USER, {'role': 'assistant', 'content': 'Noon.'}], [USER])
    with pytest.raises(AssertionError) as error:
        assert_prefix_stable(requests)
    assert str(error.value) == snapshot("""\
request 1 does not extend request 0 byte for byte: it ends after 1 segments, where request 0 goes on with segment 1 \
(message): {"role":"assistant","content":"Noon."}
(if request 1 opens a new window, pass new_windows=(1,))\
""")


def test_prefix_reuse_report():
    requests = conversation_of(
        [USER],
        [USER, {'role': 'assistant', 'content': 'Noon.'}],
        [{'role': 'user', 'content': 'Hi'}],
    )
    assert prefix_reuse(requests) == snapshot(
        [
            PrefixReuse(index=0, reused_bytes=0, new_bytes=87, total_bytes=87),
            PrefixReuse(index=1, reused_bytes=87, new_bytes=38, total_bytes=125),
            PrefixReuse(index=2, reused_bytes=0, new_bytes=30, total_bytes=30),
        ]
    )


# --- cassette check ---


class StubCassette:
    def __init__(self, size: int, played: dict[int, int], record_mode: str = 'none') -> None:
        self.play_counts = played
        self.record_mode = record_mode
        self._size = size

    def __len__(self) -> int:
        return self._size


def test_cassette_check_fails_on_unplayed_interactions():
    cassette = StubCassette(3, {})
    check = CassetteCheck(cassette)
    cassette.play_counts.update({0: 1, 2: 1})
    with pytest.raises(AssertionError, match=r'cassette interactions \[1\] of 3 were not played'):
        check.assert_all_played()
    cassette.play_counts[1] = 1
    check.assert_all_played()


def test_cassette_check_ignores_new_recordings_and_all_mode():
    recording = StubCassette(0, {})
    check = CassetteCheck(recording)
    recording._size = 2  # pyright: ignore[reportPrivateUsage]
    check.assert_all_played()
    CassetteCheck(StubCassette(2, {}, record_mode='all')).assert_all_played()


@dataclass
class RecordedRequestStub:
    uri: str


def test_recorded_loopback_uris_lose_their_port():
    rewritten = [
        loopback_as_fake_host(RecordedRequestStub(uri)).uri
        for uri in (
            'http://127.0.0.1:41234/v1/messages?beta=true',
            'http://localhost:8000/v1',
            'https://api.openai.com/v1',
        )
    ]
    assert rewritten == snapshot(
        [
            'http://fake-provider.invalid/v1/messages?beta=true',
            'http://fake-provider.invalid/v1',
            'https://api.openai.com/v1',
        ]
    )


# --- the fake provider, live ---


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
                'output_tokens': IsPositiveInt(),
                'cache_creation_input_tokens': 0,
                'cache_read_input_tokens': 0,
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


# --- recorded and replayed conversations ---

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


segment_lists = st.lists(
    st.lists(st.builds(Segment, st.sampled_from(['tool', 'message']), st.binary(min_size=1, max_size=3)), max_size=4),
    max_size=4,
)


@given(segment_lists)
def test_checker_and_report_agree(requests: list[list[Segment]]):
    # With no empty segments, a request reuses all of its predecessor's bytes exactly when it extends it.
    report = prefix_reuse(requests)
    extends = [report[index].reused_bytes == report[index - 1].total_bytes for index in range(1, len(requests))]
    try:
        assert_prefix_stable(requests)
    except AssertionError as error:
        first_break = extends.index(False) + 1
        assert str(error).startswith(f'request {first_break} does not extend request {first_break - 1}')
    else:
        assert all(extends)
