"""The provider's own cache usage (`_wire/usage`): read from recorded replies, and the rule that flags a disagreement
with the checker.

The first tests are unit tests of the pure functions, on reply bodies written here in the shapes the real APIs
return, whole and streamed; the rest run the checker, whose report shows both.

The provider's own cache use in the checker's report: beside the prefix the checker judged reusable, from the usage
each recorded reply reports, with a flag where the two disagree (`disagreement` holds the rule).

The cassettes are written here in the shape the real APIs record: long enough instructions for the providers' 1,024
token minimum, and each reply's `usage` as OpenAI and Anthropic report it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append._wire.segments import API_PATHS, Api
from pydantic_ai_append._wire.usage import Disagreement, ProviderUsage, disagreement, reply_usage, usage_counts
from pydantic_ai_append.testing import WireExchange, _wire_summary
from pydantic_ai_append.testing._wire_summary import wire_summary

from ..check_helpers import CHAT, MESSAGES, RESPONSES, assistant, interaction, run, user, write_cassette


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
# Groq streams its usage in the last chunk's `x_groq`, not in `usage`.
GROQ_STREAM = sse(
    (None, {**CHAT_CHUNKS[0], 'x_groq': {'id': 'req_01'}}),
    *((None, chunk) for chunk in CHAT_CHUNKS[1:-1]),
    (None, {**CHAT_CHUNKS[-1], 'x_groq': {'id': 'req_01', 'usage': CHAT_USAGE}}),
    (None, '[DONE]'),
)

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

GEMINI_USAGE = {'promptTokenCount': 2310, 'cachedContentTokenCount': 2176, 'candidatesTokenCount': 3}
GEMINI_CANDIDATE = {'content': {'role': 'model', 'parts': [{'text': 'Noted.'}]}, 'finishReason': 'STOP'}
GEMINI_JSON = json.dumps(
    {'candidates': [GEMINI_CANDIDATE], 'usageMetadata': GEMINI_USAGE, 'modelVersion': 'gemini-2.5-flash'}
).encode()
# Each chunk of Gemini's stream carries the usage so far; the last, the whole.
GEMINI_STREAM = sse(
    (None, {'candidates': [GEMINI_CANDIDATE], 'usageMetadata': {'promptTokenCount': 2310}}),
    (None, {'candidates': [GEMINI_CANDIDATE], 'usageMetadata': GEMINI_USAGE, 'modelVersion': 'gemini-2.5-flash'}),
)

REPLIES: dict[str, tuple[Api, bytes]] = {
    'chat-json': ('openai-chat', CHAT_JSON),
    'chat-stream': ('openai-chat', CHAT_STREAM),
    'responses-json': ('openai-responses', RESPONSES_JSON),
    'responses-stream': ('openai-responses', RESPONSES_STREAM),
    'anthropic-json': ('anthropic', ANTHROPIC_JSON),
    'anthropic-stream': ('anthropic', ANTHROPIC_STREAM),
    'anthropic-stream-after-start': ('anthropic', ANTHROPIC_STREAM_AFTER_START),
    'compatible-json': ('openai-chat', COMPATIBLE_JSON),
    'gemini-json': ('gemini', GEMINI_JSON),
    'gemini-stream': ('gemini', GEMINI_STREAM),
    'groq-stream': ('groq-chat', GROQ_STREAM),
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
            'gemini-json': ProviderUsage(
                input_tokens=2310, cache_read_tokens=2176, cache_write_tokens=0, cache_reported=True
            ),
            'gemini-stream': ProviderUsage(
                input_tokens=2310, cache_read_tokens=2176, cache_write_tokens=0, cache_reported=True
            ),
            'groq-stream': ProviderUsage(
                input_tokens=2310, cache_read_tokens=2176, cache_write_tokens=0, cache_reported=True
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


REQUESTS: dict[Api, bytes] = {
    'openai-chat': b'{"model": "gpt-5.2", "messages": [{"role": "user", "content": "hi"}]}',
    'openai-responses': b'{"model": "gpt-5.2", "input": "hi"}',
    'anthropic': b'{"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}',
    'gemini': b'{"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}',
    'groq-chat': b'{"model": "llama-3.3-70b-versatile", "messages": [{"role": "user", "content": "hi"}]}',
}


@pytest.mark.parametrize('api', get_args(Api))
def test_a_reply_of_every_api_is_read(api: Api):
    # Hugging Face's table has no cache field: a reply of it raised `KeyError` where each other API's was read.
    assert isinstance(reply_usage(api, b'{"usage": {"prompt_tokens": 10}}'), ProviderUsage)


@pytest.mark.parametrize('name', list(REPLIES))
def test_the_wire_summary_reads_the_same_table(name: str):
    api, body = REPLIES[name]
    # One table: the wire summary counts through `usage_counts`, not a copy of its own.
    assert _wire_summary.usage_counts is usage_counts
    assert not hasattr(_wire_summary, '_USAGE_FIELDS')
    usage, summary = (
        reply_usage(api, body),
        wire_summary(api, [WireExchange('POST', API_PATHS[api], REQUESTS[api], [body])]),
    )
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


RULES = ' '.join(
    f'Rule {n}: answer in the language of the question, briefly, and cite the file you read.' for n in range(60)
)


def chat_reply(prompt_tokens: int, cached_tokens: int) -> dict[str, Any]:
    message: dict[str, Any] = {'role': 'assistant', 'content': 'Done.', 'refusal': None, 'annotations': []}
    usage = {
        'prompt_tokens': prompt_tokens,
        'completion_tokens': 3,
        'total_tokens': prompt_tokens + 3,
        'prompt_tokens_details': {'cached_tokens': cached_tokens, 'audio_tokens': 0},
        'completion_tokens_details': {'reasoning_tokens': 0, 'audio_tokens': 0},
    }
    choice: dict[str, Any] = {'index': 0, 'message': message, 'logprobs': None, 'finish_reason': 'stop'}
    return {
        'id': 'chatcmpl-CkQ2', 'object': 'chat.completion', 'created': 1764700000, 'model': 'gpt-5.2-2025-12-11',
        'choices': [choice], 'usage': usage, 'service_tier': 'default', 'system_fingerprint': None,
    }  # fmt: skip


def chat(system: str, turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{'role': 'system', 'content': system}]
    for turn in range(turns):
        messages += [user(f'What does step {turn} do?'), assistant(f'Step {turn} parses.')]
    return {'model': 'gpt-5.2', 'messages': [*messages, user(f'What does step {turns} do?')]}


def test_the_provider_read_more_than_the_checker_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # The third request changes the first system message's first word, yet the provider read most of it from cache:
    # the checker's verdict on it is the one to doubt.
    cassette = write_cassette(
        tmp_path / 'chat.yaml',
        [
            interaction(CHAT, chat(RULES, 0), chat_reply(1_310, 0)),
            interaction(CHAT, chat(RULES, 1), chat_reply(1_335, 1_280)),
            interaction(CHAT, chat(f'Now {RULES}', 2), chat_reply(1_361, 1_280)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 1
    assert out.replace(str(tmp_path), '…').splitlines()[-3:] == snapshot(
        [
            '  provider: read 2,560 of 4,006 input tokens from cache (64%)',
            '  request 2 (interaction 2), read_more: the provider read 1,280 of 1,361 input tokens from cache (94%), but the checker judged only 0 of 5,421 bytes (0%) reusable, so the verdict on this request is likely wrong: compare it with the request before it by hand; if the provider is right, the checker does not know one of its cache rules',
            '1 conversation in 1 cassette: 1 breaks its prefix',
        ]
    )
    status, out, _ = run(capsys, str(cassette), '--json')
    verdicts = json.loads(out)['cassettes'][0]['conversations'][0]['request_verdicts']
    assert verdicts[2] == snapshot(
        {
            'request': 2,
            'interaction': 2,
            'reused_bytes': 0,
            'total_bytes': 5421,
            'provider': {
                'input_tokens': 1361,
                'cache_read_tokens': 1280,
                'cache_write_tokens': 0,
                'cache_reported': True,
            },
            'disagreement': {
                'kind': 'read_more',
                'message': 'the provider read 1,280 of 1,361 input tokens from cache (94%), but the checker judged only 0 of 5,421 bytes (0%) reusable, so the verdict on this request is likely wrong: compare it with the request before it by hand; if the provider is right, the checker does not know one of its cache rules',
            },
        }
    )


def test_a_miss_the_prefix_does_not_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cassette = write_cassette(
        tmp_path / 'chat.yaml',
        [
            interaction(CHAT, chat(RULES, 0), chat_reply(1_310, 0)),
            interaction(CHAT, chat(RULES, 1), chat_reply(1_335, 0)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    assert out.splitlines()[1:] == snapshot(
        [
            '  provider: read 0 of 2,645 input tokens from cache (0%)',
            '  request 1 (interaction 1), missed: the checker judged 5,227 of 5,322 bytes (about 1,311 tokens) reusable, but the provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another machine, or no breakpoint over the prefix), not an error of the checker',
            '1 conversation in 1 cassette: every one keeps its prefix',
        ]
    )


def anthropic_reply(uncached: int, written: int, read: int) -> dict[str, Any]:
    usage = {
        'input_tokens': uncached,
        'cache_creation_input_tokens': written,
        'cache_read_input_tokens': read,
        'cache_creation': {'ephemeral_5m_input_tokens': written, 'ephemeral_1h_input_tokens': 0},
        'output_tokens': 4,
        'service_tier': 'standard',
    }
    return {
        'id': 'msg_01XFDUDYJgAACzvnptvVoYEL', 'type': 'message', 'role': 'assistant', 'model': 'claude-sonnet-4-6',
        'content': [{'type': 'text', 'text': 'Done.'}], 'stop_reason': 'end_turn', 'stop_sequence': None,
        'usage': usage,
    }  # fmt: skip


def anthropic(turns: int, breakpoint: bool) -> dict[str, Any]:
    system: dict[str, Any] = {'type': 'text', 'text': RULES}
    if breakpoint:
        system['cache_control'] = {'type': 'ephemeral'}
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages += [user(f'What does step {turn} do?'), assistant(f'Step {turn} parses.')]
    messages.append(user(f'What does step {turns} do?'))
    return {'model': 'claude-sonnet-4-6', 'max_tokens': 1024, 'system': [system], 'messages': messages}


@pytest.mark.parametrize('breakpoint', [True, False])
def test_anthropic_reads_only_at_a_breakpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str], breakpoint: bool):
    # Nothing read of a long prefix is a miss worth a line only where a breakpoint covered it.
    cassette = write_cassette(
        tmp_path / 'messages.yaml',
        [
            interaction(MESSAGES, anthropic(0, breakpoint), anthropic_reply(1_330, 0, 0)),
            interaction(MESSAGES, anthropic(1, breakpoint), anthropic_reply(1_350, 0, 0)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    flagged = [line for line in out.splitlines() if line.startswith('  request ')]
    assert flagged == (
        snapshot(
            [
                '  request 1 (interaction 1), missed: the checker judged 5,222 of 5,317 bytes (about 1,326 tokens) reusable, but the provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another machine, or no breakpoint over the prefix), not an error of the checker'
            ]
        )
        if breakpoint
        else []
    )


def test_a_reply_that_cannot_be_read_says_no_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A Chat reply is read only for its usage, so one the checker can't decode leaves the verdict as it was.
    unreadable = interaction(CHAT, chat(RULES, 1), b'\x1f\x9d\x90', response_headers={'content-encoding': ['compress']})
    cassette = write_cassette(
        tmp_path / 'chat.yaml', [interaction(CHAT, chat(RULES, 0), chat_reply(1_310, 0)), unreadable]
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    assert out.splitlines()[1] == snapshot(
        '  provider: read 0 of 1,310 input tokens from cache (0%), as 1 of the 2 replies report'
    )


def test_a_responses_reply_that_cannot_be_read_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A Responses reply holds the output a later `previous_response_id` brings in, so the checker must read it.
    body = {'model': 'gpt-5.2', 'input': [user('Hi')]}
    broken = interaction(RESPONSES, body, b'\x1f\x9d\x90', response_headers={'content-encoding': ['compress']})
    status, _, err = run(capsys, str(write_cassette(tmp_path / 'responses.yaml', [broken])))
    assert (status, err.replace(str(tmp_path), '…')) == snapshot(
        (
            2,
            "pydantic-ai-append check: error: …/responses.yaml: interaction 0 (POST https://api.openai.com/v1/responses): the response body has content-encoding 'compress', which the checker cannot decode\n",
        )
    )
