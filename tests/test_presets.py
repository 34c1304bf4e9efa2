"""`append_ids` presets such as `HARNESS_BLOCKS`, and the warning for an entry that matches no block."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest

from pydantic_ai_append import HARNESS_BLOCKS, AppendInstructions, BlockPreset, UnmatchedRouteWarning

from .conversation import ScriptedModel


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
