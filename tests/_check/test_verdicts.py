"""`pydantic-ai-append check` follows the providers' documented cache rules, on cassettes shaped like recordings of the
real APIs (`tests/fixtures/cassettes/`, written for these tests in the shape vcrpy records them):

- Anthropic leaves tools marked `defer_loading` (tool search) out of the cached prefix, so adding them, or sending them
  in another order, keeps it;
- an OpenAI Responses request naming a stored `conversation` sends only its new input: the conversation's items are
  resolved from the recorded `POST /v1/conversations` call and replies, as `previous_response_id` is;
- Mistral, Groq and Hugging Face are read as themselves, by the path and the `User-Agent` their SDKs record.

The settings a provider documents as part of its cache are `_wire/test_cache_rules.py`'s, on the same cassettes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from inline_snapshot import snapshot

from pydantic_ai_append._check.cassettes import read_cassette
from pydantic_ai_append.testing import WireConversation, assert_prefix_stable

from ..check_helpers import run

FIXTURES = Path(__file__).parents[1] / 'fixtures' / 'cassettes'

Edit = Callable[[list[dict[str, Any]]], None]
"""Changes the request bodies of a cassette's interactions, parsed, in place."""


def edited(tmp_path: Path, name: str, edit: Edit, *, keep: Callable[[int], bool] = lambda _: True) -> Path:
    """A copy of the fixture cassette `name` with its request bodies changed by `edit` and only the interactions kept."""
    cassette = yaml.safe_load((FIXTURES / name).read_text())
    interactions = [item for index, item in enumerate(cassette['interactions']) if keep(index)]
    bodies = [json.loads(item['request']['body']) for item in interactions]
    edit(bodies)
    for item, body in zip(interactions, bodies, strict=True):
        item['request']['body'] = json.dumps(body, separators=(',', ':'))
    path = tmp_path / name
    path.write_text(yaml.safe_dump({**cassette, 'interactions': interactions}))
    return path


def unchanged(bodies: list[dict[str, Any]]) -> None:
    pass


