"""Resuming a conversation's window where its previous request left it, so a request reads only what history added.

Each request of a conversation is sent with the history of the request before it and something more. Folding every
record of that history again, and building the outgoing copy of each of its requests again, costs time that grows with
the conversation. So the fold of a request's history (all of it but the request being sent, which is still written
to) and the outgoing parts built for it are kept, by conversation, and the next request of that conversation goes on
from them if its history starts with the same messages.

"The same messages" is judged by what they hold now, never by identity alone, so nothing edited in place is trusted:
each message and each of its parts must be the object folded, each system prompt must have the text and the
metadata object it had, and each record the keys, values and value types it had when it was checked (a record edited
in place is read and checked again, and fails its check). The comparisons run over whole lists at once, at a cost
per record far below reading it again. A kept fold is only ever resumed within its own conversation (and with the
signing key it was checked with); it holds the history it was folded from, and its size counts that history's text.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain, compress, repeat
from operator import attrgetter, is_, itemgetter, methodcaller
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart

from ._cache import BoundedCache, content_key
from ._history import RECORD_KEY, scan
from ._window import Delivery, WindowState, fold_window

__all__ = ('Fold', 'SentKey')

_PARTS = attrgetter('parts')
_CONTENT = attrgetter('content')
_METADATA = attrgetter('metadata')
_RECORD = itemgetter(RECORD_KEY)
_FLAT = frozenset({str, int, type(None)})
_DICT = frozenset({dict})
_VALUES: Callable[[dict[str, Any]], Iterable[Any]] = dict[str, Any].values

SentKey = tuple[str, bool, bool]
"""What the outgoing parts were built for: the delivery path, `<system>` wrapping here, escaping of others' text."""


@dataclass(frozen=True)
class _Snapshot:
    """A conversation's history as one request folded it: what it held, and the window after it.

    Every list is built once and never changed, so a snapshot can be read by many requests at once.
    """

    messages: tuple[ModelMessage, ...]
    """The messages folded, in order."""

    lengths: list[int]
    """How many parts each message had."""

    parts: list[Any]
    """Every part of every message, in order."""

    prompts: list[SystemPromptPart]
    """Every system prompt of a request, in order."""

    contents: list[str]
    """The text each of `prompts` had."""

    metadata: list[dict[str, Any] | None]
    """The metadata object each of `prompts` had."""

    records: list[dict[str, Any]]
    """The flat record dicts the carriers among `prompts` stored (strings, integers and `None`), in order."""

    holders: list[dict[str, Any]]
    """The metadata of the carriers that store `records`, in the same order."""

    sizes: list[int]
    """How many entries each of `records` had."""

    keys: list[str]
    """The keys of every one of `records`, in order: the very objects."""

    values: list[Any]
    """The values of every one of `records`, in order: the very objects, each a string, an integer or `None`, which
    can't change while they are the same objects."""

    others: list[tuple[dict[str, Any], Hashable]]
    """Every other metadata dict of `prompts` (not a flat record's), with the content key it had."""

    state: WindowState
    """The window in effect after `messages`."""

    sent_key: SentKey | None
    """What `sent` was built for, or `None` if nothing was sent from this snapshot yet."""

    deliveries: tuple[Delivery, ...]
    """The changes delivered in `messages` when `sent` was built."""

    sent: dict[int, tuple[ModelRequestPart, ...]]
    """The outgoing parts of each message of `messages` that was sent other than stored, by index."""

    size: int
    """About the memory the snapshot keeps alive: the texts of its history, and a little per part."""


@dataclass(frozen=True)
class _Seen:
    """A conversation's history as a request saw it, by the identity of its messages, kept instead of a snapshot.

    A history that is sent once (as a server that loads each request's history from its store sends it, in a run of
    one request) would pay for a snapshot that is never used. So the first request of a history only notes its
    messages' ids, which cost next to nothing, and a request whose history starts with them takes the snapshot.
    The ids are never trusted for anything else: that request folds its whole history as any other does.
    """

    ids: tuple[int, ...]
    """The `id()` of each message seen."""


_FOLDS = BoundedCache[tuple[str, bytes | None], _Snapshot | _Seen](
    max_entries=1_024, max_bytes=64 * 1024 * 1024, name='conversation folds'
)
"""The last fold of each conversation (or what its last request saw), by conversation id and signing key."""


