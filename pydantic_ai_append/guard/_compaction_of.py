"""A rewrite of consumed history recognised as a compaction, and turned into the history to send in whole tool pairs.

`compaction_of` is for the compaction a user installed (Pydantic AI Harness's strategies, a processor that keeps the
first message and the last N, a provider's compaction run from a hook): it tells a compaction from any other rewrite
of consumed history, and turns it into the history to send. A compaction keeps the order of what it keeps and the
latest message, and leaves every message it keeps either as it was or with parts cleared (a tool result or a call's
arguments replaced, a response's text clamped); new messages (a summary, a receipt) stand only in the place of what
it drops. An edit of what the user or the application said is never a compaction. It must not split a tool pair,
except where it trims or summarizes the front of history: then the cut is moved as
[`compact`][pydantic_ai_append.guard.compact] moves it, and the history sent is marked and keeps the instruction
window as `compact` does it (`_compaction`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple, cast

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    repair_messages,
)

from ._bytes import message_bytes
from ._compaction import keeping_window, marked, marker_counts, unmarked, whole_pair_cut
from ._pairing import ToolPairProblem, tool_pair_problems, tool_pairs


class Compacted(NamedTuple):
    """A compaction as it is sent: what `compaction_of` makes of a rewrite it recognises."""

    messages: list[ModelMessage]
    """The history to send: what the compaction kept, the instruction window kept open (`keeping_window`), a marker
    where messages were elided."""

    elided: int
    """How many messages this compaction elided (cleared or clamped messages are kept, not elided)."""

    changed: bool
    """Whether the compaction changes anything: cut in whole tool pairs, a rewrite can come to nothing (its cut moved
    back over what it elided), and then `messages` is the history as it was."""

    split: tuple[ToolPairProblem, ...]
    """The tool pairs the rewrite split. It is then applied as the same trim or summary of the front of history with
    the cut moved to where no pair is split (see `compact`); any other rewrite that splits a pair is no compaction."""


def compaction_of(
    full: Sequence[ModelMessage],
    proposed: Sequence[ModelMessage],
    *,
    known: Collection[tuple[str, str, str | None]] = (),
    sending: bool = False,
) -> Compacted | None:
    """`proposed` as a compaction of `full`, in whole tool-pair units, or `None` if it isn't a compaction.

    Args:
        full: The history the rewrite started from: what the model consumed, and the messages not sent yet.
        proposed: The rewritten history.
        known: The pair problems `full` already had, as `(kind, tool_call_id, tool_name)`: they aren't the
            rewrite's doing, and are left as they are.
        sending: Whether `proposed` is about to be sent (see `tool_pair_problems`).
    """
    full_bytes = [message_bytes(message) for message in full]
    proposed_bytes = [message_bytes(message) for message in proposed]
    matched = _align(full, full_bytes, proposed, proposed_bytes) if proposed else None
    if matched is None:
        return None
    split = tuple(problem for problem in tool_pair_problems(proposed, sending=sending) if problem.key not in known)
    kept = [False] * len(full)
    for index in matched:
        if index is not None:
            kept[index] = True
    if split:
        # Only a rewrite that elides one run of messages (a trim, a summary, the first and the last kept) is taken to
        # have cut its edges in the wrong place; one that splits pairs in several places is no compaction.
        if sum(1 for index, keep in enumerate(kept) if not keep and (index == 0 or kept[index - 1])) != 1:
            return None
        _keep_whole_pairs(full, kept, summarized=None in matched)
    _keep_requests_apart(full, matched, kept)
    if all(kept) and all(
        index is not None and proposed_bytes[position] == full_bytes[index] for position, index in enumerate(matched)
    ):
        # Cut in whole pairs, the rewrite comes to nothing: a split is then refused as a split, and a cut that only
        # kept two requests apart is the history as it was.
        return None if split else Compacted(list(full), 0, False, split)
    if all(kept) and None in matched:
        # Kept whole, the pairs leave nothing for the new messages to stand for: they would be an insertion.
        return None
    messages, frontier, elided = _rebuilt(full, proposed, matched, kept)
    if elided:
        earlier = sum(count for message in full for count in marker_counts(message))
        messages = marked(unmarked(messages), frontier, elided + earlier)
    messages = keeping_window(full, messages, cut=bool(elided))
    if any(problem.key not in known for problem in tool_pair_problems(messages, sending=sending)):
        # A pair the kept history can't mend: a call or a result among the new messages (a summary that makes one up).
        return None
    # Requests left side by side (a summary's and the first kept) are merged as Pydantic AI merges them before a
    # run's history processors see them, so the next run is judged against the same shape. With every pair whole,
    # merging is all its repair does.
    return Compacted(repair_messages(messages, repair_last_response=False), elided, True, split)


def _align(
    full: Sequence[ModelMessage],
    full_bytes: Sequence[bytes],
    proposed: Sequence[ModelMessage],
    proposed_bytes: Sequence[bytes],
) -> list[int | None] | None:
    """For each proposed message, the index of the message of `full` it keeps, or `None` for a new one.

    Read from the end, as a compaction keeps the latest messages: each proposed message is the latest message of
    `full` before the one matched last with the same bytes (those in between are elided), a cleared copy of the one
    just before it (see `_cleared`), or new. New messages stand in the place of elided ones, or at the very front (a
    receipt). Anything else is no compaction (`None`): an edit, new messages where nothing was elided (an
    insertion), dropping the latest message, or a change that elides and clears nothing.
    """
    positions: dict[bytes, list[int]] = {}
    for index, sent in enumerate(full_bytes):
        positions.setdefault(sent, []).append(index)
    matched: list[int | None] = [None] * len(proposed)
    cursor, changed, new = len(full), False, 0
    for index in range(len(proposed) - 1, -1, -1):
        at = positions.get(proposed_bytes[index], [])
        found = bisect_left(at, cursor) - 1
        if found >= 0:
            keeps = at[found]
        elif cursor and _cleared(proposed[index], full[cursor - 1]):
            keeps, changed = cursor - 1, True
        else:
            new += 1
            continue
        skipped = cursor - 1 - keeps
        if skipped and cursor == len(full) or not skipped and new:
            return None
        if skipped and _edited(proposed[index + 1 : index + 1 + new], full[keeps + 1 : cursor]):
            return None
        matched[index], cursor, new, changed = keeps, keeps, 0, changed or bool(skipped)
    if cursor == len(full) or _edited(proposed[:new], full[:cursor]) or not (changed or cursor):
        return None
    return matched


def _keep_whole_pairs(full: Sequence[ModelMessage], kept: list[bool], *, summarized: bool) -> None:
    """Mark in `kept` the messages of `full` to keep so that no tool pair is split, in whole-pair units.

    A result kept whose call is elided is elided too, with the rest of its exchange, up to the next whole-pair cut
    (as `compact` cuts a trim); with a summary in the rewrite, or where nothing can be elided (the exchange runs to
    the latest message), the call is kept instead, with its exchange back to the whole-pair cut before it, so no turn
    is lost that the summary may not hold. A call kept whose result is elided keeps its result.
    """
    pairs = [(call.message_index, result.message_index) for call, result in tool_pairs(full)]
    changed = True
    while changed:
        changed = False
        for call, result in pairs:
            if kept[call] == kept[result]:
                continue
            changed = True
            if kept[call]:
                kept[call + 1 : result + 1] = [True] * (result - call)
                continue
            after = whole_pair_cut(full, call + 1)
            if not summarized and after is not None:
                kept[call:after] = [False] * (after - call)
            else:
                before = whole_pair_cut(full, call, earlier=True) or 0
                kept[before : call + 1] = [True] * (call + 1 - before)


def _keep_requests_apart(full: Sequence[ModelMessage], matched: Sequence[int | None], kept: list[bool]) -> None:
    """Keep the reply before a run of kept messages that starts with a request, where a request comes before the
    elided ones, and nothing new stands between them.

    Pydantic AI merges two requests side by side into one, and a processor that keeps "the first message" would then
    keep the merged one: it would grow by a prompt at every compaction. A reply with no calls between them (the end of
    a turn) is one message more, kept whole.
    """
    summarized_after = {
        previous for previous, index in zip([-1, *matched], [*matched, None], strict=True) if index is None
    }
    head: int | None = None
    for index, message in enumerate(full):
        if not kept[index]:
            continue
        if (
            head is not None
            and index - head > 1
            and head not in summarized_after
            and isinstance(full[head], ModelRequest)
            and isinstance(message, ModelRequest)
            and isinstance(reply := full[index - 1], ModelResponse)
            and not any(isinstance(part, BaseToolCallPart) for part in reply.parts)
        ):
            kept[index - 1] = True
        head = index


def _rebuilt(
    full: Sequence[ModelMessage], proposed: Sequence[ModelMessage], matched: Sequence[int | None], kept: Sequence[bool]
) -> tuple[list[ModelMessage], int, int]:
    """The messages of `full` that `kept` keeps (as `proposed` has them), with `proposed`'s new messages right after
    the kept message they follow (so a summary stays where the messages it replaced were), where the first elided
    messages were, and how many were elided.
    """
    versions = {index: proposed[position] for position, index in enumerate(matched) if index is not None}
    after: dict[int, list[ModelMessage]] = {}
    previous = -1
    for position, index in enumerate(matched):
        if index is None:
            after.setdefault(previous, []).append(proposed[position])
        else:
            previous = index
    messages: list[ModelMessage] = list(after.get(-1, []))
    frontier: int | None = None
    new = len(messages)
    for index, message in enumerate(full):
        if kept[index]:
            messages.append(versions.get(index, message))
            new = 0
        elif frontier is None:
            # The marker goes before the new messages that stand here (a summary), if any.
            frontier = len(messages) - new
        messages += after.get(index, [])
        new += len(after.get(index, []))
    return messages, 0 if frontier is None else frontier, kept.count(False)


def _edited(replacement: Sequence[ModelMessage], replaced: Sequence[ModelMessage]) -> bool:
    """Whether new messages in the place of elided ones are those messages edited (the same parts, one for one, or
    some of them left out: a tool call or result deleted from its message), rather than a summary of them.
    """
    return 0 < len(replacement) == len(replaced) and all(
        type(message) is type(was) and _left_out(_shape(message), _shape(was))
        for message, was in zip(replacement, replaced, strict=True)
    )


def _left_out(shape: Sequence[tuple[type, str | None]], original: Sequence[tuple[type, str | None]]) -> bool:
    """Whether `shape` is `original` with none, some or all of its parts left out, the rest in their order."""
    remaining = iter(original)
    # Each `in` goes on from where the last one matched, so the parts must come in `original`'s order.
    return all(part in remaining for part in shape)


def _shape(message: ModelMessage) -> list[tuple[type, str | None]]:
    return [(type(part), getattr(part, 'tool_call_id', None)) for part in message.parts]


def _cleared(message: ModelMessage, original: ModelMessage) -> bool:
    """Whether `message` is `original` with parts cleared as compaction clears them, and nothing else changed.

    That is a tool result or a tool call's arguments replaced (by a placeholder, or blanked), or a response's text
    or thinking clamped shorter. A prompt or a system prompt changed is an edit of what the user or the application
    said, whatever its size, and so is any part added, removed, retyped or given another tool call id.
    """
    if type(message) is not type(original) or _shape(message) != _shape(original):
        return False
    for part, was in zip(message.parts, original.parts, strict=True):
        if part == was or isinstance(part, BaseToolReturnPart | BaseToolCallPart):
            continue
        if not isinstance(part, TextPart | ThinkingPart) or len(part.content) >= len(cast('Any', was).content):
            return False
    return True
