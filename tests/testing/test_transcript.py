"""`transcript` on bodies written by hand: the shapes an agent seldom sends (images, server tools, reasoning items,
results made of blocks), broken and shortened prefixes, placeholders and folding.

The transcripts of what real model classes send are pinned in `test_capture.py`, through the `prompt_wire`
fixture; these are unit tests of the renderer, since no agent in this suite sends most of these shapes.
"""

from __future__ import annotations

import hashlib

import pytest
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError

from pydantic_ai_append.testing import Api, Segment, WireConversation, transcript

from ..bodies import body


def conversation(api: Api, *requests: dict[str, object]) -> list[list[Segment]]:
    wire = WireConversation(api)
    for request in requests:
        wire.add(body(request))
    return wire.requests


def test_anthropic_blocks_server_tools_and_results():
    tools = [
        {'name': 'search', 'description': 'Search the docs.', 'input_schema': {'type': 'object'}},
        {'type': 'web_search_20250305', 'name': 'web_search', 'max_uses': 2},
        {'name': 'ping'},
    ]
    system = [{'type': 'text', 'text': 'Be brief.\nCite sources.'}]
    user = {
        'role': 'user',
        'content': [{'type': 'text', 'text': 'Find it'}, {'type': 'image', 'source': {'data': 'x'}}],
    }
    asked: dict[str, object] = {
        'role': 'assistant',
        'content': [
            {'type': 'thinking', 'thinking': 'Search first.', 'signature': 'sig'},
            {'type': 'tool_use', 'id': 'toolu_01', 'name': 'search', 'input': {'q': 'cache'}},
            {'type': 'server_tool_use', 'id': 'srvtoolu_9', 'name': 'web_search', 'input': {'query': 'cache'}},
            {'type': 'web_search_tool_result', 'tool_use_id': 'srvtoolu_9', 'content': []},
            {'type': 'custom', 'id': 'toolu_01', 'note': 'an id seen as a call is the call'},
        ],
    }
    answered = {
        'role': 'user',
        'content': [
            {'type': 'tool_result', 'tool_use_id': 'toolu_01', 'content': [{'type': 'text', 'text': 'Found.'}]},
            {'type': 'tool_result', 'tool_use_id': 'toolu_02'},
            'plain',
        ],
    }
    requests = conversation(
        'anthropic',
        {'tools': tools, 'system': system, 'messages': [user]},
        {'tools': tools, 'system': system, 'messages': [user, asked, answered]},
    )
    assert transcript(requests) == snapshot("""\
request 0: reuses 0 of 309 bytes
+ tool search: Search the docs.
+     input_schema: {"type":"object"}
+ tool web_search
+     type: web_search_20250305
+     max_uses: 2
+ tool ping
+ system: Be brief.
+     Cite sources.
+ user: Find it
+     {"type":"image","source":{"data":"x"}}

request 1: reuses 309 of 896 bytes
  tool search: Search the docs.
      input_schema: {"type":"object"}
  tool web_search
      type: web_search_20250305
      max_uses: 2
  tool ping
  system: Be brief.
      Cite sources.
  user: Find it
      {"type":"image","source":{"data":"x"}}
+ assistant: {"type":"thinking","thinking":"Search first.","signature":"sig"}
+     search({"q":"cache"}) [call#1]
+     web_search({"query":"cache"}) [call#2]
+     {"type":"web_search_tool_result","tool_use_id":"call#2","content":[]}
+     {"type":"custom","id":"call#1","note":"an id seen as a call is the call"}
+ user: result [call#1]: Found.
+     result [call#3]
+     plain
""")


def test_openai_chat_parts_and_odd_tool_calls():
    tools = [{'type': 'function', 'function': {'name': 'get_time', 'parameters': {'type': 'object'}}}, 'odd']
    user = {
        'role': 'user',
        'content': [{'type': 'text', 'text': 'Hi'}, {'type': 'image_url', 'image_url': {'url': 'u'}}],
    }
    asked = {
        'role': 'assistant',
        'content': 'Checking.',
        'tool_calls': [
            {'id': 'call_a', 'type': 'function', 'function': {'name': 'get_time', 'arguments': '{}'}},
            {'type': 'function', 'function': {'name': 'no_id', 'arguments': '{}'}},
            {'id': 'call_b', 'type': 'custom'},
            'odd',
        ],
        'refusal': None,
    }
    silent = {'role': 'assistant', 'content': None, 'tool_calls': None}
    requests = conversation(
        'openai-chat',
        {'tools': tools, 'messages': [user]},
        {'tools': tools, 'messages': [user, asked, silent]},
    )
    assert transcript(requests) == snapshot("""\
request 0: reuses 0 of 186 bytes
+ tool get_time
+     parameters: {"type":"object"}
+ tool odd
+ user: Hi
+     {"type":"image_url","image_url":{"url":"u"}}

request 1: reuses 186 of 496 bytes
  tool get_time
      parameters: {"type":"object"}
  tool odd
  user: Hi
      {"type":"image_url","image_url":{"url":"u"}}
+ assistant: Checking.
+     get_time({}) [call#1]
+     no_id({})
+     {"id":"id#1","type":"custom"}
+     odd
+     refusal: null
+ assistant
""")


