"""How the window's changes reach a model: which path, which wording, and what goes in each request.

A change is sent as a mid-conversation `SystemPromptPart`. Pydantic AI's message preparation then sends it
as a system message on models whose profile has `supports_inline_system_prompts`, and as `<system>`-wrapped
user text on the others (the *wrapped* path); this module picks the wording for that path (the wrapped path also says that a
withdrawal stays in effect).

The model that serves a request isn't always the one the request was prepared for, so each delivered change
carries its wording for both paths in its (never sent) metadata, and whoever knows the serving model picks:

- A `FallbackModel` has no profile of its own: when its members are on different paths, each member is
  wrapped in `PathWording`, which picks its own wording as it prepares its messages.
- On releases with a per-attempt hook (`prepare_model_request`), the capability picks the wording of the model
  about to serve the attempt, which the `ModelFallback` capability may have switched.

Text that isn't the system's (user prompts and tool returns) is sent with the element syntax in it escaped, so
that only the system's elements read as elements on either path; the stored history keeps what was written.

Two more details keep the prefix byte-stable:

- On releases that tell a non-inline model what `<system>` means only once a mid-conversation system
  message appears (`framing_announcement='when_needed'`), the announcement would move the system prompt at
  the first change. A window on such a model asks for `'always'`, so the announcement is there from the
  first request, unless the user chose a value (`_compat.ask_for_framing_announcement`).
- Pydantic AI doesn't prepare the messages of a resumed turn for a single model, so its `<system>` wrapping
  is applied here for the changes on the wrapped path.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TypeAlias, cast

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    SystemPromptPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel

from ._cache import BoundedCache, size_of
from ._compat import ask_for_framing_announcement
from ._history import is_carrier
from ._records import InstructionDeltaPart
from ._rendering import InlineRenderer, Renderer, WrappedRenderer, escape
from ._window import Delivery, first_delivery_at

__all__ = (
    'DELIVERED',
    'PART_BYTES',
    'DeliveredPaths',
    'PathWording',
    'Template',
    'copy_reused',
    'deliver',
    'delivered_inline',
    'is_inline',
    'looked_through',
    'members',
    'paths',
    'prepare_attempt',
    'prepare_model',
    'reword',
    'templates_of',
    'wording_of',
)

_WORDING_KEY = 'pydantic_ai_append_wording'
"""Metadata of a delivered change: its text on each path, keyed `'inline'` and `'wrapped'`."""


def is_inline(model: Model) -> bool:
    """Whether `model` takes mid-conversation system messages, per its profile."""
    return bool(model.profile.get('supports_inline_system_prompts', False))


def members(model: Model) -> list[Model]:
    """The models that may serve a request to `model`: a `FallbackModel`'s members, or the model itself."""
    if isinstance(model, FallbackModel):
        return [member for inner in model.models for member in members(inner)]
    return [model]


def paths(model: Model) -> set[bool]:
    """The delivery paths of the models that may serve `model`'s requests: `True` for inline."""
    return {is_inline(member) for member in members(model)}


class PathWording(WrapperModel):
    """A `FallbackModel` member that sends the changes in the wording of its own delivery path."""

    def prepare_messages(
        self, messages: list[ModelMessage], model_request_parameters: ModelRequestParameters | None = None
    ) -> list[ModelMessage]:
        """Put this member's wording in each change, then prepare the messages as the member does."""
        return self.wrapped.prepare_messages(reword(messages, inline=is_inline(self.wrapped)), model_request_parameters)


