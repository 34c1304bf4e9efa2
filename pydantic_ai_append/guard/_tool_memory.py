"""What a guard keeps of each conversation's tools across its runs, and what it says when they change.

A retired tool (`_retired`) can only be declared again with a definition the conversation once sent, so the guard
remembers every tool a conversation declared, by its `conversation_id`, across the runs of one guard. Within a run, a
tool list that changes between requests moves the cached prefix and is warned about; a tool retired while history
still calls it is told of, once, at the end of a request, where the prefix is kept.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelRequest, UserPromptPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import ToolDefinition

from ._errors import ToolListChangedWarning
from ._pairing import called_tools
from ._retired import retirement_notice

CONVERSATIONS_KEPT = 4096
"""How many conversations' tool memories a guard keeps; a conversation forgotten and taken up again declares only
the agent's current tools, so a retired tool its history calls is warned about and sent as it is."""


@dataclass
class ToolMemory:
    """The tools one conversation has declared, kept across its runs."""

    seen: set[str] = field(default_factory=set[str])
    """The name of every tool (function or output) the conversation declared: only those can be retired; a name
    the model made up never was."""

    definitions: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    """Every tool definition the conversation declared, by name: how a retired tool that its history still calls is
    declared again."""


def warn_tool_changes(before: Mapping[str, ToolDefinition] | None, declared: Mapping[str, ToolDefinition]) -> None:
    """Warn, naming each tool, if the tools a request declares are not those the previous request of the run declared.

    Called from the hook that sees the request, so the warning points at what called the hook.
    """
    if before is None or before == declared:
        return
    added = sorted(declared.keys() - before.keys())
    removed = sorted(before.keys() - declared.keys())
    changed = sorted(name for name in declared.keys() & before.keys() if declared[name] != before[name])
    summary = '; '.join(
        f'{label} {", ".join(f"`{name}`" for name in names)}'
        for label, names in (('added', added), ('removed', removed), ('changed', changed))
        if names
    )
    warnings.warn(
        f'The tool definitions changed between requests of a run ({summary}), which moves the cached prefix at '
        'its start; change tools at a window boundary instead.',
        ToolListChangedWarning,
        stacklevel=3,
    )


def tell_retired(ctx: RunContext[Any], request_context: ModelRequestContext, retired: frozenset[str]) -> None:
    """Tell the model, at the end of this step's request, of each retired tool it was not told of yet.

    Told is what history says, not this guard's memory, so a conversation taken up in another process is not told
    again.
    """
    # A compaction this step may have taken the calls out of what is sent: only a tool still called is told of.
    retired = retired & called_tools(request_context.messages).keys()
    told = {
        part.content
        for message in request_context.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    }
    notices = [UserPromptPart(text) for name in sorted(retired) if (text := retirement_notice(name)) not in told]
    last = request_context.messages[-1] if request_context.messages else None
    if not notices or not isinstance(last, ModelRequest):
        return
    noticed = replace(last, parts=[*last.parts, *notices])
    request_context.messages[-1] = noticed
    # The run's history holds the notice too, so the next request sends it where this one did.
    ctx.messages[:] = [noticed if message is last else message for message in ctx.messages]
