"""Tool schema versions: a tool that left the agent's tools stays declared while history still calls it.

What the model sees and what runs are two registries here. The agent's toolset decides what runs. What the
model sees must also cover every tool that history calls: Anthropic rejects a history that calls an undeclared
tool, and any model reads an old call better with the schema it was made against. So a tool removed from the
agent's tools (a policy update, a `prepare_tools` filter) is declared again with the definition it was last
sent with, for as long as a call to it is in the history sent, which is until compaction opens a new window
without those calls. The model is told once, at the end of the request that first declares it so, that the tool is no
longer available (an appended notice: the prefix is kept), rather than finding out by calling it. A new call to it is
answered with a tool return saying it was retired, and nothing runs.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets import ToolsetTool, WrapperToolset
from pydantic_core import SchemaValidator, core_schema

from ._errors import RetiredToolReferencedWarning
from ._pairing import called_tools

_ANY_ARGS = SchemaValidator(core_schema.dict_schema())


def retired_tool_message(name: str) -> str:
    """The tool return a call to a retired tool gets instead of running it."""
    return (
        f'Tool `{name}` has been retired and was not run. It is still declared only because earlier turns call it; '
        'continue without it.'
    )


def retirement_notice(name: str) -> str:
    """What the model is told, once, when a tool that history calls has left the agent's tools."""
    return (
        f'Tool `{name}` is no longer available. It stays declared only because earlier turns call it; a new call to '
        'it is not run.'
    )


@dataclass
class RetiredTools(WrapperToolset[AgentDepsT]):
    """The agent's toolset, plus every retired tool that history still calls, declared as last seen and never run.

    ```python
    from pydantic_ai.toolsets import FunctionToolset

    from pydantic_ai_append.guard._retired import RetiredTools

    toolset = RetiredTools(FunctionToolset())
    print(toolset.label)
    #> RetiredTools(FunctionToolset)
    ```
    """

    definitions: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    """Every definition seen declared, by tool name; shared by the runs of one guard."""

    retired: set[str] = field(default_factory=set[str])
    """The retired tools the latest step declared; the guard's run reads it to tell the model."""

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        """The active tools, and a stand-in for each retired tool that history calls."""
        tools = await self.wrapped.get_tools(ctx)
        self.definitions.update({name: tool.tool_def for name, tool in tools.items()})
        retired = {
            name: ToolsetTool[AgentDepsT](
                toolset=self, tool_def=self.definitions[name], max_retries=0, args_validator=_ANY_ARGS
            )
            for name in called_tools(ctx.messages)
            if name not in tools and name in self.definitions
        }
        self.retired.clear()
        self.retired.update(retired)
        if retired:
            names = ', '.join(f'`{name}`' for name in retired)
            warnings.warn(
                f"History calls {names}, which left the agent's tools: it stays declared as it was last sent while "
                'history calls it, and a call to it now is answered without running it.',
                RetiredToolReferencedWarning,
                stacklevel=2,
            )
        return {**tools, **retired}

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[AgentDepsT], tool: ToolsetTool[AgentDepsT]
    ) -> Any:
        """Run an active tool; answer a call to a retired one without running anything."""
        if tool.toolset is self:
            return retired_tool_message(name)
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)
