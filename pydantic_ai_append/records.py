"""The records a window leaves in message history, and how they are stored and read back.

Pydantic AI's union of request parts is closed, so a plugin can't add part types of its own. Each record
travels instead in the `metadata` of an empty [`SystemPromptPart`][pydantic_ai.messages.SystemPromptPart]
(a *carrier*), under the key [`RECORD_KEY`][pydantic_ai_append.records.RECORD_KEY]. Part metadata is
the one place that survives everything Pydantic AI does to history: JSON round trips through
`ModelMessagesTypeAdapter`, durable execution, and the merging of consecutive requests, which drops
request-level metadata. Carriers are never sent as they are: the capability takes them out of each
outgoing request and puts the rendered text of the window's changes in their place.

Records hold content, never rendered text, so each model renders them in its own wording. They are plain
JSON-able dicts with a format version and an integrity hash; a record that is from a newer version, is
malformed, or fails its check reads as unreadable and opens a new window rather than being delivered.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple, TypeAlias, cast

from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, SystemPromptPart

__all__ = (
    'RECORD_KEY',
    'RECORD_VERSION',
    'InstructionBaselinePart',
    'InstructionBlock',
    'InstructionDeltaPart',
    'InstructionDigest',
    'InstructionRecord',
    'UnreadableRecord',
    'content_hash',
    'instruction_records',
    'strip_records',
)

RECORD_KEY = 'pydantic_ai_append'
"""The key of a carrier's `metadata` that holds a record."""

RECORD_VERSION = 1
"""The record format this version writes, and the newest it reads."""


def content_hash(text: str) -> str:
    """The digest records use to name a block's text: the first 32 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class InstructionBlock:
    """An append-mode block's value, as a baseline records it.

    ```python
    from pydantic_ai_append import InstructionBlock

    block = InstructionBlock(id='capability:todos:state', content='- [ ] write tests')
    print(block.content_hash)
    #> 46da768035b57ac0313d35fe1e954587
    ```
    """

    id: str
    """The block's id, such as `'capability:todos:state'`."""

    content: str | None
    """The block's text, or `None` while it is withdrawn."""

    # Kept once computed: decoded records are kept too, and every request's window fold reads it.
    @functools.cached_property
    def content_hash(self) -> str | None:
        """The digest of `content`, or `None` while the block is withdrawn."""
        return content_hash(self.content) if self.content is not None else None


@dataclass(frozen=True)
class InstructionDigest:
    """A rewrite-mode or literal instruction block, as a baseline records it: enough to tell whether it changed.

    ```python
    from pydantic_ai_append import InstructionDigest

    digest = InstructionDigest.of(id='agent', dynamic=False, content='Be brief.')
    print(digest.matches(id='agent', dynamic=False, content='Be brief.'))
    #> True
    ```
    """

    id: str | None
    """The block's id, or `None` if nothing addresses it."""

    dynamic: bool
    """Whether the block is computed (rewrite mode) rather than literal text."""

    content_hash: str
    """The digest of the block's text."""

    @classmethod
    def of(cls, *, id: str | None, dynamic: bool, content: str) -> InstructionDigest:
        """The digest of a block with this id, kind and text."""
        return cls(id=id, dynamic=dynamic, content_hash=content_hash(content))

    def matches(self, *, id: str | None, dynamic: bool, content: str) -> bool:
        """Whether a block with this id, kind and text is the one this digest was taken of."""
        return self.id == id and self.dynamic == dynamic and self.content_hash == content_hash(content)


@dataclass(frozen=True)
class InstructionBaselinePart:
    """The record that opens a window: the instruction list its prefix was rendered from.

    Append-mode blocks are kept in full, because their first values stay in the prefix for the whole
    window; every other block is kept as a digest. A baseline with no blocks ends the window before it.

    ```python
    from pydantic_ai_append import InstructionBaselinePart, InstructionBlock, InstructionDigest

    baseline = InstructionBaselinePart(
        instructions=(
            InstructionDigest.of(id='agent', dynamic=False, content='Be brief.'),
            InstructionBlock(id='capability:todos:state', content='- [ ] write tests'),
        )
    )
    print([block.id for block in baseline.blocks])
    #> ['capability:todos:state']
    ```
    """

    instructions: tuple[InstructionBlock | InstructionDigest, ...]
    """The prefix's blocks in the order they were sent."""

    @property
    def blocks(self) -> tuple[InstructionBlock, ...]:
        """The append-mode blocks, in prefix order."""
        return tuple(block for block in self.instructions if isinstance(block, InstructionBlock))

    @property
    def digests(self) -> tuple[InstructionDigest, ...]:
        """The digests of every other block, in prefix order."""
        return tuple(block for block in self.instructions if isinstance(block, InstructionDigest))


