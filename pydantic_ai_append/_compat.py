"""The differences between the Pydantic AI releases this package supports, in one place.

- 2.58 has no append mechanism of its own; newer releases mark an `InstructionPart` `on_change='append'`. The plugin
  reads that only to leave such blocks to it, and never sets it: its own blocks keep the default, `'rewrite'`.
- Newer releases deliver a loaded deferred capability's instructions through history (`instruction_visibility`),
  and announce what `<system>` means only at the first mid-conversation system message unless the
  `framing_announcement` setting says otherwise; 2.58 does neither.
- Newer releases deprecate `RetryPromptPart` but still put it in histories; the guard recognises it on both.
- 2.68 and later note text from a user or a tool that imitates `<system>` (`CORE_LOOKALIKE_CHECK`).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from datetime import datetime
from typing import Any, cast

from pydantic_ai.messages import (
    AgentInstructionSource,
    CapabilityInstructionSource,
    InstructionId,
    InstructionPart,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    ToolsetInstructionSource,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.settings import ModelSettings


def _core_framing(name: str) -> Any:
    # Private names, read only here: no public name says which text the release notes, or what it announces. The
    # lookalike tests and the Gemini wire summary's fail when the release with `pydantic_ai.framing` stops having them.
    framing = importlib.util.find_spec('pydantic_ai._framing')
    return None if framing is None else getattr(importlib.import_module(framing.name), name, None)


CORE_LOOKALIKE_CHECK: Callable[[str], bool] | None = _core_framing('resembles_frame')
"""Whether this release of Pydantic AI puts a note of its own beside a user's or a tool's text (it does for text that
imitates `<system>`); `None` on releases that note nothing."""

CORE_ANNOUNCEMENT: Callable[..., str] | None = _core_framing('lookalike_note_announcement')
"""How this release words what `<system>` means to a model with no inline system messages; `None` if it says none."""


def system_frame(text: str, timestamp: datetime, *, marked: bool) -> UserPromptPart:
    """`text` as `<system>`-wrapped user text, as Pydantic AI sends a system message to a model without inline ones;
    with `marked`, on releases that note user text imitating `<system>`, marked as a frame a capability wrote.
    """
    framed = f'<system>{text}</system>'
    return UserPromptPart(
        [_framework_frame(framed)] if marked and CORE_LOOKALIKE_CHECK else framed, timestamp=timestamp
    )


def _framework_frame(text: str) -> Any:
    # A private name, read only here: no public name marks a frame a capability wrote, which the lookalike check leaves
    # alone. The Mistral delivery tests fail when it moves (`tests/test_request_mistral.py`).
    return importlib.import_module('pydantic_ai._framework_frame').framework_frame_text(text)


def native_policy(part: InstructionPart) -> str:
    """The part's policy in Pydantic AI's own append mechanism: `'rewrite'` on releases that have none."""
    return str(getattr(part, 'on_change', 'rewrite'))


def in_prefix(params: ModelRequestParameters, part: InstructionPart) -> bool:
    """Whether the part reaches the model in the prefix, rather than through history (`instruction_visibility`)."""
    if part.id is None:
        return True
    visibility = cast('dict[str, str] | None', getattr(params, 'instruction_visibility', None))
    return not visibility or visibility.get(str(part.id), 'prefix') == 'prefix'


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


def ask_for_framing_announcement(request_context: ModelRequestContext) -> None:
    """Have the `<system>` framing announced from the first request, unless the user chose when it is."""
    settings = request_context.model_settings or {}
    model_settings = request_context.model.settings or {}
    if 'framing_announcement' not in settings and 'framing_announcement' not in model_settings:
        request_context.model_settings = cast('ModelSettings', {**settings, 'framing_announcement': 'always'})


def retried_call(part: object) -> tuple[str, str] | None:
    """The tool call id and tool name a retry prompt answers, if `part` is one that names a tool (read here alone,
    as `RetryPromptPart` is deprecated).
    """
    if isinstance(part, RetryPromptPart) and part.tool_name is not None:  # pyright: ignore[reportDeprecated]
        return part.tool_call_id, part.tool_name
    return None
