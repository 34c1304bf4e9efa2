"""Windows: which prefix a request is sent with, and which changes it delivers.

A window opens on the first request that has an append-mode block. Its baseline fixes the prefix; while
the window lasts, each request compares every append-mode block's current value with the value the model
last received (the baseline folded with the window's later changes) and records one change per
difference. Nothing is recorded for a block that didn't change.

The prefix moves, and a new window opens with the current values, only when it must move anyway: a
literal or rewrite-mode block changed or moved, a block's policy changed, a block moved between this plugin
and Pydantic AI's own append mode, history was compacted, the baseline is gone from history, or a record in
the window can't be read. Changes recorded before the
current baseline are no longer delivered: the prefix they followed has moved, so dropping them costs no
cache, and the new prefix already states their effect.

Everything here is pure: it reads the records the capability found in history and the blocks it resolved
for this request, and says what to record and what to send.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Literal, NamedTuple

from ._cache import BoundedCache, size_of
from ._history import Compaction, Located
from ._patch import rebuild
from ._records import (
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDeltaPart,
    InstructionDigest,
    InstructionRecord,
    StoredDiff,
    content_hash,
)
from ._rendering import record_change

__all__ = (
    'CurrentBlock',
    'Delivery',
    'WindowPlan',
    'WindowState',
    'first_delivery_at',
    'fold_window',
    'plan_request',
    'split_recorded_prefix',
)

BlockMode = Literal['literal', 'append', 'rewrite', 'native']


class CurrentBlock(NamedTuple):
    """One instruction block as this request resolved it.

    A named tuple rather than a frozen dataclass because every request builds one for each of its blocks, and a
    tuple is built at a fraction of the cost.
    """

    id: str | None
    """The block's id, or `None` if nothing addresses it (never for an append-mode block)."""

    content: str | None
    """The block's text; `None` only for a withdrawn append-mode block."""

    mode: BlockMode
    """`'literal'` for fixed text, `'append'` for a block whose changes are appended, `'rewrite'` for a computed
    block whose changes rewrite the prefix, `'native'` for a block Pydantic AI's own append mode owns, which this
    window only notes by id."""


class Delivery(NamedTuple):
    """A change the request delivers, and where in history it sits.

    A named tuple rather than a frozen dataclass because every request builds one for each change in its window,
    and a tuple is built at a fraction of the cost.
    """

    message_index: int
    """The request that carries the change."""

    part_index: int
    """The position of its carrier among that request's parts."""

    delta: InstructionDeltaPart
    """The change."""

    base_matches: bool
    """Whether the text the model last received for the block is the one the change's diff applies to."""


@dataclass(frozen=True)
class WindowState:
    """The window in effect at the end of a history, folded from its records in one pass.

    It is never changed once folded (its fields are typed read-only): a fold that goes on from it makes a new one,
    and one that finds nothing more is it, so it is shared between the folds a conversation keeps.
    """

    baseline: InstructionBaselinePart | None = None
    """The baseline of the open window, or `None` if no window is open."""

    received: Mapping[str, str | None] = field(default_factory=dict[str, 'str | None'])
    """Each append-mode block's text as the model last received it in this window."""

    deliveries: Sequence[Delivery] = field(default_factory=list[Delivery])
    """The window's changes, in history order."""

    broken: str | None = None
    """Why no window can be continued, when history says one was open but it can't be trusted."""

    hashes: Mapping[str, str | None] = field(default_factory=dict[str, 'str | None'])
    """The digest of each of `received`'s texts (`None` for a withdrawn block), kept so that a fold resumed from
    this state doesn't hash the blocks' texts again."""


def first_delivery_at(deliveries: Sequence[Delivery], message_index: int) -> int:
    """Where in `deliveries` (in history order) the first one carried at or after `message_index` is."""
    return bisect.bisect_left(deliveries, message_index, key=_message_index)


def _message_index(delivery: Delivery) -> int:
    return delivery.message_index


class _Folding:
    """A window being folded: `WindowState`'s fields, changed in place until the fold is done."""

    def __init__(self, start: WindowState) -> None:
        self.baseline, self.broken = start.baseline, start.broken
        self.received: dict[str, str | None] = dict(start.received)
        self.deliveries: list[Delivery] = list(start.deliveries)
        self.hashes: dict[str, str | None] = dict(start.hashes)

    def restart(self, baseline: InstructionBaselinePart | None = None, broken: str | None = None) -> None:
        """Start a new window at `baseline`, or none (`broken` says why none can be continued)."""
        self.baseline, self.broken, self.deliveries = baseline, broken, []
        blocks = baseline.blocks if baseline is not None else ()
        self.received = {block.id: block.content for block in blocks}
        self.hashes = {block.id: block.content_hash for block in blocks}

    def state(self) -> WindowState:
        return WindowState(self.baseline, self.received, self.deliveries, self.broken, self.hashes)


