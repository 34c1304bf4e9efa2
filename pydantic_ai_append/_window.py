"""Windows: what the model holds of each block, and which prefix and changes a request is sent with.

A window opens on the first request that has an append-mode block. Its baseline fixes the prefix; while it lasts,
each request records one change per append-mode block whose value differs from what the model holds. A new window
opens only when the prefix must move anyway: a literal or rewrite-mode block changed or moved, a block's policy or
owner changed, history was compacted, or the baseline is gone or can't be read. It states the current values, unless
no literal block changed: then what moved the prefix comes after the window's blocks, so it keeps the old values (and
the prefix up to the first block that moved), and its first request records the changes since, while they are
shorter than what they would move.

What the model holds is read from the last change's record, which names the digest of every block after it, as long
as each change of the window names the check of the one before it (`_linked`): a whole chain is checked without
reading its records. Otherwise (a processor dropped a change, or records are signed) every record is read in order,
and a change left meaningless by one gone from history (a diff that no longer follows what the model holds of its
block, a change to what it holds anyway, or one the sentence should follow) is an orphan: it is not sent, and the
block's next change states its value in full, in the same window. Everything here is pure: it reads what `scan` found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, cast

from ._encoding import CHANGE_VERSION, Change, Unreadable, decode_record, read_baseline
from ._history import COMPACTED, Found, Scan
from ._records import InstructionBaselinePart, InstructionBlock, InstructionDigest, content_hash
from ._rendering import SUPERSESSION_SENTENCE, change_text, change_value


class CurrentBlock(NamedTuple):
    """One instruction block as this request resolved it."""

    id: str | None
    """The block's id, or `None` if nothing addresses it (never for an append-mode block)."""

    content: str | None
    """The block's text; `None` only for a withdrawn append-mode block."""

    mode: Literal['literal', 'append', 'rewrite', 'native']
    """`'literal'` (fixed text), `'append'`, `'rewrite'` (computed, rewritten in the prefix) or `'native'` (owned
    by Pydantic AI's own append mode)."""


@dataclass(frozen=True)
class Window:
    """The window in effect at the end of a history."""

    found: Sequence[Found] = ()
    """Every carrier and compaction in the history, in order."""

    suspects: Sequence[int] = ()
    """The requests that may hold text imitating an element (`Scan.suspects`)."""

    empty: Sequence[int] = ()
    """Where the empty carriers and compactions are in `found` (`Scan.empty`)."""

    start: int = 0
    """Where the window's changes start in `found`: after its baseline."""

    baseline: InstructionBaselinePart | None = None
    """The baseline of the open window, or `None` if no window is open."""

    state: dict[str, str | None] = field(default_factory=dict[str, 'str | None'])
    """The digest of each block's value as the model holds it (`None`: withdrawn)."""

    orphans: frozenset[int] = frozenset()
    """Where in `found` the changes are that a change gone from history leaves meaningless: a diff that followed it,
    which the model can't apply, a change to what the model holds without it, or, where the prefix states no block,
    each before one that says the supersession sentence."""

    unsettled: frozenset[str] = frozenset()
    """The blocks whose last change is an orphan: the next one states the value in full."""

    last_check: str = ''
    """The check of the window's last record, which the next change names as the one before it."""

    broken: str | None = None
    """Why no window can be continued, when history says one was open but it can't be trusted."""

    linked: int = 0
    """How many entries of `found` are known to be the baseline and linked changes: a later fold needn't read them."""

    @property
    def unstated(self) -> bool:
        """Whether the window's prefix states no block, so that its first change says the supersession sentence."""
        return self.baseline is not None and all(block.content is None for block in self.baseline.blocks)

    def value_of(self, block_id: str) -> str | None:
        """The block's value as the model holds it, rebuilt from the texts of the window's changes and checked only
        against the digest the window holds; `None` if it can't be.
        """
        blocks = self.baseline.blocks if self.baseline is not None else ()
        value = next((block.content for block in blocks if block.id == block_id), None)
        for at, (_, _, part, stored) in enumerate(self.found[self.start :], self.start):
            if part is not None and at not in self.orphans and _field(stored, 'id') == block_id:
                changed = change_value(block_id, part.content, value)
                value = None if isinstance(changed, ValueError) else changed
        return value if value is not None and content_hash(value) == self.state.get(block_id) else None


