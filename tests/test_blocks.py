"""A request's instruction blocks (`_blocks`).

Instruction blocks from other sources: routed through append mode with `append_ids`, and Pydantic AI's own
append-mode blocks, which are left to it unless routed.

`append_ids` presets such as `HARNESS_BLOCKS`, and the warning for an entry that matches no block.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest
from pydantic_ai.models import ModelRequestParameters

from pydantic_ai_append import (
    HARNESS_BLOCKS,
    AppendInstructions,
    BlockPreset,
    UnaddressableBlockWarning,
    UnmatchedRouteWarning,
    instruction_records,
)

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


@dataclass
class Listing(AbstractCapability[list[str]]):
    """Stands in for a framework capability whose block is computed each run, with the id it gives it."""

    def get_instructions(self):  # pyright: ignore[reportIncompatibleMethodOverride]
        def listing(ctx: RunContext[list[str]]) -> str | None:
            return '\n'.join(ctx.deps) or None

        return listing


def warned_over_two_runs(agent: Agent[None, str]) -> list[str]:
    """The messages of every warning two runs of one conversation give."""
    history: list[ModelMessage] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for prompt in ['one', 'two']:
            history = agent.run_sync(prompt, message_history=history).all_messages()
    return [str(warning.message) for warning in caught]


def test_the_preset_routes_framework_blocks_and_keeps_the_prefix():
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        deps_type=list[str],
        capabilities=[Listing(id='sub_agents'), AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)],
    )
    history = agent.run_sync('one', deps=['researcher']).all_messages()
    agent.run_sync('two', deps=['researcher', 'writer'], message_history=history)
    assert chat.last.instructions == chat.seen[0].instructions
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="capability:sub_agents">
researcher
writer
</context></system>\
""")


def test_preset_entries_that_match_nothing_are_not_warned_about():
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        instructions='Be brief.',
        capabilities=[AppendInstructions(id='context', append_ids=[HARNESS_BLOCKS, 'agent:memory'])],
    )
    with pytest.warns(UnmatchedRouteWarning) as warned:
        agent.run_sync('one')
    # Only the entry named directly is warned about.
    assert [str(warning.message) for warning in warned] == snapshot(
        [
            (
                "`append_ids` entry 'agent:memory' matches no instruction block of this request: check that its source "
                'is on the agent and gives its block that id, or remove the entry. If the block only appears later, this '
                'is expected: it is delivered as a change when it does.'
            )
        ]
    )
    assert chat.last.instructions == snapshot('Be brief.')


def test_a_preset_block_that_appears_later_is_a_change_where_the_agent_has_a_window():
    # The agent's own block opens a window on the first request; a routed block that appears in an open window is
    # a change like any other, so the prefix is kept. (Only with no window yet does its appearance move the prefix.)
    chat = ScriptedModel()
    context = AppendInstructions[list[str]](id='context', append_ids=HARNESS_BLOCKS)
    context.instructions(name='state')(lambda: 'working')
    agent = Agent(chat.model(), deps_type=list[str], capabilities=[Listing(id='sub_agents'), context])
    history = agent.run_sync('one', deps=[]).all_messages()
    agent.run_sync('two', deps=['researcher'], message_history=history)
    assert chat.last.instructions == chat.seen[0].instructions
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="capability:sub_agents">
researcher
</context></system>\
""")


def test_a_preset_block_absent_from_the_first_request_is_held_while_its_capability_is_on_the_agent():
    # No other block opens a window: the listing's capability being on the agent is what holds its entry, so the
    # listing appearing later is delivered as a change and the prefix is kept.
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        deps_type=list[str],
        instructions='Be brief.',
        capabilities=[Listing(id='sub_agents'), AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)],
    )
    history = agent.run_sync('one', deps=[]).all_messages()
    agent.run_sync('two', deps=['researcher'], message_history=history)
    assert chat.last.instructions == chat.seen[0].instructions
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="capability:sub_agents">
researcher
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.</system>\
""")


@dataclass
class RepoContext(AbstractCapability[object]):
    """Stands in for harness's `RepoContext` on pydantic-ai-slim 2.58, where it has no id unless given one."""

    def get_instructions(self):  # pyright: ignore[reportIncompatibleMethodOverride]
        return lambda: 'Run the tests with `make test`.'


