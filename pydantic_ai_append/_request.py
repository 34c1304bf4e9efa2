"""One model request of `AppendInstructions`: its blocks resolved, its records stored, its prefix and changes sent.

Once per model request, [`handle_request`][pydantic_ai_append._request.handle_request]:

1. resolves the capability's own blocks, and takes over the other sources' blocks it was told to route by id,
2. reads the window records already in history and decides, with `plan_request`, whether the request continues
   the open window or opens a new one,
3. stores the new records on the request that goes into history,
4. sends the window's prefix as the request's instructions and puts the rendered text of each change the window
   has made in place of its record, with the element syntax in user prompts and tool returns escaped.

Everything it decides is derived from history and the blocks' current values, so a fresh agent given serialized
history continues the window from the records alone. What it keeps between requests (`_resume`: a conversation's
fold and the outgoing parts built for it) only spares reading again what a previous request read, and is used only
when the history still holds what it held then.
"""

from __future__ import annotations

import inspect
import reprlib
import threading
import warnings
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, Protocol, TypeAlias, cast

from pydantic.alias_generators import to_snake
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    CapabilityInstructionSource,
    InstructionId,
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.tools import AgentDepsT

from ._compat import in_prefix, instruction_id, native_policy
from ._delivery import deliver, prepare_model
from ._history import carrier
from ._records import InstructionBaselinePart, InstructionBlock, InstructionDeltaPart, InstructionDigest
from ._rendering import SUPERSESSION_SENTENCE, Renderer
from ._resume import Fold
from ._window import (
    CurrentBlock,
    Delivery,
    WindowPlan,
    WindowState,
    plan_request,
    split_recorded_prefix,
)

__all__ = (
    'BlockFunc',
    'ChangePolicy',
    'OwnBlock',
    'RequestSettings',
    'UnaddressableBlockWarning',
    'UnmatchedRouteWarning',
    'WindowObserver',
    'handle_request',
    'takes_run_context',
)

ChangePolicy: TypeAlias = Literal['append', 'rewrite']
"""What a change to a block does: `'append'` keeps the first value in the prefix and appends the change to the
conversation; `'rewrite'` rewrites the block in the prefix, which opens a new window."""

BlockFunc: TypeAlias = (
    Callable[[RunContext[AgentDepsT]], str | None]
    | Callable[[RunContext[AgentDepsT]], Awaitable[str | None]]
    | Callable[[], str | None]
    | Callable[[], Awaitable[str | None]]
)
"""A function computing a block's text: with or without `RunContext`, sync or async; `None` withdraws the block."""


class UnaddressableBlockWarning(UserWarning):
    """A block routed through append mode can't be addressed, so it is rewritten instead.

    Changes name the block they replace by its id; two blocks that share an id can't be told apart. Give each
    its own `name`, or silence this with `warnings.filterwarnings('ignore', category=UnaddressableBlockWarning)`.
    """


class UnmatchedRouteWarning(UserWarning):
    """An `append_ids` entry matches no instruction block of a request, and something can be done about it.

    Warned for an entry you named yourself: usually its source isn't on the agent or the id is misspelt. Warned
    for any entry, a preset's included, whose source capability is on the agent without an id, so the block it
    contributes has none and can't be routed: on `pydantic-ai-slim` 2.58, `RepoContext()` is such a capability,
    and `RepoContext(id='repo_context')` gives its block the id `HARNESS_BLOCKS` routes. A block that is only
    absent for now (a context file not written yet) needs nothing: it is held in the window, withdrawn, and
    delivered as a change when it appears. Other preset entries (the blocks of capabilities the agent doesn't
    have) are never warned about. Warned once per `AppendInstructions` and entry; silence it with
    `warnings.filterwarnings('ignore', category=UnmatchedRouteWarning)`.
    """

    @staticmethod
    def about(routed: str, anonymous: AbstractCapability[Any] | None = None) -> str:
        """The warning's message for the entry `routed`, whose source is `anonymous`, present without an id."""
        if anonymous is not None:
            name = type(anonymous).__name__
            return (
                f"`append_ids` entry {routed!r} matches no instruction block of this request: the agent's `{name}` "
                'has no id, so neither has the block it contributes, and that block is rewritten in the prefix '
                f'instead. Build it as `{name}(id={_source_of(routed)!r})` to route it.'
            )
        return (
            f'`append_ids` entry {routed!r} matches no instruction block of this request: check that its source is '
            'on the agent and gives its block that id, or remove the entry. If the block only appears later, this '
            'is expected: it is delivered as a change when it does.'
        )


