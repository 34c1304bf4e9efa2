"""The provider's own cache usage read from recorded replies, and the rule that flags a disagreement with the checker.

These are unit tests of pure functions: the checker's report doesn't show the provider's usage yet, so there is no
command whose output would show them. The reply bodies are written here in the shapes the real APIs return, whole
and streamed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, NamedTuple

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append._wire.segments import Api
from pydantic_ai_append._wire.usage import Disagreement, ProviderUsage, disagreement, reply_usage, usage_counts
from pydantic_ai_append.testing import _wire_summary
from pydantic_ai_append.testing._wire_summary import wire_summary


def sse(*events: tuple[str | None, dict[str, Any] | str]) -> bytes:
    """An event stream: each event's optional `event:` line, then its `data:` line."""
    lines: list[str] = []
    for name, data in events:
        if name is not None:
            lines.append(f'event: {name}')
        lines += [f'data: {data if isinstance(data, str) else json.dumps(data)}', '']
    return '\n'.join(lines).encode()


CHAT_USAGE = {
    'prompt_tokens': 2310,
    'completion_tokens': 4,
    'total_tokens': 2314,
    'prompt_tokens_details': {'cached_tokens': 2176, 'audio_tokens': 0},
    'completion_tokens_details': {
        'reasoning_tokens': 0,
        'audio_tokens': 0,
        'accepted_prediction_tokens': 0,
        'rejected_prediction_tokens': 0,
    },
}
CHAT_JSON = json.dumps(
    {
        'id': 'chatcmpl-CxQ2m7Rb',
        'object': 'chat.completion',
        'created': 1767000000,
        'model': 'gpt-5.2-2025-12-11',
        'choices': [
            {
                'index': 0,
                'message': {'role': 'assistant', 'content': 'Noted.', 'refusal': None, 'annotations': []},
                'logprobs': None,
                'finish_reason': 'stop',
            }
        ],
        'usage': CHAT_USAGE,
        'service_tier': 'default',
        'system_fingerprint': None,
    }
).encode()


def chat_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {'index': 0, 'delta': delta, 'logprobs': None, 'finish_reason': finish}
    return {'id': 'chatcmpl-CxQ2n', 'object': 'chat.completion.chunk', 'created': 1767000001,
            'model': 'gpt-5.2-2025-12-11', 'choices': [choice], 'usage': None}  # fmt: skip


CHAT_CHUNKS = [
    chat_chunk({'role': 'assistant', 'content': ''}),
    chat_chunk({'content': 'Noted.'}),
    chat_chunk({}, 'stop'),
]
# With `stream_options.include_usage`, a last chunk without choices carries the usage; then `[DONE]`.
CHAT_STREAM = sse(
    *((None, chunk) for chunk in CHAT_CHUNKS),
    (None, {**CHAT_CHUNKS[0], 'choices': [], 'usage': CHAT_USAGE}),
    (None, '[DONE]'),
)
CHAT_STREAM_CUT = sse(*((None, chunk) for chunk in CHAT_CHUNKS[:2]))

RESPONSES_USAGE = {
    'input_tokens': 3104,
    'input_tokens_details': {'cached_tokens': 2944},
    'output_tokens': 5,
    'output_tokens_details': {'reasoning_tokens': 0},
    'total_tokens': 3109,
}
RESPONSES_MESSAGE: dict[str, Any] = {
    'id': 'msg_0a1b2c',
    'type': 'message',
    'status': 'completed',
    'role': 'assistant',
    'content': [{'type': 'output_text', 'annotations': [], 'logprobs': [], 'text': 'Noted.'}],
}