def reword(messages: list[ModelMessage], *, inline: bool) -> list[ModelMessage]:
    """`messages` with each delivered change in the wording of the given path."""
    path = 'inline' if inline else 'wrapped'
    reworded = list(messages)
    # Only a system prompt with the wording in its metadata is a delivered change, and it is usually in the right
    # wording already, so this only reads: nothing is built for a request whose changes keep their wording.
    for index, message in enumerate(messages):
        if not isinstance(message, ModelRequest):
            continue
        parts: list[ModelRequestPart] | None = None
        for part_index, part in enumerate(message.parts):
            if (
                isinstance(part, SystemPromptPart)
                and (metadata := part.metadata)
                and (wording := metadata.get(_WORDING_KEY)) is not None
                and part.content != (text := cast('dict[str, str]', wording)[path])
            ):
                if parts is None:
                    parts = list(message.parts)
                parts[part_index] = replace(part, content=text)
        if parts is not None:
            reworded[index] = _with_parts(message, parts)
    return reworded


def prepare_model(request_context: ModelRequestContext, *, tagged: bool) -> Renderer:
    """Set up the request's model for delivery, and return the renderer the changes are sent with.

    The request is noted as delivered on the renderer's path (see `delivered_inline`): the caller sends its changes
    with that renderer.

    Args:
        request_context: The request being prepared; its model and settings may be replaced.
        tagged: Whether the request's prefix has an append-mode section, so changes can follow.
    """
    renderer = prepare_attempt(request_context, tagged=tagged)
    DELIVERED.note(request_context, inline=renderer.inline)
    return renderer


def prepare_attempt(request_context: ModelRequestContext, *, tagged: bool) -> Renderer:
    """Set up the model of one attempt at a request, and return the renderer of its path; nothing is noted.

    Args:
        request_context: The attempt being prepared; its model and settings may be replaced.
        tagged: Whether the request's prefix has an append-mode section, so changes can follow.
    """
    model = request_context.model
    on_paths = paths(model)
    if tagged and False in on_paths:
        ask_for_framing_announcement(request_context)
    if on_paths == {True}:
        return InlineRenderer()
    if isinstance(model, FallbackModel) and True in on_paths:
        request_context.model = _with_path_wording(model)
    return WrappedRenderer()


def delivered_inline(request_context: ModelRequestContext) -> bool | None:
    """Whether the request's changes were delivered on the inline path, or `None` if that isn't known of it.

    Known for the `ModelRequestContext` object `prepare_model` was given, as long as it lives: an attempt at the
    request is given that object again, unless a hook replaced it with a copy.
    """
    return DELIVERED.inline(request_context)