def fold(scanned: Scan, *, key: bytes | None, conversation_id: str | None, linked: int = 0) -> Window:
    """The window in effect after what `scan` found, its records checked with `key` for `conversation_id`, but for
    the first `linked` entries, which an earlier fold of the same objects found linked (`Window.linked`).
    """
    found, empty, suspects = scanned
    # Only an empty carrier (a baseline) or a compaction opens or ends a window.
    opens = next((at for at in reversed(empty) if _opens(found[at][3])), None)
    start = 0 if opens is None else opens + 1
    window = Window(found, suspects, empty, start)
    if opens is None:
        return replace(window, broken='the window baseline is gone from history' if found else None)
    _, _, opening, stored = found[opens]
    if opening is None:
        return replace(window, broken='history was compacted')
    baseline = read_baseline(stored, key=key, conversation_id=conversation_id)
    if isinstance(baseline, Unreadable):
        return replace(window, broken=f'a record can not be read: {baseline.reason}')
    assert isinstance(baseline, InstructionBaselinePart), 'a record of kind `baseline` reads as one or as unreadable'
    if not baseline.instructions:
        # A window ended here; changes after it have lost the baseline they followed.
        return replace(window, broken=None if start == len(found) else 'the window baseline is gone from history')
    check = str(stored['check'])
    seen = max(start, linked)
    first = check if seen == start else str(found[seen - 1][3]['check'])
    if key is None and start < len(found) and _linked(found[seen:], first):
        _, _, part, last = found[-1]
        record = decode_record(last, part.content if part is not None else '')
        if isinstance(record, Change):
            return replace(
                window, baseline=baseline, state=dict(record.state), last_check=record.check, linked=len(found)
            )
    state = {block.id: block.content_hash for block in baseline.blocks}
    return _read_each(replace(window, baseline=baseline, state=state, last_check=check), key, conversation_id)


def _field(stored: object, name: str) -> object:
    return cast('dict[str, object]', stored).get(name) if isinstance(stored, dict) else None


def _opens(stored: object) -> bool:
    return stored is COMPACTED or _field(stored, 'kind') == 'baseline'


def _linked(changes: Sequence[Found], first: str) -> bool:
    """Whether every one of `changes` stores a change naming the check of the one before it (`first` first)."""
    previous = first
    for _, _, _, stored in changes:
        if not isinstance(stored, dict):
            return False
        record = cast('dict[str, Any]', stored)
        previous, check = record.get('check'), previous
        if record.get('v') != CHANGE_VERSION or record.get('prev') != check or not isinstance(previous, str):
            return False
    return True


def _read_each(window: Window, key: bytes | None, conversation: str | None) -> Window:
    """The window after reading every record of its changes in order (see the module's docstring)."""
    state, check = dict(window.state), window.last_check
    orphans: list[int] = []
    unsettled: set[str] = set()
    # Where the prefix states no block, changes are orphans until one says the sentence, as the first one sent does.
    untold = window.unstated
    for at, (_, _, part, stored) in enumerate(window.found[window.start :], window.start):
        text = part.content if part is not None else ''
        record = decode_record(stored, text, key=key, conversation_id=conversation)
        if not isinstance(record, Change):
            reason = record.reason if isinstance(record, Unreadable) else 'a baseline where a change should be'
            return replace(window, baseline=None, state={}, broken=f'a record can not be read: {reason}')
        held, check = state.get(record.id), record.check
        meaningless = text.startswith('<context-diff') and held != record.base or held == record.state.get(record.id)
        if meaningless or untold and not text.endswith(SUPERSESSION_SENTENCE):
            orphans.append(at)
            unsettled.add(record.id)
        else:
            state[record.id], untold = record.state.get(record.id), False
            unsettled.discard(record.id)
    return replace(window, state=state, orphans=frozenset(orphans), unsettled=frozenset(unsettled), last_check=check)


@dataclass(frozen=True)
class WindowPlan:
    """What one request records and sends."""

    baseline: InstructionBaselinePart | None
    """The baseline to record, if the request opens (or ends) a window."""

    prefix: tuple[InstructionBlock, ...]
    """The append-mode blocks the prefix states, with the values it states them with."""

    changes: tuple[tuple[str, str | None], ...]
    """Each block this request changes, with its new value, in order."""

    continues: bool
    """Whether the request continues the window history holds."""

    opened: str | None
    """Why this request opens a new window, or `None` if it continues one or has none."""


