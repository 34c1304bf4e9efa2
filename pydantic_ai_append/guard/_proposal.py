"""A proposed request read against what the model consumed: does it open a new window, and what in it is new?

History processing hands the guard a whole message list. Before judging it, the guard needs to know whether the
request starts a new window (a new compaction marker at its start, or a provider's compaction in the latest reply),
which of its messages are the step's own new request, and which instructions history was last sent with, to tell a
change of instructions from a new instruction window.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse

from .._capability import AppendInstructions
from ._bytes import message_bytes
from ._compaction import elided_count
from ._consumed import ConsumedHistory


def newly_compacted(consumed: ConsumedHistory, proposed: Sequence[ModelMessage]) -> bool:
    """Whether `proposed` starts with a compaction marker that the consumed history doesn't start with."""
    if elided_count(proposed) is None:
        return False
    return not consumed.consumed or message_bytes(proposed[0]) != consumed.consumed[0]


def provider_compacted(consumed: ConsumedHistory) -> bool:
    """Whether the model's latest reply holds a provider's compaction (Anthropic's, or OpenAI's stateful one).

    Pydantic AI sends nothing from before it, and `AppendInstructions` opens a new window after it, so the request
    after it opens a window too, though history is not rewritten.
    """
    latest = consumed.messages[consumed.boundary - 1] if consumed.boundary else None
    return isinstance(latest, ModelResponse) and any(isinstance(part, CompactionPart) for part in latest.parts)


def new_messages(consumed: ConsumedHistory, proposed: Sequence[ModelMessage]) -> list[ModelMessage]:
    """The step's new request, which goes out after what history holds: the proposal's last message, unless history
    holds it already (a resumed turn, or a processor that ended the proposal with an old message).

    Pydantic AI adds one request per step (the prompt, or the tool results) and a processed history must end with
    it. Anything else a processor put after the boundary (a summary of what it dropped, say) stands for its rewrite.
    """
    if not proposed or any(proposed[-1] is message for message in consumed.messages):
        return []
    return [proposed[-1]]


def opens_instruction_window(messages: Sequence[ModelMessage]) -> bool:
    """Whether `AppendInstructions` opened a new window at the latest request (it recorded a baseline there)."""
    last = next(message for message in reversed(messages) if isinstance(message, ModelRequest))
    return AppendInstructions.opens_window(last)


def last_instructions(messages: Sequence[ModelMessage]) -> str | None:
    """The instructions the latest request in `messages` was sent with, if any request records them."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.instructions is not None:
            return message.instructions
    return None
