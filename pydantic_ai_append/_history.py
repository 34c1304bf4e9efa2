"""Records in message history: where they travel, how they are found, read back, and taken out.

Pydantic AI's union of request parts is closed, so each record travels in the `metadata` of a
[`SystemPromptPart`][pydantic_ai.messages.SystemPromptPart] (a *carrier*), which survives JSON round trips, durable
execution and the merging of consecutive requests. A change's carrier holds the element it sends as its text, so
Pydantic AI sends it as stored on every later request; a baseline's carrier is empty, and never sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple, TypeAlias, TypeGuard, cast

from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)

from ._diff import diff_hunks
from ._encoding import Change, Unreadable, decode_record, key_bytes
from ._records import InstructionBaselinePart, InstructionDeltaPart, InstructionRecord, content_hash
from ._rendering import change_value

RECORD_KEY = 'pydantic_ai_append'
"""The key of a carrier's `metadata` that holds a record."""

COMPACTED = object()
"""What `Found.stored` is for a compaction, which ends any window before it."""

_NOT_CARRIED = object()


Found: TypeAlias = tuple[int, int, SystemPromptPart | None, Any]
"""A carrier (or a compaction) in history: its message's and part's indexes, the carrier (`None`: a compaction), and
what it stores (`None` if dropped, or `COMPACTED`); a plain tuple, as a named one costs several times as much."""


def carrier(text: str, stored: dict[str, Any]) -> SystemPromptPart:
    """The system prompt part that sends `text` (empty for a baseline) and stores the record `stored`."""
    return SystemPromptPart(content=text, metadata={RECORD_KEY: stored})


def holds_record(part: object) -> TypeGuard[SystemPromptPart]:
    """Whether `part` is a carrier that holds a record, not what is left of one (`is_carrier` counts both)."""
    return isinstance(part, SystemPromptPart) and part.metadata is not None and RECORD_KEY in part.metadata


def stored_record(part: SystemPromptPart) -> object:
    """What a carrier stores: its record, `None` for what is left of a carrier, or a sentinel for any other part."""
    if holds_record(part):
        return cast('dict[str, Any]', part.metadata)[RECORD_KEY]
    # What a UI adapter that drops metadata leaves of a carrier: an empty system prompt, or a change's element alone.
    if not part.metadata and (not part.content or part.content.startswith(_ELEMENTS)):
        return None
    return _NOT_CARRIED


_ELEMENTS = ('<context id="', '<context-diff id="')


def request_records(request: ModelRequest) -> list[dict[str, Any]]:
    """The records `request`'s carriers store, where readable as mappings: a baseline's or a change's."""
    stored = [stored_record(part) for part in request.parts if isinstance(part, SystemPromptPart)]
    return [cast('dict[str, Any]', item) for item in stored if isinstance(item, dict)]


def opens_window(request: ModelRequest) -> bool:
    """Whether `request` is where a window opened (or ended), so its prefix may differ from the request before.

    Its baseline is known by its kind alone (the guard holds no key), so strip client history (`strip_records`).
    """
    return any(record.get('kind') == 'baseline' for record in request_records(request))


def is_carrier(part: object) -> bool:
    """Whether `part` carries one of this plugin's records, readable or not, or is what is left of a carrier."""
    return isinstance(part, SystemPromptPart) and stored_record(part) is not _NOT_CARRIED


class Scan(NamedTuple):
    """What a request's history holds for the window: its carriers and compactions, and where lookalikes may be."""

    found: list[Found]
    """Every carrier and compaction, in history order."""

    empty: list[int]
    """Where in `found` the empty carriers and the compactions are: only those can open or end a window."""

    suspects: list[int]
    """The requests with a user prompt or tool return whose text may imitate an element: anything but ASCII text
    without a `<` or a `&`."""