class WindowObserver(Protocol):
    """What is told that a request opens a new window, such as a [`WireVerifier`][pydantic_ai_append.guard.WireVerifier]."""

    def open_window(self) -> None:
        """The next request opens a new window and may move the prefix."""


@dataclass(frozen=True)
class OwnBlock(Generic[AgentDepsT]):
    """A block registered on the capability with its decorator."""

    name: str
    """The block's name; its id is `capability:<capability id>:<name>`."""

    function: BlockFunc[AgentDepsT]
    """The function computing its text."""

    on_change: ChangePolicy
    """What a change to it does."""

    takes_ctx: bool
    """Whether `function` takes the `RunContext`."""


@dataclass(frozen=True)
class RequestSettings(Generic[AgentDepsT]):
    """What a request needs to know of the capability handling it."""

    owner: object
    """The capability, to tell it from another one on the same agent."""

    source_id: str
    """The capability's id, the middle segment of its blocks' ids."""

    blocks: Mapping[str, OwnBlock[AgentDepsT]]
    """The capability's own blocks, by name, in registration order."""

    append_ids: Sequence[str]
    """Ids of other sources' blocks to route through append mode, exact or by source."""

    named: frozenset[str]
    """The entries of `append_ids` the user named, rather than took from a preset: warned about when they match no
    block, and always held in the window while absent (a preset's only while the capability it names is on the
    agent)."""

    warned: set[str]
    """The entries already warned about, shared by every request of the capability, so each is warned once."""

    key: bytes | None
    """The signing key of records, if any."""

    verifier: WindowObserver | None
    """What to tell when a request opens a new window."""

    resumed: WindowState | None = None
    """The window of the turn this run resumes, folded from the history the run started with, before a history
    processor could trim it; `None` unless the run resumes a suspended turn in a window."""

    def block_id(self, name: str) -> str:
        """The id of the own block named `name`."""
        return f'capability:{self.source_id}:{name}'

    def routes(self, part_id: str) -> bool:
        """Whether another source's block with this id is routed through append mode."""
        return any(_matches(part_id, routed) for routed in self.append_ids)


def _matches(part_id: str, routed: str) -> bool:
    """Whether the block `part_id` is what the `append_ids` entry `routed` names: that id, or a block of that source."""
    return part_id == routed or part_id.startswith(f'{routed}:')


class _StepClaims:
    """Which `AppendInstructions` handles each model request, so a second one on the same agent refuses.

    Two would nest one window inside another. The request is known by its `ModelRequestContext`, the one object
    every capability's hook of a request receives; it is unhashable, so it is held by `id()` with a weak
    reference that tells a live entry from a reused id. Requests of every conversation, in every thread, claim
    here, so claims take a lock: pruning iterates the entries, which another thread's claim would change midway.
    The entries of requests that are gone are dropped whenever the entries have doubled since the last time, which
    keeps that cost constant per claim however many requests are live.
    """

    def __init__(self) -> None:
        self._owners: dict[int, tuple[weakref.ref[ModelRequestContext], object, str]] = {}
        self._lock = threading.Lock()
        self._live = 0

    def __len__(self) -> int:
        return len(self._owners)

    def claim(self, request_context: ModelRequestContext, owner: object, owner_id: str) -> str | None:
        """Claim the request for `owner`; the id of the capability that has it already, if another one does."""
        with self._lock:
            entry = self._owners.get(id(request_context))
            if entry is not None and entry[0]() is request_context:
                return None if entry[1] is owner else entry[2]
            # A dead entry under a reused id is replaced here, so pruning can wait.
            self._owners[id(request_context)] = (weakref.ref(request_context), owner, owner_id)
            if len(self._owners) > 2 * self._live + _CLAIMS_SLACK:
                self._owners = {key: value for key, value in self._owners.items() if value[0]() is not None}
                self._live = len(self._owners)
            return None


_CLAIMS_SLACK = 64
"""How many entries `_StepClaims` takes beyond twice the live ones it last counted before it counts again."""


STEP_CLAIMS = _StepClaims()
"""Which capability handles each live model request, in this process."""


