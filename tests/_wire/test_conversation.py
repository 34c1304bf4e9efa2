"""`WireConversation` on the Responses API: a request chained with `previous_response_id` is compared as the whole
conversation the provider rebuilds from the earlier requests and replies.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append.testing import Segment, WireConversation, assert_prefix_stable

from ..bodies import body

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
