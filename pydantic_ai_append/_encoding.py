"""How a record is stored: a plain JSON-able dict with a format version and an integrity check, or a signature.

Plain dicts, so any store or durable-execution layer keeps them. A record from a newer version, malformed, or failing
its check is unreadable, and opens a new window. With a signing key the check is an HMAC that also binds the record to
its conversation. Each kind of record has one format, named by its version:

- A baseline (`v` 1): its blocks' text, and the digests of the other blocks.
- A change (`v` 3): its carrier's text is the element sent; the record names the block it changes (`id`), the digest
  of the value it replaces (`base`), the digest of every block after it (`state`) and the check of the record before
  it in the window (`prev`). The check covers the text.

A change of the formats written before this package's first release (`v` 1 or 2) reads as unreadable, as any record
of a format this version doesn't read.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple, TypeAlias, cast

from ._records import InstructionBaselinePart, InstructionBlock, InstructionDigest
from ._shared.cache import ENTRY_BYTES, BoundedCache, size_of

BASELINE_VERSION = 1
"""The format of the baselines this version writes and reads."""

CHANGE_VERSION = 3
"""The format of the changes this version writes and reads."""

_VERSIONS = {'baseline': BASELINE_VERSION, 'delta': CHANGE_VERSION}

_SORTED_JSON = json.JSONEncoder(ensure_ascii=False, separators=(',', ':'), sort_keys=True)


def sorted_json(value: object) -> str:
    """`value` as compact JSON with its keys sorted: equal data, equal text, whatever order it was built in."""
    return _SORTED_JSON.encode(value)


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


class Unreadable(NamedTuple):
    """A carrier whose record can't be trusted; a window holding one can't be continued."""

    reason: str


DecodedRecord: TypeAlias = InstructionBaselinePart | Change | Unreadable
"""What a carrier's stored dict reads as."""


def key_bytes(signing_key: str | bytes | None) -> bytes | None:
    """The bytes a signing key given as text or bytes signs with: text is encoded as UTF-8."""
    return signing_key.encode() if isinstance(signing_key, str) else signing_key


def _signature(payload: dict[str, Any], key: bytes | None) -> str:
    # A lone surrogate in a block's text is encoded as its code point, as `content_hash` does, rather than refused.
    encoded = sorted_json(payload).encode('utf-8', 'surrogatepass')
    if key is None:
        return hashlib.sha256(encoded).hexdigest()[:32]
    return hmac.new(key, encoded, hashlib.sha256).hexdigest()


def seal(
    payload: dict[str, Any], key: bytes | None = None, text: str | None = None, conversation_id: str | None = None
) -> dict[str, Any]:
    """`payload` with its check added, over `text` too when the carrier holds one; signed, bound to its conversation."""
    if key is not None and conversation_id is not None:
        payload = {**payload, 'conversation': conversation_id}
    return {**payload, 'check': _signature(payload if text is None else {**payload, 'text': text}, key)}


def encode_baseline(
    baseline: InstructionBaselinePart, *, key: bytes | None = None, conversation_id: str | None = None
) -> dict[str, Any]:
    """The stored dict of a baseline, sealed."""
    payload: dict[str, Any] = {
        'v': BASELINE_VERSION,
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
    return seal(payload, key, conversation_id=conversation_id)


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
    """The stored dict of a change whose carrier holds `text`, sealed over it."""
    payload = {'v': CHANGE_VERSION, 'kind': 'delta', 'id': block_id, 'base': base, 'state': dict(state), 'prev': prev}
    return seal(payload, key, text, conversation_id)


def decode_record(
    stored: object, text: str = '', *, key: bytes | None = None, conversation_id: str | None = None
) -> DecodedRecord:
    """Read a carrier's stored dict (and its text, which a change's check covers) back into a record, or say why it
    can't be trusted; with `key` and `conversation_id`, a signed record must belong to that conversation.
    """
    if not isinstance(stored, dict):
        return Unreadable('the record is not a mapping')
    data = cast('dict[str, Any]', stored)
    kind, version = data.get('kind'), data.get('v')
    if not isinstance(kind, str) or kind not in _VERSIONS:
        return Unreadable(f'unknown record kind {kind!r}')
    if type(version) is not int or version != _VERSIONS[kind]:
        return Unreadable(f'a {kind} of format {version!r}, which this version does not read')
    payload = {name: value for name, value in data.items() if name != 'check'}
    try:
        signature = _signature({**payload, 'text': text} if kind == 'delta' else payload, key)
    except (TypeError, ValueError) as error:
        # Not what JSON gives back: keys of mixed types, a value JSON has no form for, a dict that holds itself.
        return Unreadable(f'the record is not plain JSON: {error}')
    if not hmac.compare_digest(str(data.get('check')), signature):
        return Unreadable('the record fails its integrity check')
    if key is not None and conversation_id is not None and payload.get('conversation') != conversation_id:
        return Unreadable('the record belongs to another conversation')
    try:
        return _decoded(payload, signature)
    except (KeyError, TypeError, ValueError) as error:
        return Unreadable(f'the record is malformed: {error}')


_BASELINES = BoundedCache[tuple[str, bytes | None, str | None], tuple[dict[str, Any], InstructionBaselinePart]](
    max_entries=sys.maxsize, max_bytes=sys.maxsize, name='baselines', pooled=True
)
"""Each baseline read, with a copy of what it was read from, by its check, key and conversation: an equal one is not
checked again on every request. What it buys grows with the blocks' text (the benchmark's `pieces`: a check costs
51 us for the scenario's 16 KB baseline and 8.5 ms for a 1 MB one, a read of one checked 1 us and 29 us); at the
scenario's sizes a whole run shows no difference (`caches`: 1.03x, p25-p75 0.95-1.11, at 1,000 turns)."""


def stated_chars(baseline: Mapping[str, Any]) -> int:
    """The characters of the values a stored baseline's prefix states (unread: entries that aren't mappings count 0)."""
    entries = cast('list[object]', baseline.get('instructions') or [])
    return sum(
        len(cast('Mapping[str, Any]', entry).get('content') or '') for entry in entries if isinstance(entry, dict)
    )


def read_baseline(stored: object, *, key: bytes | None, conversation_id: str | None) -> DecodedRecord:
    """`decode_record` of a baseline, checked once per payload: an equal payload reads as it did."""
    memo = (str(cast('dict[str, Any]', stored).get('check')), key, conversation_id)
    if (known := _BASELINES.get(memo)) is not None and known[0] == stored:
        return known[1]
    record = decode_record(stored, key=key, conversation_id=conversation_id)
    if isinstance(record, InstructionBaselinePart):
        size = ENTRY_BYTES + size_of(block.content for block in record.blocks)
        _BASELINES.put(memo, (copy.deepcopy(cast('dict[str, Any]', stored)), record), size=size)
    return record


def _decoded(payload: dict[str, Any], check: str) -> DecodedRecord:
    if payload['kind'] == 'baseline':
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
    items = cast('dict[object, object]', payload['state']).items()
    state = {_block_id(block_id): _optional_str(digest) for block_id, digest in items}
    return Change(_block_id(payload['id']), _optional_str(payload['base']), state, _str(payload['prev']), check)


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
