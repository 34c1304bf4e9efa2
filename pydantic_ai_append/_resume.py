"""Resuming a conversation's window where its previous request left it, so a request reads only what history added.

Each request of a conversation is sent with the history of the request before it and something more. Folding every
record of that history again, and building the outgoing copy of each of its requests again, costs time that grows with
the conversation. So the fold of a request's history (all of it but the request being sent, which is still written
to) and the outgoing parts built for it are kept, by conversation, and the next request of that conversation goes on
from them if its history starts with what was folded.

"What was folded" is judged by content, so a server that loads each request's history afresh from its store resumes
too, and nothing edited in place is trusted. The fold of a history depends only on where its records and compactions
sit and what the records hold, so the check compares exactly that: the type of every message and of every part, the
number of parts of each message, the text of each system prompt, and for each carrier its record, by value, with every
integer in it the very object it was (so that `1`, `1.0` and `True`, which compare equal, are told apart; every other
value of a flat record is a string or `None`, which nothing but an equal string or `None` equals). A metadata dict that
isn't a flat record (a baseline, a remnant) is compared by its exact content, written out by `marshal`. The
comparisons run over whole lists at once, at a cost per record far below reading it again.

The outgoing parts kept are reused only when the history holds the very message and part objects they were built
from. A history loaded afresh has the same fold but new objects: its outgoing copy is made from its own parts by the
templates kept of how the copy was made (which part is sent as it is, which escaped, which change delivered where),
if the carriers' timestamps and which texts are escaped are the same too.

A kept fold is only ever resumed within its own conversation (and with the signing key it was checked with); it holds
the history it was folded from, and its size counts that history's text.
"""

from __future__ import annotations

import marshal
import sys
from collections.abc import Hashable, Iterable, Sequence
from itertools import chain, compress, repeat
from operator import attrgetter, getitem, is_, itemgetter, not_
from typing import Any, NamedTuple, cast

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)

from ._cache import BoundedCache
from ._delivery import PART_BYTES, Template, looked_through_at, templates_of
from ._history import RECORD_KEY, scan
from ._window import Delivery, WindowState, first_delivery_at, fold_window

__all__ = ('Fold', 'Reuse', 'SentKey', 'escape_key')

_PARTS = attrgetter('parts')
_CONTENT = attrgetter('content')
_TIMESTAMP = attrgetter('timestamp')
_METADATA = attrgetter('metadata')
_RECORD = itemgetter(RECORD_KEY)
_FLAT = frozenset({str, int, type(None)})

SentKey = tuple[str, bool, bool]
"""What the outgoing parts were built for: the delivery path, `<system>` wrapping here, escaping of others' text."""


