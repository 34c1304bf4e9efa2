"""The changes the plugin delivered, found again in the messages of a request as sent, for `causes`.

A change goes out as a `<context>` or `<context-diff>` element: a system message of its own where the model takes one,
`<system>`-wrapped user text where it doesn't (Pydantic AI wraps it), an input item on OpenAI Responses. A UI adapter
that loses the plugin's records strips these messages with them, and a new window stops sending the old one's, so a
request that sends every message of the one before but these dropped nothing a compaction would. What re-reading them
had cost tells whether the plugin's price rule can have opened the new window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import NamedTuple, cast

from .segments import Segment, canonical

_CHANGE = re.compile(
    r'\s*(<system(?: [^>]*)?>\s*)?'  # the `<system>` tag, with Pydantic AI's attributes, where the change is wrapped
    r'<context(-diff|) id="[^"]*"(?: withdrawn="true")?>\n.*?\n</context\2>(?(1)\s*</system>)\s*',
    re.DOTALL,
)
"""A change the plugin delivered: a `<context>` or `<context-diff>` element, maybe `<system>`-wrapped."""


class Delivered(NamedTuple):
    """The changes a request's messages held, which the next request sends none of."""

    chars: int
    """Their characters."""

    read: int
    """At most how many characters of them the window's requests have read, the next request's reading counted."""


def _item(segment: Segment) -> dict[str, object]:
    """A message segment's JSON object, or an empty one where it holds something else."""
    try:
        value: object = json.loads(segment.data)
    except ValueError:
        return {}
    return cast('dict[str, object]', value) if isinstance(value, dict) else {}


def _is_change(text: str, system_voice: bool) -> bool:
    """Whether `text` is nothing but changes the plugin delivered: elements, each `<system>`-wrapped (as Pydantic AI
    sends them where a model has no mid-conversation system messages) unless its message has the system's role.
    """
    elements = list(_CHANGE.finditer(text))
    covered = sum(len(element[0]) for element in elements) == len(text)
    return bool(elements) and covered and (system_voice or all(element[1] for element in elements))


def _text(block: object) -> object:
    """A content block's `text`, or `None` where it has none."""
    return cast('dict[str, object]', block).get('text') if isinstance(block, dict) else None


def without_changes(segment: Segment) -> tuple[Segment | None, int]:
    """`segment` without the changes the plugin delivered in it (`None` if that is all it holds), and their length."""
    item = _item(segment)
    voice = item.get('role') in ('system', 'developer')
    content = item.get('content')
    if isinstance(content, str):
        return (None, len(content)) if _is_change(content, voice) else (segment, 0)
    blocks: list[object] = cast('list[object]', content) if isinstance(content, list) else []
    kept: list[object] = []
    length = 0
    for block in blocks:
        # A text block of its own, never text inside another (a tool's result says what the tool said).
        text = _text(block)
        if isinstance(text, str) and _is_change(text, voice):
            length += len(text)
        else:
            kept.append(block)
    if not length:
        return segment, 0
    return (Segment(segment.kind, canonical({**item, 'content': kept})) if kept else None), length


def _answers(segment: Segment) -> bool:
    """Whether `segment` is (or may be) part of a model's response: not the user's, the system's or a tool result."""
    return _item(segment).get('role') not in ('user', 'system', 'developer', 'tool')


def changes_lost(history: Sequence[Segment], later: Sequence[Segment]) -> Delivered | None:
    """What the changes in `history` were, where `later` sends every message of it but them, and `history` held some.

    Args:
        history: The messages a request sent after its instructions.
        later: The messages the next request sent after its instructions.

    A change is read by every request after the one that delivered it; each of those but the last has its response
    in `history` after the change, as has the request that delivered it.
    """
    kept: list[Segment] = []
    delivered: list[tuple[int, int]] = []  # each change's characters, and the answers before it
    answers = 0
    for segment in history:
        rest, length = without_changes(segment)
        answers += _answers(segment)
        if length:
            delivered.append((length, answers))
        if rest is not None:
            kept.append(rest)
    later_kept = [rest for rest, _ in map(without_changes, later) if rest is not None]
    if not delivered or later_kept[: len(kept)] != kept:
        return None
    read = sum(length * (answers - before + 1) for length, before in delivered)
    return Delivered(sum(length for length, _ in delivered), read)


def price_may_have_opened(request: Sequence[Segment], end: int, delivered: Delivered) -> bool:
    """Whether the plugin's price rule may have opened the window after `request`, whose first `end` segments are its
    tools and instructions, and whose changes were `delivered`.

    The rule opens a window once its changes' reads have cost what writing the request again costs beyond reading it:
    at a cache-read price at most half the write price, reads of at least as many tokens as the mean of the request's
    size without them and the window's first request's (its tools and instructions at least). The plugin counts a
    change's tokens as its characters / 4 and a request's as the provider does, which can be fewer than its bytes / 4
    (JSON, tool schemas): half as much again allows for that.
    """
    size = sum(len(segment.data) for segment in request) - delivered.chars
    return 3 * delivered.read >= size + sum(len(segment.data) for segment in request[:end])
