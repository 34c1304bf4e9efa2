"""Compaction in whole tool-pair units, with a marker at the frontier saying that earlier turns were elided.

Dropping old messages changes the cached prefix, so it is a window boundary: the cache is paid for once, and
it must not cost a tool call its result as well. This module holds the cut and the marker, and
[`compact`][pydantic_ai_append.guard.compact], for a history processor of one's own: it cuts history only where
no call is separated from its result (at the start of a request that answers nothing from before the cut), and
puts a marker at the start of what is kept. A plain cut moves later than the position asked for, as far as it
takes; a cut whose dropped turns a summary replaces moves earlier instead, so a turn the summary doesn't cover is
never lost. The compaction a user installed is told from other rewrites by `compaction_of` (`_compaction_of`), which
cuts and marks with what is here.

Either way, the instruction window of [`AppendInstructions`][pydantic_ai_append.AppendInstructions] outlives the
compaction (`keeping_window`): its baseline's record goes to the front of what is kept if the cut took it, so the
instructions are sent as they were and keep their cache, and each block whose changes were cut is sent again at the
tail (a new window opens only where its price rule says so). One marker stands where messages were elided,
counting every message elided so far.

[`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard] recognises the marker: a request that starts with a new
one opens a new window, and only its tool pairs are checked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    UserPromptPart,
)

from .._encoding import stated_chars
from .._history import RECORD_KEY, holds_record, stored_record, strip_records
from .._reopening import CUT_KEY
from ._pairing import tool_pair_problems, tool_pairs

_MARKER = re.compile(r'<elided messages="(\d+)">')


def elision_marker(count: int) -> str:
    """The text that stands at the frontier of compacted history for `count` elided messages."""
    return (
        f'<elided messages="{count}">\nEarlier turns of this conversation were elided to save context. Tool calls '
        'were removed together with their results; nothing after this point refers to them.\n</elided>'
    )


def elided_count(messages: Sequence[ModelMessage]) -> int | None:
    """How many messages the compaction marker at the start of `messages` says were elided, if there is one."""
    if not messages or not isinstance(first := messages[0], ModelRequest) or not first.parts:
        return None
    return _marker_count(first.parts[0])


def _marker_part(count: int, *beside: ModelMessage | None) -> UserPromptPart:
    """The marker for `count` elided messages, timed as the first of `beside` that is timed (its first timed part,
    or itself), so that the same compaction of the same history gives the same messages.
    """
    parts = [item for message in beside if message is not None for item in (*message.parts, message)]
    timestamps = [timestamp for part in parts if (timestamp := getattr(part, 'timestamp', None)) is not None]
    marker = UserPromptPart(elision_marker(count))
    return replace(marker, timestamp=timestamps[0]) if timestamps else marker


def _marker_count(part: object) -> int | None:
    """How many messages `part` says were elided, if it is a compaction marker."""
    if not isinstance(part, UserPromptPart) or not isinstance(part.content, str):
        return None
    match = _MARKER.match(part.content)
    return int(match.group(1)) if match is not None else None


def marker_counts(message: ModelMessage) -> list[int]:
    """How many messages each compaction marker in `message` says were elided."""
    if not isinstance(message, ModelRequest):
        return []
    return [count for part in message.parts if (count := _marker_count(part)) is not None]


def unmarked(messages: list[ModelMessage]) -> list[ModelMessage]:
    """`messages` without earlier compaction markers, which the new one replaces (a request left empty stays, so
    indexes into `messages` still point where they did).
    """
    return [
        replace(message, parts=[part for part in message.parts if _marker_count(part) is None])
        if marker_counts(message)
        else message
        for message in messages
    ]


def marked(messages: list[ModelMessage], frontier: int, count: int) -> list[ModelMessage]:
    """`messages` with the marker for `count` elided messages at `frontier`, where the elided messages were.

    A provider's own compaction (a response that starts with a `CompactionPart`) is its marker: Pydantic AI sends
    nothing from before it.
    """
    at = messages[frontier] if frontier < len(messages) else None
    if isinstance(at, ModelResponse) and at.parts and isinstance(at.parts[0], CompactionPart):
        return [message for message in messages if not isinstance(message, ModelRequest) or message.parts]
    # A request an earlier marker was taken out of may be left with no parts: the rest of history times the marker.
    if isinstance(at, ModelRequest):
        messages[frontier] = replace(at, parts=[_marker_part(count, at, *messages), *at.parts])
    elif frontier and isinstance(before := messages[frontier - 1], ModelRequest):
        messages[frontier - 1] = replace(before, parts=[*before.parts, _marker_part(count, before, *messages)])
    else:
        messages.insert(frontier, ModelRequest(parts=[_marker_part(count, at, *messages)]))
    return [message for message in messages if not isinstance(message, ModelRequest) or message.parts]


def whole_pair_cut(messages: Sequence[ModelMessage], at: int, *, earlier: bool = False) -> int | None:
    """The first index at or after `at` where history can be cut without separating a tool call from its result.

    That is a request that answers no call made before it.

    Args:
        messages: The history.
        at: Where the cut is wanted.
        earlier: Find the last such index at or before `at` instead, keeping more than asked rather than less.

    Returns:
        The index, or `None` if there is no such request.
    """
    # A pair whose call and result are in different messages forbids every cut after the call, up to the result.
    forbidden = [0] * (len(messages) + 1)
    # A second result for a call is kept with its call too, or the cut would leave it without one.
    duplicates = [
        (problem.call, problem.result)
        for problem in tool_pair_problems(messages)
        if problem.kind == 'duplicate_result' and problem.call is not None and problem.result is not None
    ]
    for call, result in [*tool_pairs(messages), *duplicates]:
        if call.message_index < result.message_index:
            forbidden[call.message_index + 1] += 1
            forbidden[result.message_index + 1] -= 1
    covered = 0
    cuts: list[int] = []
    for index, message in enumerate(messages):
        covered += forbidden[index]
        if not covered and isinstance(message, ModelRequest):
            cuts.append(index)
    if earlier:
        return max((index for index in cuts if index <= at), default=None)
    return min((index for index in cuts if index >= at), default=None)


def compact(
    messages: Sequence[ModelMessage], *, keep_from: int, summary: Sequence[ModelMessage] = ()
) -> list[ModelMessage]:
    """`messages` without the turns before `keep_from` (the cut moved as far as it takes to keep every tool pair).

    ```python
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart

    from pydantic_ai_append.guard import compact, tool_pair_problems

    history = [
        ModelRequest.user_text_prompt('How many users?'),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'select count(*) from users'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('query_db', 42, tool_call_id='c1')]),
        ModelResponse(parts=[TextPart('42.')]),
        ModelRequest.user_text_prompt('And admins?'),
    ]
    kept = compact(history, keep_from=2)  # message 2 answers the call in message 1: cut at message 4
    print(len(kept), tool_pair_problems(kept))
    #> 1 []
    print(kept[0].parts[0].content.splitlines()[0])
    #> <elided messages="4">
    ```

    Args:
        messages: The history.
        keep_from: The index of the first message to keep, if that splits no tool pair.
        summary: Messages that stand for the turns before `keep_from` (a summary of them), kept between the marker
            and what is kept of `messages`; a last request of the summary is joined to the request the cut starts
            at. With a summary the cut moves earlier, not later: a turn it would drop past `keep_from` is in
            neither the summary nor what is kept, while one kept before it is only told twice.

    Returns:
        The kept messages, the first of them starting with the marker and holding the instruction window's baseline
        (`keeping_window`). If no cut keeps every pair, or nothing would be elided, `messages` as they are.
    """
    cut = whole_pair_cut(messages, keep_from, earlier=bool(summary))
    if cut is None or cut == 0:
        return list(messages)
    head, kept = strip_records(summary), list(messages[cut:])
    if head and isinstance(last := head[-1], ModelRequest):
        # Pydantic AI merges consecutive requests before history processors see them, while the guard takes what
        # the model consumed as stored: one request keeps the two the same.
        first_kept = kept[0]
        assert isinstance(first_kept, ModelRequest), '`whole_pair_cut` only cuts at a request'
        head, kept = head[:-1], [replace(first_kept, parts=[*last.parts, *first_kept.parts]), *kept[1:]]
    kept = [*head, *kept]
    # A history compacted before counts the messages its own marker says were elided.
    first = kept[0]
    marker = _marker_part(cut + (elided_count(messages) or 0), first)
    if not isinstance(first, ModelRequest):
        # A summary that starts with a response (the reply of a summarizing model) gets a request of its own.
        return keeping_window(messages, [ModelRequest(parts=[marker]), *kept])
    parts: list[ModelRequestPart] = [marker, *first.parts]
    return keeping_window(messages, [replace(first, parts=parts), *kept[1:]])


def keeping_window(full: Sequence[ModelMessage], kept: list[ModelMessage], *, cut: bool = True) -> list[ModelMessage]:
    """`kept`, what a compaction keeps of `full`, with the instruction window `full` has open: where the cut took the
    window's baseline, its carrier (never sent) goes to the first request kept, after the marker and any earlier
    window's carrier there (a compaction that keeps the first prompt keeps the first window's baseline with it).

    `AppendInstructions` then sends the instructions as they were, and reads what the model holds of each block from
    the changes kept: a block whose changes were cut gets its current value in full at the tail. A provider's
    compaction ends the window anyway, and a window whose prefix states no block is let go: its first change, which
    says how elements supersede each other, may be among those cut.

    Where the compaction `cut` messages (not only cleared them), the window's baseline is marked so (`CUT_KEY`): the
    conversation is one whose oldest changes go with its oldest messages, and `AppendInstructions` keeps its window.
    """
    baseline, there = _last_baseline(full), _last_baseline(kept)
    if baseline is None or _provider_compacted(kept):
        return kept
    if there is not None and stored_record(there) == stored_record(baseline):
        return _marked(kept, there) if cut else kept
    if not stated_chars(cast('dict[str, Any]', stored_record(baseline))):
        return kept
    at = next(index for index, message in enumerate(kept) if isinstance(message, ModelRequest))
    first = kept[at]
    assert isinstance(first, ModelRequest), 'found as a request'
    # Before the window's first change kept there, if there is one.
    after = {id(part) for part in _parts_after(full, baseline)}
    front = next((index for index, part in enumerate(first.parts) if id(part) in after), None)
    if front is None:
        front = 1 + max(
            (index for index, part in enumerate(first.parts) if holds_record(part) or _marker_count(part) is not None),
            default=-1,
        )
    moved = replace(first, parts=[*first.parts[:front], _cut(baseline), *first.parts[front:]])
    return [*kept[:at], moved, *kept[at + 1 :]]


def _cut(baseline: SystemPromptPart) -> SystemPromptPart:
    """The carrier of a window baseline, marked as cut."""
    return replace(baseline, metadata={**cast('dict[str, Any]', baseline.metadata), CUT_KEY: True})


def _marked(messages: list[ModelMessage], baseline: SystemPromptPart) -> list[ModelMessage]:
    """`messages` with `baseline`, which they hold, marked as cut."""
    if cast('dict[str, Any]', baseline.metadata).get(CUT_KEY):
        return messages
    return [
        replace(message, parts=[_cut(baseline) if part is baseline else part for part in message.parts])
        if isinstance(message, ModelRequest) and any(part is baseline for part in message.parts)
        else message
        for message in messages
    ]


def _parts_after(messages: Sequence[ModelMessage], part: SystemPromptPart) -> list[object]:
    """The request parts of `messages` after `part`."""
    found = False
    later: list[object] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for each in message.parts:
                if found:
                    later.append(each)
                found = found or each is part
    return later


def _provider_compacted(messages: Sequence[ModelMessage]) -> bool:
    """Whether `messages` hold a provider's compaction (kept, one the rewrite made: an earlier one would come before
    a baseline kept).
    """
    return any(
        isinstance(message, ModelResponse) and any(isinstance(part, CompactionPart) for part in message.parts)
        for message in messages
    )


def _last_baseline(messages: Sequence[ModelMessage]) -> SystemPromptPart | None:
    """The carrier of the last window baseline in `messages`, or `None` if there is none after a provider's
    compaction.
    """
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            if any(isinstance(part, CompactionPart) for part in message.parts):
                return None
            continue
        for part in reversed(message.parts):
            if holds_record(part) and cast('dict[str, Any]', part.metadata)[RECORD_KEY].get('kind') == 'baseline':
                return part
    return None
