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
from collections.abc import Hashable
from typing import Any, Literal, TypeAlias, cast

from ._cache import BoundedCache, content_key, size_of
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


_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(',', ':'), sort_keys=True)
"""The JSON a record's check is taken of: what `json.dumps` gives with these options, from one encoder made once
rather than one per record (an encoder keeps nothing between calls)."""


def _signature(payload: dict[str, Any], key: bytes | None) -> str:
    """The integrity check of a record: a keyed HMAC when a signing key is set, a plain digest otherwise."""
    # As in `content_hash`, a lone surrogate in a block's text is encoded as its code point rather than refused.
    encoded = _CANONICAL.encode(payload).encode('utf-8', 'surrogatepass')
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

_DECODED = BoundedCache[Hashable, DecodedRecord](max_entries=16_384, max_bytes=64 * 1024 * 1024, name='decoded records')
"""Records already decoded, by the content of the stored dict they were read from and the key and conversation
they were checked with.

Every request reads every record in its window, and a history freshly loaded from JSON holds new dicts equal to
those read before: keyed by content (`content_key`), each distinct record is checked and decoded once per process,
and the same record object comes back, so what is kept on it (its `content_hash`) is computed once too. A dict
edited in place has another content, so it misses and is checked again.
"""


def _record_size(record: DecodedRecord) -> int:
    # The key holds the stored dict's strings and the record holds the same string objects (decoding takes them
    # from the dict as they are), so each text is counted once.
    if isinstance(record, InstructionBaselinePart):
        texts = [block.content for block in record.blocks]
    elif isinstance(record, InstructionDeltaPart):
        texts = [record.content, record.diff]
    elif isinstance(record, StoredDiff):
        texts = [record.diff]
    else:
        texts = [record.reason]
    return size_of(texts) + 512


def decode_record(data: object, *, key: bytes | None = None, conversation_id: str | None = None) -> DecodedRecord:
    """Read a carrier's stored dict back into a record, or say why it can't be trusted.

    Args:
        data: What the carrier stores.
        key: The signing key, if records are signed.
        conversation_id: The conversation a signed record must belong to; `None` doesn't check.
    """
    content = content_key(data)
    if content is None:
        return _decode_uncached(data, key, conversation_id)
    cache_key = (content, key, conversation_id)
    if (record := _DECODED.get(cache_key)) is not None:
        return record
    record = _decode_uncached(data, key, conversation_id)
    _DECODED.put(cache_key, record, size=_record_size(record))
    return record


def _decode_uncached(data: object, key: bytes | None, conversation_id: str | None) -> DecodedRecord:
    if not isinstance(data, dict):
        return UnreadableRecord('the record is not a mapping')
    stored = cast('dict[str, Any]', data)
    version = stored.get('v')
    if not isinstance(version, int) or version > RECORD_VERSION:
        return UnreadableRecord(f'record format {version!r} is newer than this version reads ({RECORD_VERSION})')
    payload = {name: value for name, value in stored.items() if name != 'check'}
    try:
        signature = _signature(payload, key)
    except (TypeError, ValueError) as error:
        # Not what JSON gives back: keys of mixed types, a value JSON has no form for, a dict that holds itself.
        return UnreadableRecord(f'the record is not plain JSON: {error}')
    if not hmac.compare_digest(str(stored.get('check')), signature):
        return UnreadableRecord('the record fails its integrity check')
    if conversation_id is not None and payload.get('conversation') != conversation_id:
        return UnreadableRecord('the record belongs to another conversation')
    payload.pop('conversation', None)
    try:
        return _decode_payload(payload, version)
    except (KeyError, TypeError, ValueError) as error:
        return UnreadableRecord(f'the record is malformed: {error}')


def _decode_payload(payload: dict[str, Any], version: int) -> InstructionRecord | StoredDiff:
    kind = cast('_Kind', payload['kind'])
    if kind == 'baseline':
        items = cast('list[dict[str, Any]]', payload['instructions'])
        return InstructionBaselinePart(
            instructions=tuple(
                InstructionBlock(id=_block_id(item['id']), content=_optional_str(item['content']))
                if 'content' in item
                else InstructionDigest(
                    id=_optional_str(item['id']), dynamic=bool(item['dynamic']), content_hash=_str(item['hash'])
                )
                for item in items
            ),
            native=tuple(_str(item) for item in cast('list[object]', payload.get('native', []))),
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
