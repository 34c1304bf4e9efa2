"""Record formats: a history of format 1 continues its window, and a change stored as its diff is rebuilt or refused.

`fixtures/record_format_1.json` holds conversations recorded by the last version that wrote only format 1 (every
change stored with its block's whole new value), with what that version sent on the request after them. Each test
loads one, runs that request with today's code, and checks the window continues: the same prefix, the same
changes delivered, nothing moved.

The fixture was written by `python -m tests.test_record_formats` at commit 1dec542; run now, it would write
today's format, so it is not to be regenerated.

Format 2 stores a change with a diff as the diff and the digests around it; the window rebuilds the text. The tests
after the fixture's show it rebuilt after a JSON load, and a change that can't be rebuilt (its base trimmed from
history, or a diff or digest a client edited and resealed) opening a new window without delivering anything of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, SystemPromptPart, UserPromptPart

from pydantic_ai_append import AppendInstructions, InstructionDeltaPart, instruction_records
from pydantic_ai_append._encoding import seal
from pydantic_ai_append._history import RECORD_KEY
from pydantic_ai_append._records import content_hash

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


TODOS: dict[int, str | None] = {1: 'a', 2: 'b', 3: None, 4: 'c', 5: 'd', 6: 'e'}
"""The short block: a full change, a withdrawal, a value after the withdrawal, and more on the requests after."""

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


def stored(history: list[ModelMessage], at: tuple[int, int]) -> dict[str, Any]:
    part = history[at[0]].parts[at[1]]
    assert isinstance(part, SystemPromptPart) and part.metadata
    return part.metadata[RECORD_KEY]


def reseal(history: list[ModelMessage], at: tuple[int, int], change: dict[str, Any]) -> list[ModelMessage]:
    """`history` with the record at `at` edited and sealed again with the plain check, as a client can."""
    edited = list(history)
    message = edited[at[0]]
    assert isinstance(message, ModelRequest)
    record = {name: value for name, value in stored(history, at).items() if name != 'check'}
    parts = list(message.parts)
    parts[at[1]] = SystemPromptPart('', metadata={RECORD_KEY: seal({**record, **change})})
    edited[at[0]] = replace(message, parts=parts)
    return edited


def carriers(history: list[ModelMessage], version: int) -> list[tuple[int, int]]:
    """Where the records of format `version` are."""
    return [
        (message_index, part_index)
        for message_index, message in enumerate(history)
        if isinstance(message, ModelRequest)
        for part_index, part in enumerate(message.parts)
        if isinstance(part, SystemPromptPart) and part.metadata and part.metadata[RECORD_KEY]['v'] == version
    ]


def test_the_fixture_comparison_can_fail():
    # The negative control: the last change to the notes in the fixture edited (and resealed), the next request
    # differs from the recorded one.
    history, expected = recorded('inline')
    at = carriers(history, 1)[-2]
    _, seen = run_turn('inline', reseal(history, at, {'content': notes(TURNS) + ' edited'}), TURNS + 1)
    assert seen != expected


@pytest.mark.parametrize('variant', VARIANTS)
def test_a_format_1_history_continued_in_format_2_reloads_and_continues(variant: str):
    history, expected = recorded(variant)
    history, _ = run_turn(variant, history, TURNS + 1)
    # The notes changed once more on the request after the fixture's, against a value a format 1 record holds.
    assert len(carriers(history, 2)) == 1
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
    _, seen = run_turn(variant, loaded, TURNS + 2)
    assert seen['instructions'] == expected['instructions']
    assert seen['messages'][: len(expected['messages'])] == expected['messages']


def test_a_change_with_a_diff_is_stored_without_its_text_and_rebuilt_after_a_json_load():
    history, first = run_turn('inline', [], 1)
    for turn in range(2, 4):
        history, _ = run_turn('inline', history, turn)
    assert [sorted(stored(history, at)) for at in carriers(history, 2)] == snapshot(
        [
            ['base_hash', 'check', 'diff', 'hash', 'id', 'kind', 'v'],
            ['base_hash', 'check', 'diff', 'hash', 'id', 'kind', 'v'],
        ]
    )
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
    changes = [record for record in instruction_records(loaded) if isinstance(record, InstructionDeltaPart)]
    assert [(change.id, change.content) for change in changes if change.diff] == [
        ('capability:project:notes', notes(2)),
        ('capability:project:notes', notes(3)),
    ]
    _, seen = run_turn('inline', loaded, 4)
    _, unloaded = run_turn('inline', history, 4)
    assert seen == unloaded
    assert seen['instructions'] == first['instructions']
    assert sum('<context-diff' in line for line in seen['messages']) == 3


def without_turn_2(history: list[ModelMessage]) -> list[ModelMessage]:
    # A store lost the second turn: the request and the response to it.
    return [*history[:2], *history[4:]]


def diff_edited(history: list[ModelMessage]) -> list[ModelMessage]:
    # The last diff's added line rewritten, its digest left: the diff applies, and rebuilds another text.
    at = carriers(history, 2)[-1]
    diff = stored(history, at)['diff']
    assert '\n+9. edited on turn 3' in diff
    return reseal(history, at, {'diff': diff.replace('\n+9. edited on turn 3', '\n+9. PLANTED')})


def diff_not_applying(history: list[ModelMessage]) -> list[ModelMessage]:
    # A diff whose context is not the text the window holds.
    return reseal(history, carriers(history, 2)[-1], {'diff': '@@ -1,2 +1,2 @@\n not this\n-line\n+PLANTED'})


def digest_edited(history: list[ModelMessage]) -> list[ModelMessage]:
    # The digest of the value said to be that of a text with a planted line.
    planted = notes(3).replace('9. edited on turn 3', '9. PLANTED')
    return reseal(history, carriers(history, 2)[-1], {'hash': content_hash(planted)})


def base_edited(history: list[ModelMessage]) -> list[ModelMessage]:
    return reseal(history, carriers(history, 2)[-1], {'base_hash': content_hash('PLANTED')})


def other_block(history: list[ModelMessage]) -> list[ModelMessage]:
    # The diff said to change the todos, whose value the notes' diff doesn't apply to.
    return reseal(history, carriers(history, 2)[-1], {'id': 'capability:project:todos'})


@pytest.mark.parametrize(
    'edit',
    [
        pytest.param(without_turn_2, id='base-trimmed'),
        pytest.param(diff_edited, id='diff-edited'),
        pytest.param(diff_not_applying, id='diff-not-applying'),
        pytest.param(digest_edited, id='digest-edited'),
        pytest.param(base_edited, id='base-digest-edited'),
        pytest.param(other_block, id='other-block'),
    ],
)
def test_a_change_that_cant_be_rebuilt_opens_a_new_window(edit: Callable[[list[ModelMessage]], list[ModelMessage]]):
    history, first = run_turn('inline', [], 1)
    for turn in range(2, 4):
        history, _ = run_turn('inline', history, turn)
    edited = edit(history)
    after, seen = run_turn('inline', edited, 4)
    # A new window: the prefix states the current values, and no change of the old window is delivered.
    assert seen['instructions'] != first['instructions']
    assert notes(4) in seen['instructions']
    assert not any('<context' in line or 'PLANTED' in line for line in seen['messages'])
    assert isinstance(after[-2], ModelRequest)
    assert [type(record).__name__ for record in instruction_records(after[-2:])] == ['InstructionBaselinePart']
    # Reading the records back leaves the change out, and never gives a planted text.
    assert not any('PLANTED' in str(record) for record in instruction_records(edited))
    assert len(instruction_records(edited)) < len(instruction_records(history))


def test_a_diff_is_not_rebuilt_from_another_conversations_text():
    # A change to the notes, rebuilt (and kept) in one conversation, planted in another whose notes differ: the diff
    # is taken against a text that conversation's window doesn't hold, so nothing of it is delivered there.
    history: list[ModelMessage] = []
    for turn in range(1, 4):
        # The third turn rebuilds the second's change, so the process holds it rebuilt.
        history, _ = run_turn('inline', history, turn)
    stolen = SystemPromptPart('', metadata={RECORD_KEY: stored(history, carriers(history, 2)[0])})
    chat = ScriptedModel(inline=True)
    context = AppendInstructions[int](id='project')
    context.instructions(name='notes')(lambda: 'other notes')
    agent = Agent(chat.model(), deps_type=int, capabilities=[context])
    other = agent.run_sync('hi', deps=0).all_messages()
    planted = ModelRequest(parts=[UserPromptPart('planted'), stolen])
    agent.run_sync('again', deps=0, message_history=[*other, planted])
    assert not any('edited on turn 2' in line or '<context' in line for line in chat.last.messages)
    assert 'other notes' in (chat.last.instructions or '')


if __name__ == '__main__':  # pragma: no cover
    write_fixture()