class DeliveredPaths:
    """The path each live request's changes were delivered on, so that an attempt on that path skips `reword`.

    A `ModelRequestContext` is unhashable, so it is held by `id()` with a weak reference, which tells a live entry
    from a reused id and keeps no request alive. Requests of every conversation, in every thread, note here, so
    notes take a lock; the entries of requests that are gone are dropped whenever the entries have doubled since
    the last time, which keeps that cost constant per request.
    """

    def __init__(self) -> None:
        self._paths: dict[int, tuple[weakref.ref[ModelRequestContext], bool]] = {}
        self._lock = threading.Lock()
        self._live = 0

    def note(self, request_context: ModelRequestContext, *, inline: bool) -> None:
        """Note that `request_context`'s changes are delivered on the inline path or not."""
        with self._lock:
            self._paths[id(request_context)] = (weakref.ref(request_context), inline)
            if len(self._paths) > 2 * self._live + _LIVE_SLACK:
                self._paths = {key: entry for key, entry in self._paths.items() if entry[0]() is not None}
                self._live = len(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def inline(self, request_context: ModelRequestContext) -> bool | None:
        """The path noted for `request_context`: `True` for inline, `None` if none is."""
        entry = self._paths.get(id(request_context))
        return entry[1] if entry is not None and entry[0]() is request_context else None


_LIVE_SLACK = 64
"""How many entries `DeliveredPaths` takes beyond twice the live ones it last counted before it counts again."""

DELIVERED = DeliveredPaths()
"""The paths of the requests `prepare_model` set up, in this process."""


def _with_path_wording(model: FallbackModel) -> FallbackModel:
    mixed = copy.copy(model)
    # A model wrapped already (the per-attempt hook sees the step's wrapped model) is left as it is.
    mixed.models = [
        _with_path_wording(member)
        if isinstance(member, FallbackModel)
        else member
        if isinstance(member, PathWording)
        else PathWording(member)
        for member in model.models
    ]
    return mixed


def deliver(  # noqa: C901 (one loop, written out: see the comment in it)
    messages: list[ModelMessage],
    deliveries: Sequence[Delivery],
    renderer: Renderer,
    *,
    wrap: bool = False,
    escape_others: bool = False,
    reused: Mapping[int, tuple[ModelRequestPart, ...]] | None = None,
    templated: Mapping[int, Template] | None = None,
    start: int = 0,
    built: dict[int, tuple[ModelRequestPart, ...]] | None = None,
) -> list[ModelMessage]:
    """The outgoing messages: each record replaced by its change's text, or left out if it delivers nothing.

    With `escape_others`, the text of user prompts and tool returns is escaped too (see `escape`). Only the copy
    sent is changed, never the stored parts.

    Args:
        messages: The request's messages, records included.
        deliveries: The changes this request delivers, by position.
        renderer: The renderer of the request's delivery path.
        wrap: Whether to `<system>`-wrap each change here, because Pydantic AI won't prepare these messages.
        escape_others: Whether to escape the element syntax in the text of user prompts and tool returns, so that
            only the system's elements read as elements: set for a window whose prefix has tagged blocks.
        reused: The outgoing parts of the messages before `start`, by index, as an earlier request with the same
            messages and deliveries built them; a message before `start` not in it is sent as it is. Each is sent in
            a new message object with a new parts list.
        templated: The same for messages that are other objects than the ones an earlier request built its copy
            of, with the same fold (a history loaded afresh): how each one's outgoing parts are made from its own,
            as `templates_of` gave it.
        start: The index of the first message to render; the ones before it are `reused` or `templated`.
        built: Filled with the outgoing parts of each message rendered here that differs from its stored one, and
            of each message made by `templated`.
    """
    path = renderer.path
    rendered = list(messages)
    if reused:
        copy_reused(rendered, messages, reused)
    if templated:
        _copy_templated(rendered, messages, templated, {} if built is None else built)
    # The changes of the deliveries seen so far in this request, by their record's `id()` (the records outlive the
    # request, in its deliveries) and whether its base matches: a history's equal records are usually one object,
    # which is looked up by content once rather than at each carrier.
    changes: dict[tuple[int, bool], _Change] = {}
    # Deliveries are in history order, by message and then part, so they are walked alongside the messages: `at` is
    # the first one not yet passed.
    at = first_delivery_at(deliveries, start) if start else 0
    count = len(deliveries)
    new = object.__new__
    # This runs on every request over the history not rendered before: a type check and a look at the text of each
    # part that can't change, and a new message only for a request that has a carrier or a part to escape, whose
    # parts list is started at the first such part. It is one loop, with no call per message or per carrier: on
    # history freshly loaded from JSON every request of the history is copied on every request, and those calls cost
    # about a fifth of the walk.
    for index in range(start, len(messages)):
        message = messages[index]
        if not isinstance(message, ModelRequest):
            continue
        # Deliveries at messages that have no carrier there are passed.
        while at < count and deliveries[at].message_index < index:
            at += 1
        parts: list[ModelRequestPart] | None = None
        for part_index, part in enumerate(message.parts):
            sent: ModelRequestPart | None
            if type(part) is UserPromptPart or type(part) is ToolReturnPart:
                # Text with no `<` has nothing to escape; other content (a list, a dict) is looked through.
                content = part.content
                sent = _escaped(part) if escape_others and (type(content) is not str or '<' in content) else part
            elif not isinstance(part, SystemPromptPart):
                sent = _escaped(part) if escape_others else part
            elif part.content:
                # Only an empty system prompt can be a carrier; one with text is the user's, sent as it is.
                sent = part
            else:
                # Deliveries at earlier parts of the message, where no carrier is, are passed.
                delivery: Delivery | None = None
                while at < count and (ahead := deliveries[at]).message_index == index:
                    if ahead.part_index >= part_index:
                        if ahead.part_index == part_index:
                            delivery = ahead
                            at += 1
                        break
                    at += 1
                if delivery is None:
                    sent = None if is_carrier(part) else part
                else:
                    key = (id(delivery.delta), delivery.base_matches)
                    if (change := changes.get(key)) is None:
                        change = changes[key] = _change_of(delivery.delta, delivery.base_matches)
                    if (sent := change.sent.get((path, wrap, part.timestamp))) is None:
                        sent = _sent_part(change, delivery, part.timestamp, path, wrap)
            if sent is not part:
                if parts is None:
                    parts = list(message.parts[:part_index])
                if sent is not None:
                    parts.append(sent)
            elif parts is not None:
                parts.append(part)
        if parts is not None:
            if built is not None:
                built[index] = tuple(parts)
            fields = message.__dict__.copy()
            fields['parts'] = parts
            fresh = new(type(message))
            fresh.__dict__ = fields
            rendered[index] = fresh
    return rendered


def copy_reused(
    rendered: list[ModelMessage], messages: list[ModelMessage], reused: Mapping[int, tuple[ModelRequestPart, ...]]
) -> None:
    """Put in `rendered` a new message, with a new parts list, for each message of `reused`."""
    # `_with_parts` written out: this runs for every request of the history that carries a change, on every
    # request, where a call per message costs as much as the copy.
    new = object.__new__
    for index, sent_parts in reused.items():
        message = messages[index]
        fields = message.__dict__.copy()
        fields['parts'] = list(sent_parts)
        fresh = new(type(message))
        fresh.__dict__ = fields
        rendered[index] = fresh


Template: TypeAlias = tuple['int | ModelRequestPart', ...]
"""How one request's outgoing parts are made from its own parts, one item each: an integer `j` is its part `j` as it
is, `~j` (negative) its part `j` escaped (`_escaped`), and a part is that part (the one delivering a change)."""


def templates_of(
    messages: Sequence[ModelMessage],
    start: int,
    stop: int,
    built: Mapping[int, tuple[ModelRequestPart, ...]],
    delivered: Sequence[Delivery],
    *,
    escape_others: bool,
) -> dict[int, Template]:
    """How `deliver` made the outgoing parts of `messages[start:stop]`, for the requests it sent other than stored.

    A history loaded afresh that folds alike (the same records at the same places, and the carriers' timestamps and
    the texts `deliver` escapes alike) is sent by applying these to its own parts. Every part whose text `deliver`
    escapes or looks through (any content but a string without `<`) is escaped again from its text then, and so is
    in a template even where its escaped copy was the part itself.

    Args:
        messages: The request's messages, as `deliver` was given them.
        start: The first message `deliver` rendered.
        stop: The message after the last one to take.
        built: The outgoing parts of each message `deliver` sent other than stored, by index.
        delivered: The deliveries of `messages[start:stop]`, in order.
        escape_others: Whether `deliver` escaped the text of user prompts and tool returns.
    """
    at = {(delivery.message_index, delivery.part_index) for delivery in delivered}
    templates: dict[int, Template] = {}
    for index in range(start, stop):
        message = messages[index]
        if not isinstance(message, ModelRequest):
            continue
        outgoing = built.get(index, ())
        items: list[int | ModelRequestPart] = []
        marked = False
        sent = 0
        for part_index, part in enumerate(message.parts):
            if (index, part_index) in at:
                items.append(outgoing[sent])
                sent += 1
            elif not outgoing or (sent < len(outgoing) and outgoing[sent] is part):
                escaped = (
                    escape_others and isinstance(part, UserPromptPart | ToolReturnPart) and looked_through(part.content)
                )
                items.append(~part_index if escaped else part_index)
                marked = marked or escaped
                sent += 1
            elif not isinstance(part, SystemPromptPart):
                items.append(~part_index)
                sent += 1
        if outgoing or marked:
            templates[index] = tuple(items)
    return templates


def looked_through(content: object) -> bool:
    """Whether `deliver` escapes a user prompt or tool return of this `content`, or looks through it for text to escape.

    That is anything but a string without `<`. The loop in `deliver` writes this test out.
    """
    return type(content) is not str or '<' in content


def looked_through_at(contents: Sequence[object]) -> list[int]:
    """Where the contents `looked_through` holds for are among `contents`.

    Its test is written out: this runs over every user prompt and tool return of a history loaded afresh, on every
    request.
    """
    return [index for index, content in enumerate(contents) if type(content) is not str or '<' in content]


def _copy_templated(
    rendered: list[ModelMessage],
    messages: list[ModelMessage],
    templated: Mapping[int, Template],
    built: dict[int, tuple[ModelRequestPart, ...]],
) -> None:
    """Put in `rendered` a new message for each message of `templated`, its outgoing parts made by the template.

    Those parts go in `built` too, so a snapshot that holds these messages keeps them.
    """
    for index, items in templated.items():
        # Templates are only ever made of requests.
        message = cast('ModelRequest', messages[index])
        own = message.parts
        parts: list[ModelRequestPart] = []
        for item in items:
            if not isinstance(item, int):
                parts.append(item)
            elif item >= 0:
                parts.append(own[item])
            else:
                parts.append(_escaped(own[~item]))
        built[index] = tuple(parts)
        rendered[index] = _with_parts(message, parts)


def _escaped(part: ModelRequestPart) -> ModelRequestPart:
    """`part` with the element syntax in its text escaped, if it is a user prompt or tool return that has any.

    The stored part is never changed: the history holds what the user and the tools wrote, and escaping the copy
    sent on each request gives the same bytes every time, so what was sent stays a prefix of what is sent next.
    """
    if isinstance(part, UserPromptPart | ToolReturnPart):
        content = _escaped_value(part.content)
        if content is not part.content:
            return replace(part, content=content)
    return part


def _escaped_value(value: object) -> object:
    """`value` with its strings escaped, through lists and dicts; `value` itself when nothing in it changes."""
    unchanged: object = value
    if isinstance(value, str):
        escaped = escape(value)
        return value if escaped == value else escaped
    if isinstance(value, list | tuple):
        items = cast('Sequence[object]', value)
        new_items = [_escaped_value(item) for item in items]
        if all(new is old for new, old in zip(new_items, items, strict=True)):
            return unchanged
        return new_items if isinstance(value, list) else tuple(new_items)
    if isinstance(value, dict):
        mapping = cast('dict[object, object]', value)
        new_values = {key: _escaped_value(item) for key, item in mapping.items()}
        return unchanged if all(new_values[key] is item for key, item in mapping.items()) else new_values
    return value


def _with_parts(message: ModelRequest, parts: list[ModelRequestPart]) -> ModelRequest:
    """A new request like `message` with other parts; downstream code needs new message objects on each request.

    This is what `copy.copy` does for a dataclass, without the generic copy protocol, which costs more than the
    rest of a delivery; `dataclasses.replace` costs more still. The parts are `message`'s own (already checked when
    it was built) with carriers taken out or replaced by system prompts, or with their text escaped, so the request's
    `__post_init__` check of its parts has nothing to check and isn't run again. The fields are copied into a dict of
    the new object's own in one step, which is the cheapest way to make one.
    """
    fields = message.__dict__.copy()
    fields['parts'] = parts
    fresh = object.__new__(type(message))
    fresh.__dict__ = fields
    return fresh


def _sent_part(change: _Change, delivery: Delivery, timestamp: datetime, path: str, wrap: bool) -> ModelRequestPart:
    """The part that delivers `change` from a carrier of `timestamp` on `path`, built and kept up to the bound."""
    text = change.wording[path]
    sent: ModelRequestPart
    if wrap:
        sent = UserPromptPart(f'<system>{text}</system>', timestamp=timestamp)
    else:
        sent = SystemPromptPart(text, timestamp=timestamp, metadata={_WORDING_KEY: change.wording})
    limit, cost = (_WRAPPED_PER_CHANGE, PART_BYTES + len(text)) if wrap else (_SENT_PER_CHANGE, PART_BYTES)
    # Counted apart from `sent`, which other threads may be adding to: a count a race leaves short lets an entry
    # keep a part or two beyond its limit, never without end.
    kept = change.wrapped_kept if wrap else change.inline_kept
    if kept < limit:
        change.sent[(path, wrap, timestamp)] = sent
        if wrap:
            change.wrapped_kept += 1
        else:
            change.inline_kept += 1
        # The entry's size grows with it, so the cache's bound counts the parts kept.
        change.size += cost
        _WORDINGS.put((delivery.delta, delivery.base_matches), change, size=change.size)
    return sent


@dataclass
class _Change:
    """A change's text on both paths, and the parts already built to deliver it."""

    wording: dict[str, str]
    """The text on each path, keyed `'inline'` and `'wrapped'`; nothing changes it once made."""

    size: int
    """About the memory the entry keeps alive, its parts included."""

    inline_kept: int = 0
    """How many system prompt parts `sent` keeps."""

    wrapped_kept: int = 0
    """How many `<system>`-wrapped parts `sent` keeps."""

    sent: dict[tuple[str, bool, datetime], ModelRequestPart] = field(
        default_factory=dict[tuple[str, bool, datetime], ModelRequestPart]
    )
    """The part that delivers the change, by path, by whether it is `<system>`-wrapped here, and by its carrier's
    timestamp (which the part keeps). Pydantic AI never changes a request part it is given (it builds new ones where
    it rewrites), so one part object is sent in every request that delivers the change. A part per carrier built
    on each request instead, with its own fields, was measured slower on history freshly loaded from JSON than the
    timestamp's hash (likely the collection of the objects it makes)."""


_SENT_PER_CHANGE = 64
"""The most system prompt parts kept for one change. A change's value can recur in a conversation (a todo item
ticked and unticked), each time in a carrier of its own timestamp, and a history freshly loaded from JSON delivers
all of them on each request; parts beyond the limit are built every time, so a record copied many times can't grow
an entry without end."""

_WRAPPED_PER_CHANGE = 4
"""The most `<system>`-wrapped parts kept for one change (each holds a text of its own; only a resumed turn is
wrapped here)."""

PART_BYTES = 512
"""About the memory one kept part takes besides its text: the part, its metadata dict, the key."""


_WORDINGS = BoundedCache[tuple[InstructionDeltaPart, bool], _Change](
    max_entries=16_384, max_bytes=64 * 1024 * 1024, name='change wordings'
)
"""Each change's text on both paths and its delivered parts, by the change's content and whether its base matches.

Every request of a window delivers all of its changes again, and one lookup gives both texts. Keyed by the record's
value (records are frozen, and compare and hash by their fields), so a record decoded again from history freshly
loaded from JSON finds the wording rendered before. The entry's size counts the record's texts, each path's text,
and the parts kept (a `<system>`-wrapped part's text too), and grows as parts are kept.
"""


def _change_of(delta: InstructionDeltaPart, base_matches: bool) -> _Change:
    key = (delta, base_matches)
    if (change := _WORDINGS.get(key)) is not None:
        return change
    wording = {
        'inline': InlineRenderer().change(delta, base_matches=base_matches),
        'wrapped': WrappedRenderer().change(delta, base_matches=base_matches),
    }
    change = _Change(wording, size=size_of([*wording.values(), delta.content, delta.diff]) + 512)
    _WORDINGS.put(key, change, size=change.size)
    return change


def wording_of(delta: InstructionDeltaPart, base_matches: bool) -> dict[str, str]:
    """The change's text on each path, keyed `'inline'` and `'wrapped'`, rendered once per distinct record."""
    return _change_of(delta, base_matches).wording
