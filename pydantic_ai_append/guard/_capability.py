"""The guard on an agent: each request checked against what the model consumed, before it is sent.

[`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard] applies the pure model
([`decide_rewrite`][pydantic_ai_append.guard.decide_rewrite]) to every real request. It runs after history processing (so it
sees what processors and compaction did) and before [`AppendInstructions`][pydantic_ai_append.AppendInstructions]
(so it sees records, not their rendered text, the same on every request). What the model consumed is taken
when a run starts (the history it is given, through the latest reply) and after each response (the history
as sent, with the reply).

In `observe` mode it changes nothing: each condition is a warning of its own class and a span. In `enforce`
mode a rewrite that is not a `patch` is refused: the request goes out with the consumed prefix as it was and
the new messages after it, and the run's history is put back the same way. With `on_defer='compact'`, a rewrite
that replaces the front of history (dropped turns, or a summary in their place) is applied as whole-pair
compaction instead. A tool that history still calls
stays declared, with the definition it was last sent with, even after it leaves the agent's tools.

Changes that the guard can only see once the request is final (the instructions as sent) are checked after
the response and warned about in both modes; [`WireVerifier`][pydantic_ai_append.guard.WireVerifier] checks the
bytes on the wire and can refuse them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict
from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    CapabilityOrdering,
    ProcessHistory,
    SelectModel,
    WrapRunHandler,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelRequest, ModelResponse, repair_messages
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from .._cache import BoundedCache
from .._capability import AppendInstructions
from .._request import WindowObserver
from .._spec import refuse_options
from .._transport import conversation_scope
from ._bytes import message_bytes
from ._compaction import compact, elided_count
from ._consumed import ConsumedHistory
from ._decision import RewriteDecision, decide_rewrite
from ._errors import (
    ConsumedPrefixChangedWarning,
    InstructionsChangedWarning,
    OrphanedToolPairWarning,
    PrefixGuardWarning,
    RetiredToolReferencedWarning,
    ToolListChangedWarning,
)
from ._retired import RetiredTools

__all__ = ('DeferPolicy', 'GuardMode', 'PrefixGuard', 'PrefixGuardSpecOptions')

GuardMode: TypeAlias = Literal['observe', 'enforce']
"""`observe` warns and records a span; `enforce` also refuses every rewrite that isn't a `patch`."""

_MODES: tuple[GuardMode, ...] = ('observe', 'enforce')

DeferPolicy: TypeAlias = Literal['keep', 'compact']
"""What enforce mode does with a rewrite that trims or summarizes consumed messages: keep the old prefix, or compact."""

_DEFER_POLICIES: tuple[DeferPolicy, ...] = ('keep', 'compact')

_CONVERSATIONS_KEPT = 4096
"""How many conversations' tool memories a guard keeps; a conversation forgotten and taken up again declares only
the agent's current tools, so a retired tool its history calls is warned about and sent as it is."""


@dataclass
class _ToolMemory:
    """The tools one conversation has declared, kept across its runs."""

    seen: set[str] = field(default_factory=set[str])
    """The name of every tool (function or output) the conversation declared: only those can be retired; a name
    the model made up never was."""

    definitions: dict[str, ToolDefinition] = field(default_factory=dict[str, ToolDefinition])
    """Every tool definition the conversation declared, by name: how a retired tool that its history still calls is
    declared again."""


class PrefixGuardSpecOptions(BaseModel):
    """The options of a `PrefixGuard` entry in an agent spec, as the spec's JSON schema states them."""

    model_config = ConfigDict(extra='forbid')

    mode: GuardMode = 'enforce'
    """As `PrefixGuard.mode`."""

    on_defer: DeferPolicy = 'keep'
    """As `PrefixGuard.on_defer`."""


