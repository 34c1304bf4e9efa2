"""Records in message history: where they travel, how they are found, and how they are taken out.

Pydantic AI's union of request parts is closed, so a plugin can't add part types of its own. Each record
travels instead in the `metadata` of an empty [`SystemPromptPart`][pydantic_ai.messages.SystemPromptPart]
(a *carrier*), under the plugin's own key. Part metadata is the one place that survives everything Pydantic AI
does to history: JSON round trips through `ModelMessagesTypeAdapter`, durable execution, and the merging of
consecutive requests, which drops request-level metadata. Carriers are never sent as they are: the capability
takes them out of each outgoing request and puts the rendered text of the window's changes in their place.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart

from ._encoding import DecodedRecord, decode_record, encode_record
from ._patch import rebuild
from ._records import InstructionDeltaPart, InstructionRecord, StoredDiff, UnreadableRecord

__all__ = (
    'RECORD_KEY',
    'Compaction',
    'Located',
    'carrier',
    'instruction_records',
    'is_carrier',
    'opens_window',
    'scan',
    'strip_records',
)

RECORD_KEY = 'pydantic_ai_append'
"""The key of a carrier's `metadata` that holds a record."""

_BASELINE_KIND = 'baseline'
"""The `kind` a stored baseline record has (see `_encoding`)."""


def carrier(
    record: InstructionRecord, *, key: bytes | None = None, conversation_id: str | None = None
) -> SystemPromptPart:
    """The empty system prompt part that stores `record` in history."""
    return SystemPromptPart(
        content='', metadata={RECORD_KEY: encode_record(record, key=key, conversation_id=conversation_id)}
    )


def is_carrier(part: object) -> bool:
    """Whether `part` is a carrier of this plugin's records, readable or not, or what is left of one.

    Some UI adapters drop part metadata on the way through a client, which leaves a carrier an empty system
    prompt with no record. That remnant says nothing, so it is treated as a carrier that delivers nothing.
    """
    return isinstance(part, SystemPromptPart) and _stored(part) is not _NOT_CARRIED


_NOT_CARRIED = object()
"""What `_stored` returns for a system prompt part that is not a carrier."""


def _stored(part: SystemPromptPart) -> object:
    """What a carrier stores (`None` for a remnant), or `_NOT_CARRIED` if `part` is not a carrier."""
    metadata = part.metadata
    if part.content:
        # A carrier is empty: a system prompt with text of its own is the user's, kept as it is, whatever its
        # metadata says (a record planted on it is not read).
        return _NOT_CARRIED
    if metadata is None or RECORD_KEY not in metadata:
        return None if not metadata else _NOT_CARRIED
    return metadata[RECORD_KEY]


class Located(NamedTuple):
    """A record found in history, with where it was found.

    A named tuple rather than a frozen dataclass because every request builds one for each record in history,
    and a tuple is built at a fraction of the cost.
    """

    message_index: int
    """The index of the request that carries it."""

    part_index: int
    """The index of the carrier among that request's parts."""

    record: DecodedRecord
    """What the carrier holds: a change stored as its diff is rebuilt only when the window is folded."""


@dataclass(frozen=True)
class Compaction:
    """A point in history where earlier turns were compacted, which ends any window before it."""

    message_index: int
    """The index of the message that holds the compaction."""


def scan(
    messages: Sequence[ModelMessage],
    *,
    key: bytes | None = None,
    conversation_id: str | None = None,
    start: int = 0,
    stop: int | None = None,
) -> Iterator[Located | Compaction]:
    """Every record and compaction in `messages`, in history order, in one pass without rendering.

    Records are checked against `conversation_id` only when they are signed (`key` given): an unsigned record could
    be rewritten whole, so binding it to a conversation would prove nothing. With `start` and `stop`, only the
    messages at those indexes are read (what is found keeps its index in `messages`).
    """
    if key is None:
        conversation_id = None
    # This runs on every request over the whole history: one type check for each part, and work only for system
    # prompts and compactions. Records are yielded rather than listed, so each is dropped as soon as it is folded.
    for message_index in range(start, len(messages) if stop is None else stop):
        message = messages[message_index]
        request = isinstance(message, ModelRequest)
        for part_index, part in enumerate(message.parts):
            if isinstance(part, SystemPromptPart):
                if request and (stored := _stored(part)) is not _NOT_CARRIED:
                    record = (
                        decode_record(stored, key=key, conversation_id=conversation_id)
                        if stored is not None
                        else UnreadableRecord("the record was dropped from its part's metadata")
                    )
                    yield Located(message_index, part_index, record)
            elif isinstance(part, CompactionPart):
                yield Compaction(message_index)