class _Snapshot(NamedTuple):
    """A conversation's history as one request folded it: what it held, and the window after it.

    Every list is built once and never changed, so a snapshot can be read by many requests at once. Positions are
    indexes into the lists before them: `prompt_at` into the history's parts, `carrier_at` into its system prompts,
    and so on. A named tuple, which is made in one step: a frozen dataclass of this many fields sets each one
    through `object.__setattr__`, several microseconds on every request.
    """

    folded: int
    """How many messages were folded."""

    messages: tuple[ModelMessage, ...] | None
    """The messages folded, in order: the objects, for reusing `sent`; `None` when the snapshot holds no objects
    (it was taken of a history loaded afresh, which is dropped after its request)."""

    parts: list[Any] | None
    """Every part of every message, in order: the objects, held with `messages`."""

    prompts: list[Any] | None
    """The system prompts of requests among `parts` (at `prompt_at`): the objects, held with `messages`, so a request
    over the same objects reads them without gathering them again."""

    carriers: list[Any] | None
    """The system prompts among `prompts` with no text (at `carrier_at`): the objects, held with `messages`."""

    record_carriers: list[Any] | None
    """The carriers of flat records among `carriers` (at `record_at`): the objects, held with `messages`."""

    other_carriers: list[Any] | None
    """The other prompts among `carriers` (at `other_at`): the objects, held with `messages`."""

    escapable_parts: list[Any] | None
    """The user prompts and tool returns among `parts` (at `escapable_at`): the objects, held with `messages`."""

    kinds: list[type]
    """The type of each message."""

    lengths: list[int]
    """How many parts each message had."""

    types: list[type]
    """The type of each of `parts`."""

    prompt_at: list[int]
    """Where the system prompts of requests are among `parts`."""

    contents: list[str]
    """The text each of those system prompts had."""

    carrier_at: list[int]
    """Where the system prompts with no text (carriers, remnants, or neither) are among the system prompts."""

    record_at: list[int]
    """Where the carriers of flat records are among `carrier_at`'s prompts."""

    records: list[dict[str, Any]]
    """A copy of each flat record (a dict of strings, integers and `None`), taken when it was folded."""

    integer_of: list[int]
    """For each integer value of a flat record, which of `records` holds it."""

    integer_keys: list[str]
    """For each integer value of a flat record, its key."""

    integers: list[int]
    """Each integer value of a flat record: the object, which a record holding an equal value of another type isn't."""

    other_at: list[int]
    """Where the other metadata of `carrier_at`'s prompts is (not a flat record: a baseline, a remnant, none)."""

    others: list[tuple[type, bytes]]
    """The type and exact content (`_content_bytes`) of each of those metadata values."""

    escapable_at: list[int]
    """Where the user prompts and tool returns of requests are among `parts`: `deliver` escapes their text."""

    escapable: list[object]
    """The content each of them had: the object, so a string given in its place is told apart (held with
    `messages`)."""

    walked_at: list[int]
    """Which of `escapable` aren't strings (a list, a dict), whose items can be changed in place."""

    walked: list[Hashable]
    """What each of those held, as `escape_key` gives it (held with `messages`)."""

    opaque: list[object]
    """The objects inside `walked` that `deliver` doesn't look into, kept alive so their ids name them."""

    timestamps: list[object]
    """The timestamp of each carrier (the objects, held whether or not `messages` is): a delivered change is sent
    with its carrier's."""

    marked: list[int]
    """Which of the user prompts and tool returns at `escapable_at` `deliver` escapes or looks through: those whose
    content isn't a string without `<`."""

    templates: dict[int, Template]
    """How the outgoing parts of each message of `messages` sent other than stored were made from its own parts, by
    index (see `templates_of`): kept whether or not `messages` is, so a history loaded afresh that folds alike, with
    the same timestamps and `marked`, is sent by them without being rendered again."""

    copied: list[tuple[Any, dict[str, Any]]]
    """Each part `sent` holds an escaped copy of, with its fields as they were (held with `messages`)."""

    state: WindowState
    """The window in effect after `messages`."""

    sent_key: SentKey | None
    """What `sent` was built for, or `None` if nothing was sent from this snapshot yet."""

    deliveries: tuple[Delivery, ...]
    """The changes delivered in `messages` when `sent` was built."""

    sent: dict[int, tuple[ModelRequestPart, ...]]
    """The outgoing parts of each message of `messages` that was sent other than stored, by index."""

    sent_size: int
    """About the memory of the parts in `sent`."""

    templates_size: int
    """About the memory of what `templates` keeps alive: its items, and the parts that deliver changes."""

    sent_request: ModelMessage | None
    """The request that was being sent when the snapshot was taken (folded apart, so not in `messages`)."""

    content_size: int
    """About the memory of what the snapshot compares by content: its records' copies, its texts, its lists."""

    held_size: int
    """About the memory of the objects it holds: the texts of their parts and instructions, a little per part."""

    size: int
    """About the memory the snapshot keeps alive in all, the outgoing parts in `sent` included."""


_FOLDS = BoundedCache[tuple[str, bytes | None], _Snapshot](
    max_entries=1_024, max_bytes=64 * 1024 * 1024, name='conversation folds'
)
"""The last fold of each conversation, by conversation id and signing key."""


def _gather(items: Sequence[Any], at: Iterable[int]) -> list[Any]:
    return list(map(items.__getitem__, at))