@dataclass
class PrefixGuard(AbstractCapability[AgentDepsT]):
    """Check every request against what the model consumed: no changed prefix, no tool call without its result.

    ```python
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from pydantic_ai_append.guard import PrefixGuard

    agent = Agent(TestModel(), capabilities=[PrefixGuard(mode='enforce')])
    print(agent.run_sync('Hi').output)
    #> success (no tool calls)
    ```
    """

    mode: GuardMode = 'enforce'
    """`'observe'` to warn and record spans only, `'enforce'` to refuse rewrites as well."""

    on_defer: DeferPolicy = 'keep'
    """In enforce mode, what becomes of a rewrite that replaces consumed messages at the front (as a history
    processor that trims old turns does, or one that summarizes them): `'keep'` sends the consumed prefix as it
    was, `'compact'` applies the rewrite as whole-pair compaction, which opens a new window. The cut is moved to
    where no tool pair is split (later for a trim, earlier for a summary, so nothing the summary leaves out is
    lost), a marker stands at the frontier, and a summary is kept after it."""

    _: KW_ONLY

    verifier: WindowObserver | None = field(default=None, repr=False)
    """A [`WireVerifier`][pydantic_ai_append.guard.WireVerifier] to tell when a request opens a new window by
    compaction, so the prefix that request moves isn't reported as a divergence."""

    _consumed: ConsumedHistory | None = field(default=None, init=False, repr=False)
    """What the model has consumed in this run so far."""

    _tools: dict[str, ToolDefinition] | None = field(default=None, init=False, repr=False)
    """The tools the previous request of this run declared, by name."""

    _instructions: str | None = field(default=None, init=False, repr=False)
    """The instructions the previous request was sent with, as sent."""

    _opened: bool = field(default=False, init=False, repr=False)
    """Whether the current request opens a new window (it starts with a new compaction marker)."""

    _sent: list[ModelMessage] = field(default_factory=list[ModelMessage], init=False, repr=False)
    """The messages the current request sends, once decided."""

    _rewritten: bool = field(default=False, init=False, repr=False)
    """Whether this guard put a history of its own in the run for the current request (refused or compacted)."""

    _verified: int = field(default=0, init=False, repr=False)
    """How many leading messages the current request sends with the bytes the model consumed."""

    _memory: _ToolMemory = field(default_factory=lambda: _ToolMemory(), init=False, repr=False, compare=False)
    """The tools this run's conversation has declared: its own, never another conversation's."""

    _memories: BoundedCache[str, _ToolMemory] = field(
        default_factory=lambda: BoundedCache[str, _ToolMemory](max_entries=_CONVERSATIONS_KEPT, max_bytes=sys.maxsize),
        init=False,
        repr=False,
        compare=False,
    )
    """Each conversation's tool memory, by `conversation_id`, shared by the runs of this guard: a later run of a
    conversation declares a retired tool as that conversation last sent it. Concurrent conversations on one agent
    each have their own; the least recently started are forgotten past `_CONVERSATIONS_KEPT`."""

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise UserError(f"Unknown `PrefixGuard` mode {self.mode!r}: use 'observe' or 'enforce'.")
        if self.on_defer not in _DEFER_POLICIES:
            raise UserError(f"Unknown `PrefixGuard` on_defer {self.on_defer!r}: use 'keep' or 'compact'.")

    @classmethod
    def from_spec(cls, options: GuardMode | PrefixGuardSpecOptions = 'enforce', /, **named: Any) -> PrefixGuard[Any]:
        """Build the guard from an agent spec entry (`Agent.from_spec`, `Agent.from_file`).

        A spec names it `PrefixGuard` alone (the defaults), with its mode (`{'PrefixGuard': 'observe'}`), or with
        options (`{'PrefixGuard': {'mode': 'enforce', 'on_defer': 'compact'}}`). Pydantic AI passes options as
        keyword arguments; they are taken as `**named`, because its JSON schema offers the one-argument form only
        for a `from_spec` with one parameter, and this one's type (the mode, or the options) covers both forms.

        Args:
            options: The mode, or the options as `PrefixGuardSpecOptions`.
            **named: The options, as Pydantic AI passes them: `mode` and `on_defer`. Any other (`verifier`) is
                refused with an error that names it.
        """
        # Anything but the options is taken as the mode, which `__post_init__` checks, naming the value.
        given: dict[str, Any] = (
            options.model_dump(exclude_unset=True) if isinstance(options, PrefixGuardSpecOptions) else {'mode': options}
        )
        given.update(named)
        mode = given.pop('mode', 'enforce')
        on_defer = given.pop('on_defer', 'keep')
        refuse_options(
            'PrefixGuard',
            given,
            accepted='`mode` and `on_defer`',
            python_only={'verifier': 'a `WireVerifier` is a Python object'},
        )
        return cls(mode, on_defer)

    def get_ordering(self) -> CapabilityOrdering:
        """Run after history processing and model selection, and before `AppendInstructions` renders its records."""
        return CapabilityOrdering(wrapped_by=(ProcessHistory, SelectModel), wraps=(AppendInstructions,))

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> PrefixGuard[AgentDepsT]:
        """A guard for one run, starting from the history the run is given, with its conversation's tool memory."""
        run = PrefixGuard[AgentDepsT](self.mode, self.on_defer, verifier=self.verifier)
        run._memories = self._memories
        # Pydantic AI resolves every run's `conversation_id` (given, from history, or new) before `for_run`.
        if ctx.conversation_id is not None:  # pragma: no branch
            run._memory = self._memories.setdefault(ctx.conversation_id, _ToolMemory, size=1)
        # The run starts from the history as given, but Pydantic AI repairs it before anything reads it (merging
        # consecutive requests, dropping orphaned tool results), and before sending it: the consumed history is
        # taken in that shape, which is both what history processors see and what the model was sent.
        run._consumed = ConsumedHistory.of(repair_messages(ctx.messages, repair_last_response=False))
        run._instructions = _last_instructions(ctx.messages)
        return run

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Name the run's conversation to the HTTP transports it sends through, so a shared `WireVerifier` keeps
        each conversation's requests apart (and `open_window` opens only this one's).
        """
        with conversation_scope(ctx.conversation_id):
            return await handler()

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT] | None:
        """In enforce mode, keep each tool that history calls declared after it leaves the agent's tools."""
        return RetiredTools(toolset, self._memory.definitions) if self.mode == 'enforce' else None

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Decide on what history processing did to the consumed prefix, and keep tools that history calls."""
        consumed = self._consumed if self._consumed is not None else ConsumedHistory.of([])
        proposed = list(request_context.messages)
        self._opened = _newly_compacted(consumed, proposed)
        self._rewritten = False
        # Compaction is a window boundary: the prefix may change, the tool pairs still may not break.
        judged = ConsumedHistory(consumed.messages, 0) if self._opened else consumed
        params = request_context.model_request_parameters
        declared = {tool.name: tool for tool in [*params.function_tools, *params.output_tools]}
        decision = decide_rewrite(judged, proposed, tools=declared, sending=True, declared_before=self._memory.seen)
        # How many leading messages are sent with the bytes the model consumed: all of the consumed prefix, unless
        # a divergent rewrite goes out as it is.
        self._verified = consumed.boundary
        attributes: dict[str, str | int] = {
            'logfire.msg': f'prefix_guard {decision.action}',
            'action': decision.action,
            'mode': self.mode,
            'reason': decision.reason,
            'boundary': judged.boundary,
            'messages': len(proposed),
        }
        # On the run's tracer, so the span follows the agent's instrumentation settings.
        with ctx.tracer.start_as_current_span('prefix_guard', attributes=attributes):
            if not self._opened:
                self._check_tools(declared)
            if decision.action != 'patch':
                self._refuse(ctx, request_context, consumed, decision)
            elif self._opened:
                self._verified = 0
        if self._opened and self.verifier is not None:
            self.verifier.open_window()
        self._tools = declared
        self._memory.seen.update(declared)
        self._sent = list(request_context.messages)
        return request_context

    def _check_tools(self, declared: dict[str, ToolDefinition]) -> None:
        if self._tools is None or self._tools == declared:
            return
        added = sorted(declared.keys() - self._tools.keys())
        removed = sorted(self._tools.keys() - declared.keys())
        changed = sorted(name for name in declared.keys() & self._tools.keys() if declared[name] != self._tools[name])
        summary = '; '.join(
            f'{label} {", ".join(f"`{name}`" for name in names)}'
            for label, names in (('added', added), ('removed', removed), ('changed', changed))
            if names
        )
        warnings.warn(
            f'The tool definitions changed between requests of a run ({summary}), which moves the cached prefix at '
            'its start; change tools at a window boundary instead.',
            ToolListChangedWarning,
            stacklevel=3,
        )

    def _refuse(
        self,
        ctx: RunContext[AgentDepsT],
        request_context: ModelRequestContext,
        consumed: ConsumedHistory,
        decision: RewriteDecision,
    ) -> None:
        conditions: list[tuple[type[PrefixGuardWarning], str]] = [
            (OrphanedToolPairWarning, problem.describe()) for problem in decision.problems
        ]
        conditions += [
            (RetiredToolReferencedWarning, f'history calls `{name}`, which this request does not declare')
            for name in decision.retired_tools
        ]
        if decision.divergence is not None:
            conditions.append((ConsumedPrefixChangedWarning, decision.divergence.describe()))
        if self.mode == 'observe' or (decision.divergence is None and not decision.problems):
            # In enforce mode, that is a tool missing that this guard never declared as a function tool (an output
            # tool of another run, say): there is no definition to declare again, and no older shape of the
            # messages would change that.
            _warn(conditions, 'Sent anyway (observe mode)' if self.mode == 'observe' else 'Sent as it is')
            if decision.divergence is not None:
                self._verified = decision.divergence.message_index
            elif self._opened:
                self._verified = 0
            return
        proposed = request_context.messages
        # A processor may have edited the very objects the history holds, so they are taken as consumed, not as now;
        # a refused compaction keeps the history it would have closed.
        self._opened = False
        kept = [*consumed.consumed_messages(), *_new_messages(consumed, proposed)]
        retry = decide_rewrite(consumed, kept, sending=True)
        if retry.action == 'abort':
            # The new messages themselves break a pair: no older shape of the history can be sent instead.
            error = retry.error()
            assert error is not None
            raise error
        outcome = 'Refused, the consumed prefix kept'
        # A resumed turn (history ends with the suspended response) is sent with the instructions it was started
        # with, so it can't open the window a compaction needs; a later request of the conversation may compact.
        resuming = any(isinstance(message, ModelResponse) for message in proposed[-1:])
        if self.on_defer == 'compact' and not resuming and (replaced := _front_replacement(kept, proposed)) is not None:
            summary, start = replaced
            compacted = compact(kept, keep_from=start, summary=summary)
            opened = ConsumedHistory(consumed.messages, 0)
            # Only a compaction that shortens history and keeps every pair is sent.
            if len(compacted) < len(kept) and decide_rewrite(opened, compacted, sending=True).action == 'patch':
                kept = compacted
                self._opened = True
                self._verified = 0
                elided = f'{elided_count(compacted)} messages elided'
                outcome = f'Applied as whole-pair compaction ({elided}{", the summary kept" if summary else ""})'
        request_context.messages = kept
        ctx.messages[:] = kept
        self._rewritten = True
        _warn(conditions, outcome)

    async def after_model_request(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """Take what the model has now consumed, and check the instructions the request was sent with."""
        sent = InstructionPart.join(request_context.model_request_parameters.instruction_parts or [])
        if self._rewritten:
            # The history put back holds this guard's request objects, and Pydantic AI 2.58 records the instructions
            # sent on the request it built, which the history no longer holds; a resumed turn reads them from history.
            last = next(message for message in reversed(ctx.messages) if isinstance(message, ModelRequest))
            last.instructions = last.instructions or sent or None
        base = self._consumed if self._consumed is not None else ConsumedHistory.of([])
        self._consumed = base.advance([*ctx.messages, response], sent=self._sent, verified=self._verified)
        opened = self._opened or _opens_instruction_window(ctx.messages)
        if self._instructions is not None and sent != self._instructions and not opened:
            warnings.warn(
                'The instructions changed within a conversation, which moves the cached prefix; keep changing '
                'blocks in append mode (`AppendInstructions`) or change them at a window boundary.',
                InstructionsChangedWarning,
                stacklevel=2,
            )
        self._instructions = sent
        return response


def _newly_compacted(consumed: ConsumedHistory, proposed: Sequence[ModelMessage]) -> bool:
    """Whether `proposed` starts with a compaction marker that the consumed history doesn't start with."""
    if elided_count(proposed) is None:
        return False
    return not consumed.consumed or message_bytes(proposed[0]) != consumed.consumed[0]


