"""Presets of `append_ids`: the ids Pydantic AI and Pydantic AI Harness give the instruction blocks they compute.

A preset lets one option route every framework block that changes during a conversation, without the user
knowing each id. It is a tuple of its own type so `AppendInstructions` can tell its entries from the ids a user
named: a preset routes many blocks a given agent doesn't have, so an entry that matches nothing is held in the
window only while the capability it names is on the agent, and warned about only when that capability has no id.
"""

from __future__ import annotations

__all__ = ('HARNESS_BLOCKS', 'BlockPreset')


class BlockPreset(tuple[str, ...]):
    """A named set of `append_ids` entries, given whole to `append_ids` or as one of its entries.

    ```python
    from pydantic_ai_append import HARNESS_BLOCKS, AppendInstructions

    context = AppendInstructions(id='context', append_ids=[HARNESS_BLOCKS, 'agent:memory'])
    print('capability:sub_agents' in HARNESS_BLOCKS)
    #> True
    ```
    """

    __slots__ = ()


HARNESS_BLOCKS = BlockPreset(
    (
        # `RepoContext` (harness): the `AGENTS.md` / `CLAUDE.md` files of the workspace, read at each run's start.
        # On pydantic-ai-slim 2.58 it has this id only when built as `RepoContext(id='repo_context')`.
        'capability:repo_context',
        # `SubAgents` (harness): the list of agents a task can be delegated to, which grows with the agent folders.
        'capability:sub_agents',
        # `LogfireMCP` (harness), whose id is `logfire-mcp`: its query guidance, the current UTC hour, and the
        # hosted server's instructions. On 2.58 the guidance and the hour share the id, so they can't be told
        # apart and are left where Pydantic AI puts them.
        'capability:logfire-mcp',
        # Pydantic AI's catalog of capabilities that can be loaded on demand (`defer_loading=True`); from 2.59.
        # On 2.58 the catalog has no id, so it can't be routed.
        'capability:deferred_capabilities',
    )
)
"""The ids of the blocks Pydantic AI and Pydantic AI Harness compute and change during a conversation.

`capability:repo_context` (`RepoContext`'s context files), `capability:sub_agents` (`SubAgents`' list of
delegates), `capability:logfire-mcp` (`LogfireMCP`'s guidance, current hour and server instructions) and
`capability:deferred_capabilities` (the catalog of capabilities loaded on demand). From pydantic-ai-slim 2.59 these blocks use Pydantic AI's own
append mode; routed through `AppendInstructions`, the plugin owns them instead.
"""