def _alike_carriers(
    snapshot: _Snapshot, lists: list[list[Any]], prefix: Sequence[ModelMessage], parts: list[Any], *, same_objects: bool
) -> list[Any] | None:
    """The carriers of `prefix` (with its parts `lists`, and those `parts` in one list) if it folds as `snapshot`'s
    messages did, with the same records at the same places; otherwise `None`.

    With `same_objects`, `prefix` and `parts` are the very objects the snapshot was taken of, whose types are known
    and whose system prompts the snapshot holds.
    """
    if list(map(len, lists)) != snapshot.lengths:
        return None
    if same_objects:
        prompts = cast('list[Any]', snapshot.prompts)
        carriers = cast('list[Any]', snapshot.carriers)
        record_carriers = cast('list[Any]', snapshot.record_carriers)
        others: list[Any] = list(map(_METADATA, cast('list[Any]', snapshot.other_carriers)))
    elif list(map(type, prefix)) != snapshot.kinds or list(map(type, parts)) != snapshot.types:
        return None
    else:
        prompts = _gather(parts, snapshot.prompt_at)
        carriers = _gather(prompts, snapshot.carrier_at)
        record_carriers = _gather(carriers, snapshot.record_at)
        others = list(map(_METADATA, _gather(carriers, snapshot.other_at)))
    if list(map(_CONTENT, prompts)) != snapshot.contents:
        return None
    try:
        records: list[Any] = list(map(_RECORD, map(_METADATA, record_carriers)))
    except (KeyError, TypeError):
        return None
    # Equal by value, then every integer the same object: `True == 1`, but `True is not 1`.
    if records != snapshot.records or not all(map(is_, map(type, records), repeat(dict))):
        return None
    if not all(map(is_, map(getitem, _gather(records, snapshot.integer_of), snapshot.integer_keys), snapshot.integers)):
        return None
    if not all((type(held), _content_bytes(held)) == key for held, key in zip(others, snapshot.others, strict=True)):
        return None
    return carriers


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
        self._scope = (scope, key) if scope is not None else None
        previous = _FOLDS.get(self._scope) if self._scope is not None else None
        self._previous: _Snapshot | None = None
        self._parts: list[Any] = []
        # The carriers among `_parts`, when the fold resumes.
        self._carriers: list[Any] = []
        self._same_objects = False
        self._hold = True
        if previous is not None and len(messages) >= previous.folded:
            count = previous.folded
            prefix = messages[:count]
            lists: list[list[Any]] = list(map(_PARTS, prefix))
            parts = list(chain.from_iterable(lists))
            same_objects = (
                previous.messages is not None
                and previous.parts is not None
                and all(map(is_, prefix, previous.messages))
                and all(map(is_, parts, previous.parts))
            )
            if (carriers := _alike_carriers(previous, lists, prefix, parts, same_objects=same_objects)) is not None:
                self._previous, self._parts, self._same_objects = previous, parts, same_objects
                self._carriers = carriers
                # Other objects holding the same are a history loaded afresh, which its caller drops after the
                # request: holding them would keep a second copy of the history alive and free the one held before
                # inside this request. They are held only if the history goes on from the request sent last, as a
                # history kept in process after one load does.
                self._hold = same_objects or (count < len(messages) and messages[count] is previous.sent_request)
        self._start = self._previous.folded if self._previous is not None else 0
        self._reused = False
        # What `reusable` read of the previous messages when their copy is made by the kept templates: the carriers'
        # timestamps and which escapable parts are marked.
        self._templated: tuple[list[object], list[int]] | None = None
        self._rendered_from = 0
        # The request being sent is folded apart: it is still written to (its records are added to it), so it is
        # never part of what is kept.
        self._stop = max(len(messages) - 1, self._start)
        start_state = self._previous.state if self._previous is not None else None
        found = scan(messages, key=key, conversation_id=conversation_id, start=self._start, stop=self._stop)
        self._kept = fold_window(found, start=start_state)
        last = scan(messages, key=key, conversation_id=conversation_id, start=self._stop)
        self.state = fold_window(last, start=self._kept)
        """The window in effect after every message."""

    def reusable(self, deliveries: Sequence[Delivery], sent_key: SentKey) -> Reuse:
        """What of the outgoing copy kept for the messages this fold resumed over can be sent again.

        Nothing, unless it was built for the same path and options and delivered the same changes. The parts kept
        are reused if the history holds the objects they were built from; the templates, if it holds other objects
        (loaded afresh) whose carriers' timestamps and escaped texts are alike.
        """
        previous = self._previous
        if previous is None or previous.sent_key != sent_key:
            return _NOTHING_REUSED
        start = self._start
        cut = first_delivery_at(deliveries, start)
        if tuple(deliveries[:cut]) != previous.deliveries:
            return _NOTHING_REUSED
        if self._same_objects:
            if not _same_escapable(previous):
                return _NOTHING_REUSED
            self._reused = True
            self._rendered_from = start
            return Reuse(previous.sent, {}, start)
        read = _alike_to_send(previous, self._parts, self._carriers)
        if read is None:
            return _NOTHING_REUSED
        self._templated, self._rendered_from = read, start
        return Reuse({}, previous.templates, start)

    def remember(
        self,
        deliveries: Sequence[Delivery],
        sent_key: SentKey,
        built: dict[int, tuple[ModelRequestPart, ...]],
    ) -> None:
        """Keep this fold and the outgoing parts built for its history, for the conversation's next request."""
        if self._scope is None:
            return
        sent = {index: parts for index, parts in built.items() if index < self._stop} if self._hold else {}
        delivered = deliveries[
            first_delivery_at(deliveries, self._rendered_from) : first_delivery_at(deliveries, self._stop)
        ]
        templates = templates_of(
            self._messages, self._rendered_from, self._stop, built, delivered, escape_others=sent_key[2]
        )
        # Counted as the parts are added: what was reused was counted when it was built.
        sent_size = sum(64 * (1 + len(parts)) for parts in sent.values())
        templates_size = _templates_size(templates)
        copied: list[tuple[Any, dict[str, Any]]] = []
        for index, outgoing in sent.items():
            # The user prompts and tool returns sent as escaped copies, whose other fields the copies keep.
            kept = set(map(id, outgoing))
            own = self._messages[index].parts
            for part in own:
                if isinstance(part, UserPromptPart | ToolReturnPart) and id(part) not in kept:
                    copied.append((part, dict(part.__dict__)))
                    sent_size += 2 * _content_size(part.content)
            # The parts that deliver a change hold its text on both paths (in their content and metadata): the
            # change's wording entry counts them only while that cache keeps it.
            stored = set(map(id, own))
            for part in outgoing:
                if isinstance(part, SystemPromptPart) and id(part) not in stored:
                    sent_size += _content_size(part.content) + _content_size(part.metadata)
        previous = self._previous
        if self._reused and previous is not None:
            sent = {**previous.sent, **sent}
            sent_size += previous.sent_size
            copied = previous.copied + copied
        if (self._reused or self._templated is not None) and previous is not None:
            templates = {**previous.templates, **templates}
            templates_size += previous.templates_size
        snapshot = _extended(
            previous,
            self._parts,
            self._messages,
            self._stop,
            self._kept,
            same_objects=self._same_objects,
            hold=self._hold,
            checked=self._reused,
            read=self._templated,
            sent=_Sent(
                sent_key,
                tuple(deliveries[: first_delivery_at(deliveries, self._stop)]),
                sent,
                templates,
                sent_size,
                templates_size,
                copied,
            ),
        )
        if snapshot is not None:
            _FOLDS.put(self._scope, snapshot, size=snapshot.size)


