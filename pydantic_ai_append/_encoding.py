"""How a record is stored: a plain JSON-able dict with a format version and an integrity check, or a signature.

Records are plain dicts so any store or durable-execution layer keeps them as they are. A record that is from a
newer version, is malformed, or fails its check reads as unreadable and opens a new window rather than being
delivered. With a signing key, the check is an HMAC that also binds the record to its conversation.

Two formats are written. Format 1 is every record as first defined: a baseline with its blocks' text, a change
with the block's whole new value. Format 2 adds one shape, a change stored as its diff: the hunks, the digest of
the text they apply to (`base_hash`) and the digest of the text they make (`hash`), without the text, which the
window fold rebuilds (`_patch`). Each record is written in the oldest format that holds it, so a change with a diff
is format 2 and every other record keeps the bytes format 1 gave it; a version that reads only format 1 still reads
those, and opens a new window at the first change it can't.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Literal, TypeAlias, cast

from ._cache import BoundedCache, size_of
from ._records import (
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDeltaPart,
    InstructionDigest,
    InstructionRecord,
    StoredDiff,
    UnreadableRecord,
)

__all__ = ('RECORD_VERSION', 'DecodedRecord', 'decode_record', 'encode_record', 'seal')

RECORD_VERSION = 2
"""The newest record format this version writes and reads: a change stored as its diff (see above)."""

_FULL_VERSION = 1
"""The format of every record that isn't a change stored as its diff."""


_Kind = Literal['baseline', 'delta']


def _signature(payload: dict[str, Any], key: bytes | None) -> str:
    """The integrity check of a record: a keyed HMAC when a signing key is set, a plain digest otherwise."""
    # As in `content_hash`, a lone surrogate in a block's text is encoded as its code point rather than refused.
    encoded = json.dumps(payload, sort_keys=True, separators=(',', ':'), ensure_ascii=False).encode(
        'utf-8', 'surrogatepass'
    )
    if key is None:
        return hashlib.sha256(encoded).hexdigest()[:32]
    return hmac.new(key, encoded, hashlib.sha256).hexdigest()


def seal(payload: dict[str, Any], key: bytes | None = None) -> dict[str, Any]:
    """`payload` with its integrity check (or signature, with `key`) added, as a carrier stores it."""
    return {**payload, 'check': _signature(payload, key)}


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
            'v': _FULL_VERSION,
            'kind': 'baseline',
            'instructions': [
                {'id': block.id, 'content': block.content}
                if isinstance(block, InstructionBlock)
                else {'id': block.id, 'dynamic': block.dynamic, 'hash': block.content_hash}
                for block in record.instructions
            ],
        }
        # Written only when there is something to say, so a baseline without native blocks keeps its old bytes.
        if record.native:
            payload['native'] = list(record.native)
    elif record.diff is not None and record.content is not None and record.base_hash is not None:
        # The diff and the digests are what it takes to rebuild the new text from the one before it and to know
        # it was rebuilt right; storing the text too would keep a second copy of the block with every edit.
        payload = {
            'v': RECORD_VERSION,
            'kind': 'delta',
            'id': record.id,
            'base_hash': record.base_hash,
            'diff': record.diff,
            'hash': record.content_hash,
        }
    else:
        payload = {
            'v': _FULL_VERSION,
            'kind': 'delta',
            'id': record.id,
            'content': record.content,
            'base_hash': record.base_hash,
            'diff': record.diff,
        }
    if conversation_id is not None:
        payload['conversation'] = conversation_id
    return seal(payload, key)


DecodedRecord: TypeAlias = InstructionRecord | StoredDiff | UnreadableRecord
"""What a carrier's stored dict reads as."""

_DECODED = BoundedCache[int, tuple[object, bytes | None, str | None, DecodedRecord]](
    max_entries=16_384, max_bytes=64 * 1024 * 1024, name='decoded records'
)
"""Records already decoded, by the identity of the stored dict they were read from.

History objects live for a whole run, so each request would otherwise check every record in the window again, at a
cost that grows with the conversation; a fresh history (after a JSON round trip) is checked once. An entry holds
the dict, so its `id()` is never reused while the entry exists, and it is for the key and conversation it was
checked with: a lookup with others checks again. It is keyed by the `id()` alone, so a lookup builds no key object.
"""


def _record_size(record: DecodedRecord) -> int:
    # The entry holds both the stored dict and the record decoded from it, which share no strings after a JSON load.
    if isinstance(record, InstructionBaselinePart):
        texts = [block.content for block in record.blocks]
    elif isinstance(record, InstructionDeltaPart):
        texts = [record.content, record.diff]
    elif isinstance(record, StoredDiff):
        texts = [record.diff]
    else:
        texts = [record.reason]
    return 2 * size_of(texts) + 256


def decode_record(data: object, *, key: bytes | None = None, conversation_id: str | None = None) -> DecodedRecord:
    """Read a carrier's stored dict back into a record, or say why it can't be trusted.

    Args:
        data: What the carrier stores.
        key: The signing key, if records are signed.
        conversation_id: The conversation a signed record must belong to; `None` doesn't check.
    """
    entry = _DECODED.get(id(data))
    if entry is not None and entry[0] is data and entry[1] == key and entry[2] == conversation_id:
        return entry[3]
    record = _decode_uncached(data, key, conversation_id)
    _DECODED.put(id(data), (data, key, conversation_id, record), size=_record_size(record))
    return record


def _decode_uncached(data: object, key: bytes | None, conversation_id: str | None) -> DecodedRecord:
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
        return _decode_payload(payload, version)
    except (KeyError, TypeError, ValueError) as error:
        return UnreadableRecord(f'the record is malformed: {error}')


def _decode_payload(payload: dict[str, Any], version: int) -> InstructionRecord | StoredDiff:
    kind = cast(_Kind, payload['kind'])
    if kind == 'baseline':
        items = cast(list[dict[str, Any]], payload['instructions'])
        return InstructionBaselinePart(
            instructions=tuple(
                InstructionBlock(id=_block_id(item['id']), content=_optional_str(item['content']))
                if 'content' in item
                else InstructionDigest(
                    id=_optional_str(item['id']), dynamic=bool(item['dynamic']), content_hash=_str(item['hash'])
                )
                for item in items
            ),
            native=tuple(_str(item) for item in cast(list[object], payload.get('native', []))),
        )
    if kind == 'delta' and version >= RECORD_VERSION:
        return StoredDiff(
            id=_block_id(payload['id']),
            base_hash=_str(payload['base_hash']),
            diff=_str(payload['diff']),
            content_hash=_str(payload['hash']),
        )
    if kind == 'delta':
        return InstructionDeltaPart(
            id=_block_id(payload['id']),
            content=_optional_str(payload['content']),
            base_hash=_optional_str(payload['base_hash']),
            diff=_optional_str(payload['diff']),
        )
    raise ValueError(f'unknown record kind {kind!r}')


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f'expected a string, got {value!r}')
    return value


def _block_id(value: object) -> str:
    # Every block this plugin appends has an id, and a change is delivered under it: an empty one names no block.
    block_id = _str(value)
    if not block_id:
        raise ValueError('an append-mode block has an empty id')
    return block_id


def _optional_str(value: object) -> str | None:
    return None if value is None else _str(value)