@dataclass(frozen=True)
class InstructionDeltaPart:
    """The record of one append-mode block's change, delivered at the request it is stored on.

    ```python
    from pydantic_ai_append import InstructionDeltaPart

    delta = InstructionDeltaPart(id='capability:todos:state', content=None, base_hash=None)
    print(delta.withdrawn)
    #> True
    ```
    """

    id: str
    """The id of the block that changed."""

    content: str | None
    """The block's new text, or `None` if it was withdrawn."""

    base_hash: str | None
    """The digest of the text the change replaces, or `None` if the block had no text before."""

    diff: str | None = None
    """The change as unified-diff hunks against the replaced text, when that was shorter than the full text.

    Computed once, when the change is recorded, so later requests never diff again and the bytes of a past
    change can't move with the diff algorithm."""

    @property
    def withdrawn(self) -> bool:
        """Whether the change withdraws the block."""
        return self.content is None

    # Kept once computed: decoded records are kept too, and every request's window fold reads it.
    @functools.cached_property
    def content_hash(self) -> str | None:
        """The digest of `content`, or `None` for a withdrawal."""
        return content_hash(self.content) if self.content is not None else None


@dataclass(frozen=True)
class UnreadableRecord:
    """A carrier whose record this version can't trust: newer, malformed, or failing its integrity check.

    It is never delivered; a window that contains one can't be continued.
    """

    reason: str
    """Why the record can't be read, for logs."""


InstructionRecord: TypeAlias = InstructionBaselinePart | InstructionDeltaPart
"""A record a window leaves in history."""


# --- Encoding. Records are plain dicts so any store or durable-execution layer keeps them as they are.

_Kind = Literal['baseline', 'delta']


def _signature(payload: dict[str, Any], key: bytes | None) -> str:
    """The integrity check of a record: a keyed HMAC when a signing key is set, a plain digest otherwise."""
    encoded = json.dumps(payload, sort_keys=True, separators=(',', ':'), ensure_ascii=False).encode()
    if key is None:
        return hashlib.sha256(encoded).hexdigest()[:32]
    return hmac.new(key, encoded, hashlib.sha256).hexdigest()


def encode_record(
    record: InstructionRecord, *, key: bytes | None = None, conversation_id: str | None = None
) -> dict[str, Any]:
    """The JSON-able dict a carrier stores for `record`, sealed with its integrity check.

    Args:
        record: The record.
        key: The signing key, if records are signed.
        conversation_id: The conversation a signed record belongs to, which the signature covers.
    """
    payload: dict[str, Any]
    if isinstance(record, InstructionBaselinePart):
        payload = {
            'v': RECORD_VERSION,
            'kind': 'baseline',
            'instructions': [
                {'id': block.id, 'content': block.content}
                if isinstance(block, InstructionBlock)
                else {'id': block.id, 'dynamic': block.dynamic, 'hash': block.content_hash}
                for block in record.instructions
            ],
        }
    else:
        payload = {
            'v': RECORD_VERSION,
            'kind': 'delta',
            'id': record.id,
            'content': record.content,
            'base_hash': record.base_hash,
            'diff': record.diff,
        }
    if conversation_id is not None:
        payload['conversation'] = conversation_id
    return {**payload, 'check': _signature(payload, key)}