def test_a_preset_entry_whose_capability_has_no_id_is_warned_about_once():
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        instructions='Be brief.',
        capabilities=[RepoContext(), AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)],
    )
    assert warned_over_two_runs(agent) == snapshot(
        [
            "`append_ids` entry 'capability:repo_context' matches no instruction block of this request: the agent's `RepoContext` has no id, so neither has the block it contributes, and that block is rewritten in the prefix instead. Build it as `RepoContext(id='repo_context')` to route it."
        ]
    )
    # The block has no id, so it stays where Pydantic AI puts it: rewritten in the prefix.
    assert 'make test' in (chat.last.instructions or '')


def test_a_capability_with_an_id_of_its_own_is_not_taken_for_an_anonymous_source():
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        instructions='Be brief.',
        capabilities=[RepoContext(id='repo'), AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)],
    )
    agent.run_sync('one')  # `filterwarnings = error` fails this on any warning
    assert 'make test' in (chat.last.instructions or '')


def test_a_preset_alone_that_matches_nothing_changes_nothing():
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        instructions='Be brief.',
        capabilities=[AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)],
    )
    agent.run_sync('one')
    assert chat.last.instructions == 'Be brief.'


def test_an_unmatched_entry_is_warned_about_once_per_capability():
    chat = ScriptedModel()
    context = AppendInstructions(id='context', append_ids=['capability:repo_context'])
    agent = Agent(chat.model(), instructions='Be brief.', capabilities=[context])
    assert warned_over_two_runs(agent) == snapshot(
        [
            (
                "`append_ids` entry 'capability:repo_context' matches no instruction block of this request: check that its source is on the agent and gives its block that id, or remove the entry. If the block only appears later, this is expected: it is delivered as a change when it does."
            )
        ]
    )
    # Another capability instance warns again.
    other = Agent(
        chat.model(),
        instructions='Be brief.',
        capabilities=[AppendInstructions(id='context', append_ids=['capability:repo_context'])],
    )
    with pytest.warns(UnmatchedRouteWarning):
        other.run_sync('three')


def test_an_agent_without_instructions_is_not_warned_about():
    chat = ScriptedModel()
    agent = Agent(chat.model(), capabilities=[AppendInstructions(id='context', append_ids=['agent:memory'])])
    agent.run_sync('one')  # `filterwarnings = error` fails this on any warning


def test_an_entry_that_is_neither_an_id_nor_a_preset_is_refused():
    with pytest.raises(UserError) as raised:
        AppendInstructions(id='context', append_ids=[('capability:repo_context',)])  # pyright: ignore[reportArgumentType]
    assert str(raised.value) == snapshot(
        "`append_ids` entry ('capability:repo_context',) is neither an id nor a preset such as `HARNESS_BLOCKS`; pass "
        'the preset itself, or its ids as strings.'
    )


@dataclass
class Refunds(AbstractCapability[object]):
    def get_instructions(self) -> str:
        return 'Refunds over $100 need approval.'


def test_the_deferred_capability_catalog_is_routed_where_it_has_an_id():
    from pydantic_ai.models.test import TestModel

    agent = Agent(
        TestModel(call_tools=[]),
        capabilities=[
            Refunds(id='refunds', description='Refunds', defer_loading=True),
            AppendInstructions(id='context', append_ids=HARNESS_BLOCKS),
        ],
    )
    request = agent.run_sync('hi').all_messages()[0]
    assert isinstance(request, ModelRequest)
    instructions = request.instructions or ''
    assert '- refunds: Refunds' in instructions
    # From 2.59 the catalog is `capability:deferred_capabilities`; on 2.58 it has no id, so it stays as it was.
    has_id = 'on_change' in InstructionPart.__dataclass_fields__
    assert instructions.startswith('<context id="capability:deferred_capabilities">') == has_id


def test_blocks_a_preset_reaches_that_share_an_id_are_left_in_place_without_a_warning():
    # As `LogfireMCP`'s guidance and hour are on 2.58: the framework's to fix, so nothing is said to the user.
    chat = ScriptedModel()
    agent = Agent(
        chat.model(),
        instructions=[
            InstructionPart('one', name='memory', dynamic=True),
            InstructionPart('two', name='memory', dynamic=True),
        ],
        capabilities=[AppendInstructions(id='context', append_ids=BlockPreset(('agent:memory',)))],
    )
    agent.run_sync('hi')  # `filterwarnings = error` fails this on any warning
    assert chat.last.instructions == 'one\n\ntwo'