async def handle_request(
    settings: RequestSettings[AgentDepsT], ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
) -> ModelRequestContext:
    """Send the window's prefix, record this request's changes, and deliver the window's changes."""
    messages = list(request_context.messages)
    conversation_id = _conversation(settings, ctx)
    if not messages or not isinstance(messages[-1], ModelRequest):
        state = Fold(messages, key=settings.key, conversation_id=conversation_id, scope=ctx.conversation_id).state
        # Resuming a turn the provider suspended: it is completed with exactly the history and instructions it
        # was started with, so nothing is resolved or recorded, only delivered again. Pydantic AI doesn't
        # prepare a resumed turn's messages for a single model, so the `<system>` wrapping of the wrapped path
        # is applied here; a `FallbackModel`'s members prepare their own.
        deliveries = list(state.deliveries)
        baseline = state.baseline
        if (resumed := settings.resumed) is not None and resumed.baseline is not None:
            if baseline is None:
                # The processor took the baseline: the turn's recorded prefix is still the full window's, and the
                # changes left in history follow a baseline they can't be checked against.
                baseline, deliveries = resumed.baseline, []
            deliveries.extend(_retell(messages, resumed, baseline, deliveries))
        renderer = prepare_model(request_context, tagged=baseline is not None)
        wrap = not renderer.inline and not isinstance(request_context.model, FallbackModel)
        request_context.messages = deliver(
            messages, deliveries, renderer, wrap=wrap, escape_others=bool(baseline and baseline.blocks)
        )
        if baseline is not None:
            _restore_prefix(request_context, baseline, renderer, signed=settings.key is not None)
        return request_context

    params = request_context.model_request_parameters
    parts = list(params.instruction_parts or [])
    if (other := STEP_CLAIMS.claim(request_context, settings.owner, settings.source_id)) is not None:
        raise UserError(
            f'An agent can have only one `AppendInstructions` capability, but {other!r} and {settings.source_id!r} '
            'both handle this request: register all blocks on one, and route other sources through its `append_ids`.'
        )
    ordered = await _current_blocks(settings, ctx, params, parts)
    # Folded after the block functions ran, and nothing is awaited from here until the fold is kept: a block
    # function, or another task while one awaits, may edit the history in place, and what is kept for the next
    # request must be what this one read and sent.
    fold = Fold(messages, key=settings.key, conversation_id=conversation_id, scope=ctx.conversation_id)
    plan = plan_request(fold.state, [block for block, _ in ordered if block is not None])
    renderer = prepare_model(request_context, tagged=plan.tagged)

    # On the run's tracer, so the span follows the agent's instrumentation settings.
    with ctx.tracer.start_as_current_span('append_instructions', attributes=_span_attributes(settings, renderer, plan)):
        if plan.opened is not None and settings.verifier is not None:
            settings.verifier.open_window()
        new_deliveries = _record(settings, ctx, messages, plan, conversation_id)
        deliveries = [*plan.deliveries, *new_deliveries] if new_deliveries else plan.deliveries
        sent_key = (renderer.path, False, plan.tagged)
        reuse = fold.reusable(deliveries, sent_key)
        built: dict[int, tuple[ModelRequestPart, ...]] = {}
        outgoing = deliver(
            messages,
            deliveries,
            renderer,
            escape_others=plan.tagged,
            reused=reuse.sent,
            templated=reuse.templated,
            start=reuse.start,
            built=built,
        )
        fold.remember(deliveries, sent_key, built)
        prefix = _prefix(plan, ordered, renderer)
        # An empty list, never `None`: models read `None` as unset and fall back to the instructions history
        # recorded on an earlier request, which would tell the model a value this request no longer has. Some
        # models of 2.58 fall back on an empty list too, so the requests sent carry no recorded instructions then.
        request_context.messages = outgoing if prefix else _without_recorded_instructions(outgoing)
        request_context.model_request_parameters = replace(params, instruction_parts=prefix)
    return request_context


