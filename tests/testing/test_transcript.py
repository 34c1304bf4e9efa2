"""`transcript` on bodies written by hand: the shapes an agent seldom sends (images, server tools, reasoning items,
results made of blocks, Gemini's parts and Bedrock's content blocks of every kind), broken and shortened prefixes,
placeholders and folding.

The transcripts of what real model classes send are pinned in `test_capture.py` and the `test_prompt_wire_*.py` files,
through the `prompt_wire` fixture; these are unit tests of the renderer, since no agent in this suite sends most of
these shapes.
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


def test_gemini_parts_calls_results_and_tools():
    declarations: list[object] = [
        {'name': 'get_time', 'description': 'Now.', 'parameters_json_schema': {'type': 'object'}},
        {'name': 'ping', 'parameters': {}},
    ]
    tools: list[object] = [{'functionDeclarations': declarations}, {'googleSearch': {}}]
    system = {'parts': [{'text': 'Be brief.'}, {'text': 'Cite sources.'}]}
    asked = {
        'role': 'user',
        'parts': [{'text': 'Time?'}, {'inlineData': {'mimeType': 'image/png', 'data': 'iVBO'}}, {}],
    }
    called: dict[str, object] = {
        'role': 'model',
        'parts': [
            {'text': 'Ask the clock.', 'thought': True},
            {'functionCall': {'id': 'fc_9', 'args': {}, 'name': 'get_time'}, 'thoughtSignature': 'c2ln'},
            {'functionCall': {'args': {'host': 'a'}, 'name': 'ping'}},
            {'functionCall': {'name': 'no_args'}},
            {'text': 5},
        ],
    }
    answered = {
        'role': 'user',
        'parts': [
            {'functionResponse': {'id': 'fc_9', 'name': 'get_time', 'response': {'return_value': '12:00'}}},
            {'functionResponse': {'name': 'ping', 'response': {'return_value': 'pong'}, 'willContinue': False}},
            {'functionResponse': {'id': 'fc_9'}},
        ],
    }
    bare = {'parts': [{'text': 'no role'}]}
    body: dict[str, object] = {'systemInstruction': system, 'tools': tools, 'contents': [asked, called, answered, bare]}
    assert transcript(conversation('gemini', body)) == snapshot("""\