def verdicts(capsys: pytest.CaptureFixture[str], file: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    """The exit status and, per conversation, its interactions, reuse and divergences (kind, segment and message)."""
    status, out, _ = run(capsys, '--json', str(file), *args)
    [cassette] = json.loads(out)['cassettes']
    return status, [
        {
            'interactions': c['interactions'],
            'reused': f'{c["reused_bytes"]} of {c["total_bytes"]}',
            'divergences': [(d['request'], d['kind'], d['segment'], d['message']) for d in c['divergences']],
        }
        for c in cassette['conversations']
    ]


# --- Anthropic deferred tools ---


def test_deferred_tools_added_and_reordered_keep_the_prefix(capsys: pytest.CaptureFixture[str]):
    # Request 1 adds the deferred `get_tides` before the deferred `get_forecast`; request 2 sends them the other way.
    assert verdicts(capsys, FIXTURES / 'anthropic_tool_search.yaml') == snapshot(
        (0, [{'interactions': [0, 1, 2], 'reused': '1526 of 3138', 'divergences': []}])
    )
    # The test-time assertion, fed the same exchanges, agrees.
    exchanges = read_cassette(FIXTURES / 'anthropic_tool_search.yaml')
    conversation = WireConversation('anthropic')
    for exchange in exchanges:
        conversation.add(exchange.request_body())
    assert_prefix_stable(conversation.requests)


def test_a_change_to_a_tool_not_deferred_still_breaks_the_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    def reword(bodies: list[dict[str, Any]]) -> None:
        bodies[2]['tools'][1]['description'] = 'Get the weather in a harbour, now.'

    def undefer(bodies: list[dict[str, Any]]) -> None:
        bodies[2]['tools'][3]['defer_loading'] = False

    # A tool with `defer_loading: false` is in the prefix like any other: it comes where request 1 had its system.
    _, [conversation] = verdicts(capsys, edited(tmp_path, 'anthropic_tool_search.yaml', undefer))
    assert [(kind, segment) for _, kind, segment, _ in conversation['divergences']] == [('system', 2)]
    assert verdicts(capsys, edited(tmp_path, 'anthropic_tool_search.yaml', reword)) == snapshot(
        (
            1,
            [
                {
                    'interactions': [0, 1, 2],
                    'reused': '543 of 3135',
                    'divergences': [
                        (
                            2,
                            'tool',
                            1,
                            """\
request 2 does not extend request 1 byte for byte: first divergent segment is 1 (tool in request 1, tool in request 2), at byte 45 of it
  request 1: …e":"get_weather","description":"Get the current weather in a harbour.","input_schema":{"additionalProperties":false,"pro…
  request 2: …e":"get_weather","description":"Get the weather in a harbour, now.","input_schema":{"additionalProperties":false,"proper…\
""",
                        )
                    ],
                }
            ],
        )
    )


# --- OpenAI Responses conversations ---


def test_a_stored_conversation_is_resolved_from_the_recording(capsys: pytest.CaptureFixture[str]):
    # The conversation is created with one item; each request names it (as a string, or as `{"id": ...}`) and sends
    # only its new input, the second streamed.
    status, out, _ = run(capsys, '--json', str(FIXTURES / 'openai_responses_conversation.yaml'))
    [cassette] = json.loads(out)['cassettes']
    assert (status, cassette['other_requests']) == (0, 1)
    assert verdicts(capsys, FIXTURES / 'openai_responses_conversation.yaml') == snapshot(
        (0, [{'interactions': [1, 2, 3], 'reused': '1083 of 1968', 'divergences': []}])
    )


def test_a_conversation_breaks_where_its_resolved_prefix_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    def reinstruct(bodies: list[dict[str, Any]]) -> None:
        bodies[3]['instructions'] = 'You plan sailing trips. Check the weather and the tides before you answer.'

    assert verdicts(capsys, edited(tmp_path, 'openai_responses_conversation.yaml', reinstruct)) == snapshot(
        (
            1,
            [
                {
                    'interactions': [1, 2, 3],
                    'reused': '659 of 1982',
                    'divergences': [
                        (
                            2,
                            'instructions',
                            1,
                            """\
request 2 does not extend request 1 byte for byte: first divergent segment is 1 (instructions in request 1, instructions in request 2), at byte 43 of it
  request 1: "You plan sailing trips. Check the weather before you answer."
  request 2: "You plan sailing trips. Check the weather and the tides before you answer."\
""",
                        )
                    ],
                }
            ],
        )
    )


def test_conversations_the_cassette_holds_nothing_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # Without the call that created it, the first request's conversation is unknown: nothing to compare it with, but
    # its reply makes the conversation known, so the requests after it are compared.
    file = edited(tmp_path, 'openai_responses_conversation.yaml', unchanged, keep=lambda index: index > 0)
    assert verdicts(capsys, file) == snapshot(
        (0, [{'interactions': [0, 1, 2], 'reused': '925 of 1731', 'divergences': []}])
    )

    # A request naming a conversation nothing in the cassette belongs to starts a conversation of its own.
    def elsewhere(bodies: list[dict[str, Any]]) -> None:
        bodies[3]['conversation'] = 'conv_00000000000000000000000000000000'

    assert verdicts(capsys, edited(tmp_path, 'openai_responses_conversation.yaml', elsewhere)) == snapshot(
        (
            0,
            [
                {'interactions': [1, 2], 'reused': '425 of 1083', 'divergences': []},
                {'interactions': [3], 'reused': '0 of 377', 'divergences': []},
            ],
        )
    )


def test_items_added_to_a_conversation_between_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cassette = yaml.safe_load((FIXTURES / 'openai_responses_conversation.yaml').read_text())
    create, first, second, third = cassette['interactions']
    conversation = json.loads(create['response']['body']['string'])['id']
    added = {'items': [{'type': 'message', 'role': 'user', 'content': 'My draft is 1.6 m.'}]}
    items = {
        'request': {
            **create['request'],
            'uri': f'{create["request"]["uri"]}/{conversation}/items',
            'body': json.dumps(added),
        },
        'response': {**create['response'], 'body': {'string': json.dumps({'object': 'list', 'data': added['items']})}},
    }
    # A failed call adds nothing; a conversation created with no body has no items.
    failed = {**items, 'response': {**items['response'], 'body': {'string': '{"error": {"message": "not found"}}'}}}
    empty = {'request': {**create['request'], 'body': None}, 'response': create['response']}
    path = tmp_path / 'items.yaml'
    path.write_text(yaml.safe_dump({**cassette, 'interactions': [empty, first, failed, second, items, third]}))
    assert verdicts(capsys, path) == snapshot(
        (0, [{'interactions': [1, 3, 5], 'reused': '925 of 1794', 'divergences': []}])
    )
    # The added item is part of the last request's resolved input, before its own: 63 bytes more than without it.
    without = tmp_path / 'without.yaml'
    without.write_text(yaml.safe_dump({**cassette, 'interactions': [empty, first, second, third]}))
    assert verdicts(capsys, without) == snapshot(
        (0, [{'interactions': [1, 2, 3], 'reused': '925 of 1731', 'divergences': []}])
    )


def test_a_test_capture_naming_an_unknown_conversation_is_taken_as_sent():
    # `prompt_wire` captures only requests to the three APIs, never the call that created a conversation.
    exchanges = [exchange for exchange in read_cassette(FIXTURES / 'openai_responses_conversation.yaml')][1:]
    conversation = WireConversation('openai-responses')
    for exchange in exchanges:
        conversation.add(exchange.request_body(), exchange.response_body())
    assert_prefix_stable(conversation.requests)
    assert [[segment.kind for segment in request] for request in conversation.requests] == snapshot(
        [
            ['tool', 'instructions', 'input'],
            ['tool', 'instructions', 'input', 'output', 'input'],
            ['tool', 'instructions', 'input', 'output', 'input', 'output', 'input'],
        ]
    )


def test_two_stored_conversations_in_one_cassette(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A second conversation of the same model, created and continued the same way, interleaved with the first: its
    # first request carries no history yet (no response of it was recorded), so it starts a conversation of its own.
    text = (FIXTURES / 'openai_responses_conversation.yaml').read_text()
    cassette = yaml.safe_load(text)
    conversation = json.loads(cassette['interactions'][0]['response']['body']['string'])['id']
    other = yaml.safe_load(
        text.replace(conversation, 'conv_6a0f2b7c91d84e5fa3b1c2d4e5f60718')
        .replace('resp_', 'resp_b')
        .replace('a 9 m sloop', 'an 11 m ketch')
    )
    interleaved = [item for pair in zip(cassette['interactions'], other['interactions'], strict=True) for item in pair]
    path = tmp_path / 'two.yaml'
    path.write_text(yaml.safe_dump({**cassette, 'interactions': interleaved}))
    assert verdicts(capsys, path) == snapshot(
        (
            0,
            [
                {'interactions': [2, 4, 6], 'reused': '1083 of 1968', 'divergences': []},
                {'interactions': [3, 5, 7], 'reused': '1087 of 1974', 'divergences': []},
            ],
        )
    )


# --- Chat Completions of other providers ---


def chat_interaction(uri: str, user_agent: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = json.dumps({'model': 'a-model', 'messages': messages}, separators=(',', ':'))
    reply: dict[str, Any] = {'id': 'c', 'object': 'chat.completion', 'model': 'a-model', 'choices': []}
    return {
        'request': {'body': body, 'headers': {'user-agent': [user_agent]}, 'method': 'POST', 'uri': uri},
        'response': {'body': {'string': json.dumps(reply)}, 'headers': {}, 'status': {'code': 200, 'message': 'OK'}},
    }


def test_mistral_groq_and_hugging_face_are_read_as_themselves(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # As their SDKs record them: Mistral's and Hugging Face's name themselves in `User-Agent` on OpenAI's path.
    sent = [
        ('https://api.mistral.ai/v1/chat/completions', 'mistral-client-python/3.7.0'),
        ('https://api.groq.com/openai/v1/chat/completions', 'pydantic-ai/2.68.0'),
        ('https://router.huggingface.co/v1/chat/completions', 'unknown/None; hf_hub/1.18.0; python/3.11.7'),
        ('https://api.openai.com/v1/chat/completions', 'pydantic-ai/2.68.0'),
    ]
    hello = {'role': 'user', 'content': 'Hello'}
    interactions = [
        chat_interaction(uri, agent, messages)
        for uri, agent in sent
        # The second request rewrites the first message under a reply: a broken prefix.
        for messages in ([hello], [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hi!'}, hello])
    ]
    file = tmp_path / 'chats.yaml'
    file.write_text(yaml.safe_dump({'interactions': interactions, 'version': 1}))
    status, out, _ = run(capsys, '--json', str(file))
    [cassette] = json.loads(out)['cassettes']
    assert (status, [(c['api'], c['divergences'][0]['kind']) for c in cassette['conversations']]) == snapshot(
        (
            1,
            [
                ('mistral-chat', 'message'),
                ('groq-chat', 'message'),
                ('huggingface-chat', 'message'),
                ('openai-chat', 'message'),
            ],
        )
    )
