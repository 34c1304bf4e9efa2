"""Instruction blocks from other sources: routed through append mode with `append_ids`, and Pydantic AI's own
append-mode blocks, which are left to it unless routed.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import InstructionPart, ModelMessage
from pydantic_ai.models import ModelRequestParameters

from pydantic_ai_append import AppendInstructions, UnaddressableBlockWarning, instruction_records

from .conversation import ScriptedModel
from .todo_agent import Deps, make_agent


def test_blocks_from_other_sources_can_be_routed_through_append_mode():
    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for memory in ['likes tea', 'likes tea; dislikes coffee', None]:
        # The agent is built per run with the memory of the moment, as a server building agents per request would.
        context = AppendInstructions(id='context', append_ids=['agent:memory'])
        instructions = [InstructionPart(memory, name='memory')] if memory else []
        agent = Agent(chat.model(), instructions=instructions, capabilities=[context])
        history = agent.run_sync('hi', message_history=history).all_messages()
    assert chat.last.instructions == chat.seen[0].instructions
    assert chat.seen[1].messages[-1] == snapshot("""\
user: <system><context id="agent:memory">
likes tea; dislikes coffee
</context></system>\
""")
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="agent:memory" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context></system>\
""")


def test_a_routed_block_that_shares_its_id_is_rewritten_with_a_warning():
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        instructions=[
            InstructionPart('one', name='memory', dynamic=True),
            InstructionPart('two', name='memory', dynamic=True),
        ],
        capabilities=[AppendInstructions(id='context', append_ids=['agent:memory'])],
    )
    with pytest.warns(UnaddressableBlockWarning) as warned:
        agent.run_sync('hi')
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            (
                "Instruction block 'agent:memory' is routed through append mode, but 2 blocks share that id, so a "
                "change can't say which one it replaces; rewriting it instead."
            ),
            (
                "Instruction block 'agent:memory' is routed through append mode, but 2 blocks share that id, so a "
                "change can't say which one it replaces; rewriting it instead."
            ),
        ]
    )
    assert chat.last.instructions == snapshot("""\
one

two\
""")


def test_a_routed_toolset_block_that_goes_away_is_withdrawn():
    from pydantic_ai.toolsets import FunctionToolset

    chat = ScriptedModel()
    guide = ['Search before you answer.']
    docs = FunctionToolset[object](id='docs', instructions=lambda: guide[0] or None)
    agent = Agent(
        chat.model(), toolsets=[docs], capabilities=[AppendInstructions(id='context', append_ids=['toolset:docs'])]
    )
    history = agent.run_sync('one').all_messages()
    guide[0] = ''
    agent.run_sync('two', message_history=history)
    assert (
        chat.last.instructions
        == chat.seen[0].instructions
        == snapshot("""\
<context id="toolset:docs">
Search before you answer.
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""")
    )
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="toolset:docs" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context></system>\
""")


def test_native_append_blocks_are_left_to_pydantic_ai():
    if 'on_change' not in InstructionPart.__dataclass_fields__:
        pytest.skip('this release has no append mechanism of its own')
    from pydantic_ai import messages as core

    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for version, todos in [(1, ['a']), (2, ['a', 'b'])]:
        native = InstructionPart(f'native v{version}', name='native', on_change='append')  # pyright: ignore[reportCallIssue]
        agent = make_agent(chat)
        agent = Agent(
            chat.model(), deps_type=Deps, instructions=native, capabilities=agent.root_capability.capabilities
        )
        history = agent.run_sync('hi', deps=Deps(todos=todos), message_history=history).all_messages()
    assert (
        chat.last.instructions
        == chat.seen[0].instructions
        == snapshot("""\
<context id="capability:todos:state">
- [ ] a
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.

<pyai:context id="agent:native">
native v1
</pyai:context>
A later <pyai:context> element with the same id replaces the earlier one and stays in effect until replaced again.

Mode: plan\
""")
    )
    assert chat.last.messages[-2:] == snapshot(
        [
            """\
user: <system><context id="capability:todos:state">
- [ ] a
- [ ] b
</context></system>\
""",
            """\
user: <system><pyai:context id="agent:native">
native v2
</pyai:context></system>\
""",
        ]
    )
    # Pydantic AI's own records track only its own block; the plugin's blocks are rewrite-mode digests to it.
    native_ids = [
        str(entry.id)
        for message in history
        for part in message.parts
        if isinstance(part, core.InstructionBaselinePart | core.InstructionDeltaPart)  # pyright: ignore[reportAttributeAccessIssue]
        for entry in (part.instructions if isinstance(part, core.InstructionBaselinePart) else [part])  # pyright: ignore
        if not isinstance(entry, core.InstructionDigest)  # pyright: ignore[reportAttributeAccessIssue]
    ]
    assert native_ids == ['agent:native', 'agent:native']


def test_a_routed_block_in_native_append_mode_is_taken_over():
    if 'on_change' not in InstructionPart.__dataclass_fields__:
        pytest.skip('this release has no append mechanism of its own')
    chat = ScriptedModel()
    history: list[ModelMessage] = []
    for version in (1, 2):
        native = InstructionPart(f'notes v{version}', name='notes', on_change='append')  # pyright: ignore[reportCallIssue]
        context = AppendInstructions(id='context', append_ids=['agent:notes'])
        agent = Agent(chat.model(), instructions=native, capabilities=[context])
        history = agent.run_sync('hi', message_history=history).all_messages()
    assert (
        chat.last.instructions
        == chat.seen[0].instructions
        == snapshot("""\
<context id="agent:notes">
notes v1
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""")
    )
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="agent:notes">
notes v2
</context></system>\
""")


def test_a_loaded_deferred_capability_does_not_move_the_window():
    if 'instruction_visibility' not in ModelRequestParameters.__dataclass_fields__:
        pytest.skip('this release states loaded capabilities in the prefix')
    from pydantic_ai.capabilities import AbstractCapability

    @dataclass
    class Refunds(AbstractCapability[Deps]):
        def get_instructions(self) -> str:
            return 'Refunds over $100 need approval.'

    chat = ScriptedModel(script=[[('load_capability', {'id': 'refunds'})], 'loaded'])
    deps = Deps(todos=['a'])
    chat.on_request = lambda: deps.todos.append('b') if len(chat.seen) == 1 else None
    agent = make_agent(chat)
    agent = Agent(
        chat.model(),
        deps_type=Deps,
        capabilities=[
            *agent.root_capability.capabilities,
            Refunds(id='refunds', description='Refunds', defer_loading=True),
        ],
    )
    history = agent.run_sync('load refunds', deps=deps).all_messages()
    assert chat.last.instructions == chat.seen[0].instructions
    assert [type(record).__name__ for record in instruction_records(history)] == snapshot(
        ['InstructionBaselinePart', 'InstructionDeltaPart']
    )
    assert chat.last.messages == snapshot(
        [
            'user: load refunds',
            'call load_capability: {"id":"refunds"}',
            'tool-return load_capability: {"message":"Capability \'refunds\' loaded. Its instructions, if any, follow."}',
            """\
user: <system><context id="capability:todos:state">
- [ ] a
- [ ] b
</context></system>\
""",
            """\
user: <system><pyai:context id="capability:refunds">
Refunds over $100 need approval.
</pyai:context></system>\
""",
        ]
    )
