"""The checker's report of a conversation whose prefix broke more than once: every break is detailed (where, why, the
fix), up to ten a conversation, and the rest counted; `--json` lists them all.

The cassettes are recorded from an `Agent` on Pydantic AI's `OpenAIChatModel` and the OpenAI SDK, whose instructions
state the time, as an agent that tells its model the time does: each request moves the prefix. An
`httpx2.MockTransport` stands in for the OpenAI API, and `prompt_wire` keeps what was sent, written out as vcrpy
records it.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append.testing import PromptWire

from ..check_helpers import interaction, run, write_cassette

pytestmark = pytest.mark.anyio


def openai_stand_in(request: httpx2.Request) -> httpx2.Response:
    message = {'role': 'assistant', 'content': 'Noted.'}
    choice = {'index': 0, 'message': message, 'finish_reason': 'stop'}
    body = {'id': 'chatcmpl-1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': [choice]}
    return httpx2.Response(200, json=body)


async def record(prompt_wire: PromptWire, path: Path, turns: int) -> Path:
    """Run `turns` turns of an agent whose instructions give the minute, one minute later each turn, as a cassette."""
    http_client = prompt_wire.http_client(transport=httpx2.MockTransport(openai_stand_in))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
    agent = Agent(model, deps_type=int, instructions='Be brief.')

    @agent.instructions
    def clock(ctx: RunContext[int]) -> str:  # pyright: ignore[reportUnusedFunction]
        return f'The time is 09:{ctx.deps:02}.'

    history: list[ModelMessage] = []
    for turn in range(turns):
        history = (await agent.run(f'question {turn}', deps=turn, message_history=history)).all_messages()
    exchanges = [
        interaction(f'https://api.openai.com{e.path}', e.request_body.decode(), e.response_body.decode())
        for e in prompt_wire.exchanges
    ]
    return write_cassette(path, exchanges)


async def test_every_break_is_detailed(
    prompt_wire: PromptWire, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    await record(prompt_wire, Path('clock.yaml'), turns=4)
    assert run(capsys, 'clock.yaml') == snapshot(
        (
            1,
            """\
clock.yaml#0: openai-chat gpt-5.2, 4 requests, 117 of 962 bytes reused (12%): prefix broken at request 1, 2, 3
  interaction 1: request 1 does not extend request 0 byte for byte: first divergent segment is 1 (message in request 0, message in request 1), at byte 44 of it
    request 0: {"role":"system","content":"The time is 09:00."}
    request 1: {"role":"system","content":"The time is 09:01."}
  why: the instructions changed and state no block of this plugin: 'The time is 09:00.' became 'The time is 09:01.'
  fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)
  (only if request 1 is meant to open a new window, pass --allow-new-window 'clock.yaml#0:1')
  interaction 2: request 2 does not extend request 1 byte for byte: first divergent segment is 1 (message in request 1, message in request 2), at byte 44 of it
    request 1: {"role":"system","content":"The time is 09:01."}
    request 2: {"role":"system","content":"The time is 09:02."}
  why: the instructions changed and state no block of this plugin: 'The time is 09:01.' became 'The time is 09:02.'
  fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)
  (only if request 2 is meant to open a new window, pass --allow-new-window 'clock.yaml#0:2')
  interaction 3: request 3 does not extend request 2 byte for byte: first divergent segment is 1 (message in request 2, message in request 3), at byte 44 of it
    request 2: {"role":"system","content":"The time is 09:02."}
    request 3: {"role":"system","content":"The time is 09:03."}
  why: the instructions changed and state no block of this plugin: 'The time is 09:02.' became 'The time is 09:03.'
  fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)
  (only if request 3 is meant to open a new window, pass --allow-new-window 'clock.yaml#0:3')
1 conversation in 1 cassette: 1 breaks its prefix
""",
            '',
        )
    )


async def test_past_ten_breaks_the_rest_are_counted(
    prompt_wire: PromptWire, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    await record(prompt_wire, Path('clock.yaml'), turns=13)
    status, out, _ = run(capsys, 'clock.yaml')
    lines = out.splitlines()
    details = [line.split(':')[0] for line in lines if line.startswith('  interaction ')]
    assert (status, lines[0].split(': ')[-1], details, lines[-2:]) == snapshot(
        (
            1,
            'prefix broken at request 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more',
            [
                '  interaction 1',
                '  interaction 2',
                '  interaction 3',
                '  interaction 4',
                '  interaction 5',
                '  interaction 6',
                '  interaction 7',
                '  interaction 8',
                '  interaction 9',
                '  interaction 10',
            ],
            [
                '  and 2 more requests broke it (`--json` lists every one)',
                '1 conversation in 1 cassette: 1 breaks its prefix',
            ],
        )
    )
    status, out, _ = run(capsys, '--json', 'clock.yaml')
    [conversation] = json.loads(out)['cassettes'][0]['conversations']
    assert [(d['request'], d['cause']) for d in conversation['divergences']] == snapshot(
        [
            (1, 'instructions'),
            (2, 'instructions'),
            (3, 'instructions'),
            (4, 'instructions'),
            (5, 'instructions'),
            (6, 'instructions'),
            (7, 'instructions'),
            (8, 'instructions'),
            (9, 'instructions'),
            (10, 'instructions'),
            (11, 'instructions'),
            (12, 'instructions'),
        ]
    )