request 0: reuses 0 of 828 bytes
+ system: Be brief.
+ system: Cite sources.
+ tool get_time: Now.
+     parameters_json_schema: {"type":"object"}
+ tool ping
+     parameters: {}
+ tool {"googleSearch":{}}
+ user: Time?
+     inlineData: {"mimeType":"image/png","data":"iVBO"}
+     {}
+ model: Ask the clock.
+         thought: true
+     get_time({}) [call#1]
+         thoughtSignature: c2ln
+     ping({"host":"a"})
+     functionCall: {"name":"no_args"}
+     text: 5
+ user: result get_time [call#1]: {"return_value":"12:00"}
+     result ping: {"return_value":"pong"}
+         willContinue: false
+     result [call#1]
+ message: no role
""")


def test_bedrock_converse_blocks_calls_and_results():
    spec = {'name': 'get_time', 'description': 'Now.', 'inputSchema': {'json': {'type': 'object'}}}
    tools: list[object] = [{'toolSpec': spec}, {'cachePoint': {'type': 'default'}}, {'toolSpec': 'odd'}]
    system: list[object] = [{'text': 'Be brief.'}, {'guardContent': {'text': {'text': 'Stay safe.'}}}]
    asked = {
        'role': 'user',
        'content': [{'text': 'Time?'}, {'image': {'format': 'png', 'source': {'bytes': 'iVBO'}}}],
    }
    reasoning = {'reasoningText': {'text': 'Ask the clock.', 'signature': 'sig'}}
    called: dict[str, object] = {
        'role': 'assistant',
        'content': [
            {'reasoningContent': reasoning},
            {'toolUse': {'toolUseId': 'tooluse_Ab1', 'name': 'get_time', 'input': {}}},
            {'toolUse': {'toolUseId': 'tooluse_Cd2', 'name': 'get_time', 'input': {'zone': 'UTC'}}},
        ],
    }
    answered = {
        'role': 'user',
        'content': [
            {'toolResult': {'toolUseId': 'tooluse_Ab1', 'content': [{'text': '12:00'}], 'status': 'success'}},
            {
                'toolResult': {
                    'toolUseId': 'tooluse_Cd2',
                    'content': [{'json': {'error': 'no zone'}}],
                    'status': 'error',
                }
            },
            {'toolResult': {'toolUseId': 'tooluse_Ef3'}},
            {'cachePoint': {'type': 'default'}},
        ],
    }
    body: dict[str, object] = {'toolConfig': {'tools': tools}, 'system': system, 'messages': [asked, called, answered]}
    assert transcript(conversation('bedrock-converse', body)) == snapshot("""\
request 0: reuses 0 of 803 bytes
+ tool get_time: Now.
+     inputSchema: {"json":{"type":"object"}}
+ tool {"toolSpec":"odd"}
+ system: Be brief.
+ system
+     guardContent: {"text":{"text":"Stay safe."}}
+ user: Time?
+     image: {"format":"png","source":{"bytes":"iVBO"}}
+ assistant: reasoningContent: {"reasoningText":{"text":"Ask the clock.","signature":"sig"}}
+     get_time({}) [call#1]
+     get_time({"zone":"UTC"}) [call#2]
+ user: result [call#1]: 12:00
+         status: success
+     result [call#2]: json: {"error":"no zone"}
+         status: error
+     result [call#3]
""")


def test_cohere_and_mistral_shapes_read_as_chat_messages():
    # Cohere's v2 Chat and Mistral's Chat Completions carry keys of their own on OpenAI Chat's shapes (a plan beside
    # the calls, content as blocks, a call's `index`, `prefix`): each still reads as a message, its keys shown.
    call = {'id': 'get_time_k2', 'type': 'function', 'function': {'name': 'get_time', 'arguments': '{}'}}
    cohere = [
        {'role': 'system', 'content': 'Be brief.'},
        {'role': 'user', 'content': [{'type': 'text', 'text': 'Time?'}]},
        {'role': 'assistant', 'tool_plan': 'Ask the clock.', 'tool_calls': [call]},
        {'role': 'tool', 'tool_call_id': 'get_time_k2', 'content': [{'type': 'document', 'document': {'data': '12'}}]},
        {
            'role': 'assistant',
            'content': [{'type': 'thinking', 'thinking': 'Done.'}, {'type': 'text', 'text': 'Noon.'}],
        },
    ]
    mistral = [
        {'content': 'Time?', 'role': 'user'},
        {'role': 'assistant', 'content': [], 'tool_calls': [{**call, 'index': 0}], 'prefix': False},
        {'content': '12:00', 'role': 'tool', 'tool_call_id': 'get_time_k2'},
        {'role': 'assistant', 'content': [{'text': 'Noon.', 'type': 'text'}], 'tool_calls': [], 'prefix': False},
    ]
    requests = [
        *conversation('cohere-chat', {'messages': cohere}),
        *conversation('mistral-chat', {'messages': mistral}),
    ]
    assert [transcript([request]) for request in requests] == snapshot(
        [
            """\
request 0: reuses 0 of 451 bytes
+ system: Be brief.
+ user: Time?
+ assistant: get_time({}) [call#1]
+     tool_plan: Ask the clock.
+ tool [call#1]: {"type":"document","document":{"data":"12"}}
+ assistant: {"type":"thinking","thinking":"Done."}
+     Noon.
""",
            """\
request 0: reuses 0 of 349 bytes
+ user: Time?
+ assistant: get_time({}) [call#1]
+         index: 0
+     prefix: false
+ tool [call#1]: 12:00
+ assistant: Noon.
+     prefix: false
""",
        ]
    )


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
