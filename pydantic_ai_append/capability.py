"""The `AppendInstructions` capability: the adapter between Pydantic AI's request hook and the window logic.

Once per model request, in `before_model_request`, it:

1. resolves its own blocks (and takes over the other sources' blocks it was told to route by id),
2. reads the window records already in history and decides, with [`plan_request`][pydantic_ai_append.window.plan_request],
   whether the request continues the open window or opens a new one,
3. stores the new records on the request that goes into history,
4. sends the window's prefix as the request's instructions and puts the rendered text of each change the
   window has made in place of its record.

Everything it decides is derived from history and the blocks' current values, so it keeps no state between
requests or runs: a fresh agent given serialized history continues the window from the records alone.
"""

from __future__ import annotations

import inspect
import reprlib
import warnings
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeAlias, cast, overload

import logfire_api
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, ProcessHistory, SelectModel
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    CapabilityInstructionSource,
    InstructionId,
    InstructionPart,
    ModelMessage,
    ModelRequest,
)
from pydantic_ai.models import ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.tools import AgentDepsT

from ._compat import in_prefix, instruction_id, native_policy
from .delivery import deliver, prepare_model, reword
from .records import InstructionBaselinePart, InstructionBlock, InstructionDigest, carrier, scan
from .rendering import SUPERSESSION_SENTENCE, Renderer
from .window import CurrentBlock, Delivery, WindowPlan, fold_window, plan_request, split_recorded_prefix

__all__ = ('AppendInstructions', 'BlockFunc', 'ChangePolicy', 'UnaddressableBlockWarning')

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

_POLICIES: tuple[ChangePolicy, ...] = ('append', 'rewrite')
_NAMESPACES = ('agent', 'capability', 'toolset')


class _StepClaims:
    """Which `AppendInstructions` handles each model request, so a second one on the same agent refuses.

    Two would nest one window inside another. The request is known by its `ModelRequestContext`, the one object
    every capability's hook of a request receives; it is unhashable, so it is held by `id()` with a weak
    reference that tells a live entry from a reused id.
    """

    def __init__(self) -> None:
        self._owners: dict[int, tuple[weakref.ref[ModelRequestContext], AbstractCapability[Any]]] = {}

    def claim(self, request_context: ModelRequestContext, owner: AbstractCapability[Any]) -> str | None:
        """Claim the request for `owner`; the id of the capability that has it already, if another one does."""
        entry = self._owners.get(id(request_context))
        if entry is not None and entry[0]() is request_context:
            return None if entry[1] is owner else entry[1].id
        self._owners = {key: value for key, value in self._owners.items() if value[0]() is not None}
        self._owners[id(request_context)] = (weakref.ref(request_context), owner)
        return None


_CLAIMS = _StepClaims()


class UnaddressableBlockWarning(UserWarning):
    """A block routed through append mode can't be addressed, so it is rewritten instead.

    Changes name the block they replace by its id; two blocks that share an id can't be told apart. Give each
    its own `name`, or silence this with `warnings.filterwarnings('ignore', category=UnaddressableBlockWarning)`.
    """


class WindowObserver(Protocol):
    """What is told that a request opens a new window, such as a [`WireVerifier`][pydantic_ai_append.guard.WireVerifier]."""

    def open_window(self) -> None:
        """The next request opens a new window and may move the prefix."""


@dataclass(frozen=True)
class _Block(Generic[AgentDepsT]):
    name: str
    function: BlockFunc[AgentDepsT]
    on_change: ChangePolicy
    takes_ctx: bool


