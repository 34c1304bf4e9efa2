"""How a record is stored: a plain JSON-able dict with a format version and an integrity check, or a signature.

Records are plain dicts so any store or durable-execution layer keeps them as they are. A record that is from a
newer version, is malformed, or fails its check reads as unreadable and opens a new window rather than being sent.
With a signing key, the check is an HMAC that also binds the record to its conversation; an unsigned record could be
rewritten whole, so binding it would prove nothing, and a conversation id given without a key is ignored.

Three formats are read, and each record is written in the oldest one that holds it:

- Format 1: a baseline, with its blocks' text; and (read only) a change holding the block's new value and diff.
- Format 2 (read only): a change stored as its diff and the digests of the text before and after it.
- Format 3: a change whose carrier's text is the element sent. The record says which block it changes (`id`), the
  digest of the value it replaces (`base`), the digest of every block of the window after it (`state`), and
  the check of the record before it in the window (`prev`). The check covers the text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeAlias, cast

from ._records import InstructionBaselinePart, InstructionBlock, InstructionDeltaPart, InstructionDigest

__all__ = (
    'CHANGE_VERSION',
    'Change',
    'DecodedRecord',
    'StoredDiff',
    'Unreadable',
    'decode_record',
    'encode_baseline',
    'encode_change',
    'seal',
)

CHANGE_VERSION = 3
"""The format of the changes this version writes, and the newest it reads."""

_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(',', ':'), sort_keys=True)


class Change(NamedTuple):
    """A change as format 3 stores it, beside its text in the carrier."""

    id: str
    """The block it changes."""

    base: str | None
    """The digest of the value it replaces, `None` if the block had none."""

    state: dict[str, str | None]
    """The digest of each block of the window after it, by id (`None`: withdrawn)."""

    prev: str
    """The check of the record before it in its window: the baseline's, for the first change."""

    check: str
    """Its own check."""


class StoredDiff(NamedTuple):
    """A change as format 2 stores it: the diff and the digests either side, in an empty carrier."""

    id: str
    base_hash: str
    diff: str
    content_hash: str


class Unreadable(NamedTuple):
    """A carrier whose record can't be trusted; a window holding one can't be continued."""

    reason: str


DecodedRecord: TypeAlias = InstructionBaselinePart | Change | InstructionDeltaPart | StoredDiff | Unreadable
"""What a carrier's stored dict reads as: format 1 changes as `InstructionDeltaPart`, format 2 as `StoredDiff`."""


def _signature(payload: dict[str, Any], key: bytes | None) -> str:
    # A lone surrogate in a block's text is encoded as its code point, as `content_hash` does, rather than refused.
    encoded = _CANONICAL.encode(payload).encode('utf-8', 'surrogatepass')
    if key is None:
        return hashlib.sha256(encoded).hexdigest()[:32]
    return hmac.new(key, encoded, hashlib.sha256).hexdigest()


def seal(payload: dict[str, Any], key: bytes | None = None, text: str | None = None) -> dict[str, Any]:
    """`payload` with its check added, taken over `text` too when the carrier holds one."""
    return {**payload, 'check': _signature(payload if text is None else {**payload, 'text': text}, key)}


def encode_baseline(
    baseline: InstructionBaselinePart, *, key: bytes | None = None, conversation_id: str | None = None
) -> dict[str, Any]:
    """The stored dict of a baseline (format 1), sealed."""
    payload: dict[str, Any] = {
        'v': 1,
        'kind': 'baseline',
        'instructions': [
            {'id': entry.id, 'content': entry.content}
            if isinstance(entry, InstructionBlock)
            else {'id': entry.id, 'dynamic': entry.dynamic, 'hash': entry.content_hash}
            for entry in baseline.instructions
        ],
    }
    if baseline.native:
        payload['native'] = list(baseline.native)
    if key is not None and conversation_id is not None:
        payload['conversation'] = conversation_id
    return seal(payload, key)


