"""Histories written in an older record format still load, and continue their window as they would have.

`fixtures/record_format_1.json` holds conversations recorded by the last version that wrote only format 1 (every
change stored with its block's whole new value), with what that version sent on the request after them. Each test
loads one, runs that request with today's code, and checks the window continues: the same prefix, the same
changes delivered, nothing moved.

The fixture was written by `python -m tests.test_record_formats` at commit 1dec542; run now, it would write
today's format, so it is not to be regenerated.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from pydantic_ai_append import AppendInstructions

from .conversation import ScriptedModel

FIXTURE = Path(__file__).parent / 'fixtures' / 'record_format_1.json'

NOTES = [
    f'{index}. a note about the project, long enough that a one-line edit is sent as a diff' for index in range(30)
]


def notes(turn: int) -> str:
    """The long block: each turn from the second edits one line, so each change is recorded as a diff."""
    lines = list(NOTES)
    for edited in range(2, turn + 1):
        lines[edited * 3] = f'{edited * 3}. edited on turn {edited}'
    return '\n'.join(lines)


TODOS: dict[int, str | None] = {1: 'a', 2: 'b', 3: None, 4: 'c', 5: 'd'}
"""The short block: a full change, a withdrawal, a value after the withdrawal, and one more on the next request."""

TURNS = 4
"""The turns the recorded history holds; the next request is turn 5."""

VARIANTS = ('inline', 'wrapped', 'signed-inline', 'signed-wrapped')


def build_agent(chat: ScriptedModel, *, signed: bool) -> Agent[int, str]:
    context = AppendInstructions[int](id='project', signing_key='fixture-secret' if signed else None)

    @context.instructions(name='notes')
    def notes_block(ctx: RunContext[int]) -> str:
        return notes(ctx.deps)

    @context.instructions(name='todos')
    def todos_block(ctx: RunContext[int]) -> str | None:
        return TODOS[ctx.deps]

    return Agent(chat.model(), deps_type=int, instructions='Be brief.', capabilities=[context])


def run_turn(variant: str, history: list[ModelMessage], turn: int) -> tuple[list[ModelMessage], dict[str, Any]]:
    """Run turn `turn` of the variant's conversation on `history`: the history after it, and what the model saw."""
    chat = ScriptedModel(inline=variant.endswith('inline'))
    agent = build_agent(chat, signed=variant.startswith('signed'))
    result = agent.run_sync(f'turn {turn}', deps=turn, message_history=history)
    return result.all_messages(), asdict(chat.last)


def write_fixture() -> None:  # pragma: no cover - run by hand, once, by the version whose format the fixture keeps
    recorded: dict[str, Any] = {}
    for variant in VARIANTS:
        history: list[ModelMessage] = []
        for turn in range(1, TURNS + 1):
            history, _ = run_turn(variant, history, turn)
        _, seen = run_turn(variant, history, TURNS + 1)
        recorded[variant] = {
            'history': ModelMessagesTypeAdapter.dump_python(history, mode='json'),
            'next_request': seen,
        }
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + '\n')


def recorded(variant: str) -> tuple[list[ModelMessage], dict[str, Any]]:
    stored = json.loads(FIXTURE.read_text())[variant]
    return ModelMessagesTypeAdapter.validate_python(stored['history']), stored['next_request']


@pytest.mark.parametrize('variant', VARIANTS)
def test_a_format_1_history_continues_its_window(variant: str):
    history, expected = recorded(variant)
    _, seen = run_turn(variant, history, TURNS + 1)
    assert seen == expected


if __name__ == '__main__':  # pragma: no cover
    write_fixture()
