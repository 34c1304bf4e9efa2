"""The differences between the Pydantic AI releases this package supports, in one place.

`pydantic-ai-slim` 2.58 has no append mechanism of its own; newer releases have one, which marks an
`InstructionPart` with `on_change='append'`. The plugin reads that field only to leave such blocks to the
native mechanism, and never sets it, so the blocks it owns keep the native default policy, `'rewrite'`.
"""

from __future__ import annotations

from typing import cast

from pydantic_ai.messages import (
    AgentInstructionSource,
    CapabilityInstructionSource,
    InstructionId,
    InstructionPart,
    ToolsetInstructionSource,
)
from pydantic_ai.models import ModelRequestParameters

__all__ = ('in_prefix', 'instruction_id', 'native_policy')


def native_policy(part: InstructionPart) -> str:
    """The part's policy in Pydantic AI's own append mechanism: `'rewrite'` on releases that have none."""
    return str(getattr(part, 'on_change', 'rewrite'))


def in_prefix(params: ModelRequestParameters, part: InstructionPart) -> bool:
    """Whether the part reaches the model in the prefix.

    Newer releases deliver a loaded deferred capability's instructions through history instead, which they say
    in `instruction_visibility`.
    """
    visibility = cast(dict[str, str] | None, getattr(params, 'instruction_visibility', None)) or {}
    return part.id is None or visibility.get(str(part.id), 'prefix') == 'prefix'


def instruction_id(text: str) -> InstructionId:
    """The `InstructionId` an id string names, such as `'capability:todos:state'` or `'agent:memory'`."""
    namespace, _, rest = text.partition(':')
    if namespace == 'agent':
        return InstructionId(AgentInstructionSource(), name=rest or None)
    source_id, _, name = rest.partition(':')
    source = (
        CapabilityInstructionSource(source_id) if namespace == 'capability' else ToolsetInstructionSource(source_id)
    )
    return InstructionId(source, name=name or None)