def _retell(
    messages: list[ModelMessage],
    resumed: WindowState,
    baseline: InstructionBaselinePart,
    deliveries: Sequence[Delivery],
) -> list[Delivery]:
    """Changes that bring each block of a resumed turn back to the value the model was last told.

    A history processor may trim the changes a resumed turn's window made, and then the recorded prefix, with
    what is left of them, states an older value than the model received when the turn began. Each block whose
    value differs is told again in full, after the last request, where the turn's own changes sit.
    """
    told = {block.id: block.content for block in baseline.blocks}
    for delivery in deliveries:
        told[delivery.delta.id] = delivery.delta.content
    stale = [block_id for block_id, content in resumed.received.items() if told.get(block_id) != content]
    index = max((index for index, message in enumerate(messages) if isinstance(message, ModelRequest)), default=-1)
    if not stale or index < 0:
        return []
    changes = [
        InstructionDeltaPart(id=block_id, content=resumed.received[block_id], base_hash=None) for block_id in stale
    ]
    last = cast('ModelRequest', messages[index])
    # Only on the copy that is sent: history keeps the records it had.
    messages[index] = replace(last, parts=[*last.parts, *(carrier(change) for change in changes)])
    return [
        Delivery(index, len(last.parts) + offset, change, base_matches=False) for offset, change in enumerate(changes)
    ]


def _span_attributes(
    settings: RequestSettings[Any], renderer: Renderer, plan: WindowPlan
) -> dict[str, str | list[str]]:
    """What the request's span says: which capability, which delivery path, why a window opened, which changes."""
    attributes: dict[str, str | list[str]] = {
        'logfire.msg': f'append_instructions {settings.source_id}',
        'capability_id': settings.source_id,
        'delivery_path': renderer.path,
        'changes': [delta.id for delta, _ in plan.new_changes],
    }
    if plan.opened is not None:
        attributes['window_opened'] = plan.opened
    return attributes


def _conversation(settings: RequestSettings[Any], ctx: RunContext[Any]) -> str | None:
    # Only a signed record can be bound to its conversation: an unsigned one could be rewritten whole.
    return ctx.conversation_id if settings.key is not None else None


def _restore_prefix(
    request_context: ModelRequestContext, baseline: InstructionBaselinePart, renderer: Renderer, *, signed: bool
) -> None:
    """Send a resumed turn's instructions as the parts the suspended request was sent, not as one joined part.

    The instructions come from the history, as a client may have written them. With signed records, they are sent
    only if the window's baseline vouches for them: each append-mode block and the sentence by its exact text,
    every other block by its digest, and a block Pydantic AI's own append mode owns (2.59 and later) as the part
    Pydantic AI rebuilt from its own records.

    Raises:
        UserError: With signed records, if the instructions aren't made of what the baseline records.
    """
    params = request_context.model_request_parameters
    given = params.instruction_parts or []
    recorded = InstructionPart.join(given)
    split = split_recorded_prefix(baseline, recorded or '', renderer.block, SUPERSESSION_SENTENCE)
    if split is not None:
        parts = [_restored_part(entry, text) for entry, text in split]
        request_context.model_request_parameters = replace(params, instruction_parts=parts)
        return
    if not signed:
        return
    # Pydantic AI rebuilt the parts from its own window when its blocks are in the prefix; the plugin's are checked.
    ours = [part for part in given if part.id is None or str(part.id) not in baseline.native]
    joined = InstructionPart.join(ours) or ''
    if (
        len(ours) == len(given)
        or split_recorded_prefix(baseline, joined, renderer.block, SUPERSESSION_SENTENCE) is None
    ):
        raise UserError(_unvouched_message(recorded or ''))


def _unvouched_message(recorded: str) -> str:
    return (
        f'The suspended turn this run resumes records instructions its signed records do not vouch for: '
        f'{reprlib.repr(recorded)}. The history was changed after the turn was recorded: resume the turn from the '
        'history your server recorded, or leave out the suspended response to start the turn over with the current '
        'instructions.'
    )