def responses_object(status: str, output: list[Any], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {'id': 'resp_0a1b', 'object': 'response', 'created_at': 1767000000, 'status': status,
            'model': 'gpt-5.2-2025-12-11', 'output': output, 'usage': usage}  # fmt: skip


RESPONSES_JSON = json.dumps(responses_object('completed', [RESPONSES_MESSAGE], RESPONSES_USAGE)).encode()
RESPONSES_OPENING: list[tuple[str | None, dict[str, Any] | str]] = [
    ('response.created', {'type': 'response.created', 'sequence_number': 0,
                          'response': responses_object('in_progress', [], None)}),
    ('response.in_progress', {'type': 'response.in_progress', 'sequence_number': 1,
                              'response': responses_object('in_progress', [], None)}),
    ('response.output_text.delta', {'type': 'response.output_text.delta', 'sequence_number': 2,
                                    'item_id': 'msg_0a1b2c', 'output_index': 0, 'content_index': 0,
                                    'delta': 'Noted.', 'logprobs': []}),
]  # fmt: skip
RESPONSES_STREAM = sse(
    *RESPONSES_OPENING,
    ('response.completed', {'type': 'response.completed', 'sequence_number': 3,
                            'response': responses_object('completed', [RESPONSES_MESSAGE], RESPONSES_USAGE)}),
)  # fmt: skip
RESPONSES_STREAM_CUT = sse(*RESPONSES_OPENING)

ANTHROPIC_USAGE = {
    'input_tokens': 12,
    'cache_creation_input_tokens': 180,
    'cache_read_input_tokens': 2400,
    'cache_creation': {'ephemeral_5m_input_tokens': 180, 'ephemeral_1h_input_tokens': 0},
    'output_tokens': 4,
    'service_tier': 'standard',
}
ANTHROPIC_JSON = json.dumps(
    {
        'id': 'msg_01Fq9',
        'type': 'message',
        'role': 'assistant',
        'model': 'claude-sonnet-4-5-20250929',
        'content': [{'type': 'text', 'text': 'Noted.'}],
        'stop_reason': 'end_turn',
        'stop_sequence': None,
        'usage': ANTHROPIC_USAGE,
    }
).encode()
ANTHROPIC_START: tuple[str | None, dict[str, Any] | str] = (
    'message_start',
    {'type': 'message_start', 'message': {'id': 'msg_01Fq9', 'type': 'message', 'role': 'assistant',
                                          'model': 'claude-sonnet-4-5-20250929', 'content': [], 'stop_reason': None,
                                          'stop_sequence': None, 'usage': {**ANTHROPIC_USAGE, 'output_tokens': 1}}},
)  # fmt: skip
ANTHROPIC_STREAM = sse(
    ANTHROPIC_START,
    ('content_block_start', {'type': 'content_block_start', 'index': 0, 'content_block': {'type': 'text', 'text': ''}}),
    ('ping', {'type': 'ping'}),
    ('content_block_delta', {'type': 'content_block_delta', 'index': 0,
                             'delta': {'type': 'text_delta', 'text': 'Noted.'}}),
    ('content_block_stop', {'type': 'content_block_stop', 'index': 0}),
    # The final usage repeats the input figures and updates `output_tokens`.
    ('message_delta', {'type': 'message_delta', 'delta': {'stop_reason': 'end_turn', 'stop_sequence': None},
                       'usage': {'input_tokens': 12, 'cache_creation_input_tokens': 180,
                                 'cache_read_input_tokens': 2400, 'output_tokens': 4}}),
    ('message_stop', {'type': 'message_stop'}),
)  # fmt: skip
ANTHROPIC_STREAM_AFTER_START = sse(ANTHROPIC_START)

ANTHROPIC_ERROR = json.dumps(
    {
        'type': 'error',
        'error': {'type': 'overloaded_error', 'message': 'Overloaded'},
        'request_id': 'req_011CX',
    }
).encode()
OPENAI_ERROR = json.dumps(
    {'error': {'message': 'Rate limit reached.', 'type': 'requests', 'param': None, 'code': 'rate_limit_exceeded'}}
).encode()
# An OpenAI-compatible server at the same path, reporting prompt tokens but nothing of a cache.
COMPATIBLE_JSON = json.dumps(
    {
        'id': 'chatcmpl-7',
        'object': 'chat.completion',
        'model': 'llama3.2',
        'choices': [{'index': 0, 'message': {'role': 'assistant', 'content': 'Noted.'}, 'finish_reason': 'stop'}],
        'usage': {'prompt_tokens': 1900, 'completion_tokens': 3, 'total_tokens': 1903},
    }
).encode()

REPLIES: dict[str, tuple[Api, bytes]] = {
    'chat-json': ('openai-chat', CHAT_JSON),
    'chat-stream': ('openai-chat', CHAT_STREAM),
    'responses-json': ('openai-responses', RESPONSES_JSON),
    'responses-stream': ('openai-responses', RESPONSES_STREAM),
    'anthropic-json': ('anthropic', ANTHROPIC_JSON),
    'anthropic-stream': ('anthropic', ANTHROPIC_STREAM),
    'anthropic-stream-after-start': ('anthropic', ANTHROPIC_STREAM_AFTER_START),
    'compatible-json': ('openai-chat', COMPATIBLE_JSON),
}


def test_each_apis_reply_says_what_the_input_read_whole_or_streamed():
    assert {name: reply_usage(api, body) for name, (api, body) in REPLIES.items()} == snapshot(
        {
            'chat-json': ProviderUsage(
                input_tokens=2310, cache_read_tokens=2176, cache_write_tokens=0, cache_reported=True
            ),
            'chat-stream': ProviderUsage(
                input_tokens=2310, cache_read_tokens=2176, cache_write_tokens=0, cache_reported=True
            ),
            'responses-json': ProviderUsage(
                input_tokens=3104, cache_read_tokens=2944, cache_write_tokens=0, cache_reported=True
            ),
            'responses-stream': ProviderUsage(
                input_tokens=3104, cache_read_tokens=2944, cache_write_tokens=0, cache_reported=True
            ),
            'anthropic-json': ProviderUsage(
                input_tokens=2592, cache_read_tokens=2400, cache_write_tokens=180, cache_reported=True
            ),
            'anthropic-stream': ProviderUsage(
                input_tokens=2592, cache_read_tokens=2400, cache_write_tokens=180, cache_reported=True
            ),
            'anthropic-stream-after-start': ProviderUsage(
                input_tokens=2592, cache_read_tokens=2400, cache_write_tokens=180, cache_reported=True
            ),
            'compatible-json': ProviderUsage(
                input_tokens=1900, cache_read_tokens=0, cache_write_tokens=0, cache_reported=False
            ),
        }
    )


@pytest.mark.parametrize(
    ('api', 'body'),
    [
        ('anthropic', ANTHROPIC_ERROR),
        ('openai-chat', OPENAI_ERROR),
        ('openai-chat', CHAT_STREAM_CUT),
        ('openai-responses', RESPONSES_STREAM_CUT),
        ('openai-chat', b''),
        ('openai-chat', b'<html><body>502 Bad Gateway</body></html>'),
    ],
    ids=['anthropic-error', 'openai-error', 'chat-stream-cut', 'responses-stream-cut', 'empty', 'html'],
)
def test_a_reply_that_reports_no_usage_has_none(api: Api, body: bytes):
    assert reply_usage(api, body) is None


class Exchange(NamedTuple):
    request_body: bytes
    response_body: bytes


REQUESTS: dict[Api, bytes] = {
    'openai-chat': b'{"model": "gpt-5.2", "messages": [{"role": "user", "content": "hi"}]}',
    'openai-responses': b'{"model": "gpt-5.2", "input": "hi"}',
    'anthropic': b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}',
}


