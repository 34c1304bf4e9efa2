"""`segments`: how each provider API's request body splits into cache-order segments, shown on hand-written bodies.

Hand-written bodies are the only way to pin the exact splitting: what is dropped (cache markers), what is kept (key
order), and what each segment's kind is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append._wire.cache_rules import SETTINGS
from pydantic_ai_append._wire.segments import API_PATHS, CACHE_MARKER_KEYS, Api, api_of, model_of, segments
from pydantic_ai_append._wire.usage import PROVIDERS, USAGE_FIELDS
from pydantic_ai_append.testing import Segment

from ..bodies import body


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


def test_gemini_segments_are_system_parts_then_tools_then_contents():
    request: dict[str, Any] = {
        'contents': [{'role': 'user', 'parts': [{'text': 'Hi'}]}],
        'systemInstruction': {'role': 'user', 'parts': [{'text': 'Be brief.'}, {'text': 'Use tools.'}]},
        'tools': [{'functionDeclarations': [{'name': 'get_time', 'description': 'Now.'}]}],
        'generationConfig': {'temperature': 0},
    }
    assert segments('gemini', body(request)) == snapshot(
        [
            Segment(kind='system', data=b'{"text":"Be brief."}'),
            Segment(kind='system', data=b'{"text":"Use tools."}'),
            Segment(kind='tool', data=b'{"functionDeclarations":[{"name":"get_time","description":"Now."}]}'),
            Segment(kind='message', data=b'{"role":"user","parts":[{"text":"Hi"}]}'),
        ]
    )
    # Without a system instruction, the tools lead.
    assert segments('gemini', body({'contents': request['contents']})) == snapshot(
        [Segment(kind='message', data=b'{"role":"user","parts":[{"text":"Hi"}]}')]
    )


def test_bedrock_segments_are_tools_then_system_then_messages_without_cache_points():
    point = {'cachePoint': {'type': 'default'}}
    request: dict[str, Any] = {
        'messages': [
            {'role': 'user', 'content': [{'text': 'Hi'}, point]},
            {'role': 'assistant', 'content': [{'toolUse': {'toolUseId': 't1', 'name': 'get_time', 'input': {}}}]},
        ],
        'system': [{'text': 'Be brief.'}, point],
        'inferenceConfig': {'maxTokens': 1024},
        'toolConfig': {'tools': [{'toolSpec': {'name': 'get_time', 'inputSchema': {'json': {}}}}, point]},
    }
    assert segments('bedrock-converse', body(request)) == snapshot(
        [
            Segment(kind='tool', data=b'{"toolSpec":{"name":"get_time","inputSchema":{"json":{}}}}'),
            Segment(kind='system', data=b'{"text":"Be brief."}'),
            Segment(kind='message', data=b'{"role":"user","content":[{"text":"Hi"}]}'),
            Segment(
                kind='message',
                data=b'{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_time","input":{}}}]}',
            ),
        ]
    )
    # Moving the cache point to the newest message keeps every earlier segment; an empty object stays content.
    later = {'messages': [{'role': 'user', 'content': [{'text': 'Hi'}, {}]}], 'toolConfig': []}
    assert segments('bedrock-converse', body(later)) == snapshot(
        [Segment(kind='message', data=b'{"role":"user","content":[{"text":"Hi"},{}]}')]
    )


@pytest.mark.parametrize(
    ('path', 'request_body', 'model'),
    [
        ('/v1/chat/completions', {'model': 'gpt-5.2'}, 'gpt-5.2'),
        ('/v1beta/models/gemini-2.5-flash:generateContent', {}, 'gemini-2.5-flash'),
        ('/v1beta/models/gemini-3-pro:streamGenerateContent', {}, 'gemini-3-pro'),
        ('/model/us.anthropic.claude-sonnet-4-5-v1%3A0/converse', {}, 'us.anthropic.claude-sonnet-4-5-v1:0'),
        ('/model/amazon.nova-pro-v1:0/converse-stream', {}, 'amazon.nova-pro-v1:0'),
        ('/v1/messages', {'model': None}, ''),
    ],
)
def test_the_model_is_the_bodys_or_the_one_the_path_names(path: str, request_body: dict[str, Any], model: str):
    assert model_of(path, request_body) == model


def test_bedrock_paths_are_read_as_bedrock_converse():
    paths = ['/model/m/converse', '/model/m/converse-stream', '/model/m/invoke']
    assert [api_of('POST', path) for path in paths] == ['bedrock-converse', 'bedrock-converse', None]


_PER_API_TABLES: dict[str, Mapping[Api, object]] = {
    'segments.API_PATHS': API_PATHS,
    'segments.CACHE_MARKER_KEYS': CACHE_MARKER_KEYS,
    'cache_rules.SETTINGS': SETTINGS,
    'usage.USAGE_FIELDS': USAGE_FIELDS,
    'usage.PROVIDERS': PROVIDERS,
}


@pytest.mark.parametrize(('table', 'api'), [(name, api) for name in _PER_API_TABLES for api in get_args(Api)])
def test_every_table_keyed_by_api_names_every_api(table: str, api: Api):
    # A table that leaves an API out fails with a `KeyError` only once a request to that API is read.
    assert api in _PER_API_TABLES[table]