class Reuse(NamedTuple):
    """What a request sends again of the outgoing copy kept for the messages its fold resumed over."""

    sent: dict[int, tuple[ModelRequestPart, ...]]
    """The outgoing parts of the messages sent other than stored, by index, for a history of the same objects."""

    templated: dict[int, Template]
    """How to make those parts from the messages' own, for a history of other objects (loaded afresh)."""

    start: int
    """The index of the first message to render; the ones before it are sent by `sent` or `templated`, or as they
    are."""


_NOTHING_REUSED = Reuse({}, {}, 0)


def _alike_to_send(previous: _Snapshot, parts: list[Any], carriers: list[Any]) -> tuple[list[object], list[int]] | None:
    """The timestamps of `carriers` and the marked escapable parts of the history whose `parts` fold as `previous`'s
    did, if they are the same as `previous`'s, so its copy can be made by `previous`'s templates; otherwise `None`.

    A delivered change is sent with its carrier's timestamp, and `deliver` escapes each marked part (see
    `_Snapshot.marked`) from its own text, so only these two can make the copy of a history that folds alike differ.
    """
    stamps: list[object] = list(map(_TIMESTAMP, carriers))
    if stamps != previous.timestamps:
        return None
    marked = looked_through_at(list(map(_CONTENT, _gather(parts, previous.escapable_at))))
    if marked != previous.marked:
        return None
    return stamps, marked