@pytest.mark.parametrize('name', list(REPLIES))
def test_the_wire_summary_reads_the_same_table(name: str):
    api, body = REPLIES[name]
    # One table: the wire summary counts through `usage_counts`, not a copy of its own.
    assert _wire_summary.usage_counts is usage_counts
    assert not hasattr(_wire_summary, '_USAGE_FIELDS')
    usage, summary = reply_usage(api, body), wire_summary(api, [Exchange(REQUESTS[api], body)])
    assert usage is not None
    assert (summary.cache_read_tokens, summary.cache_write_tokens) == (
        usage.cache_read_tokens,
        usage.cache_write_tokens,
    )
    assert summary.cache_read_tokens + summary.cache_write_tokens + summary.uncached_input_tokens == usage.input_tokens


def test_the_module_imports_without_pydantic_ai():
    # The checker imports it, and the checker runs without Pydantic AI.
    code = 'import sys, pydantic_ai_append._wire.usage; print(sorted(m for m in sys.modules if m.startswith("pydantic_ai.")))'
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert result.stdout == '[]\n'


def usage(input_tokens: int, cache_read_tokens: int, *, cache_reported: bool = True) -> ProviderUsage:
    return ProviderUsage(input_tokens, cache_read_tokens, cache_write_tokens=0, cache_reported=cache_reported)