def encode_change(
    block_id: str,
    *,
    base: str | None,
    state: Mapping[str, str | None],
    prev: str,
    text: str,
    key: bytes | None = None,
    conversation_id: str | None = None,
) -> dict[str, Any]:
    """The stored dict of a change (format 3) whose carrier holds `text`, sealed over it."""
    payload: dict[str, Any] = {
        'v': CHANGE_VERSION,
        'kind': 'delta',
        'id': block_id,
        'base': base,
        'state': dict(state),
        'prev': prev,
    }
    if key is not None and conversation_id is not None:
        payload['conversation'] = conversation_id
    return seal(payload, key, text)


def decode_record(
    stored: object, text: str = '', *, key: bytes | None = None, conversation_id: str | None = None
) -> DecodedRecord:
    """Read a carrier's stored dict (and its text) back into a record, or say why it can't be trusted.

    Args:
        stored: What the carrier's metadata holds.
        text: The carrier's text, which a format 3 check covers.
        key: The signing key, if records are signed.
        conversation_id: The conversation a signed record must belong to; `None` (or no `key`) doesn't check.
    """
    if not isinstance(stored, dict):
        return Unreadable('the record is not a mapping')
    data = cast('dict[str, Any]', stored)
    version = data.get('v')
    if type(version) is not int or version > CHANGE_VERSION:
        return Unreadable(f'record format {version!r} is newer than this version reads ({CHANGE_VERSION})')
    payload = {name: value for name, value in data.items() if name != 'check'}
    try:
        signature = _signature({**payload, 'text': text} if version == CHANGE_VERSION else payload, key)
    except (TypeError, ValueError) as error:
        # Not what JSON gives back: keys of mixed types, a value JSON has no form for, a dict that holds itself.
        return Unreadable(f'the record is not plain JSON: {error}')
    if not hmac.compare_digest(str(data.get('check')), signature):
        return Unreadable('the record fails its integrity check')
    if key is not None and conversation_id is not None and payload.get('conversation') != conversation_id:
        return Unreadable('the record belongs to another conversation')
    try:
        return _decoded(payload, version, signature)
    except (KeyError, TypeError, ValueError) as error:
        return Unreadable(f'the record is malformed: {error}')


def _decoded(payload: dict[str, Any], version: int, check: str) -> DecodedRecord:
    kind = payload['kind']
    if kind == 'baseline':
        return InstructionBaselinePart(
            instructions=tuple(
                InstructionBlock(id=_block_id(item['id']), content=_optional_str(item['content']))
                if 'content' in item
                else InstructionDigest(
                    id=_optional_str(item['id']), dynamic=bool(item['dynamic']), content_hash=_str(item['hash'])
                )
                for item in cast('list[dict[str, Any]]', payload['instructions'])
            ),
            native=tuple(_str(item) for item in cast('list[object]', payload.get('native', []))),
        )
    if kind != 'delta':
        raise ValueError(f'unknown record kind {kind!r}')
    if version == CHANGE_VERSION:
        items = cast('dict[object, object]', payload['state']).items()
        state = {_block_id(block_id): _optional_str(digest) for block_id, digest in items}
        return Change(_block_id(payload['id']), _optional_str(payload['base']), state, _str(payload['prev']), check)
    if version == 2:
        return StoredDiff(
            _block_id(payload['id']), _str(payload['base_hash']), _str(payload['diff']), _str(payload['hash'])
        )
    return InstructionDeltaPart(
        id=_block_id(payload['id']),
        content=_optional_str(payload['content']),
        base_hash=_optional_str(payload['base_hash']),
        diff=_optional_str(payload['diff']),
    )


def _str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f'expected a string, got {value!r}')
    return value


def _block_id(value: object) -> str:
    # A change is sent under its block's id: an empty one names no block.
    if not (block_id := _str(value)):
        raise ValueError('an append-mode block has an empty id')
    return block_id


def _optional_str(value: object) -> str | None:
    return None if value is None else _str(value)
