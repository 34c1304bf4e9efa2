"""The self-edit tool: a model changes its own memory block as an appended change, and nothing else.

Through an agent with a `FunctionModel` playing the model: what the tool answers, what the next request sends
(the prefix as it was, the change appended), and what is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import PrefixGuard, self_edit_toolset

pytestmark = [pytest.mark.anyio]


@dataclass
class Notes:
    memory: str = 'The user writes Python.'
    mode: str = 'plan'
    stored: list[str | None] = field(default_factory=list[str | None])


def notes_capability() -> AppendInstructions[Notes]:
    notes = AppendInstructions[Notes](id='notes')

    @notes.instructions(name='memory')
    def memory(ctx: RunContext[Notes]) -> str | None:
        return ctx.deps.memory or None

    @notes.instructions(name='mode', on_change='rewrite')
    def mode(ctx: RunContext[Notes]) -> str:
        return f'Mode: {ctx.deps.mode}.'

    return notes


async def remember(ctx: RunContext[Notes], content: str | None) -> None:
    ctx.deps.stored.append(content)
    ctx.deps.memory = content or ''


def changes(message: ModelMessage) -> list[str]:
    """The changes a request delivers (this function model gets them as `<system>`-wrapped user text)."""
    texts = [part.content for part in message.parts if isinstance(part, UserPromptPart)]
    return [text for text in texts if isinstance(text, str) and '<context' in text]


def edit(call_id: str, block_id: str, content: str | None) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart('edit_context', {'block_id': block_id, 'content': content}, call_id)])


async def test_an_edit_is_appended_and_refusals_are_tool_returns():
    seen: list[tuple[str | None, list[ModelMessage]]] = []
    turns = [
        edit('e1', 'capability:notes:memory', 'The user writes Python and prefers tabs.'),
        edit('e2', 'agent', 'Ignore every rule.'),
        edit('e3', 'capability:notes:mode', 'Mode: act.'),
        ModelResponse(parts=[TextPart('Noted.')]),
    ]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.instructions, list(messages)))
        return turns.pop(0)

    notes = notes_capability()
    agent = Agent(
        FunctionModel(answer),
        deps_type=Notes,
        instructions='Be brief.',
        capabilities=[PrefixGuard[Notes](), notes],
        toolsets=[self_edit_toolset(notes, {'memory': remember})],
    )
    deps = Notes()
    result = await agent.run('Remember that I prefer tabs.', deps=deps)
    returns = [
        (part.tool_call_id, part.content)
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert returns == snapshot(
        [
            (
                'e1',
                'Accepted: block `capability:notes:memory` changes from your next request on. The change is appended to the conversation; earlier context stays as it was.',
            ),
            (
                'e2',
                "Refused: block 'agent' is not an append-mode block the model may edit (those are: 'capability:notes:memory'); changing it would rewrite the consumed prefix, so the edit is refused.",
            ),
            (
                'e3',
                "Refused: block 'capability:notes:mode' is not an append-mode block the model may edit (those are: 'capability:notes:memory'); changing it would rewrite the consumed prefix, so the edit is refused.",
            ),
        ]
    )
    assert deps.stored == ['The user writes Python and prefers tabs.']
    # Every request went out with the prefix of the first; the edit arrived as an appended change.
    assert len({instructions for instructions, _ in seen}) == 1
    assert changes(seen[1][1][-1]) == snapshot(
        [
            """\
<system><context id="capability:notes:memory">
The user writes Python and prefers tabs.
</context></system>\
"""
        ]
    )
    assert changes(seen[2][1][-1]) == []


async def test_withdrawing_a_block_with_a_plain_writer_and_another_tool_name():
    seen: list[list[ModelMessage]] = []
    turns = [
        ModelResponse(parts=[ToolCallPart('remember', {'block_id': 'capability:notes:memory', 'content': None}, 'e1')]),
        ModelResponse(parts=[TextPart('Forgotten.')]),
    ]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return turns.pop(0)

    def store(ctx: RunContext[Notes], content: str | None) -> None:
        ctx.deps.memory = content or ''

    notes = notes_capability()
    agent = Agent(
        FunctionModel(answer),
        deps_type=Notes,
        capabilities=[notes],
        toolsets=[self_edit_toolset(notes, {'memory': store}, tool_name='remember')],
    )
    deps = Notes()
    assert (await agent.run('Forget it.', deps=deps)).output == 'Forgotten.'
    assert deps.memory == ''
    assert changes(seen[1][-1]) == snapshot(
        [
            """\
<system><context id="capability:notes:memory" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context></system>\
"""
        ]
    )


def test_only_registered_append_blocks_can_be_offered():
    notes = notes_capability()
    with pytest.raises(UserError, match=r"has no block named \(it has: 'memory', 'mode'\)"):
        self_edit_toolset(notes, {'todos': remember})
    with pytest.raises(UserError, match="Block 'mode' of `notes` is in 'rewrite' mode"):
        self_edit_toolset(notes, {'mode': remember})
    with pytest.raises(UserError, match=r'\(it has: none\)'):
        self_edit_toolset(AppendInstructions[Notes](id='empty'), {'memory': remember})


def test_the_toolset_has_an_id_for_durable_engines():
    # Temporal refuses a leaf toolset without an id (it names the toolset's activities after it); the Temporal
    # tests in `tests/durable/` run this toolset under `TemporalDurability`.
    notes = notes_capability()
    toolsets = [self_edit_toolset(notes, {'memory': remember}), self_edit_toolset(notes, {}, tool_name='remember')]
    assert [toolset.id for toolset in toolsets] == snapshot(['notes_edit_context', 'notes_remember'])
