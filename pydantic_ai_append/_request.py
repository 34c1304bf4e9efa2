"""One model request of `AppendInstructions`: its window read, its changes recorded, its prefix and history sent.

Once per model request, [`handle_request`][pydantic_ai_append._request.handle_request]:

1. resolves the request's blocks (`_blocks`), reads the window history holds (`_window.fold`), and decides whether
   the request continues it or opens a new one (`_window.plan_request`);
2. stores each change on the request that goes into history, as a carrier whose text is the element sent, so this
   request and every later one send it as stored;
3. sends the window's prefix as the request's instructions, and a copy of history without what isn't sent: the
   baselines' empty carriers and the changes of earlier windows. Changes of older record formats are rendered, and
   user or tool text that imitates the package's elements gets a note beside it (`_lookalikes`).

Everything is derived from history and the blocks' current values, so a fresh agent given serialized history goes
on from the records alone, and the work of a request follows what it adds: a past change costs a look at its
carrier, not a copy of its message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, cast

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.tools import AgentDepsT

from ._blocks import Blocks, current_blocks
from ._cache import BoundedCache, size_of
from ._compat import ask_for_framing_announcement, instruction_id
from ._encoding import encode_baseline, encode_change
from ._history import carrier
from ._kept import conversation_window
from ._lookalikes import with_notes
from ._records import content_hash
from ._rendering import SUPERSESSION_SENTENCE, change_text, context_element
from ._window import CurrentBlock, Window, WindowPlan, plan_request

__all__ = (
    'RequestSettings',
    'WindowObserver',
    'append',
    'handle_request',
    'is_inline',
    'outgoing',
    'prefix_part',
    'record_changes',
)


class WindowObserver(Protocol):
    """What is told that a request opens a new window, such as a [`WireVerifier`][pydantic_ai_append.guard.WireVerifier]."""

    def open_window(self) -> None:
        """The next request opens a new window and may move the prefix."""


@dataclass(frozen=True)
class RequestSettings(Generic[AgentDepsT]):
    """What a request needs to know of the capability handling it."""

    owner: object
    """The capability, to tell it from another one on the same agent."""

    blocks: Blocks[AgentDepsT]
    """The capability's blocks and routes."""

    key: bytes | None
    """The signing key of records, if any."""

    verifier: WindowObserver | None
    """What to tell when a request opens a new window."""


def is_inline(model: Model) -> bool:
    """Whether every model that may serve `model`'s requests takes mid-conversation system messages."""
    if isinstance(model, FallbackModel):
        return all(is_inline(member) for member in model.models)
    return bool(model.profile.get('supports_inline_system_prompts', False))


async def handle_request(
    settings: RequestSettings[AgentDepsT], ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
) -> ModelRequestContext:
    """Send the window's prefix, record this request's changes, and send history as the window has it."""
    owners = list(dict.fromkeys(cap.id for cap in ctx.capabilities.values() if isinstance(cap, type(settings.owner))))
    if len(owners) > 1:
        raise UserError(
            f'An agent can have only one `AppendInstructions` capability, but {owners[0]!r} and {owners[1]!r} both '
            'handle this request: register all blocks on one, and route other sources through its `append_ids`.'
        )
    params = request_context.model_request_parameters
    ordered = await current_blocks(settings.blocks, ctx, params)
    # Read after the block functions ran, and nothing is awaited from here on: a block function may edit the history.
    messages = list(request_context.messages)
    kept_by = (ctx.conversation_id, settings.key) if ctx.conversation_id else None
    window = conversation_window(messages, kept_by, key=settings.key, conversation_id=ctx.conversation_id)
    plan = plan_request(window, [block for block, _ in ordered if block is not None])
    inline = is_inline(request_context.model)
    if plan.tagged and not inline:
        ask_for_framing_announcement(request_context)
    attributes: dict[str, str | list[str]] = {
        'logfire.msg': f'append_instructions {settings.blocks.source_id}',
        'capability_id': settings.blocks.source_id,
        'delivery_path': 'inline' if inline else 'wrapped',
        'changes': [block_id for block_id, _ in plan.changes],
    }
    if plan.opened is not None:
        attributes['window_opened'] = plan.opened
    # On the run's tracer, so the span follows the agent's instrumentation settings.
    with ctx.tracer.start_as_current_span('append_instructions', attributes=attributes):
        if plan.opened is not None and settings.verifier is not None:
            settings.verifier.open_window()
        sent = outgoing(messages, window, continues=plan.continues, notes=plan.tagged)
        append(ctx, messages, sent, _record(settings, ctx, window, plan))
        prefix = _prefix(plan, ordered)
        # An empty list, never `None`: models read `None` as unset and fall back to the instructions history
        # recorded on an earlier request. Some models of 2.58 fall back on an empty list too, so the requests sent
        # carry no recorded instructions then.
        request_context.messages = sent if prefix else [_unrecorded(message) for message in sent]
        request_context.model_request_parameters = replace(params, instruction_parts=prefix)
    return request_context