def fold_window(found: Iterable[Located | Compaction], *, start: WindowState | None = None) -> WindowState:
    """Fold the records found in history, in order, into the window in effect after them.

    With `start`, the fold goes on from that window (left as it is), the one in effect before the first of `found`;
    if nothing is found, that is `start` itself.

    A change stored as its diff is rebuilt here, from the text the window holds for its block, and delivered with
    that text. One that can't be rebuilt from it (the text it was taken against was trimmed from history or isn't
    the one the window holds, or the result has another digest) can't be trusted to say what the model was told,
    so it is read as an unreadable record: no window is continued past it.
    """
    items = iter(found)
    if (first := next(items, None)) is None:
        # Most requests of a conversation fold records only from the messages the previous one added, and often
        # there are none: the state then stays the one before, without copying its changes.
        return start if start is not None else WindowState()
    window = _Folding(start if start is not None else WindowState())
    for item in chain((first,), items):
        if isinstance(item, Compaction):
            if window.baseline is not None or window.deliveries:
                window.restart(broken='history was compacted')
            continue
        record = item.record
        # Changes are most of a window's records, so they are told apart first.
        if isinstance(record, (InstructionDeltaPart, StoredDiff)):
            if window.baseline is None:
                # A change with no baseline before it: the baseline was removed from history.
                window.broken = window.broken or 'the window baseline is gone from history'
                continue
            if isinstance(record, StoredDiff):
                rebuilt = rebuild(record, window.received.get(record.id), window.hashes.get(record.id))
                if isinstance(rebuilt, str):
                    window.restart(broken=f'a record can not be read: {rebuilt}')
                    continue
                record, base_matches = rebuilt, True
            else:
                base_hash = record.base_hash
                base_matches = base_hash is not None and window.hashes.get(record.id) == base_hash
            window.deliveries.append(Delivery(item.message_index, item.part_index, record, base_matches))
            window.received[record.id] = record.content
            window.hashes[record.id] = record.content_hash
        elif isinstance(record, InstructionBaselinePart):
            window.restart(baseline=record if record.instructions else None)
        else:
            window.restart(broken=f'a record can not be read: {record.reason}')
    return window.state()


@dataclass(frozen=True)
class WindowPlan:
    """What one request records and sends."""

    records: tuple[InstructionRecord, ...]
    """Records to add to the outgoing request, in order."""

    prefix: tuple[InstructionBlock, ...]
    """The append-mode blocks the prefix states, in order, with the values it states them with."""

    tagged: bool
    """Whether the prefix has an append-mode section, which the supersession sentence follows."""

    deliveries: tuple[Delivery, ...]
    """The changes already in history that this request delivers, in history order."""

    new_changes: tuple[tuple[InstructionDeltaPart, bool], ...]
    """The changes recorded on this request, each with whether its base matches, in order."""

    opened: str | None
    """Why this request opens a new window, or `None` if it continues one or has none."""


def plan_request(state: WindowState, current: Sequence[CurrentBlock]) -> WindowPlan:
    """Decide the prefix and the changes of a request whose instructions resolved to `current`.

    `current` must be in prefix order: literal blocks, then append-mode blocks, then the blocks Pydantic AI's own
    append mode owns, then rewrite-mode blocks.
    """
    appending = [block for block in current if block.mode == 'append']
    baseline = state.baseline
    moved = baseline is not None and _changed_owner(baseline, current)
    if baseline is not None and not moved and _continues(baseline, current):
        now = {block.id: block.content for block in appending if block.id is not None}
        new_changes: list[tuple[InstructionDeltaPart, bool]] = []
        for block_id in dict.fromkeys([*state.received, *now]):
            previous, value = state.received.get(block_id), now.get(block_id)
            if previous != value:
                change = record_change(block_id, previous, value, previous_hash=state.hashes.get(block_id))
                new_changes.append((change, previous is not None))
        return WindowPlan(
            records=tuple(delta for delta, _ in new_changes),
            prefix=baseline.blocks,
            tagged=True,
            deliveries=tuple(state.deliveries),
            new_changes=tuple(new_changes),
            opened=None,
        )
    if appending:
        opened = _OWNER_CHANGED if moved else _why_new_window(state, baseline)
        new_baseline = InstructionBaselinePart(
            instructions=tuple(_baseline_entry(block) for block in current if block.mode != 'native'),
            native=tuple(block.id for block in current if block.mode == 'native' and block.id is not None),
        )
        return WindowPlan(
            records=(new_baseline,),
            prefix=new_baseline.blocks,
            tagged=True,
            deliveries=(),
            new_changes=(),
            opened=opened,
        )
    # Nothing appends any more: end an open window so its changes stop applying.
    ending = (InstructionBaselinePart(instructions=()),) if baseline is not None else ()
    return WindowPlan(records=ending, prefix=(), tagged=False, deliveries=(), new_changes=(), opened=None)


_OWNER_CHANGED = "a block moved between this plugin and Pydantic AI's own append mode"