def instruction_records(
    messages: Sequence[ModelMessage], *, signing_key: str | bytes | None = None, conversation_id: str | None = None
) -> list[InstructionRecord]:
    """The window records in a message history, in history order, leaving out any that can't be read.

    A change stored as its diff is given with its text, rebuilt from the text the records before it give the block;
    one that can't be rebuilt from them (its base was trimmed from history, or it doesn't rebuild the text its digest
    names) is left out, as the capability would not deliver it.

    ```python
    from pydantic_ai_append import instruction_records

    print(instruction_records([]))
    #> []
    ```

    Args:
        messages: A message history, as returned by `result.all_messages()` or loaded with
            `ModelMessagesTypeAdapter`.
        signing_key: The key the capability signed its records with, if it was given one.
        conversation_id: With `signing_key`, the conversation the records must belong to, as the capability
            checks it; records copied in from another conversation are left out.
    """
    key = signing_key.encode() if isinstance(signing_key, str) else signing_key
    records: list[InstructionRecord] = []
    # Each block's text and digest as the records so far give it. A rebuilt change is checked against the digests
    # it stores, so following the records without the window's rules can't give a wrong text, only leave one out.
    held: dict[str, tuple[str | None, str | None]] = {}
    for found in scan(messages, key=key, conversation_id=conversation_id):
        if not isinstance(found, Located) or isinstance(found.record, UnreadableRecord):
            continue
        record = found.record
        if isinstance(record, StoredDiff):
            rebuilt = rebuild(record, *held.get(record.id, (None, None)))
            if isinstance(rebuilt, str):
                held.pop(record.id, None)
                continue
            record = rebuilt
        if isinstance(record, InstructionDeltaPart):
            held[record.id] = (record.content, record.content_hash)
        else:
            held = {block.id: (block.content, block.content_hash) for block in record.blocks}
        records.append(record)
    return records


def strip_records(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """A copy of `messages` without this plugin's records (or their remnants), for history from an untrusted client.

    A client that sends history back (a browser, a UI adapter) can forge records. Stripping them makes the
    next request open a new window from the current values, which costs one cache miss and trusts nothing
    the client sent.

    The instructions each request records are taken out too: a client can forge them as well, and Pydantic AI
    sends a request's recorded instructions again when it resumes a turn the provider suspended. A suspended turn
    in stripped history is resumed without instructions; to start it over with the current ones, leave out the
    suspended response.

    ```python
    from pydantic_ai.messages import ModelRequest
    from pydantic_ai_append import strip_records

    history = [ModelRequest.user_text_prompt('hi')]
    print(strip_records(history) == history)
    #> True
    ```
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


def opens_window(request: ModelRequest) -> bool:
    """Whether `request` carries a baseline: the record [`AppendInstructions`][pydantic_ai_append.AppendInstructions]
    stores on a request that opens a new window (or ends one), whose prefix may differ from the request before.

    The record is recognised by its kind alone, without checking its integrity or signature: it only tells the
    guard that the prefix was meant to move there, and is never delivered on the strength of this.

    ```python
    from pydantic_ai.messages import ModelRequest

    from pydantic_ai_append._history import opens_window

    print(opens_window(ModelRequest.user_text_prompt('hi')))
    #> False
    ```
    """
    for part in request.parts:
        if isinstance(part, SystemPromptPart):
            stored = _stored(part)
            if isinstance(stored, dict) and stored.get('kind') == _BASELINE_KIND:  # pyright: ignore[reportUnknownMemberType]
                return True
    return False
