"""A turn the provider suspended, resumed: sent as it was started, without running the blocks again.

Pydantic AI resumes a suspended turn with its history and recorded instructions, joined into one string, which is
split back into the parts the turn was sent with (`split_recorded_prefix`). Where a history processor has since
trimmed the window's changes, each value the model held when the run began is told again in full, and recorded, so
the next request keeps the prefix. Pydantic AI doesn't prepare a resumed turn's messages for a single model, so the
`<system>` wrapping of a model without inline system messages is applied here.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, TypeAlias

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import InstructionPart, ModelMessage, SystemPromptPart
from pydantic_ai.models import ModelRequestContext

from ._blocks import RequestSettings
from ._compat import ask_for_framing_announcement, instruction_id
from ._history import scan
from ._records import InstructionBaselinePart, InstructionBlock, InstructionDigest, content_hash
from ._rendering import SUPERSESSION_SENTENCE, context_element
from ._request import append, is_inline, outgoing, prefix_part, record_changes, wrapped
from ._telemetry.observe import fallback_of
from ._window import Window, fold

Resumed: TypeAlias = 'tuple[InstructionBaselinePart, dict[str, str | None]]'
"""A suspended turn's window baseline as the run's history had it, and each block's value the model held."""


def resumed_window(
    messages: Sequence[ModelMessage], *, key: bytes | None, conversation_id: str | None
) -> Resumed | None:
    """The window of the suspended turn `messages` ends with, if it is in one."""
    window = fold(scan(messages), key=key, conversation_id=conversation_id)
    if window.baseline is None:
        return None
    values: dict[str, str | None] = {}
    for block_id, digest in window.state.items():
        value = window.value_of(block_id) if digest is not None else None
        if digest is None or value is not None:
            values[block_id] = value
    return window.baseline, values


def resume_turn(
    settings: RequestSettings[Any], ctx: RunContext[Any], request_context: ModelRequestContext, resumed: Resumed | None
) -> ModelRequestContext:
    """Send a resumed turn as it was started, telling again what a processor trimmed since the run began."""
    messages = list(request_context.messages)
    window = fold(scan(messages), key=settings.key, conversation_id=ctx.conversation_id)
    baseline = window.baseline
    carriers: list[SystemPromptPart] = []
    if resumed is not None:
        told = window
        if baseline is None:
            # The processor took the baseline: the turn's recorded prefix is still the full window's, and the
            # changes left in history follow a baseline they can't be checked against.
            baseline = resumed[0]
            told = Window(baseline=baseline, state={block.id: block.content_hash for block in baseline.blocks})
        held = [InstructionBlock(block_id, value) for block_id, value in resumed[1].items()]
        stale = [(block.id, block.content) for block in held if told.state.get(block.id) != block.content_hash]
        carriers = record_changes(told, stale, key=settings.key, conversation_id=ctx.conversation_id, full=True)
    sent = outgoing(messages, window, continues=window.baseline is not None, notes=baseline is not None)
    append(ctx, messages, sent, carriers)
    if not is_inline(request_context.model):
        if baseline is not None:
            ask_for_framing_announcement(request_context)
        if fallback_of(request_context.model) is None:
            sent = [wrapped(message, leading=index == 0) for index, message in enumerate(sent)]
    request_context.messages = sent
    if baseline is not None:
        _restore_prefix(request_context, baseline, signed=settings.key is not None)
    return request_context


def _restore_prefix(request_context: ModelRequestContext, baseline: InstructionBaselinePart, *, signed: bool) -> None:
    """Send a resumed turn's instructions as the parts the suspended request was sent, not as one joined part.

    Raises:
        UserError: With signed records, if the baseline doesn't vouch for them: append-mode blocks and the sentence
            by their text, other blocks by digest, a native append-mode block as Pydantic AI rebuilt it.
    """
    params = request_context.model_request_parameters
    given = params.instruction_parts or []
    recorded = InstructionPart.join(given) or ''
    split = split_recorded_prefix(baseline, recorded)
    if split is not None:
        parts = [_restored_part(entry, text) for entry, text in split]
        request_context.model_request_parameters = replace(params, instruction_parts=parts)
        return
    if not signed:
        return
    # Pydantic AI rebuilt the parts from its own window when its blocks are in the prefix; the plugin's are checked.
    ours = [part for part in given if part.id is None or str(part.id) not in baseline.native]
    if len(ours) == len(given) or split_recorded_prefix(baseline, InstructionPart.join(ours) or '') is None:
        raise UserError(
            'The suspended turn this run resumes records instructions its signed records do not vouch for: '
            f'{reprlib.repr(recorded)}. The history was changed after the turn was recorded: resume the turn from the '
            'history your server recorded, or leave out the suspended response to start the turn over with the '
            'current instructions.'
        )


def _restored_part(entry: InstructionBlock | InstructionDigest | None, text: str) -> InstructionPart:
    if isinstance(entry, InstructionDigest):
        return InstructionPart(content=text, dynamic=entry.dynamic, id=instruction_id(entry.id) if entry.id else None)
    if isinstance(entry, InstructionBlock):
        return prefix_part(text, entry.id)
    return InstructionPart(content=text)


def split_recorded_prefix(
    baseline: InstructionBaselinePart, instructions: str
) -> list[tuple[InstructionBlock | InstructionDigest | None, str]] | None:
    """Split the joined instructions a request of `baseline`'s window was sent into the parts they were joined from:
    each digest's part found by its hash, each stated block and the sentence by their text, joined by blank lines.

    Returns:
        Each part's entry (`None` for the sentence) with its text, or `None` if the string isn't made of them.
    """
    stated = [
        entry for entry in baseline.instructions if not isinstance(entry, InstructionBlock) or entry.content is not None
    ]
    last = max((index for index, entry in enumerate(stated) if isinstance(entry, InstructionBlock)), default=None)
    expected: list[InstructionBlock | InstructionDigest | None] = list(stated)
    if last is not None:
        expected.insert(last + 1, None)
    return _split(expected, instructions, 0)


def _split(
    expected: Sequence[InstructionBlock | InstructionDigest | None], text: str, start: int
) -> list[tuple[InstructionBlock | InstructionDigest | None, str]] | None:
    if not expected:
        return [] if start == len(text) else None
    entry, rest = expected[0], expected[1:]
    if isinstance(entry, InstructionDigest):
        # The part ends at a blank line (or the end) where its text has the digest's hash.
        ends = [end for end in range(start, len(text) + 1) if end == len(text) or text.startswith('\n\n', end)]
        candidates = [end for end in ends if content_hash(text[start:end]) == entry.content_hash]
    else:
        piece = SUPERSESSION_SENTENCE if entry is None else context_element(entry.id, entry.content or '')
        candidates = [start + len(piece)] if text.startswith(piece, start) else []
    for end in candidates:
        if rest and not text.startswith('\n\n', end):
            continue
        if (split := _split(rest, text, end + 2 if rest else end)) is not None:
            return [(entry, text[start:end]), *split]
    return None