def _new_messages(consumed: ConsumedHistory, proposed: Sequence[ModelMessage]) -> list[ModelMessage]:
    """What a refused request sends after the consumed prefix: the unconsumed messages, then the new one.

    Pydantic AI adds one request per step (the prompt, or the tool results) and a processed history must end with
    it, so the proposal's last message is the new one. Anything else a processor put after the boundary (a
    summary of what it dropped, say) stands for the rewrite being refused, so it isn't sent.
    """
    pending = list(consumed.messages[consumed.boundary :])
    if proposed and not any(proposed[-1] is message for message in consumed.messages):
        pending.append(proposed[-1])
    return pending


def _front_replacement(
    full: Sequence[ModelMessage], proposed: Sequence[ModelMessage]
) -> tuple[list[ModelMessage], int] | None:
    """The messages the proposal puts in place of the front of `full`, and where in `full` what it keeps starts.

    A processor that trims old turns keeps a run of `full` from some message on (`([], start)`). One that
    summarizes them sends new messages (the summary) and then a suffix of `full`, as long as at least the step's
    new request. The summary must be new: a proposal that starts with a message of `full` and then skips some is a
    cut from the middle, not a replacement of the front, and is left to the refusal. `None` if it is neither.
    """
    if not proposed:
        return None
    full_bytes = [message_bytes(message) for message in full]
    proposed_bytes = [message_bytes(message) for message in proposed]
    start = _trimmed_from(full_bytes, proposed_bytes)
    if start is not None:
        return [], start
    shared = 0
    while shared < min(len(full), len(proposed)) and full_bytes[-1 - shared] == proposed_bytes[-1 - shared]:
        shared += 1
    head = len(proposed) - shared
    start = len(full) - shared
    if not shared or not start or any(sent in full_bytes for sent in proposed_bytes[:head]):
        return None
    return list(proposed[:head]), start