def scan(messages: Sequence[ModelMessage], start: int = 0, stop: int | None = None) -> Scan:  # noqa: C901 (one loop, written out: see the comment in it)
    """The carriers and compactions of `messages[start:stop]`, unread, and the requests that may hold lookalikes."""
    found: list[Found] = []
    empty: list[int] = []
    suspects: list[int] = []
    # Runs on every request over the whole history, so written for speed: a type check per part, a look at user and
    # tool text, a tuple per carrier.
    for message_index in range(start, len(messages) if stop is None else stop):
        message = messages[message_index]
        if not isinstance(message, ModelRequest):
            if any(type(part) is CompactionPart for part in message.parts):
                empty.append(len(found))
                found.append((message_index, -1, None, COMPACTED))
            continue
        suspect = False
        for part_index, part in enumerate(message.parts):
            if type(part) is SystemPromptPart:
                if holds_record(part):
                    if not part.content:
                        empty.append(len(found))
                    found.append((message_index, part_index, part, cast('dict[str, Any]', part.metadata)[RECORD_KEY]))
                elif (stored := stored_record(part)) is not _NOT_CARRIED:
                    # What is left of a carrier: it can only open or end a window, like an empty one.
                    empty.append(len(found))
                    found.append((message_index, part_index, part, stored))
            elif type(part) is UserPromptPart or type(part) is ToolReturnPart:
                content = part.content
                suspect = (
                    suspect or type(content) is not str or '<' in content or '&' in content or not content.isascii()
                )
        if suspect:
            suspects.append(message_index)
    return Scan(found, empty, suspects)


def instruction_records(
    messages: Sequence[ModelMessage], *, signing_key: str | bytes | None = None, conversation_id: str | None = None
) -> list[InstructionRecord]:
    """The window records in a message history, in history order, leaving out any that can't be read.

    A change sent as a diff is given with its text, rebuilt from the records before it, or left out if its base was
    trimmed from history.

    Args:
        messages: A message history, as `result.all_messages()` returns it or `ModelMessagesTypeAdapter` loads it.
        signing_key: The key the capability signed its records with, if any.
        conversation_id: With `signing_key`, the conversation the records must belong to.
    """
    key = key_bytes(signing_key)
    records: list[InstructionRecord] = []
    held: dict[str, str | None] = {}
    for _, _, part, stored in scan(messages).found:
        text = part.content if part is not None else ''
        record = decode_record(stored, text, key=key, conversation_id=conversation_id)
        if isinstance(record, InstructionBaselinePart):
            held = {block.id: block.content for block in record.blocks}
            records.append(record)
        elif not isinstance(record, Unreadable):
            if (delta := delta_of(record, text, held.get(record.id))) is None:
                held.pop(record.id, None)
            else:
                held[delta.id] = delta.content
                records.append(delta)
    return records


def delta_of(record: Change, text: str, previous: str | None) -> InstructionDeltaPart | None:
    """The change a record sent as `text` makes, given the block's value before it; `None` if it can't be rebuilt."""
    value = change_value(record.id, text, previous)
    digest = content_hash(value) if isinstance(value, str) else None
    if isinstance(value, ValueError) or digest != record.state.get(record.id):
        return None
    diffed = previous is not None and value is not None and text.startswith('<context-diff')
    diff = diff_hunks(cast('str', previous), cast('str', value)) if diffed else None
    return InstructionDeltaPart(id=record.id, content=value, base_hash=record.base, diff=diff)


def strip_records(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """A copy of `messages` without this plugin's records (or their remnants), for history from an untrusted client.

    A client that sends history back (a browser, a UI adapter) can forge records. Stripped, the next request opens a
    new window from the current values: one cache miss, and nothing the client sent is trusted. The changes' texts
    go with their records, and each request's recorded instructions too (Pydantic AI sends them again to resume a
    suspended turn, which stripped history resumes without instructions).
    """
    stripped: list[ModelMessage] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            if any(is_carrier(part) for part in message.parts):
                message = replace(message, parts=[part for part in message.parts if not is_carrier(part)])
            if message.instructions is not None:
                message = replace(message, instructions=None)
        stripped.append(message)
    return stripped