_TEXTS = BoundedCache[tuple[str | None, str], str](max_entries=4096, max_bytes=32 * 1024 * 1024, name='block texts')
"""The value of each block the model was sent, by conversation and digest: a request that changes a block diffs
against the value the model holds, which history holds only as a chain of diffs since its last full element."""


def _record(
    settings: RequestSettings[Any], ctx: RunContext[Any], window: Window, plan: WindowPlan
) -> list[SystemPromptPart]:
    """The carriers of the plan's records: its baseline, or each change with the element it sends."""
    if plan.baseline is not None:
        for block in plan.baseline.blocks:
            if block.content is not None:
                _TEXTS.put(
                    (ctx.conversation_id, content_hash(block.content)), block.content, size=size_of([block.content])
                )
        stored = encode_baseline(plan.baseline, key=settings.key, conversation_id=ctx.conversation_id)
        return [carrier('', stored)]
    return record_changes(window, plan.changes, key=settings.key, conversation_id=ctx.conversation_id)


def record_changes(
    window: Window,
    changes: Sequence[tuple[str, str | None]],
    *,
    key: bytes | None,
    conversation_id: str | None,
    full: bool = False,
) -> list[SystemPromptPart]:
    """The carriers of `changes` to `window`'s blocks, each sent in full with `full`, or as a diff when shorter."""
    assert window.baseline is not None or full or not changes, 'only a resumed turn retells changes outside a window'
    state, prev = dict(window.state), window.last_check
    # The sentence follows the first change of a window whose prefix states no block, since nothing else says it.
    untold = window.baseline is not None and not any(block.content for block in window.baseline.blocks)
    untold = untold and window.start == len(window.found)
    carriers: list[SystemPromptPart] = []
    for block_id, value in changes:
        base = state.get(block_id)
        previous = None
        if not full and base is not None and value is not None and block_id not in window.unsettled:
            previous = _TEXTS.get((conversation_id, base))
            if (
                previous is None
                and (previous := window.value_of(block_id, key=key, conversation_id=conversation_id)) is not None
            ):
                _TEXTS.put((conversation_id, base), previous, size=size_of([previous]))
        text = change_text(block_id, previous, value)
        if untold:
            text, untold = f'{text}\n\n{SUPERSESSION_SENTENCE}', False
        state[block_id] = digest = content_hash(value) if value is not None else None
        if value is not None and digest is not None:
            _TEXTS.put((conversation_id, digest), value, size=size_of([value]))
        stored = encode_change(
            block_id,
            base=base,
            state=state,
            prev=prev,
            text=text,
            key=key,
            conversation_id=conversation_id,
        )
        prev = stored['check']
        carriers.append(carrier(text, stored))
    return carriers