def _templates_size(templates: dict[int, Template]) -> int:
    """About the memory of `templates`: a little per template and item, and the text of each delivered part."""
    size = 0
    for items in templates.values():
        size += 64 + 8 * len(items)
        for item in items:
            if type(item) is not int:
                # Only a system prompt delivers a change here (`<system>` wrapping is for resumed turns).
                part = cast('SystemPromptPart', item)
                size += PART_BYTES + _content_size(part.content) + _content_size(part.metadata)
    return size


class _Sent(NamedTuple):
    """What a snapshot keeps of the outgoing copy built for its messages (see `_Snapshot`'s fields of these names)."""

    sent_key: SentKey
    deliveries: tuple[Delivery, ...]
    sent: dict[int, tuple[ModelRequestPart, ...]]
    templates: dict[int, Template]
    sent_size: int
    templates_size: int
    copied: list[tuple[Any, dict[str, Any]]]


_OPAQUE = object()
"""Marks an object `escape_key` names by its id."""


def escape_key(value: object, opaque: list[object]) -> Hashable:
    """What of `value` decides how `deliver` escapes it: its strings, through lists, tuples and dicts.

    `deliver` leaves any other object as it is, so such an object is named by its id (and added to `opaque`, which
    keeps it alive so the id can't name another).

    ```python
    from pydantic_ai_append._resume import escape_key

    print(escape_key(['a', {'b': 'c'}], []) == escape_key(['a', {'b': 'c'}], []))
    #> True
    ```
    """
    # The same tests, in the same order, as `_delivery._escaped_value` makes: subclasses are looked through too.
    if isinstance(value, str):
        # A subclass is named by its characters, which are all that escaping reads.
        return value if type(value) is str else (type(value), str.__str__(value))
    if isinstance(value, list | tuple):
        kind: type = type(cast('object', value))
        return (kind, tuple(escape_key(item, opaque) for item in cast('Sequence[object]', value)))
    if isinstance(value, dict):
        items = cast('dict[Hashable, object]', value).items()
        return (type(cast('object', value)), tuple((name, escape_key(item, opaque)) for name, item in items))
    opaque.append(value)
    return (_OPAQUE, id(value))


def _same_escapable(snapshot: _Snapshot) -> bool:
    """Whether the user prompts and tool returns `snapshot` holds hold what they held when it was taken.

    The outgoing copy kept for a message holds their text as it was escaped then, and a message kept as it was
    sent had nothing to escape: either is sent again only if their content is still the same.
    """
    contents: list[object] = list(map(_CONTENT, cast('list[Any]', snapshot.escapable_parts)))
    if not all(map(is_, contents, snapshot.escapable)):
        return False
    # A part sent as an escaped copy is sent with the other fields it had then; a change is sent with the timestamp
    # of its carrier.
    if not all(part.__dict__ == fields for part, fields in snapshot.copied):
        return False
    if not all(map(is_, map(_TIMESTAMP, cast('list[Any]', snapshot.carriers)), snapshot.timestamps)):
        return False
    ignored: list[object] = []
    return all(
        escape_key(contents[index], ignored) == key
        for index, key in zip(snapshot.walked_at, snapshot.walked, strict=True)
    )


