"""One model request of `AppendInstructions`: its window read, its changes recorded, its prefix and history sent.

[`handle_request`][pydantic_ai_append._request.handle_request] resolves the request's blocks (`_blocks`), reads the
window history holds and plans the request (`_window`), stores each change on the request that goes into history as a
carrier whose text is the element sent, and sends the window's prefix with a copy of history without what isn't sent
(the baselines' empty carriers, the changes of earlier windows) and with a note beside each lookalike (`_lookalikes`).
Everything is derived from history and the blocks' current values, so a fresh agent given serialized history goes on
from the records alone. Mistral's API refuses a request whose last message is a system message (`Expected last role
User or Tool (or Assistant with prefix True)`), so it gets each change `<system>`-wrapped as user text (sources in
`docs/delivery.md`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeGuard, cast

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, SystemPromptPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import AgentDepsT

from ._blocks import RequestSettings, Resolved, current_blocks
from ._compat import ask_for_framing_announcement, instruction_id, system_frame
from ._encoding import encode_baseline, encode_change
from ._history import carrier, is_carrier
from ._kept import conversation_window
from ._lookalikes import with_notes
from ._records import content_hash
from ._rendering import SUPERSESSION_SENTENCE, change_text, context_element
from ._shared.cache import ENTRY_BYTES, BoundedCache, size_of
from ._telemetry.observe import DROPPED_KEY, fallback_of
from ._telemetry.window import request_attributes
from ._window import Window, WindowPlan, plan_request

REFUSES_LAST_SYSTEM_MESSAGE = frozenset({'mistral'})
"""The providers (`Model.system`) whose API refuses a request whose last message is a system message, though Pydantic
AI's profile takes mid-conversation ones: they get each change `<system>`-wrapped."""


def is_inline(model: Model) -> bool:
    """Whether every model that may serve `model`'s requests takes a change as a mid-conversation system message."""
    return all(_takes_inline(member) and member.system not in REFUSES_LAST_SYSTEM_MESSAGE for member in _members(model))


def _members(model: Model) -> list[Model]:
    """The models that may serve `model`'s requests: a `FallbackModel`'s (through wrapper models), or `model`."""
    fallback = fallback_of(model)
    return [model] if fallback is None else [served for member in fallback.models for served in _members(member)]


def _takes_inline(model: Model) -> bool:
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
    ordered = await current_blocks(settings, ctx, params)
    # Read after the block functions ran, and nothing is awaited from here on: a block function may edit the history.
    messages = list(request_context.messages)
    window = conversation_window(messages, key=settings.key, conversation_id=ctx.conversation_id)
    current = [block for block, _ in ordered if block is not None]
    plan = plan_request(window, current)
    carriers = plan_records(window, plan, key=settings.key, conversation_id=ctx.conversation_id)
    reopening = None
    if plan.continues and settings.windows is not None:
        delivering = sum(len(part.content) for part in carriers)
        stating = sum(len(block.content or '') for block in current)
        reopening = settings.windows.reopening(window, messages, (delivering, stating), request_context)
    if reopening is not None:
        plan = plan_request(window, current, reopen=reopening.why)
        carriers = plan_records(window, plan, key=settings.key, conversation_id=ctx.conversation_id)
        cast('dict[str, int]', carriers[0].metadata)[DROPPED_KEY] = reopening.dropped  # for `cache_summary`
    inline = is_inline(request_context.model)
    if plan.prefix and not inline:
        ask_for_framing_announcement(request_context)
    attributes = request_attributes(settings.source_id, inline, messages, window, plan, carriers, reopening)
    # On the run's tracer, so the span follows the agent's instrumentation settings.
    with ctx.tracer.start_as_current_span('append_instructions', attributes=attributes):
        if plan.opened is not None and settings.verifier is not None:
            settings.verifier.open_window()
        sent = outgoing(messages, window, continues=plan.continues, notes=bool(plan.prefix))
        append(ctx, messages, sent, carriers)
        prefix = _prefix(plan, ordered)
        request_context.messages = _sent(sent, prefix, request_context.model)
        request_context.model_request_parameters = replace(params, instruction_parts=prefix)
    return request_context


def _sent(sent: list[ModelMessage], prefix: list[InstructionPart], model: Model) -> list[ModelMessage]:
    """The messages sent with the instruction parts `prefix`: the last request carries them too, and where a model
    that may serve them takes inline system messages but refuses one last, their system prompts are wrapped.
    """
    last = sent[-1]
    if prefix and isinstance(last, ModelRequest) and last.instructions != (joined := InstructionPart.join(prefix)):
        # Pydantic AI records the instructions sent on the request history keeps, not on the one sent, where a
        # model that reads them off the messages (`MCPSamplingModel`) would otherwise find the literal ones alone.
        sent[-1] = replace(last, instructions=joined)
    if any(_takes_inline(member) and member.system in REFUSES_LAST_SYSTEM_MESSAGE for member in _members(model)):
        # Pydantic AI would send it a change as a system message last: every member of a fallback model gets it wrapped.
        sent = [wrapped(message, leading=index == 0, marked=True) for index, message in enumerate(sent)]
    # An empty list, never `None`, which models read as unset, sending the instructions recorded on an earlier
    # request instead; some models of 2.58 do so for an empty list too, so the requests sent then carry none.
    return (
        sent if prefix else [replace(message, instructions=None) if _recorded(message) else message for message in sent]
    )