def test_a_read_close_to_the_judged_prefix_agrees():
    # 90% of the bytes judged reused, 85% of the tokens read: bytes and tokens are not proportional.
    assert disagreement('openai-chat', usage(5000, 4224), reused_bytes=18000, total_bytes=20000, first=False) is None


def test_a_provider_reading_much_more_than_judged_is_flagged():
    # The checker says the prefix broke at the first tool; the provider read 92% of the input.
    found = disagreement('openai-responses', usage(5000, 4608), reused_bytes=0, total_bytes=20000, first=False)
    assert found == snapshot(
        Disagreement(
            kind='read_more',
            message='the provider read 4,608 of 5,000 input tokens from cache (92%), but the checker judged only 0 of 20,000 bytes (0%) reusable, so the verdict on this request is likely wrong: compare it with the request before it by hand; if the provider is right, the checker does not know one of its cache rules',
        )
    )


def test_reading_more_of_a_request_that_kept_the_prefix_is_not_flagged():
    # The checker judged all of the previous request reusable: a larger share of tokens is the provider's own tokens
    # (Anthropic's tool-use system prompt) or its tokenizer, not a wrong verdict.
    assert (
        disagreement('anthropic', usage(1476, 1321), reused_bytes=404, total_bytes=778, first=False, kept=True) is None
    )


def test_the_first_request_reading_an_older_cache_is_not_flagged():
    # A cache written before the conversation (an earlier run with the same instructions) is the provider's to read.
    assert disagreement('anthropic', usage(5000, 4608), reused_bytes=0, total_bytes=20000, first=True) is None


def test_anthropic_reading_less_than_judged_is_not_flagged():
    # The breakpoint sits after the instructions: Anthropic reads those, not the whole prefix the checker judged.
    found = disagreement('anthropic', usage(5000, 2000), reused_bytes=19000, total_bytes=20000, first=False)
    assert found is None


def test_reading_nothing_of_a_large_judged_prefix_is_a_miss():
    # OpenAI caches every prompt of 1,024 tokens or more; Anthropic where a breakpoint covers the prefix.
    found = {
        api: disagreement(api, usage(5000, 0), reused_bytes=18000, total_bytes=20000, first=False, cache_control=True)
        for api in ('openai-chat', 'anthropic')
    }
    assert found == snapshot(
        {
            'openai-chat': Disagreement(
                kind='missed',
                message='the checker judged 18,000 of 20,000 bytes (about 4,500 tokens) reusable, but the provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another machine, or no breakpoint over the prefix), not an error of the checker',
            ),
            'anthropic': Disagreement(
                kind='missed',
                message='the checker judged 18,000 of 20,000 bytes (about 4,500 tokens) reusable, but the provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another machine, or no breakpoint over the prefix), not an error of the checker',
            ),
        }
    )


@pytest.mark.parametrize(
    ('api', 'reply', 'options'),
    [
        ('anthropic', usage(5000, 0), {}),
        ('openai-chat', usage(5000, 0, cache_reported=False), {}),
        ('openai-chat', usage(1100, 0), {}),
        ('anthropic', usage(3500, 0), {'cache_control': True, 'minimum_tokens': 4096}),
        ('openai-chat', usage(5000, 0), {'first': True}),
    ],
    ids=['anthropic-unmarked', 'cache-unreported', 'below-minimum', 'below-models-minimum', 'first-request'],
)
def test_reading_nothing_is_not_a_miss_where_the_provider_would_not_cache(
    api: Api, reply: ProviderUsage, options: dict[str, Any]
):
    assert disagreement(api, reply, reused_bytes=18000, total_bytes=20000, **{'first': False, **options}) is None


def test_empty_figures_agree():
    assert disagreement('openai-chat', usage(0, 0), reused_bytes=0, total_bytes=0, first=False) is None
