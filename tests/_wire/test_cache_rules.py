"""The request settings a provider documents as part of its cache (`_wire.cache_rules`), through the checker: a changed
setting moves the cache from the documented point on (Anthropic's `tool_choice`, `thinking`, `speed`; OpenAI's
structured-output schema), a setting the same in both requests changes nothing, and the report says why and the fix. The
cassettes are the fixtures of `_check/test_verdicts.py`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot

from .._check.test_verdicts import FIXTURES, Edit, edited, unchanged, verdicts
from ..check_helpers import run

# --- settings the providers document as part of the cache ---


def anthropic_thinking(bodies: list[dict[str, Any]]) -> None:
    bodies[2]['tool_choice'] = {'type': 'auto'}
    bodies[2]['thinking'] = {'type': 'enabled', 'budget_tokens': 2048}


def anthropic_speed(bodies: list[dict[str, Any]]) -> None:
    # `speed` comes first: it invalidates the system prompt too, before the messages `tool_choice` does.
    bodies[2]['speed'] = 'fast'


def responses_schema(bodies: list[dict[str, Any]]) -> None:
    plan = {
        'type': 'object',
        'properties': {'go': {'type': 'boolean'}},
        'required': ['go'],
        'additionalProperties': False,
    }
    for body in bodies[1:3]:
        body['text'] = {'format': {'type': 'json_schema', 'name': 'plan', 'schema': plan, 'strict': True}}
    bodies[3]['text'] = {'format': {'type': 'text'}}


@pytest.mark.parametrize(
    ('name', 'edit'),
    [
        pytest.param('anthropic_tool_choice.yaml', unchanged, id='anthropic-tool_choice'),
        pytest.param('anthropic_tool_choice.yaml', anthropic_thinking, id='anthropic-thinking'),
        pytest.param('anthropic_tool_choice.yaml', anthropic_speed, id='anthropic-speed'),
        pytest.param('openai_chat_response_format.yaml', unchanged, id='openai-chat-response_format'),
        pytest.param('openai_responses_conversation.yaml', responses_schema, id='openai-responses-text.format'),
    ],
)
def test_a_changed_setting_moves_the_cache_from_the_documented_point(
    name: str, edit: Edit, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
):
    file = edited(tmp_path, name, edit)
    status, conversations = verdicts(capsys, file)
    assert (status, conversations) == snapshot(
        {
            'anthropic-tool_choice': (
                1,
                [
                    {
                        'interactions': [0, 1, 2],
                        'reused': '1122 of 2501',
                        'divergences': [
                            (
                                2,
                                'setting',
                                3,
                                'request 2 does not reuse the cache of request 1 from segment 3 (message) on: `tool_choice` changed from {"type":"auto"} to {"type":"tool","name":"final_result"}: Anthropic invalidates the cached messages when it changes',
                            )
                        ],
                    }
                ],
            ),
            'anthropic-thinking': (
                1,
                [
                    {
                        'interactions': [0, 1, 2],
                        'reused': '1122 of 2501',
                        'divergences': [
                            (
                                2,
                                'setting',
                                3,
                                'request 2 does not reuse the cache of request 1 from segment 3 (message) on: `thinking` changed from (not sent) to {"type":"enabled","budget_tokens":2048}: Anthropic invalidates the cached messages when it changes',
                            )
                        ],
                    }
                ],
            ),
            'anthropic-speed': (
                1,
                [
                    {
                        'interactions': [0, 1, 2],
                        'reused': '1023 of 2501',
                        'divergences': [
                            (
                                2,
                                'setting',
                                2,
                                'request 2 does not reuse the cache of request 1 from segment 2 (system) on: `speed` changed from (not sent) to "fast": Anthropic invalidates the cached system and messages when it changes',
                            )
                        ],
                    }
                ],
            ),
            'openai-chat-response_format': (
                1,
                [
                    {
                        'interactions': [0, 1, 2],
                        'reused': '647 of 1777',
                        'divergences': [
                            (
                                2,
                                'setting',
                                1,
                                'request 2 does not reuse the cache of request 1 from segment 1 (message) on: `response_format` changed from …:{"additionalProperties":false,"properties":{"go":{"type":"boolean"}},"required":["go"],"type":"object"},"strict":true}} to …se,"properties":{"go":{"type":"boolean"},"leave_by":{"type":"string"}},"required":["go","leave_by"],"type":"object"},"st…: OpenAI caches the structured-output schema before the system message, so the messages are not reused when it changes',
                            )
                        ],
                    }
                ],
            ),
            'openai-responses-text.format': (
                1,
                [
                    {
                        'interactions': [1, 2, 3],
                        'reused': '659 of 1968',
                        'divergences': [
                            (
                                2,
                                'setting',
                                1,
                                'request 2 does not reuse the cache of request 1 from segment 1 (instructions) on: `text.format` changed from {"type":"json_schema","name":"plan","schema":{"type":"object","properties":{"go":{"type":"boolean"}},"required":["go"],"… to {"type":"text"}: OpenAI caches the structured-output schema before the system message, so the instructions and input are not reused when it changes',
                            )
                        ],
                    }
                ],
            ),
        }
    )[request.node.callspec.id]
    # A setting change is a new window like any other, when one is allowed there.
    [conversation] = conversations
    [(index, *_)] = conversation['divergences']
    assert run(capsys, str(file), '--allow-new-window', str(index))[0] == 0


def test_a_setting_the_same_in_both_requests_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    def forced_throughout(bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            body['tool_choice'] = {'type': 'tool', 'name': 'final_result'}

    status, [conversation] = verdicts(capsys, edited(tmp_path, 'anthropic_tool_choice.yaml', forced_throughout))
    assert (status, conversation['divergences']) == (0, [])


def test_a_byte_change_before_the_settings_point_is_reported_as_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    def both(bodies: list[dict[str, Any]]) -> None:
        bodies[2]['system'] = [{'type': 'text', 'text': 'You plan sailing trips.'}]

    _, [conversation] = verdicts(capsys, edited(tmp_path, 'anthropic_tool_choice.yaml', both))
    assert [(kind, segment) for _, kind, segment, _ in conversation['divergences']] == [('system', 2)]


def test_a_changed_setting_says_why_and_the_fix(capsys: pytest.CaptureFixture[str]):
    status, out, _ = run(capsys, str(FIXTURES / 'anthropic_tool_choice.yaml'))
    assert (status, [line for line in out.splitlines() if line.startswith(('  why:', '  fix:'))]) == snapshot(
        (
            1,
            [
                '  why: `tool_choice` changed: Anthropic invalidates the cached messages when it changes',
                '  fix: keep `tool_choice` the same through a conversation: set it on the agent, not per run or request',
            ],
        )
    )