async def _current_blocks(
    settings: RequestSettings[AgentDepsT],
    ctx: RunContext[AgentDepsT],
    params: ModelRequestParameters,
    parts: list[InstructionPart],
) -> list[tuple[CurrentBlock | None, InstructionPart | None]]:
    """Every block of this request in prefix order, each with the part it came from (if any).

    A block in Pydantic AI's own append mode, or one it delivers through history rather than the prefix (a
    loaded deferred capability's), comes without a `CurrentBlock`: it is passed through and takes no part
    in this window.
    """
    counts = _shared_ids(settings, parts)
    literal: list[tuple[CurrentBlock, InstructionPart | None]] = []
    appending: list[tuple[CurrentBlock, InstructionPart | None]] = []
    rewriting: list[tuple[CurrentBlock, InstructionPart | None]] = []
    native: list[tuple[CurrentBlock | None, InstructionPart | None]] = []
    for part in parts:
        part_id = str(part.id) if part.id is not None else None
        if not in_prefix(params, part):
            native.append((None, part))
            continue
        if part_id is not None and settings.routes(part_id):
            if counts[part_id] == 1:
                # Pydantic AI strips instruction text, and keeps an append-mode part that is empty so its
                # withdrawal can be recorded: empty means withdrawn.
                appending.append((CurrentBlock(part_id, part.content or None, 'append'), part))
                continue
            # Left as Pydantic AI has them. Warned only if the user named them: blocks a preset reaches that share
            # an id (`LogfireMCP`'s two on 2.58) are the framework's to fix, not the user's.
            if any(_matches(part_id, named) for named in settings.named):
                warnings.warn(
                    f'Instruction block {part_id!r} is routed through append mode, but {counts[part_id]} blocks share '
                    "that id, so a change can't say which one it replaces; rewriting it instead.",
                    UnaddressableBlockWarning,
                    stacklevel=2,
                )
        if native_policy(part) == 'append':
            native.append((CurrentBlock(part_id, part.content, 'native') if part_id is not None else None, part))
            continue
        target = rewriting if part.dynamic else literal
        target.append((CurrentBlock(part_id, part.content, 'rewrite' if part.dynamic else 'literal'), part))
    appending.extend((block, None) for block in _absent_routed_blocks(settings, ctx.capabilities, parts))
    for block in settings.blocks.values():
        content = await _call_block(block, ctx)
        block_id = settings.block_id(block.name)
        if block.on_change == 'append':
            appending.append((CurrentBlock(block_id, content, 'append'), None))
        elif content is not None and (text := content.strip()):
            # Rewritten in the prefix like Pydantic AI's own dynamic instructions, so stripped like them, and
            # left out when empty.
            rewriting.append((CurrentBlock(block_id, text, 'rewrite'), _own_part(settings.source_id, block.name, text)))
    return [*literal, *appending, *native, *rewriting]


def _shared_ids(settings: RequestSettings[Any], parts: Sequence[InstructionPart]) -> Mapping[str, int]:
    """How many of `parts` have each id; counted only when something is routed, as only routed ids are looked up."""
    if not settings.append_ids:
        return {}
    return Counter(str(part.id) for part in parts if part.id is not None)


def _absent_routed_blocks(
    settings: RequestSettings[Any],
    capabilities: Mapping[str, AbstractCapability[Any]],
    parts: Sequence[InstructionPart],
) -> list[CurrentBlock]:
    """The entries of `append_ids` that no block of this request matches and that are held, as withdrawn blocks.

    Held in the window, withdrawn, so that a block appearing later is delivered as a change rather than moving the
    prefix, as a block of the plugin's own that returns `None` is. An entry the user named is held; a preset's
    entry is held only while the capability it names is on the agent (`capabilities` is the run's, by id), since
    a preset names many blocks a given agent never has. Unmatched entries are warned about once per capability,
    when the request has instructions at all: one the user named, and any whose source is on the agent with no id.
    """
    if not settings.append_ids:
        return []
    ids = [str(part.id) for part in parts if part.id is not None]
    ids.extend(settings.block_id(name) for name in settings.blocks)
    absent: list[CurrentBlock] = []
    for routed in settings.append_ids:
        if any(_matches(part_id, routed) for part_id in ids):
            continue
        named = routed in settings.named
        if (parts or settings.blocks) and routed not in settings.warned:
            anonymous = _anonymous_source(routed, capabilities)
            if named or anonymous is not None:
                settings.warned.add(routed)
                warnings.warn(UnmatchedRouteWarning.about(routed, anonymous), UnmatchedRouteWarning, stacklevel=4)
        if named or _source_of(routed) in capabilities:
            absent.append(CurrentBlock(routed, None, 'append'))
    return absent


def _source_of(routed: str) -> str | None:
    """The capability id an entry such as `'capability:repo_context'` names, if it names a capability's block."""
    namespace, _, rest = routed.partition(':')
    return (rest.partition(':')[0] or None) if namespace == 'capability' else None