def plan_request(window: Window, current: Sequence[CurrentBlock], *, reopen: str | None = None) -> WindowPlan:
    """Decide the prefix and the changes of a request whose blocks resolved to `current`, in prefix order; with
    `reopen` (why), a new window stating the current values even where the request could keep the window.
    """
    appending = {block.id: block.content for block in current if block.mode == 'append' and block.id is not None}
    baseline = window.baseline
    moved = baseline is not None and _changed_owner(baseline, current)
    if baseline is not None and not moved and reopen is None and _continues(baseline, current):
        values = {block_id: appending.get(block_id) for block_id in dict.fromkeys([*window.state, *appending])}
        changes = tuple(
            (block_id, value)
            for block_id, value in values.items()
            if window.state.get(block_id) != (content_hash(value) if value is not None else None)
        )
        return WindowPlan(None, baseline.blocks, changes, continues=True, opened=None)
    if appending:
        opened = (
            "a block moved between this plugin and Pydantic AI's own append mode"
            if moved
            else reopen
            if reopen is not None
            else 'a literal or rewrite-mode block changed, moved or changed policy'
            if baseline is not None
            else window.broken or 'first request with an append-mode block'
        )
        literal = [_baseline_entry(block) for block in current if block.mode == 'literal']
        # Where only blocks sent after the window's moved the prefix, the new window keeps the values it states, while
        # the changes since are shorter than what they would move.
        kept: dict[str, str | None] | None = None
        if baseline is not None and not (moved or reopen) and [d for d in baseline.digests if not d.dynamic] == literal:
            kept = {block.id: block.content for block in baseline.blocks}
            kept = kept if _cheaper(kept, appending) else None
        new = InstructionBaselinePart(
            instructions=tuple(_baseline_entry(block, kept) for block in current if block.mode != 'native'),
            native=tuple(block.id for block in current if block.mode == 'native' and block.id is not None),
        )
        changes = tuple(
            (block_id, value)
            for block_id, value in appending.items()
            if kept is not None and kept.get(block_id) != value
        )
        return WindowPlan(new, new.blocks, changes, continues=False, opened=opened)
    # Nothing appends any more: an open window is ended, so its changes stop applying.
    ending = InstructionBaselinePart(instructions=()) if baseline is not None else None
    return WindowPlan(ending, (), (), continues=False, opened=None)


def _changed_owner(baseline: InstructionBaselinePart, current: Sequence[CurrentBlock]) -> bool:
    """Whether a block of the window is now owned by Pydantic AI's own append mode, or the other way round."""
    native = {block.id for block in current if block.mode == 'native'}
    to_plugin = any(block.mode == 'append' and block.id in baseline.native for block in current)
    return to_plugin or not native.isdisjoint(block.id for block in baseline.blocks)


def _continues(baseline: InstructionBaselinePart, current: Sequence[CurrentBlock]) -> bool:
    """Whether `current` can be sent with `baseline`'s prefix: its other blocks are the same, in the same order."""
    others = [_baseline_entry(block) for block in current if block.mode in ('literal', 'rewrite')]
    return others == list(baseline.digests)


def _cheaper(kept: dict[str, str | None], current: dict[str, str | None]) -> bool:
    """Whether the changes from `kept` to `current` are shorter than the stated values from the first one changed."""
    changed = [block_id for block_id, value in current.items() if kept.get(block_id) != value]
    stated = list(kept)
    first = min((stated.index(block_id) for block_id in changed if block_id in kept), default=len(stated))
    moved = sum(len(kept[block_id] or '') for block_id in stated[first:])
    return sum(len(change_text(block_id, kept.get(block_id), current[block_id])) for block_id in changed) < moved


def _baseline_entry(block: CurrentBlock, kept: dict[str, Any] | None = None) -> InstructionBlock | InstructionDigest:
    if block.mode == 'append':
        assert block.id is not None, 'append-mode blocks always have an id'
        return InstructionBlock(id=block.id, content=block.content if kept is None else kept.get(block.id))
    return InstructionDigest.of(id=block.id, dynamic=block.mode == 'rewrite', content=block.content or '')