def test_openai_responses_items():
    tools: list[object] = [
        {'type': 'function', 'name': 'get_time', 'description': 'Now.', 'parameters': {}},
        {'type': 'web_search'},
    ]
    first: dict[str, object] = {
        'tools': tools,
        'instructions': 'Be brief.',
        'input': [
            {'role': 'user', 'content': 'Time?'},
            {'type': 'reasoning', 'id': 'rs_1', 'summary': [], 'encrypted_content': 'opaque'},
            {'type': 'function_call', 'id': 'fc_1', 'call_id': 'call_1', 'name': 'get_time', 'arguments': '{}'},
            {'type': 'function_call_output', 'call_id': 'call_1', 'output': '12:00'},
            {'type': 'message', 'role': 'assistant', 'content': [{'type': 'output_text', 'text': 'Noon.'}]},
            {'type': 'input_text', 'text': 'bare text item'},
            {'content': 'no role, no type'},
        ],
    }
    assert transcript(conversation('openai-responses', first)) == snapshot("""\
request 0: reuses 0 of 532 bytes
+ tool get_time: Now.
+     parameters: {}
+ tool {"type":"web_search"}
+ instructions: Be brief.
+ user: Time?
+ reasoning
+     id: id#1
+     summary: []
+     encrypted_content: opaque
+ function_call: get_time({}) [call#1]
+     id: id#2
+ function_call_output [call#1]: 12:00
+ assistant: Noon.
+ input: bare text item
+ input: no role, no type
""")


def test_a_broken_and_a_shortened_prefix_are_marked():
    one, two, three = ({'role': 'user', 'content': text} for text in ('one', 'two', 'three'))
    requests = conversation(
        'openai-chat',
        {'messages': [one, two]},
        {'messages': [one, three, two]},
        {'messages': [one]},
    )
    assert transcript(requests) == snapshot("""\
request 0: reuses 0 of 62 bytes
+ user: one
+ user: two

request 1: reuses 31 of 95 bytes; breaks the prefix at segment 1 (message in request 0)
why: message 1 of the conversation changed or is gone in request 1: compaction or a history processor rewrote earlier messages, or this is another conversation
fix: if that is the compaction you chose, the move is expected; otherwise keep history append-only (the guard refuses rewrites of what the model already read: docs/guard.md)
  user: one
! user: three
+ user: two

request 2: reuses 31 of 31 bytes; breaks the prefix: ends after 1 of the 3 segments of request 1
why: message 1 of the conversation changed or is gone in request 2: compaction or a history processor rewrote earlier messages, or this is another conversation
fix: if that is the compaction you chose, the move is expected; otherwise keep history append-only (the guard refuses rewrites of what the model already read: docs/guard.md)
  user: one
""")


def test_long_texts_fold_to_their_length_and_hash_unless_told_not_to():
    long = 'x' * 30
    requests = conversation('anthropic', {'system': long, 'messages': [{'role': 'user', 'content': long}]})
    assert hashlib.sha256(long.encode()).hexdigest().startswith('666a596d')
    assert [transcript(requests, fold=29), transcript(requests, fold=30), transcript(requests, fold=None)] == snapshot(
        [
            """\
request 0: reuses 0 of 90 bytes
+ system: <30 chars sha256:666a596d>
+ user: <30 chars sha256:666a596d>
""",
            """\
request 0: reuses 0 of 90 bytes
+ system: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
+ user: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
""",
            """\
request 0: reuses 0 of 90 bytes
+ system: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
+ user: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
""",
        ]
    )


@pytest.mark.parametrize('fold', [0, -5])
def test_a_fold_below_one_is_refused(fold: int):
    with pytest.raises(UserError) as raised:
        transcript([], fold=fold)
    assert str(raised.value) == f'transcript fold must be at least 1 character, or None to fold nothing, not {fold}'


def test_no_requests_is_an_empty_transcript():
    assert transcript([]) == ''