def _changed_owner(baseline: InstructionBaselinePart, current: Sequence[CurrentBlock]) -> bool:
    """Whether a block of the window is now owned by Pydantic AI's own append mode, or the other way round.

    Either way the prefix moves: the other mechanism states the block in its own prefix, and keeping the
    window would send the block twice, or deliver a withdrawal of a block that is still there.
    """
    # Most windows have no native blocks, in the baseline or now, and then nothing can have moved.
    native = [block.id for block in current if block.mode == 'native']
    if native and not {block.id for block in baseline.blocks}.isdisjoint(native):
        return True
    theirs = baseline.native
    return bool(theirs) and any(block.mode == 'append' and block.id in theirs for block in current)


def _continues(baseline: InstructionBaselinePart, current: Sequence[CurrentBlock]) -> bool:
    """Whether `current` can be sent with `baseline`'s prefix: its other blocks are the same, in the same order."""
    others = [block for block in current if block.mode in ('literal', 'rewrite')]
    digests = baseline.digests
    # Each is the entry a baseline opened now would record for it, its digest hashed once per process.
    return len(digests) == len(others) and all(
        digest == _baseline_entry(block) for digest, block in zip(digests, others, strict=True)
    )


_PREFIX_DIGESTS = BoundedCache[str, str](max_entries=1024, max_bytes=16 * 1024 * 1024, name='prefix digests')
"""The digest of each literal or rewrite-mode block's text, by the text.

Every request of a window checks that these blocks are the ones its baseline recorded, and they are the same texts
request after request (an agent's fixed instructions, often many kilobytes): each is hashed once per process rather
than on every request. Only the text's own digest is kept, which says nothing of any conversation.
"""


def _prefix_digest(text: str) -> str:
    """The digest of a literal or rewrite-mode block's text (`content_hash`), hashed once per process."""
    if type(text) is not str:
        # A subclass may compare or hash unlike its text, which would make the cache give another text's digest.
        return content_hash(text)
    if (digest := _PREFIX_DIGESTS.get(text)) is None:
        digest = content_hash(text)
        _PREFIX_DIGESTS.put(text, digest, size=size_of([text, digest]))
    return digest


def _why_new_window(state: WindowState, baseline: InstructionBaselinePart | None) -> str:
    if baseline is not None:
        return 'a literal or rewrite-mode block changed, moved or changed policy'
    return state.broken or 'first request with an append-mode block'


def _baseline_entry(block: CurrentBlock) -> InstructionBlock | InstructionDigest:
    if block.mode == 'append':
        assert block.id is not None, 'append-mode blocks always have an id'
        return InstructionBlock(id=block.id, content=block.content)
    return InstructionDigest(
        id=block.id, dynamic=block.mode == 'rewrite', content_hash=_prefix_digest(block.content or '')
    )


def split_recorded_prefix(
    baseline: InstructionBaselinePart, instructions: str, render_block: Callable[[str, str], str], sentence: str
) -> list[tuple[InstructionBlock | InstructionDigest | None, str]] | None:
    """Split the joined instructions a request of `baseline`'s window was sent into the parts they were joined from.

    Pydantic AI records a request's instructions as one string, and resumes a suspended turn with that string as
    a single part, which some providers send as one system block where the original request sent several. The
    baseline says what the parts were: each digest's part is found by its hash, each append-mode block and the
    supersession sentence by their exact text, in order, joined by blank lines.

    Returns:
        Each part's entry (`None` for the sentence) with its text, or `None` if the string isn't made of them.
    """
    expected: list[InstructionBlock | InstructionDigest | None] = []
    last_block = max(
        (index for index, entry in enumerate(baseline.instructions) if isinstance(entry, InstructionBlock)), default=-1
    )
    for index, entry in enumerate(baseline.instructions):
        if not isinstance(entry, InstructionBlock) or entry.content is not None:
            expected.append(entry)
        if index == last_block:
            expected.append(None)
    return _split(expected, instructions, 0, render_block, sentence)


def _split(
    expected: Sequence[InstructionBlock | InstructionDigest | None],
    text: str,
    start: int,
    render_block: Callable[[str, str], str],
    sentence: str,
) -> list[tuple[InstructionBlock | InstructionDigest | None, str]] | None:
    if not expected:
        return [] if start == len(text) else None
    entry, rest = expected[0], expected[1:]
    if isinstance(entry, InstructionDigest):
        # The part ends at a blank line (or the end) where its text has the digest's hash.
        ends = [end for end in range(start, len(text) + 1) if end == len(text) or text.startswith('\n\n', end)]
        candidates = [end for end in ends if content_hash(text[start:end]) == entry.content_hash]
    else:
        piece = sentence if entry is None else render_block(entry.id, entry.content or '')
        candidates = [start + len(piece)] if text.startswith(piece, start) else []
    for end in candidates:
        following = end + 2 if rest else end
        if rest and not text.startswith('\n\n', end):
            continue
        if (split := _split(rest, text, following, render_block, sentence)) is not None:
            return [(entry, text[start:end]), *split]
    return None