def _extended(
    previous: _Snapshot | None,
    previous_parts: list[Any],
    messages: Sequence[ModelMessage],
    stop: int,
    state: WindowState,
    *,
    same_objects: bool,
    hold: bool,
    checked: bool,
    read: tuple[list[object], list[int]] | None,
    sent: _Sent,
) -> _Snapshot | None:
    """A snapshot of `messages[:stop]`: `previous`'s with the messages after it added, or `None` if one can't be kept.

    `previous_parts` are the parts of the messages `previous` folded, as `messages` holds them now; `same_objects`
    says whether they are the very objects `previous` holds, `hold` whether the snapshot is to hold `messages`'
    objects, for reusing their outgoing copy, and `checked` whether what `previous` compares a reused copy against
    was found unchanged in this request (its copy was reused). `read` is what `_alike_to_send` read of the previous
    messages if their copy was made by templates. `sent` is what is kept of this request's copy.
    """
    if previous is None:
        previous = _EMPTY
    added = messages[previous.folded : stop]
    lengths = list(map(len, map(_PARTS, added)))
    parts: list[Any] = list(chain.from_iterable(map(_PARTS, added)))
    # The system prompts of requests, which are all `scan` reads records from, and the parts of requests whose text
    # `deliver` escapes.
    prompt_flags: list[bool] = []
    escapable_flags: list[bool] = []
    for message in added:
        request = isinstance(message, ModelRequest)
        prompt_flags.extend(request and isinstance(part, SystemPromptPart) for part in message.parts)
        escapable_flags.extend(request and isinstance(part, UserPromptPart | ToolReturnPart) for part in message.parts)
    offset = len(previous.types)
    escapable_at = [offset + index for index in compress(range(len(parts)), escapable_flags)]
    prompt_at = [offset + index for index in compress(range(len(parts)), prompt_flags)]
    prompts = cast('list[SystemPromptPart]', list(compress(parts, prompt_flags)))
    contents: list[str] = list(map(_CONTENT, prompts))
    # Only a system prompt without text can be a carrier: one with text is compared by its text.
    empty_at = list(compress(range(len(prompts)), map(not_, contents)))
    carrier_at = [len(previous.contents) + index for index in empty_at]
    carriers = [prompts[index] for index in empty_at]
    metadata: list[dict[str, Any] | None] = list(map(_METADATA, carriers))
    record_at: list[int] = []
    records: list[dict[str, Any]] = []
    integer_of: list[int] = []
    integer_keys: list[str] = []
    integers: list[int] = []
    other_at: list[int] = []
    others: list[tuple[type, bytes]] = []
    for index, held in enumerate(metadata, start=len(previous.carrier_at)):
        stored: object = held.get(RECORD_KEY) if type(held) is dict else None
        if type(stored) is dict and _FLAT.issuperset(map(type, cast('dict[str, Any]', stored).values())):
            record = cast('dict[str, Any]', stored)
            for name, value in record.items():
                if type(value) is int:
                    integer_of.append(len(previous.records) + len(records))
                    integer_keys.append(name)
                    integers.append(value)
            record_at.append(index)
            records.append(dict(record))
        elif (key := _content_bytes(held)) is None:
            return None
        else:
            other_at.append(index)
            others.append((cast('type', type(cast('object', held))), key))
    timestamps, marked = _read_to_send(
        previous, previous_parts, carriers, list(compress(parts, escapable_flags)), checked=checked, read=read
    )
    # What the snapshot compares by content and keeps alive: the copies of its records, the system prompts' texts,
    # the others' contents, the timestamps, and a few list entries per part.
    content_size = (
        previous.content_size
        + sum(sys.getsizeof(value) for record in records for value in record.values())
        + 256 * len(records)
        + sum(map(sys.getsizeof, contents))
        + sum(sys.getsizeof(key) for _, key in others)
        + 64 * (len(added) + len(parts))
        + 64 * len(carriers)
    )
    held_messages: tuple[ModelMessage, ...] | None = None
    held_parts: list[Any] | None = None
    held_prompts: list[Any] | None = None
    held_carriers: list[Any] | None = None
    held_records: list[Any] | None = None
    held_others: list[Any] | None = None
    held_escapable: list[Any] | None = None
    escapable: list[object] = []
    walked_at: list[int] = []
    walked: list[Hashable] = []
    opaque: list[object] = []
    held_size = 0
    if hold:
        held_messages, held_parts = (*messages[:stop],), previous_parts + parts
        added_escapable = list(compress(parts, escapable_flags))
        if same_objects and previous.prompts is not None:
            # `previous` holds these very objects: only the messages added are gathered.
            held_prompts = previous.prompts + prompts
            held_carriers = cast('list[Any]', previous.carriers) + carriers
            held_records = cast('list[Any]', previous.record_carriers) + _gather(
                carriers, _shifted(record_at, previous)
            )
            held_others = cast('list[Any]', previous.other_carriers) + _gather(carriers, _shifted(other_at, previous))
            held_escapable = cast('list[Any]', previous.escapable_parts) + added_escapable
        else:
            held_prompts = _gather(held_parts, [*previous.prompt_at, *prompt_at])
            held_carriers = _gather(held_prompts, previous.carrier_at + carrier_at)
            held_records = _gather(held_carriers, previous.record_at + record_at)
            held_others = _gather(held_carriers, previous.other_at + other_at)
            held_escapable = _gather(held_parts, [*previous.escapable_at, *escapable_at])
        escapable, walked_at, walked, opaque = _compared(previous, held_escapable, added_escapable, checked=checked)
        held_size = (
            previous.held_size if same_objects else _held_size(messages[: previous.folded], previous_parts)
        ) + _held_size(added, parts)
    return _Snapshot(
        folded=stop,
        messages=held_messages,
        parts=held_parts,
        prompts=held_prompts,
        carriers=held_carriers,
        record_carriers=held_records,
        other_carriers=held_others,
        escapable_parts=held_escapable,
        kinds=previous.kinds + list(map(type, added)),
        lengths=previous.lengths + lengths,
        types=previous.types + list(map(type, parts)),
        prompt_at=previous.prompt_at + prompt_at,
        contents=previous.contents + contents,
        carrier_at=previous.carrier_at + carrier_at,
        record_at=previous.record_at + record_at,
        records=previous.records + records,
        integer_of=previous.integer_of + integer_of,
        integer_keys=previous.integer_keys + integer_keys,
        integers=previous.integers + integers,
        other_at=previous.other_at + other_at,
        others=previous.others + others,
        escapable_at=previous.escapable_at + escapable_at,
        escapable=escapable,
        walked_at=walked_at,
        walked=walked,
        opaque=opaque,
        timestamps=timestamps,
        marked=marked,
        templates=sent.templates,
        copied=sent.copied,
        state=state,
        sent_key=sent.sent_key,
        deliveries=sent.deliveries,
        sent=sent.sent,
        sent_size=sent.sent_size,
        templates_size=sent.templates_size,
        sent_request=messages[stop] if stop < len(messages) else None,
        content_size=content_size,
        held_size=held_size,
        size=content_size + held_size + _request_size(messages, stop) + sent.sent_size + sent.templates_size,
    )


