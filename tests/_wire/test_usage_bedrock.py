"""Bedrock Converse's usage (`_wire/usage`), read from its replies: the JSON `usage` of Converse and the `metadata`
event of ConverseStream's binary event stream, with the counts figured by hand, and mapped as Pydantic AI's
`BedrockConverseModel` maps them.

The replies are written here in the shapes Bedrock returns: a Converse body as AWS's API reference gives it (with the
`...TokenCount` twins and `serverToolUsage` recorded replies also carry), and a stream framed as AWS frames it, each
event's payload padded with the `p` field Bedrock adds.
"""

from __future__ import annotations

import json
from binascii import crc32
from typing import Any, cast
from urllib.parse import quote

import pytest
from botocore.stub import Stubber  # pyright: ignore[reportMissingTypeStubs]  # botocore ships no stubs
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.models.bedrock import BedrockConverseModel, BedrockModelSettings
from pydantic_ai.providers.bedrock import BedrockProvider

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append._wire.conversation import reply_payloads
from pydantic_ai_append._wire.event_stream import event_payloads
from pydantic_ai_append._wire.usage import ProviderUsage, reply_usage, usage_counts
from pydantic_ai_append.testing import WireExchange
from pydantic_ai_append.testing._wire_summary import wire_summary
from pydantic_ai_append.testing.fake_provider._event_stream import event_message

MODEL = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
PATH = f'/model/{quote(MODEL, safe="")}/converse'

# 24 uncached, 2,400 read, 1,500 written (1,000 of them for an hour), 6 out: 3,930 in all.
USAGE: dict[str, Any] = {
    'inputTokens': 24,
    'outputTokens': 6,
    'totalTokens': 3_930,
    'cacheReadInputTokens': 2_400,
    'cacheReadInputTokenCount': 2_400,
    'cacheWriteInputTokens': 1_500,
    'cacheWriteInputTokenCount': 1_500,
    'cacheDetails': [{'inputTokens': 1_000, 'ttl': '1h'}, {'inputTokens': 500, 'ttl': '5m'}],
    'serverToolUsage': {},
}
MESSAGE = {'role': 'assistant', 'content': [{'text': 'Noted.'}]}
JSON_REPLY: dict[str, Any] = {
    'output': {'message': MESSAGE},
    'stopReason': 'end_turn',
    'usage': USAGE,
    'metrics': {'latencyMs': 812},
}


def event(kind: str, payload: dict[str, Any], message_type: str = 'event') -> bytes:
    headers = {':event-type': kind, ':content-type': 'application/json', ':message-type': message_type}
    if message_type == 'exception':
        headers = {':exception-type': kind, ':content-type': 'application/json', ':message-type': message_type}
    return event_message(headers, json.dumps({**payload, 'p': 'abcdefgh'}).encode())


STREAM_EVENTS = [
    event('messageStart', {'role': 'assistant'}),
    event('contentBlockDelta', {'contentBlockIndex': 0, 'delta': {'text': 'Noted.'}}),
    event('contentBlockStop', {'contentBlockIndex': 0}),
    event('messageStop', {'stopReason': 'end_turn'}),
]
STREAM = b''.join([*STREAM_EVENTS, event('metadata', {'usage': USAGE, 'metrics': {'latencyMs': 812}})])


def test_bedrocks_reply_says_what_the_input_read_whole_or_streamed():
    figured = ProviderUsage(input_tokens=24 + 2_400 + 1_500, cache_read_tokens=2_400, cache_write_tokens=1_500,
                            cache_reported=True)  # fmt: skip
    assert reply_usage('bedrock-converse', json.dumps(JSON_REPLY).encode()) == figured
    assert reply_usage('bedrock-converse', STREAM) == figured
    assert usage_counts('bedrock-converse', USAGE) == snapshot(
        {
            'input_tokens': 3924,
            'cache_read_tokens': 2400,
            'cache_write_tokens': 1500,
            'cache_write_1h_tokens': 1000,
            'output_tokens': 6,
        }
    )
    # A model that caches nothing (Llama) reports no cache fields: nothing read, and nothing said of a cache.
    plain = {'inputTokens': 1_900, 'outputTokens': 3, 'totalTokens': 1_903}
    assert reply_usage('bedrock-converse', json.dumps({'output': {'message': MESSAGE}, 'usage': plain}).encode()) == (
        ProviderUsage(input_tokens=1_900, cache_read_tokens=0, cache_write_tokens=0, cache_reported=False)
    )