@dataclass
class AppendInstructions(AbstractCapability[AgentDepsT]):
    r"""Instruction blocks that keep the prompt cache when they change.

    A block registered with `on_change='append'` keeps its first value in the prefix, as a
    `<context id="capability:<id>:<name>">` element. When its value changes, the prefix stays byte-identical
    and the change is appended to the conversation as a later element with the same id, which replaces the
    earlier one: the full new value, or a `<context-diff>` when that is shorter. Models that take
    mid-conversation system messages get it as one; the others get `<system>`-wrapped user text.

    ```python
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.test import TestModel

    from pydantic_ai_append import AppendInstructions

    todos = AppendInstructions[list[str]](id='todos')


    @todos.instructions(name='state')
    def state(ctx: RunContext[list[str]]) -> str | None:
        return '\n'.join(ctx.deps) or None


    agent = Agent(TestModel(), deps_type=list[str], capabilities=[todos])
    result = agent.run_sync('What is next?', deps=['write tests'])
    print(result.all_messages()[0].instructions)
    #> <context id="capability:todos:state">
    #> write tests
    #> </context>
    #>
    #> A later <context> element with the same id replaces the earlier one and stays in effect until replaced again.
    ```
    """

    append_ids: Sequence[str] = ()
    """Ids of other sources' blocks to route through append mode: an exact id such as `'agent:memory'` or
    `'capability:repo_context:agents_md'`, or a source such as `'capability:repo_context'` for all of its blocks."""

    _: KW_ONLY

    signing_key: str | bytes | None = field(default=None, repr=False)
    """A secret to sign records with, so records forged in history that came from a client are told apart from
    genuine ones. A signed record is bound to its conversation (`conversation_id`), so it can't be replayed into
    another. A record that fails the check opens a new window; it is never delivered."""

    verifier: WindowObserver | None = field(default=None, repr=False)
    """A [`WireVerifier`][pydantic_ai_append.guard.WireVerifier] (or anything with `open_window()`) to tell when a
    request opens a new window, so the prefix that request moves isn't reported as a divergence."""

    _blocks: dict[str, _Block[AgentDepsT]] = field(
        default_factory=dict[str, '_Block[AgentDepsT]'], init=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.id is None or not self.id:
            raise UserError("`AppendInstructions` needs an `id`, such as `AppendInstructions(id='todos')`.")
        if ':' in self.id:
            raise UserError(f'`AppendInstructions` id {self.id!r} cannot contain a colon; colons separate id segments.')
        if self.defer_loading:
            raise UserError(
                "`AppendInstructions` can't be loaded on demand (`defer_loading=True`): its blocks are the prefix of "
                'every request from the first.'
            )
        if isinstance(self.append_ids, str):
            raise UserError(f'`append_ids` takes a sequence of ids, not the string {self.append_ids!r}.')
        for routed in self.append_ids:
            if routed.split(':', 1)[0] not in _NAMESPACES:
                raise UserError(
                    f'`append_ids` entry {routed!r} is not an instruction id: ids start with one of '
                    f'{", ".join(repr(namespace) for namespace in _NAMESPACES)}, such as `capability:repo_context`.'
                )

    def get_ordering(self) -> CapabilityOrdering:
        """Run after history processing and model selection, so the window sees the history and model that go out.

        A history processor that ran after this capability would write the outgoing messages, which carry the
        rendered changes instead of their records, back into history.
        """
        return CapabilityOrdering(wrapped_by=(ProcessHistory, SelectModel))

    @property
    def _source_id(self) -> str:
        assert self.id is not None, 'checked in `__post_init__`'
        return self.id

    @property
    def _key(self) -> bytes | None:
        return self.signing_key.encode() if isinstance(self.signing_key, str) else self.signing_key

    # --- Registration

    @overload
    def instructions(
        self, function: BlockFunc[AgentDepsT], /, *, name: str | None = None, on_change: ChangePolicy = 'append'
    ) -> BlockFunc[AgentDepsT]: ...

    @overload
    def instructions(
        self, /, *, name: str | None = None, on_change: ChangePolicy = 'append'
    ) -> Callable[[BlockFunc[AgentDepsT]], BlockFunc[AgentDepsT]]: ...

    def instructions(
        self,
        function: BlockFunc[AgentDepsT] | None = None,
        /,
        *,
        name: str | None = None,
        on_change: ChangePolicy = 'append',
    ) -> BlockFunc[AgentDepsT] | Callable[[BlockFunc[AgentDepsT]], BlockFunc[AgentDepsT]]:
        """Register a function computing one instruction block.

        Args:
            function: The function, when used as a bare decorator.
            name: The block's name, unique within this capability; its id is `capability:<id>:<name>`.
                Defaults to the function's name.
            on_change: `'append'` to keep the first value in the prefix and append changes, or `'rewrite'` to
                rewrite the block in place (which opens a new window when it changes).
        """

        def register(function: BlockFunc[AgentDepsT]) -> BlockFunc[AgentDepsT]:
            block_name = name if name is not None else getattr(function, '__name__', '')
            if on_change not in _POLICIES:
                raise UserError(
                    f"Unknown `on_change` policy {on_change!r} for block {block_name!r}: use 'append' or 'rewrite'."
                )
            self._check_name(block_name)
            takes_ctx = _takes_run_context(function)
            self._blocks[block_name] = _Block(block_name, function, on_change, takes_ctx)
            return function

        return register(function) if function is not None else register

    def _check_name(self, name: str) -> None:
        if not name or not name.strip():
            raise UserError(f'Block names must be non-empty; got {name!r} on `AppendInstructions` {self.id!r}.')
        if ':' in name:
            raise UserError(f'Block name {name!r} cannot contain a colon; colons separate id segments.')
        if name in self._blocks:
            raise UserError(
                f'Two blocks share the id {self._block_id(name)!r}; give each block of `AppendInstructions` '
                f'{self.id!r} its own `name`.'
            )

    def _block_id(self, name: str) -> str:
        return f'capability:{self._source_id}:{name}'

    # --- The request hook

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send the window's prefix, record this request's changes, and deliver the window's changes."""
        messages = list(request_context.messages)
        state = fold_window(scan(messages, key=self._key, conversation_id=self._conversation(ctx)))
        if not messages or not isinstance(messages[-1], ModelRequest):
            # Resuming a turn the provider suspended: it is completed with exactly the history and instructions it
            # was started with, so nothing is resolved or recorded, only delivered again. Pydantic AI doesn't
            # prepare a resumed turn's messages for a single model, so the `<system>` wrapping of the fallback path
            # is applied here; a `FallbackModel`'s members prepare their own.
            renderer = prepare_model(request_context, tagged=state.baseline is not None)
            wrap = not renderer.inline and not isinstance(request_context.model, FallbackModel)
            request_context.messages = deliver(messages, state.deliveries, renderer, wrap=wrap)
            if state.baseline is not None:
                self._restore_prefix(request_context, state.baseline, renderer)
            return request_context

        params = request_context.model_request_parameters
        parts = list(params.instruction_parts or [])
        if (other := _CLAIMS.claim(request_context, self)) is not None:
            raise UserError(
                f'An agent can have only one `AppendInstructions` capability, but {other!r} and {self.id!r} both '
                'handle this request: register all blocks on one, and route other sources through its `append_ids`.'
            )
        ordered = await self._current_blocks(ctx, params, parts)
        plan = plan_request(state, [block for block, _ in ordered if block is not None])
        renderer = prepare_model(request_context, tagged=plan.tagged)

        with logfire_api.span(
            'append_instructions {capability_id}',
            capability_id=self.id,
            delivery_path=renderer.path,
            window_opened=plan.opened,
            changes=[delta.id for delta, _ in plan.new_changes],
        ):
            if plan.opened is not None and self.verifier is not None:
                self.verifier.open_window()
            new_deliveries = self._record(ctx, messages, plan)
            request_context.messages = deliver(messages, [*plan.deliveries, *new_deliveries], renderer)
            request_context.model_request_parameters = replace(
                params, instruction_parts=self._prefix(plan, ordered, renderer) or None
            )
        return request_context

    def _restore_prefix(
        self, request_context: ModelRequestContext, baseline: InstructionBaselinePart, renderer: Renderer
    ) -> None:
        """Send a resumed turn's instructions as the parts the suspended request was sent, not as one joined part."""
        params = request_context.model_request_parameters
        recorded = InstructionPart.join(params.instruction_parts or [])
        split = split_recorded_prefix(baseline, recorded or '', renderer.block, SUPERSESSION_SENTENCE)
        if split is not None:
            parts = [_restored_part(entry, text) for entry, text in split]
            request_context.model_request_parameters = replace(params, instruction_parts=parts)

    async def prepare_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Word the changes for the model about to serve this attempt, which may not be the step's model.

        Pydantic AI calls this once per attempt on releases that have it (the `ModelFallback` capability switches
        models between attempts); older releases don't, and the step's model serves every attempt.
        """
        if any(
            part.content == SUPERSESSION_SENTENCE
            for part in request_context.model_request_parameters.instruction_parts or []
        ):
            renderer = prepare_model(request_context, tagged=True)
            request_context.messages = reword(list(request_context.messages), inline=renderer.inline)
        return request_context

    def _conversation(self, ctx: RunContext[AgentDepsT]) -> str | None:
        # Only a signed record can be bound to its conversation: an unsigned one could be rewritten whole.
        return ctx.conversation_id if self._key is not None else None

    async def _current_blocks(
        self, ctx: RunContext[AgentDepsT], params: ModelRequestParameters, parts: list[InstructionPart]
    ) -> list[tuple[CurrentBlock | None, InstructionPart | None]]:
        """Every block of this request in prefix order, each with the part it came from (if any).

        A block in Pydantic AI's own append mode, or one it delivers through history rather than the prefix (a
        loaded deferred capability's), comes without a `CurrentBlock`: it is passed through and takes no part
        in this window.
        """
        counts = Counter(str(part.id) for part in parts if part.id is not None)
        literal: list[tuple[CurrentBlock, InstructionPart | None]] = []
        appending: list[tuple[CurrentBlock, InstructionPart | None]] = []
        rewriting: list[tuple[CurrentBlock, InstructionPart | None]] = []
        native: list[tuple[CurrentBlock | None, InstructionPart | None]] = []
        for part in parts:
            part_id = str(part.id) if part.id is not None else None
            if not in_prefix(params, part):
                native.append((None, part))
                continue
            if part_id is not None and self._routes(part_id):
                if counts[part_id] == 1:
                    # Pydantic AI strips instruction text, and keeps an append-mode part that is empty so its
                    # withdrawal can be recorded: empty means withdrawn.
                    appending.append((CurrentBlock(part_id, part.content or None, 'append'), part))
                    continue
                warnings.warn(
                    f'Instruction block {part_id!r} is routed through append mode, but {counts[part_id]} blocks share '
                    "that id, so a change can't say which one it replaces; rewriting it instead.",
                    UnaddressableBlockWarning,
                    stacklevel=2,
                )
            if native_policy(part) == 'append':
                native.append((None, part))
                continue
            target = rewriting if part.dynamic else literal
            target.append((CurrentBlock(part_id, part.content, 'rewrite' if part.dynamic else 'literal'), part))
        for block in self._blocks.values():
            content = await _call_block(block, ctx)
            block_id = self._block_id(block.name)
            if block.on_change == 'append':
                appending.append((CurrentBlock(block_id, content, 'append'), None))
            elif content is not None and (text := content.strip()):
                # Rewritten in the prefix like Pydantic AI's own dynamic instructions, so stripped like them, and
                # left out when empty.
                rewriting.append(
                    (CurrentBlock(block_id, text, 'rewrite'), _own_part(self._source_id, block.name, text))
                )
        return [*literal, *appending, *native, *rewriting]

    def _routes(self, part_id: str) -> bool:
        return any(part_id == routed or part_id.startswith(f'{routed}:') for routed in self.append_ids)

    def _record(self, ctx: RunContext[AgentDepsT], messages: list[ModelMessage], plan: WindowPlan) -> list[Delivery]:
        """Store the plan's new records on the request that goes into history; say where its changes sit."""
        if not plan.records:
            return []
        carriers = [carrier(record, key=self._key, conversation_id=self._conversation(ctx)) for record in plan.records]
        persisted = ctx.messages[-1] if ctx.messages else None
        if isinstance(persisted, ModelRequest):
            persisted.parts = [*persisted.parts, *carriers]
        last = cast(ModelRequest, messages[-1])
        if last is not persisted:
            messages[-1] = last = replace(last, parts=[*last.parts, *carriers])
        first = len(last.parts) - len(carriers)
        return [
            Delivery(len(messages) - 1, first + index, delta, base_matches)
            for index, (delta, base_matches) in enumerate(plan.new_changes)
        ]

    def _prefix(
        self,
        plan: WindowPlan,
        ordered: list[tuple[CurrentBlock | None, InstructionPart | None]],
        renderer: Renderer,
    ) -> list[InstructionPart]:
        """The instruction parts the request is sent with: literal, the window's blocks, the sentence, rewrite."""
        sources = {block.id: part for block, part in ordered if block and block.mode == 'append'}
        prefix: list[InstructionPart] = [part for block, part in ordered if block and block.mode == 'literal' and part]
        for block in plan.prefix:
            if block.content is not None:
                prefix.append(_prefix_part(renderer.block(block.id, block.content), sources.get(block.id), block.id))
        if plan.tagged:
            prefix.append(InstructionPart(content=SUPERSESSION_SENTENCE))
        prefix.extend(part for block, part in ordered if block is None and part)
        prefix.extend(part for block, part in ordered if block and block.mode == 'rewrite' and part)
        return prefix


def _takes_run_context(function: Callable[..., Any]) -> bool:
    """Whether `function` takes the `RunContext`: it has a positional parameter that must be passed."""
    return any(
        parameter.default is inspect.Parameter.empty
        and parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for parameter in inspect.signature(function).parameters.values()
    )


async def _call_block(block: _Block[Any], ctx: RunContext[Any]) -> str | None:
    function = cast(Callable[..., Any], block.function)
    value = function(ctx) if block.takes_ctx else function()
    if inspect.isawaitable(value):
        value = await value
    if value is not None and not isinstance(value, str):
        raise UserError(
            f'Instruction block {block.name!r} returned {reprlib.repr(value)} ({type(value).__name__}); a block returns a `str`, '
            'or `None` to withdraw it.'
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