def _read_to_send(
    previous: _Snapshot,
    previous_parts: list[Any],
    added_carriers: list[Any],
    added_escapable: list[Any],
    *,
    checked: bool,
    read: tuple[list[object], list[int]] | None,
) -> tuple[list[object], list[int]]:
    """The carriers' timestamps and the marked escapable parts of a snapshot (`_Snapshot.timestamps`, `.marked`).

    `previous`'s are extended by the parts added if they were found to hold for this request's objects (`checked`
    over the same objects, or `read` over others), and read again from `previous_parts` otherwise.
    """
    added_stamps: list[object] = list(map(_TIMESTAMP, added_carriers))
    added_marked = [
        len(previous.escapable_at) + index for index in looked_through_at(list(map(_CONTENT, added_escapable)))
    ]
    if checked:
        return previous.timestamps + added_stamps, previous.marked + added_marked
    if read is not None:
        return read[0] + added_stamps, read[1] + added_marked
    previous_carriers = _gather(_gather(previous_parts, previous.prompt_at), previous.carrier_at)
    previous_contents: list[object] = list(map(_CONTENT, _gather(previous_parts, previous.escapable_at)))
    return list(map(_TIMESTAMP, previous_carriers)) + added_stamps, looked_through_at(previous_contents) + added_marked


