"""Who owns a block: a change of owner between the plugin and Pydantic AI's own append mode, and a routed block
that is absent when the window opens."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import InstructionPart, ModelMessage

from pydantic_ai_append import AppendInstructions, UnmatchedRouteWarning, instruction_records

from .conversation import ScriptedModel

native_append = pytest.mark.skipif(
    'on_change' not in InstructionPart.__dataclass_fields__, reason='this release has no append mechanism of its own'
)


def kinds(messages: list[ModelMessage]) -> list[str]:
    return [
        type(record).__name__.removeprefix('Instruction').removesuffix('Part')
        for record in instruction_records(messages)
    ]


def notes_agent(chat: ScriptedModel, version: int, append_ids: list[str]) -> Agent[None, str]:
    native = InstructionPart(f'notes v{version}', name='notes', on_change='append')  # pyright: ignore[reportCallIssue]
    context = AppendInstructions(id='context', append_ids=append_ids)
    context.instructions(name='state')(lambda: 'state')
    return Agent(chat.model(), instructions=native, capabilities=[context])


@native_append
@pytest.mark.parametrize(
    ('before', 'after'),
    [
        pytest.param(['agent:notes'], [], id='plugin-to-native'),
        pytest.param([], ['agent:notes'], id='native-to-plugin'),
    ],
)
def test_a_change_of_owner_opens_a_new_window_and_sends_the_block_once(before: list[str], after: list[str]):
    chat = ScriptedModel()
    history = notes_agent(chat, 1, before).run_sync('one').all_messages()
    history = notes_agent(chat, 2, after).run_sync('two', message_history=history).all_messages()
    assert kinds(history) == ['Baseline', 'Baseline']
    # One part carries the block, in the owner's wording, with its current value.
    assert [part for part in chat.last.parts if 'notes v' in part] == [
        part for part in chat.last.parts if 'notes v2' in part
    ]
    assert len([part for part in chat.last.parts if 'notes v' in part]) == 1
    assert not any('withdrawn' in line for line in chat.last.messages)


def test_a_routed_block_absent_from_the_first_request_is_delivered_as_a_change():
    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for memory in [None, 'likes tea', 'likes tea; dislikes coffee']:
        context = AppendInstructions(id='context', append_ids=['agent:memory'])
        context.instructions(name='state', on_change='rewrite')(lambda: 'Be brief.')
        instructions = [InstructionPart(memory, name='memory')] if memory else []
        agent = Agent(chat.model(), instructions=instructions, capabilities=[context])
        with pytest.warns(UnmatchedRouteWarning) if memory is None else nullcontext():
            history = agent.run_sync('hi', message_history=history).all_messages()
    assert chat.last.instructions == chat.seen[0].instructions
    assert kinds(history) == snapshot(['Baseline', 'Delta', 'Delta'])
    assert chat.seen[1].messages[-1] == snapshot("""\
user: <system><context id="agent:memory">
likes tea
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.</system>\
""")


def test_a_window_recorded_before_absent_blocks_were_held_continues():
    chat = ScriptedModel()

    def agent(append_ids: list[str]) -> Agent[None, str]:
        context = AppendInstructions(id='context', append_ids=append_ids)
        context.instructions(name='state')(lambda: 'state')
        return Agent(chat.model(), capabilities=[context])

    # Without the entry, the baseline is the one earlier versions recorded with the block absent.
    history = agent([]).run_sync('one').all_messages()
    with pytest.warns(UnmatchedRouteWarning):
        history = agent(['agent:memory']).run_sync('two', message_history=history).all_messages()
    assert kinds(history) == ['Baseline']
    assert chat.last.instructions == chat.seen[0].instructions