def _matched(snapshot: _Snapshot, messages: Sequence[ModelMessage]) -> bool:
    """Whether `messages` starts with `snapshot`'s messages, holding what they held when they were folded."""
    folded = snapshot.messages
    count = len(folded)
    if len(messages) < count or not all(map(is_, messages[:count], folded)):
        return False
    prefix = messages[:count]
    if list(map(len, map(_PARTS, prefix))) != snapshot.lengths:
        return False
    if not all(map(is_, chain.from_iterable(map(_PARTS, prefix)), snapshot.parts)):
        return False
    prompts = snapshot.prompts
    if list(map(_CONTENT, prompts)) != snapshot.contents or not all(
        map(is_, map(_METADATA, prompts), snapshot.metadata)
    ):
        return False
    try:
        records: list[dict[str, Any]] = list(map(_RECORD, snapshot.holders))
    except KeyError:
        return False
    # The same keys and values, as the same objects (of types that can't change), mean the same content: nothing
    # is compared by equality, under which `1`, `1.0` and `True` would pass for one another.
    return (
        all(map(is_, records, snapshot.records))
        and list(map(len, records)) == snapshot.sizes
        and all(map(is_, chain.from_iterable(records), snapshot.keys))
        and all(map(is_, chain.from_iterable(map(_VALUES, records)), snapshot.values))
        and all(content_key(metadata) == key for metadata, key in snapshot.others)
    )


def _seen(seen: _Seen, messages: Sequence[ModelMessage]) -> bool:
    count = len(seen.ids)
    return len(messages) >= count and tuple(map(id, messages[:count])) == seen.ids


class Fold:
    """The window of one request's history, folded from where the conversation's previous request left it."""

    def __init__(
        self,
        messages: list[ModelMessage],
        *,
        key: bytes | None,
        conversation_id: str | None,
        scope: str | None,
    ) -> None:
        """Fold `messages`, resuming from the kept fold of conversation `scope` (`None` keeps nothing).

        Args:
            messages: The request's messages.
            key: The signing key records are checked with.
            conversation_id: The conversation signed records must belong to, as `scan` takes it.
            scope: The conversation the request belongs to, whatever the signing.
        """
        self._messages = messages
        self._key = key
        self._scope = (scope, key) if scope is not None else None
        previous = _FOLDS.get(self._scope) if self._scope is not None else None
        self._seen = isinstance(previous, _Seen) and _seen(previous, messages)
        self._previous = previous if isinstance(previous, _Snapshot) and _matched(previous, messages) else None
        self._start = len(self._previous.messages) if self._previous is not None else 0
        self._reused = False
        # The request being sent is folded apart: it is still written to (its records are added to it), so it is
        # never part of what is kept.
        self._stop = max(len(messages) - 1, self._start)
        start_state = self._previous.state if self._previous is not None else None
        found = scan(messages, key=key, conversation_id=conversation_id, start=self._start, stop=self._stop)
        self._kept = fold_window(found, start=start_state)
        last = scan(messages, key=key, conversation_id=conversation_id, start=self._stop)
        self.state = fold_window(last, start=self._kept)
        """The window in effect after every message."""

    def reusable(
        self, deliveries: Sequence[Delivery], sent_key: SentKey
    ) -> tuple[dict[int, tuple[ModelRequestPart, ...]], int]:
        """The outgoing parts kept for the messages this fold resumed over, and the index rendering goes on from.

        They are reused only if they were built for the same path and options and delivered the same changes.
        """
        previous = self._previous
        if previous is None or previous.sent_key != sent_key:
            return {}, 0
        start = self._start
        cut = bisect.bisect_left(deliveries, start, key=_message_index)
        if tuple(deliveries[:cut]) != previous.deliveries:
            return {}, 0
        self._reused = True
        return previous.sent, start

    def remember(
        self,
        deliveries: Sequence[Delivery],
        sent_key: SentKey,
        built: dict[int, tuple[ModelRequestPart, ...]],
    ) -> None:
        """Keep this fold and the outgoing parts built for its history, for the conversation's next request."""
        if self._scope is None:
            return
        if self._previous is None and not self._seen:
            ids = tuple(map(id, self._messages[: self._stop]))
            _FOLDS.put(self._scope, _Seen(ids), size=64 + 8 * len(ids))
            return
        snapshot = _extended(self._previous, self._messages, self._stop, self._kept)
        if snapshot is None:
            return
        cut = bisect.bisect_left(deliveries, self._stop, key=_message_index)
        sent = {index: parts for index, parts in built.items() if index < self._stop}
        if self._reused and self._previous is not None:
            sent = {**self._previous.sent, **sent}
        size = snapshot.size + sum(64 * (1 + len(parts)) for index, parts in built.items() if index < self._stop)
        snapshot = replace(snapshot, sent_key=sent_key, deliveries=tuple(deliveries[:cut]), sent=sent, size=size)
        _FOLDS.put(self._scope, snapshot, size=snapshot.size)