def _trimmed_from(full: Sequence[bytes], proposed: Sequence[bytes]) -> int | None:
    """Where in `full` the proposed history starts, if it is `full` with messages dropped from the front (as bytes).

    Of the places whose message matches the proposal's first, the one that matches the most messages after it
    wins, so a prompt repeated earlier in the conversation doesn't move the cut.
    """

    def run_length(start: int) -> int:
        pairs = zip(full[start:], proposed, strict=False)
        return next((count for count, (x, y) in enumerate(pairs) if x != y), min(len(full) - start, len(proposed)))

    starts = [index for index in range(1, len(full)) if full[index] == proposed[0]]
    return max(starts, key=run_length, default=None)


def _opens_instruction_window(messages: Sequence[ModelMessage]) -> bool:
    """Whether `AppendInstructions` opened a new window at the latest request (it recorded a baseline there)."""
    last = next(message for message in reversed(messages) if isinstance(message, ModelRequest))
    return AppendInstructions.opens_window(last)


def _warn(conditions: list[tuple[type[PrefixGuardWarning], str]], outcome: str) -> None:
    """One warning for each condition, of the condition's own class, so each can be silenced on its own."""
    for category, condition in conditions:
        warnings.warn(f'{outcome}: {condition}', category, stacklevel=4)


def _last_instructions(messages: Sequence[ModelMessage]) -> str | None:
    """The instructions the latest request in `messages` was sent with, if any request records them."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest) and message.instructions is not None:
            return message.instructions
    return None