def wrapped(message: ModelMessage, *, leading: bool, marked: bool = False) -> ModelMessage:
    """`message` with each system prompt after the leading ones as `<system>`-wrapped user text; with `marked`, only the
    plugin's own, marked as its frames where Pydantic AI notes user text that imitates `<system>` (`system_frame`).
    """
    if not isinstance(message, ModelRequest):
        return message
    parts = list(message.parts)
    for index, part in enumerate(parts):
        leading = leading and isinstance(part, SystemPromptPart)
        if isinstance(part, SystemPromptPart) and not leading and (is_carrier(part) or not marked):
            parts[index] = system_frame(part.content, part.timestamp, marked=marked)
    return replace(message, parts=parts) if parts != list(message.parts) else message


_TEXTS = BoundedCache[tuple[str | None, str], str](
    max_entries=sys.maxsize, max_bytes=sys.maxsize, name='block texts', pooled=True
)
"""The value of each block the model was sent, by conversation and digest, for a change to be diffed against, where a
miss rebuilds it from the window's diffs: without it a run on a 1,000-turn conversation in progress takes 1.09x as
long (the benchmark's `caches`, p25-p75 1.03-1.12)."""


def _remember(conversation_id: str | None, text: str, digest: str | None = None) -> None:
    key = (conversation_id, digest or content_hash(text))
    _TEXTS.put(key, text, size=ENTRY_BYTES + size_of([text]))


def plan_records(
    window: Window, plan: WindowPlan, *, key: bytes | None, conversation_id: str | None
) -> list[SystemPromptPart]:
    """The carriers of the plan's records: its baseline and the changes it delivers at once, or each change."""
    if plan.baseline is None:
        return record_changes(window, plan.changes, key=key, conversation_id=conversation_id)
    for block in plan.baseline.blocks:
        if block.content is not None:
            _remember(conversation_id, block.content)
    stored = encode_baseline(plan.baseline, key=key, conversation_id=conversation_id)
    state = {block.id: block.content_hash for block in plan.baseline.blocks}
    opened = Window(baseline=plan.baseline, state=state, last_check=str(stored['check']))
    return [carrier('', stored), *record_changes(opened, plan.changes, key=key, conversation_id=conversation_id)]


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
    # The sentence follows the first change sent of a window whose prefix states no block, since nothing else says it.
    untold = window.unstated and window.start + len(window.orphans) == len(window.found)
    carriers: list[SystemPromptPart] = []
    for block_id, value in changes:
        base = state.get(block_id)
        previous = None
        if not full and base is not None and value is not None and block_id not in window.unsettled:
            previous = _TEXTS.get((conversation_id, base))
            if previous is None and (previous := window.value_of(block_id)) is not None:
                _remember(conversation_id, previous, base)
        text = change_text(block_id, previous, value)
        if untold:
            text, untold = f'{text}\n\n{SUPERSESSION_SENTENCE}', False
        state[block_id] = digest = content_hash(value) if value is not None else None
        if value is not None:
            _remember(conversation_id, value, digest)
        stored = encode_change(
            block_id, base=base, state=state, prev=prev, text=text, key=key, conversation_id=conversation_id
        )
        prev = stored['check']
        carriers.append(carrier(text, stored))
    return carriers


def append(
    ctx: RunContext[Any], messages: list[ModelMessage], sent: list[ModelMessage], carriers: list[SystemPromptPart]
) -> None:
    """Store `carriers` on the last request of the run's history, and send the changes among them there, in `sent`
    (what `outgoing` made of `messages`): a request-only message a hook added after it stays after them.
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
    """The messages sent: without the empty carriers, the earlier windows' changes and the orphan diffs, and with
    `notes` a note beside each lookalike; a message that needs no change is sent as the same object.
    """
    start = window.start if continues else len(window.found)
    edits: dict[int, set[int]] = {}
    # Every carrier before the window's changes, the empty ones and the orphans.
    for index in dict.fromkeys([*range(start), *(at for at in [*window.empty, *window.orphans] if at >= start)]):
        message_index, part_index, part, _ = window.found[index]
        if part is not None:
            edits.setdefault(message_index, set()).add(part_index)
    suspects = window.suspects if notes else ()
    if not edits and not suspects:
        return messages
    sent_messages = list(messages)
    for index in sorted({*edits, *suspects}):
        message = messages[index]
        assert isinstance(message, ModelRequest), 'carriers and lookalikes are found in requests'
        changed = edits.get(index, set())
        parts = [part for at, part in enumerate(message.parts) if at not in changed]
        noted = with_notes(parts) if notes and index in suspects else None
        if noted is not None or changed:
            sent_messages[index] = replace(message, parts=noted if noted is not None else parts)
    return sent_messages


def _prefix(plan: WindowPlan, ordered: Resolved) -> list[InstructionPart]:
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
    """A prefix block's part: not dynamic, in the default `'rewrite'` policy, so native append mode leaves it alone."""
    if source is not None:
        return InstructionPart(content=text, name=source.name, id=source.id)
    key = instruction_id(block_id)
    return InstructionPart(content=text, name=key.name, id=key)


def _recorded(message: ModelMessage) -> TypeGuard[ModelRequest]:
    return isinstance(message, ModelRequest) and message.instructions is not None
