"""A tool a developer hands the model to edit chosen append-mode blocks, such as its own memory.

A model that edits its own instructions must not rewrite what it has already consumed. The tool this module
builds takes a proposal (a block id and its new text), has the guard decide it
([`self_edit`][pydantic_ai_append.guard.self_edit]), and applies it only one way: the developer's writer stores
the new value, and [`AppendInstructions`][pydantic_ai_append.AppendInstructions] appends the change to the
conversation on the next request, leaving the prefix as it was. A proposal for any other block (a literal one,
a rewrite-mode one, one that isn't offered) is refused with a tool return that says why and which blocks can be
edited, so the model can carry on.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeAlias

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import AgentDepsT, Tool
from pydantic_ai.toolsets import FunctionToolset

from .._capability import AppendInstructions
from ._consumed import ConsumedHistory
from ._decision import InstructionEdit, self_edit

BlockWriter: TypeAlias = Callable[[RunContext[AgentDepsT], str | None], Awaitable[None] | None]
"""Stores a block's new value (`None` withdraws it) where the block's function reads it from."""


def self_edit_toolset(
    context: AppendInstructions[AgentDepsT],
    writers: Mapping[str, BlockWriter[AgentDepsT]],
    *,
    tool_name: str = 'edit_context',
) -> FunctionToolset[AgentDepsT]:
    """A toolset with one tool that lets the model change the named append-mode blocks of `context`.

    ```python
    from dataclasses import dataclass, field

    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.test import TestModel

    from pydantic_ai_append import AppendInstructions
    from pydantic_ai_append.guard import self_edit_toolset


    @dataclass
    class Notes:
        memory: str = 'Nothing yet.'
        edits: list[str] = field(default_factory=list[str])


    notes = AppendInstructions[Notes](id='notes')


    @notes.instructions(name='memory')
    def memory(ctx: RunContext[Notes]) -> str:
        return ctx.deps.memory


    def remember(ctx: RunContext[Notes], content: str | None) -> None:
        ctx.deps.memory = content or 'Nothing yet.'


    toolset = self_edit_toolset(notes, {'memory': remember})
    agent = Agent(TestModel(call_tools=[]), deps_type=Notes, capabilities=[notes], toolsets=[toolset])
    print(agent.run_sync('Hi', deps=Notes()).output)
    #> success (no tool calls)
    ```

    Args:
        context: The capability that owns the blocks.
        writers: For each block the model may edit, by its name on `context`, the function that stores its new
            value. Every block named must be registered on `context` in append mode.
        tool_name: The name of the tool the model sees.

    Returns:
        A `FunctionToolset` whose `id` is `'<context id>_<tool_name>'`, which durable engines such as Temporal
        name its activities after.

    Raises:
        UserError: A block named in `writers` isn't registered on `context`, or isn't in append mode.
    """
    by_id = _editable_blocks(context, writers)
    tool = Tool(_edit(writers, by_id), takes_ctx=True, name=tool_name, description=_description(by_id))
    # A durable engine names the toolset's activities after its id, and refuses a toolset without one (Temporal).
    return FunctionToolset[AgentDepsT]([tool], id=f'{context.id}_{tool_name}')


def _editable_blocks(context: AppendInstructions[AgentDepsT], writers: Mapping[str, object]) -> dict[str, str]:
    """The name of each block in `writers`, by its id, once each is known to be registered on `context` in append mode.

    Raises:
        UserError: A block named in `writers` isn't registered on `context`, or isn't in append mode.
    """
    policies = context.block_policies
    for name in writers:
        if name not in policies:
            known = ', '.join(repr(block) for block in policies) or 'none'
            raise UserError(
                f'`self_edit_toolset` got block {name!r}, which `{context.id}` has no block named (it has: {known}).'
            )
        if policies[name] != 'append':
            raise UserError(
                f'Block {name!r} of `{context.id}` is in {policies[name]!r} mode; a model may only edit '
                'append-mode blocks, whose changes are appended instead of rewriting the prefix.'
            )
    return {context.block_id(name): name for name in writers}


def _edit(
    writers: Mapping[str, BlockWriter[AgentDepsT]], by_id: Mapping[str, str]
) -> Callable[[RunContext[AgentDepsT], str, str | None], Awaitable[str]]:
    """The tool's function: it has the guard decide each proposal, and stores the new value only if it is accepted."""

    async def edit(ctx: RunContext[AgentDepsT], block_id: str, content: str | None) -> str:
        # An edit of a block is decided by the block alone, so the history needs no window (and no encoding).
        decision = self_edit(ConsumedHistory.of(()), InstructionEdit(block_id, content), append_blocks=by_id)
        if decision.action != 'patch':
            return f'Refused: {decision.reason}.'
        stored = writers[by_id[block_id]](ctx, content)
        if inspect.isawaitable(stored):
            await stored
        return (
            f'Accepted: block `{block_id}` changes from your next request on. The change is appended to the '
            'conversation; earlier context stays as it was.'
        )

    return edit


def _description(by_id: Mapping[str, str]) -> str:
    """What the model is told of the tool, naming the blocks it may change."""
    listed = ', '.join(f'`{block_id}`' for block_id in by_id)
    return (
        f'Change one of your context blocks ({listed}) for the rest of this conversation. Give the block id and '
        'its complete new text, or null to withdraw it. The change reaches you as a new <context> element.'
    )