def _anonymous_source(
    routed: str, capabilities: Mapping[str, AbstractCapability[Any]]
) -> AbstractCapability[Any] | None:
    """The capability of the run that the entry `routed` would name if it had an id, present without one.

    A capability with no id is known by its class: `RepoContext` would be `repo_context`, as the framework's
    own ids are the snake case of their class names.
    """
    source = _source_of(routed)
    return next(
        (
            capability
            for capability in capabilities.values()
            if capability.id is None and to_snake(type(capability).__name__) == source
        ),
        None,
    )


def _record(
    settings: RequestSettings[Any],
    ctx: RunContext[Any],
    messages: list[ModelMessage],
    plan: WindowPlan,
    conversation_id: str | None,
) -> list[Delivery]:
    """Store the plan's new records on the request that goes into history; say where its changes sit."""
    if not plan.records:
        return []
    carriers = [carrier(record, key=settings.key, conversation_id=conversation_id) for record in plan.records]
    persisted = ctx.messages[-1] if ctx.messages else None
    if isinstance(persisted, ModelRequest):
        persisted.parts = [*persisted.parts, *carriers]
    last = cast('ModelRequest', messages[-1])
    if last is not persisted:
        messages[-1] = last = replace(last, parts=[*last.parts, *carriers])
    first = len(last.parts) - len(carriers)
    return [
        Delivery(len(messages) - 1, first + index, delta, base_matches)
        for index, (delta, base_matches) in enumerate(plan.new_changes)
    ]


def _prefix(
    plan: WindowPlan,
    ordered: list[tuple[CurrentBlock | None, InstructionPart | None]],
    renderer: Renderer,
) -> list[InstructionPart]:
    """The instruction parts the request is sent with: literal, the window's blocks, the sentence, native, rewrite."""
    sources = {block.id: part for block, part in ordered if block and block.mode == 'append'}
    prefix: list[InstructionPart] = [part for block, part in ordered if block and block.mode == 'literal' and part]
    for block in plan.prefix:
        if block.content is not None:
            prefix.append(_prefix_part(renderer.block(block.id, block.content), sources.get(block.id), block.id))
    if plan.tagged:
        prefix.append(InstructionPart(content=SUPERSESSION_SENTENCE))
    prefix.extend(part for block, part in ordered if (block is None or block.mode == 'native') and part)
    prefix.extend(part for block, part in ordered if block and block.mode == 'rewrite' and part)
    return prefix


def _without_recorded_instructions(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Copies of `messages` whose requests record no instructions; the ones history keeps are left as they are."""
    return [
        replace(message, instructions=None)
        if isinstance(message, ModelRequest) and message.instructions is not None
        else message
        for message in messages
    ]


def takes_run_context(function: Callable[..., Any]) -> bool:
    """Whether `function` takes the `RunContext`: it has a positional parameter that must be passed."""
    return any(
        parameter.default is inspect.Parameter.empty
        and parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for parameter in inspect.signature(function).parameters.values()
    )


async def _call_block(block: OwnBlock[Any], ctx: RunContext[Any]) -> str | None:
    function = cast('Callable[..., Any]', block.function)
    value = function(ctx) if block.takes_ctx else function()
    if value is None or type(value) is str:
        return value
    if inspect.isawaitable(value):
        value = await value
    if value is not None and not isinstance(value, str):
        raise UserError(
            f'Instruction block {block.name!r} returned {reprlib.repr(value)} ({type(value).__name__}); a block '
            'returns a `str`, or `None` to withdraw it.'
        )
    return value


def _restored_part(entry: InstructionBlock | InstructionDigest | None, text: str) -> InstructionPart:
    if isinstance(entry, InstructionDigest):
        return InstructionPart(content=text, dynamic=entry.dynamic, id=instruction_id(entry.id) if entry.id else None)
    if isinstance(entry, InstructionBlock):
        return _prefix_part(text, None, entry.id)
    return InstructionPart(content=text)


def _own_part(capability_id: str, name: str, content: str) -> InstructionPart:
    return InstructionPart(
        content=content,
        dynamic=True,
        name=name,
        id=InstructionId(CapabilityInstructionSource(capability_id), name=name),
    )


def _prefix_part(text: str, source: InstructionPart | None, block_id: str) -> InstructionPart:
    """A prefix block's part: frozen for the window, so not dynamic, and in Pydantic AI's default `'rewrite'`
    policy so that a release with its own append mechanism leaves it alone.
    """
    if source is not None:
        return InstructionPart(content=text, name=source.name, id=source.id)
    key = instruction_id(block_id)
    return InstructionPart(content=text, name=key.name, id=key)