def _message_index(delivery: Delivery) -> int:
    return delivery.message_index


def _extended(
    previous: _Snapshot | None, messages: Sequence[ModelMessage], stop: int, state: WindowState
) -> _Snapshot | None:
    """A snapshot of `messages[:stop]`: `previous`'s with the messages after it added, or `None` if one can't be kept."""
    if previous is None:
        previous = _EMPTY
    added = messages[len(previous.messages) : stop]
    lengths = list(map(len, map(_PARTS, added)))
    parts: list[Any] = list(chain.from_iterable(map(_PARTS, added)))
    prompts = [part for part in parts if isinstance(part, SystemPromptPart)]
    metadata: list[dict[str, Any] | None] = list(map(_METADATA, prompts))
    contents: list[str] = list(map(_CONTENT, prompts))
    # Only an empty system prompt can be a carrier (one with text is compared by its text); most are carriers of a
    # flat record, which are told apart in one pass over them all.
    empty = [held for text, held in zip(contents, metadata, strict=True) if not text and held is not None]
    stored: list[object] = list(map(methodcaller('get', RECORD_KEY), empty))
    holders: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    others: list[tuple[dict[str, Any], Hashable]] = []
    if _DICT.issuperset(map(type, stored)):
        types = cast(Iterable[Iterable[type]], map(map, repeat(type), map(_VALUES, cast(list[dict[str, Any]], stored))))
        flat = list(map(_FLAT.issuperset, types))
        holders = list(compress(empty, flat))
        records = list(compress(cast(list[dict[str, Any]], stored), flat))
        rest = [held for held, is_flat in zip(empty, flat, strict=True) if not is_flat]
    else:
        rest = empty
    for held in rest:
        stored_here = held.get(RECORD_KEY)
        if (
            rest is empty
            and type(stored_here) is dict
            and _FLAT.issuperset(map(type, cast(dict[str, Any], stored_here).values()))
        ):
            holders.append(held)
            records.append(cast(dict[str, Any], stored_here))
        elif (key := content_key(held)) is None:
            return None
        else:
            others.append((held, key))
    values: list[Any] = list(chain.from_iterable(map(_VALUES, records)))
    # What the snapshot keeps alive: the texts of its history, a little for each part, and the text of the metadata
    # that isn't a flat record. Requests often share one instructions string, which is counted once.
    instructions = list(map(_instructions, added))
    size = (
        sum(map(sys.getsizeof, values))
        + sum(map(sys.getsizeof, dict(zip(map(id, instructions), instructions, strict=True)).values()))
        + sum(map(sys.getsizeof, map(getattr, parts, repeat('content'), repeat(None))))
        + 128 * (len(added) + len(parts))
        + sum(len(repr(held)) for held, _ in others)
    )
    return _Snapshot(
        messages=(*previous.messages, *added),
        lengths=previous.lengths + lengths,
        parts=previous.parts + parts,
        prompts=previous.prompts + prompts,
        contents=previous.contents + contents,
        metadata=previous.metadata + metadata,
        records=previous.records + records,
        holders=previous.holders + holders,
        sizes=previous.sizes + list(map(len, records)),
        keys=previous.keys + list(chain.from_iterable(records)),
        values=previous.values + values,
        others=previous.others + others,
        state=state,
        sent_key=None,
        deliveries=(),
        sent={},
        size=previous.size + size,
    )


def _instructions(message: ModelMessage) -> str | None:
    return message.instructions if isinstance(message, ModelRequest) else None


_EMPTY = _Snapshot((), [], [], [], [], [], [], [], [], [], [], [], WindowState(), None, (), {}, 0)