def test_the_event_streams_messages_are_read_up_to_one_cut_short_or_corrupted():
    assert [json.loads(payload)['p'] for payload in event_payloads(STREAM)] == ['abcdefgh'] * 5
    metadata = STREAM[sum(map(len, STREAM_EVENTS)) :]
    flipped = metadata[:-5] + bytes([metadata[-5] ^ 1]) + metadata[-4:]  # a payload byte: the message CRC fails
    assert len(event_payloads(b''.join(STREAM_EVENTS) + flipped)) == 4
    assert len(event_payloads(STREAM[:-1])) == 4  # the last message cut short
    # Not an event stream: JSON, server-sent events, nothing, a prelude whose CRC fails.
    for body in (json.dumps(JSON_REPLY).encode(), b'data: {"usage": {}}\n\n', b'', b'\x00' * 12 + STREAM):
        assert event_payloads(body) == []
    # A prelude whose CRC holds but whose lengths can't frame a message (headers longer than the message).
    lengths = (16).to_bytes(4, 'big') + (8).to_bytes(4, 'big')
    assert event_payloads(lengths + crc32(lengths).to_bytes(4, 'big') + b'\x00' * 8) == []


@pytest.mark.parametrize(
    'body',
    [
        # Bedrock's error body: a `message`, the error's type in a header the wire tools don't keep.
        b'{"message": "The provided model identifier is invalid."}',
        b''.join(STREAM_EVENTS),  # cut before the metadata event
        # A stream that ends in an exception, which botocore raises: its payload is the `message`.
        b''.join([*STREAM_EVENTS, event('throttlingException', {'message': 'Too many tokens'}, 'exception')]),
    ],
    ids=['error', 'stream-cut', 'stream-exception'],
)
def test_a_bedrock_reply_that_reports_no_usage_has_none(body: bytes):
    assert reply_usage('bedrock-converse', body) is None


def test_a_stream_that_ends_in_an_exception_is_an_error_the_summary_leaves_out():
    body = b''.join([*STREAM_EVENTS, event('throttlingException', {'message': 'Too many tokens'}, 'exception')])
    assert reply_payloads(body)[-1] == {'message': 'Too many tokens', 'p': 'abcdefgh'}
    request = b'{"messages": [{"role": "user", "content": [{"text": "Hello"}]}]}'
    summary = wire_summary('bedrock-converse', [WireExchange('POST', f'{PATH}-stream', request, [body])])
    assert summary.requests == 0


@pytest.mark.anyio
async def test_the_wire_summary_maps_bedrocks_usage_as_bedrock_converse_model_does():
    # botocore's stubber answers the real client with a reply it checks against Bedrock's service model: Pydantic AI's
    # own mapping of `usage`, and its price, are what the wire summary must give for the same reply.
    provider = BedrockProvider(region_name='us-east-1', aws_access_key_id='k', aws_secret_access_key='s')
    client = cast('Any', provider.client)
    reply = {
        **JSON_REPLY,
        'usage': {k: v for k, v in USAGE.items() if 'TokenCount' not in k and k != 'serverToolUsage'},
    }
    stubber: Any = Stubber(client)
    with stubber:
        stubber.add_response('converse', reply)
        model = BedrockConverseModel(MODEL, provider=provider)
        result = await Agent(model).run('Hello', model_settings=BedrockModelSettings(max_tokens=1_024))
    request = b'{"messages": [{"role": "user", "content": [{"text": "Hello"}]}]}'
    exchange = WireExchange('POST', PATH, request, [json.dumps(JSON_REPLY).encode()])
    (response,) = [message for message in result.all_messages() if message.kind == 'response']
    counts = usage_counts('bedrock-converse', USAGE)
    assert {name: getattr(response.usage, name) for name in counts} == counts
    assert (response.model_name, response.provider_name) == (MODEL, 'bedrock')
    summary = wire_summary('bedrock-converse', [exchange])
    assert summary == AppendInstructions.cache_summary(result.all_messages())
    assert summary.cost_usd > 0