def append(
    ctx: RunContext[Any], messages: list[ModelMessage], sent: list[ModelMessage], carriers: list[SystemPromptPart]
) -> None:
    """Store `carriers` on the last request of the run's history, and send the changes among them there.

    That request is found among `messages` by identity, so a request-only message a hook added after it (a
    reminder) stays after the changes, as it will be gone from the next request. `sent` is what `outgoing` made of
    `messages`.
    """
    if not carriers:
        return
    persisted = next((message for message in reversed(ctx.messages) if isinstance(message, ModelRequest)), None)
    index = next((at for at in range(len(messages) - 1, -1, -1) if messages[at] is persisted), None)
    if index is None:
        index = next(at for at in range(len(messages) - 1, -1, -1) if isinstance(messages[at], ModelRequest))
    shown = [part for part in carriers if part.content]
    before = sent[index]
    assert isinstance(before, ModelRequest), 'changes go on a request'
    if persisted is not None:
        persisted.parts = [*persisted.parts, *carriers]
        if before is persisted:
            if len(shown) < len(carriers):
                sent[index] = replace(persisted, parts=[*persisted.parts[: -len(carriers)], *shown])
            return
    sent[index] = replace(before, parts=[*before.parts, *shown])


def outgoing(messages: list[ModelMessage], window: Window, *, continues: bool, notes: bool) -> list[ModelMessage]:
    """The messages sent: without the empty carriers and the earlier windows' changes, with older formats' changes
    rendered, and with a note beside each lookalike when `notes`.

    Only the copy sent changes; each message that needs no change is sent as the same object.
    """
    start = window.start if continues else len(window.found)
    edits: dict[int, dict[int, SystemPromptPart | None]] = {}
    # Every carrier before the window's changes, and among them the older formats' (sent as rendered: their records'
    # checks don't cover a carrier's text) and the empty ones.
    for index in dict.fromkeys([*range(start), *window.rendered, *(at for at in window.empty if at >= start)]):
        message_index, part_index, part, _ = window.found[index]
        if part is not None:
            rendered = window.rendered.get(index) if index >= start else None
            sent = SystemPromptPart(rendered, timestamp=part.timestamp) if rendered is not None else None
            edits.setdefault(message_index, {})[part_index] = sent
    suspects = window.suspects if notes else ()
    if not edits and not suspects:
        return messages
    sent_messages = list(messages)
    for index in sorted({*edits, *suspects}):
        message = messages[index]
        assert isinstance(message, ModelRequest), 'carriers and lookalikes are found in requests'
        changed = edits.get(index, {})
        parts: list[ModelRequestPart] = []
        for at, part in enumerate(message.parts):
            kept = changed.get(at, part)
            if kept is not None:
                parts.append(kept)
        noted = with_notes(parts) if notes and index in suspects else None
        if noted is not None or changed:
            sent_messages[index] = replace(message, parts=noted if noted is not None else parts)
    return sent_messages


def _prefix(
    plan: WindowPlan, ordered: list[tuple[CurrentBlock | None, InstructionPart | None]]
) -> list[InstructionPart]:
    """The instruction parts sent: literal, the window's blocks and the sentence, native, rewrite-mode."""
    sources = {block.id: part for block, part in ordered if block and block.mode == 'append'}
    prefix = [part for block, part in ordered if block and block.mode == 'literal' and part]
    stated = [block for block in plan.prefix if block.content is not None]
    prefix.extend(
        prefix_part(context_element(block.id, cast('str', block.content)), block.id, sources.get(block.id))
        for block in stated
    )
    if stated:
        prefix.append(InstructionPart(content=SUPERSESSION_SENTENCE))
    prefix.extend(part for block, part in ordered if (block is None or block.mode == 'native') and part)
    prefix.extend(part for block, part in ordered if block and block.mode == 'rewrite' and part)
    return prefix


def prefix_part(text: str, block_id: str, source: InstructionPart | None = None) -> InstructionPart:
    """A prefix block's part: frozen for the window, so not dynamic, and in Pydantic AI's default `'rewrite'`
    policy so that a release with its own append mechanism leaves it alone.
    """
    if source is not None:
        return InstructionPart(content=text, name=source.name, id=source.id)
    key = instruction_id(block_id)
    return InstructionPart(content=text, name=key.name, id=key)


def _unrecorded(message: ModelMessage) -> ModelMessage:
    if isinstance(message, ModelRequest) and message.instructions is not None:
        return replace(message, instructions=None)
    return message