class _DecodedCache:
    """Records already decoded, by the identity of the stored dict they were read from.

    History objects live for a whole run, so each request would otherwise check every record in the window
    again, at a cost that grows with the conversation. A fresh history (after a JSON round trip) is checked
    once. The dicts are held, so an `id()` is never reused while its entry exists; the cache is bounded.
    An entry is for the key and conversation it was checked with; a lookup with others checks again.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        # Keyed by the `id()` alone: a lookup builds no key object, since it runs for every record on every request.
        self._entries: dict[int, tuple[object, bytes | None, str | None, InstructionRecord | UnreadableRecord]] = {}

    def get(self, data: object, key: bytes | None, conversation_id: str | None) -> InstructionRecord | UnreadableRecord:
        entry = self._entries.get(id(data))
        if entry is not None and entry[0] is data and entry[1] == key and entry[2] == conversation_id:
            return entry[3]
        record = _decode_uncached(data, key, conversation_id)
        if len(self._entries) >= self._size:
            # Dicts keep insertion order: drop the oldest half.
            for stale in list(self._entries)[: self._size // 2]:
                del self._entries[stale]
        self._entries[id(data)] = (data, key, conversation_id, record)
        return record


_DECODED = _DecodedCache(size=16384)


def decode_record(
    data: object, *, key: bytes | None = None, conversation_id: str | None = None
) -> InstructionRecord | UnreadableRecord:
    """Read a carrier's stored dict back into a record, or say why it can't be trusted.

    Args:
        data: What the carrier stores.
        key: The signing key, if records are signed.
        conversation_id: The conversation a signed record must belong to; `None` doesn't check.
    """
    return _DECODED.get(data, key, conversation_id)


def _decode_uncached(
    data: object, key: bytes | None, conversation_id: str | None
) -> InstructionRecord | UnreadableRecord:
    if not isinstance(data, dict):
        return UnreadableRecord('the record is not a mapping')
    stored = cast(dict[str, Any], data)
    version = stored.get('v')
    if not isinstance(version, int) or version > RECORD_VERSION:
        return UnreadableRecord(f'record format {version!r} is newer than this version reads ({RECORD_VERSION})')
    payload = {name: value for name, value in stored.items() if name != 'check'}
    if not hmac.compare_digest(str(stored.get('check')), _signature(payload, key)):
        return UnreadableRecord('the record fails its integrity check')
    if conversation_id is not None and payload.get('conversation') != conversation_id:
        return UnreadableRecord('the record belongs to another conversation')
    payload.pop('conversation', None)
    try:
        return _decode_payload(payload)
    except (KeyError, TypeError, ValueError) as error:
        return UnreadableRecord(f'the record is malformed: {error}')


def _decode_payload(payload: dict[str, Any]) -> InstructionRecord:
    kind = cast(_Kind, payload['kind'])
    if kind == 'baseline':
        items = cast(list[dict[str, Any]], payload['instructions'])
        return InstructionBaselinePart(
            instructions=tuple(
                InstructionBlock(id=_str(item['id']), content=_optional_str(item['content']))
                if 'content' in item
                else InstructionDigest(
                    id=_optional_str(item['id']), dynamic=bool(item['dynamic']), content_hash=_str(item['hash'])
                )
                for item in items
            )
        )
    if kind == 'delta':
        return InstructionDeltaPart(
            id=_str(payload['id']),
            content=_optional_str(payload['content']),
            base_hash=_optional_str(payload['base_hash']),
            diff=_optional_str(payload['diff']),
        )
    raise ValueError(f'unknown record kind {kind!r}')


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f'expected a string, got {value!r}')
    return value


def _optional_str(value: object) -> str | None:
    return None if value is None else _str(value)


# --- Carriers in history.


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
    if metadata is None or RECORD_KEY not in metadata:
        return None if not part.content and not metadata else _NOT_CARRIED
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

    record: InstructionRecord | UnreadableRecord
    """What the carrier holds."""


@dataclass(frozen=True)
class Compaction:
    """A point in history where earlier turns were compacted, which ends any window before it."""

    message_index: int
    """The index of the message that holds the compaction."""


def scan(
    messages: Sequence[ModelMessage], *, key: bytes | None = None, conversation_id: str | None = None
) -> Iterator[Located | Compaction]:
    """Every record and compaction in `messages`, in history order, in one pass without rendering."""
    # This runs on every request over the whole history: one type check for each part, and work only for system
    # prompts and compactions. Records are yielded rather than listed, so each is dropped as soon as it is folded.
    for message_index, message in enumerate(messages):
        request = isinstance(message, ModelRequest)
        for part_index, part in enumerate(message.parts):
            if isinstance(part, SystemPromptPart):
                if request and (stored := _stored(part)) is not _NOT_CARRIED:
                    record = (
                        _DECODED.get(stored, key, conversation_id)
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
    return [
        found.record
        for found in scan(messages, key=key, conversation_id=conversation_id if key is not None else None)
        if isinstance(found, Located) and not isinstance(found.record, UnreadableRecord)
    ]


def strip_records(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """A copy of `messages` without this plugin's records (or their remnants), for history from an untrusted client.

    A client that sends history back (a browser, a UI adapter) can forge records. Stripping them makes the
    next request open a new window from the current values, which costs one cache miss and trusts nothing
    the client sent.

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
        if isinstance(message, ModelRequest) and any(is_carrier(part) for part in message.parts):
            message = replace(message, parts=[part for part in message.parts if not is_carrier(part)])
        stripped.append(message)
    return stripped
