"""What a conversation's previous request found in its history, kept so the next request reads only what is new.

The scan of a conversation's history (but the request being sent) is kept with a weak reference to each message and
request part it read. The next request takes it over if its history starts with those very objects, and scans only
the messages after them. A first request keeps only its history's last message, which history loaded afresh never
holds: that is scanned whole, with nothing kept. What it buys, in the benchmark: a past change costs a check of its
part's identity rather than a scan. Without it (measured at 1,000 turns on the inline model), the hooks on a
conversation served before took 3.03 ms a request against 1.62 ms with it, 7.2% of the static run against 2.6%, and
each 1,000 past changes cost 2.09% of a run against 0.23%. It keeps nothing for history loaded afresh.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Sequence
from operator import call, is_
from typing import Any, NamedTuple, cast

from pydantic_ai.messages import ModelMessage, ModelRequest

from ._cache import ENTRY_BYTES, BoundedCache, size_of
from ._history import Scan, scan
from ._window import Window, fold


class _Kept(NamedTuple):
    """A conversation's last scan, with what it was taken of."""

    messages: list[weakref.ref[Any]]
    """The messages scanned, in order."""

    requests: list[int]
    """Where the requests are among them."""

    parts: list[weakref.ref[Any]]
    """Every part of those requests, in order (a response's hold nothing the scan reads but a new compaction)."""

    scanned: Scan
    """What the scan found in them."""

    linked: int
    """How many of the entries found are known linked (`Window.linked`)."""

    size: int
    """About the memory the entry keeps alive: its references, and the carriers its scan holds with their texts."""


class _Seen(NamedTuple):
    """What a conversation's first request keeps: one message of its history, to tell history kept in process."""

    last: weakref.ref[Any]
    """The last message of that history but the request (or the request, if it was alone)."""

    at: int
    """Its index, where the next request's history holds it again if the history is kept in process."""


_LOADED = _Kept([], [], [], Scan([], [], []), 0, 0)
"""What is kept for a conversation whose history is loaded afresh for each request: nothing to go on from."""

_KEPT = BoundedCache[tuple[str, bytes | None], _Kept | _Seen](
    max_entries=sys.maxsize, max_bytes=sys.maxsize, name='conversation scans', pooled=True
)
"""The last scan of each conversation, by conversation id and signing key; `_LOADED`; or, after a first request, a
`_Seen`: the last message of its history (or the request) and its index, which history kept in process holds again."""


def conversation_window(messages: Sequence[ModelMessage], *, key: bytes | None, conversation_id: str | None) -> Window:
    """`fold(scan(messages))`, going on from what the conversation's previous request kept, if its history holds it."""
    conversation = (conversation_id, key) if conversation_id else None
    kept = _KEPT.get(conversation) if conversation is not None else _LOADED
    if kept is None or isinstance(kept, _Seen):
        if kept is None or len(messages) <= kept.at or messages[kept.at] is not kept.last():
            at = max(len(messages) - 2, 0)
            seen = _Seen(weakref.ref(messages[at]), at) if kept is None else _LOADED
            _KEPT.put(cast('tuple[str, bytes | None]', conversation), seen, size=ENTRY_BYTES)
            return fold(scan(messages), key=key, conversation_id=conversation_id)
        kept = None
    folded = len(kept.messages) if kept is not None else 0
    if kept is _LOADED or (kept is not None and (len(messages) <= folded or not _holds(kept, messages[:folded]))):
        if conversation is not None and kept is not _LOADED and len(messages) > folded:
            # Other objects: a history loaded afresh, whose next load won't match either.
            _KEPT.put(conversation, _LOADED, size=ENTRY_BYTES)
        return fold(scan(messages), key=key, conversation_id=conversation_id)
    assert conversation is not None, 'kept only for a conversation'
    stop = len(messages) - 1
    added = scan(messages, folded, stop)
    held = _joined(kept.scanned, added) if kept is not None else added
    whole = _joined(held, scan(messages, stop))
    window = fold(whole, key=key, conversation_id=conversation_id, linked=kept.linked if kept is not None else 0)
    requests = [at for at in range(folded, stop) if isinstance(messages[at], ModelRequest)]
    parts = [part for at in requests for part in messages[at].parts]
    size = (kept.size if kept else 0) + 128 * (stop - folded + len(parts)) + 512 * len(added.found)
    size += sum(_weight(part, stored) for _, _, part, stored in added.found)
    refs = _Kept(
        [*(kept.messages if kept else ()), *(weakref.ref(message) for message in messages[folded:stop])],
        [*(kept.requests if kept else ()), *requests],
        [*(kept.parts if kept else ()), *(weakref.ref(part) for part in parts)],
        held,
        min(window.linked, len(held.found)),
        size,
    )
    _KEPT.put(conversation, refs, size=size)
    return window


def _joined(first: Scan, then: Scan) -> Scan:
    """The scan of two runs of a history's messages, `then` the run after `first`."""
    return Scan(
        [*first.found, *then.found],
        [*first.empty, *(at + len(first.found) for at in then.empty)],
        [*first.suspects, *then.suspects],
    )


def _weight(part: Any, stored: Any) -> int:
    """About the memory of a carrier the scan holds: its text, and a baseline's blocks."""
    items = cast('dict[str, Any]', stored).get('instructions') if isinstance(stored, dict) else None
    entries = cast('list[Any]', items) if isinstance(items, list) else []
    texts = [cast('Any', item).get('content') for item in entries if isinstance(item, dict)]
    return size_of(text for text in [part.content if part else None, *texts] if isinstance(text, str))


def _holds(kept: _Kept, messages: Sequence[ModelMessage]) -> bool:
    """Whether `messages` are the very messages `kept` scanned, each request with the very parts it had."""
    # Run on every request over the whole history kept: `map` keeps the identity checks in C, a fifth quicker than a
    # generator's (140 against 170 us for 3,000 references, measured with `timeit`).
    if not all(map(is_, map(call, kept.messages), messages)):
        return False
    parts = [part for at in kept.requests for part in messages[at].parts]
    return len(parts) == len(kept.parts) and all(map(is_, map(call, kept.parts), parts))