def _compared(
    previous: _Snapshot, escapable_parts: list[Any], added_escapable: list[Any], *, checked: bool
) -> tuple[list[object], list[int], list[Hashable], list[object]]:
    """What a reused copy will be checked against (`escapable`, `walked_at`, `walked`, `opaque`): what the held
    objects hold now, which is what `deliver` read for the copy kept with the snapshot (built now, or reused because
    they held what they held before).

    With `checked`, `previous`'s were found unchanged in this request, and only the parts added are read.
    """
    if not checked:
        escapable: list[object] = list(map(_CONTENT, escapable_parts))
        walked_at = _not_text(escapable)
        opaque: list[object] = []
        walked = [escape_key(escapable[index], opaque) for index in walked_at]
        return escapable, walked_at, walked, opaque
    added: list[object] = list(map(_CONTENT, added_escapable))
    escapable = previous.escapable + added
    added_walked_at = [len(previous.escapable) + index for index in _not_text(added)]
    opaque = list(previous.opaque)
    walked = previous.walked + [escape_key(escapable[index], opaque) for index in added_walked_at]
    return escapable, previous.walked_at + added_walked_at, walked, opaque


def _shifted(positions: list[int], previous: _Snapshot) -> list[int]:
    """`positions` among all the carriers as positions among the carriers added after `previous`'s."""
    start = len(previous.carrier_at)
    return [position - start for position in positions]


def _not_text(values: list[object]) -> list[int]:
    """Where the values that aren't strings are among `values` (a list, a dict: what `escape_key` walks)."""
    return list(compress(range(len(values)), map(not_, map(isinstance, values, repeat(str)))))


def _request_size(messages: Sequence[ModelMessage], stop: int) -> int:
    """About the memory of holding the request being sent (`sent_request`), held whether or not the others are."""
    if stop >= len(messages):
        return 0
    request = messages[stop]
    return _held_size([request], list(_PARTS(request)))


def _held_size(messages: Sequence[ModelMessage], parts: list[Any]) -> int:
    """About the memory of holding `messages` and their `parts`: the texts of the parts and of the instructions.

    Requests often share one instructions string, which is counted once.
    """
    instructions = list(map(_instructions, messages))
    return (
        sum(map(sys.getsizeof, dict(zip(map(id, instructions), instructions, strict=True)).values()))
        + sum(map(_content_size, map(getattr, parts, repeat('content'), repeat(None))))
        + 128 * (len(messages) + len(parts))
    )


def _content_size(value: object) -> int:
    """About the memory a part's content takes: its strings, through lists, tuples and dicts."""
    if isinstance(value, str):
        return sys.getsizeof(value)
    if isinstance(value, list | tuple):
        return 64 + sum(map(_content_size, cast('Sequence[object]', value)))
    if isinstance(value, dict):
        items = cast('dict[object, object]', value).items()
        return 64 + sum(_content_size(name) + _content_size(item) for name, item in items)
    return sys.getsizeof(value)


def _content_bytes(value: object) -> bytes | None:
    """The exact content of a metadata value, as bytes that are equal for two values only if they hold the same.

    That is `marshal`'s format 0, which writes `True`, `1` and `1.0`, and a list and a tuple, apart, keeps the order of
    a dict's items, takes no subclass of a built-in type, and has no references between objects (so sharing doesn't
    change it). `None` for a value it can't write (a class instance, a subclass): that is never compared.
    """
    try:
        # Typed for the values it writes; any other raises `ValueError`, which is the answer here.
        return marshal.dumps(cast('Any', value), 0)
    except ValueError:
        return None


def _instructions(message: ModelMessage) -> str | None:
    return message.instructions if isinstance(message, ModelRequest) else None


_EMPTY = _Snapshot(
    folded=0,
    messages=(),
    parts=[],
    prompts=[],
    carriers=[],
    record_carriers=[],
    other_carriers=[],
    escapable_parts=[],
    kinds=[],
    lengths=[],
    types=[],
    prompt_at=[],
    contents=[],
    carrier_at=[],
    record_at=[],
    records=[],
    integer_of=[],
    integer_keys=[],
    integers=[],
    other_at=[],
    others=[],
    escapable_at=[],
    escapable=[],
    walked_at=[],
    timestamps=[],
    marked=[],
    templates={},
    copied=[],
    walked=[],
    opaque=[],
    state=WindowState(),
    sent_key=None,
    deliveries=(),
    sent={},
    sent_size=0,
    templates_size=0,
    sent_request=None,
    content_size=0,
    held_size=0,
    size=0,
)
