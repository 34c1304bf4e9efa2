"""The guard on an agent: each request checked against what the model consumed, before it is sent.

[`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard] applies the pure model
([`decide_rewrite`][pydantic_ai_append.guard.decide_rewrite]) to every real request. It runs after history processing (so it
sees what processors and compaction did) and before [`AppendInstructions`][pydantic_ai_append.AppendInstructions]
(so it sees records, not their rendered text, the same on every request). What the model consumed is taken
when a run starts (the history it is given, through the latest reply) and after each response (the history
as sent, with the reply).

In `observe` mode it changes nothing: each condition is a warning of its own class and a span. In `enforce`
mode a compaction (what Pydantic AI Harness's strategies, a trimming or summarizing history processor, or a
provider's compaction do) is applied as a new window, in whole tool-pair units, with a marker where messages were
elided; any other rewrite that is not a `patch` is refused: the request goes out with the consumed prefix as it was
and the new messages after it, and the run's history is put back the same way. With `on_defer='keep'`, a
compaction is refused too. A tool that history still calls stays declared, with the definition it was last sent
with, even after it leaves the agent's tools.

Changes that the guard can only see once the request is final (the instructions as sent) are checked after
the response and warned about in both modes; [`WireVerifier`][pydantic_ai_append.guard.WireVerifier] checks the
bytes on the wire and can refuse them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    CapabilityOrdering,
    ProcessHistory,
    SelectModel,
    WrapRunHandler,
)
from pydantic_ai.messages import (
    InstructionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    repair_messages,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from .._blocks import WindowObserver
from .._cache import BoundedCache
from .._capability import AppendInstructions
from .._wire.transport import conversation_scope
from ._consumed import ConsumedHistory
from ._decision import RewriteDecision, decide_rewrite
from ._errors import (
    ConsumedPrefixChangedWarning,
    InstructionsChangedWarning,
    OrphanedToolPairWarning,
    PrefixGuardWarning,
    RetiredToolReferencedWarning,
)
from ._options import DeferPolicy, GuardMode, PrefixGuardSpecOptions, check_options, spec_options
from ._proposal import last_instructions, new_messages, newly_compacted, opens_instruction_window, provider_compacted
from ._repair import RepairPolicy, repaired
from ._retired import RetiredTools
from ._tool_memory import CONVERSATIONS_KEPT, ToolMemory, tell_retired, warn_tool_changes


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

    on_defer: DeferPolicy = 'compact'
    """In enforce mode, what becomes of a compaction of consumed messages (a rewrite that drops, clears, clamps or
    summarizes them, keeping the order of what it keeps and the latest message, as every compaction strategy of
    Pydantic AI Harness does): `'compact'` applies it as a new window, in whole tool-pair units (a cut that splits a
    pair is moved to a whole-pair cut), with a marker where messages were elided; `'keep'` sends the consumed prefix
    as it was, so history grows as if no compaction were installed. Any other rewrite of consumed messages is refused
    either way. See the table in `docs/guard.md`."""

    repair: RepairPolicy = 'answer'
    """In enforce mode, what becomes of a tool call that the history a run is given never answered (its tool was
    cancelled or its process stopped, and the conversation went on): `'answer'` answers it with a result saying it
    was not run, `'drop'` drops it. Either way no tool is run for it, a result without its call is dropped, and the
    run's history is mended before anything is sent, with one `OrphanedToolPairWarning` for each call. The calls of
    the history's latest reply are left to Pydantic AI, which runs them when the run is resumed."""

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

    _retired: set[str] = field(default_factory=set[str], init=False, repr=False)
    """The retired tools this run's latest step declared (written by its `RetiredTools`)."""

    _found: set[str] = field(default_factory=set[str], init=False, repr=False)
    """In observe mode, the calls whose broken pairs the run's given history was already warned about."""

    _rewritten: bool = field(default=False, init=False, repr=False)
    """Whether this guard put a history of its own in the run for the current request (refused or compacted)."""

    _verified: int = field(default=0, init=False, repr=False)
    """How many leading messages the current request sends with the bytes the model consumed."""

    _memory: ToolMemory = field(default_factory=lambda: ToolMemory(), init=False, repr=False, compare=False)
    """The tools this run's conversation has declared: its own, never another conversation's."""

    _memories: BoundedCache[str, ToolMemory] = field(
        default_factory=lambda: BoundedCache[str, ToolMemory](max_entries=CONVERSATIONS_KEPT, max_bytes=sys.maxsize),
        init=False,
        repr=False,
        compare=False,
    )
    """Each conversation's tool memory, by `conversation_id`, shared by the runs of this guard: a later run of a
    conversation declares a retired tool as that conversation last sent it. Concurrent conversations on one agent
    each have their own; the least recently started are forgotten past `CONVERSATIONS_KEPT`."""

    def __post_init__(self) -> None:
        check_options(self.mode, self.on_defer, self.repair, self.verifier)

    @classmethod
    def from_spec(cls, options: GuardMode | PrefixGuardSpecOptions = 'enforce', /, **named: Any) -> PrefixGuard[Any]:
        """Build the guard from an agent spec entry (`Agent.from_spec`, `Agent.from_file`).

        A spec names it `PrefixGuard` alone (the defaults), with its mode (`{'PrefixGuard': 'observe'}`), or with
        options (`{'PrefixGuard': {'mode': 'enforce', 'on_defer': 'keep'}}`). Pydantic AI passes options as
        keyword arguments; they are taken as `**named`, because its JSON schema offers the one-argument form only
        for a `from_spec` with one parameter, and this one's type (the mode, or the options) covers both forms.

        Args:
            options: The mode, or the options as `PrefixGuardSpecOptions`.
            **named: The options, as Pydantic AI passes them: `mode`, `on_defer` and `repair`. Any other
                (`verifier`) is refused with an error that names it.
        """
        return cls(*spec_options(options, named))

    def get_ordering(self) -> CapabilityOrdering:
        """Run after every capability that edits history (history processing, compaction, model selection), whatever
        the order they are listed in, and before `AppendInstructions` renders its records.
        """
        return CapabilityOrdering(
            position='innermost', wrapped_by=(ProcessHistory, SelectModel), wraps=(AppendInstructions,)
        )

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> PrefixGuard[AgentDepsT]:
        """A guard for one run, starting from the history the run is given, with its conversation's tool memory."""
        run = PrefixGuard[AgentDepsT](self.mode, self.on_defer, self.repair, verifier=self.verifier)
        run._memories = self._memories
        # Pydantic AI resolves every run's `conversation_id` (given, from history, or new) before `for_run`.
        if ctx.conversation_id is not None:  # pragma: no branch
            run._memory = self._memories.setdefault(ctx.conversation_id, ToolMemory, size=1)
        mended, done = repaired(ctx.messages, self.repair)
        if done:
            # `RunContext.messages` is the run's own history: mended here, it is what Pydantic AI goes on from.
            if self.mode == 'enforce':
                ctx.messages[:] = mended
            else:
                run._found = {problem.tool_call_id for problem, _ in done}
            outcome = 'Repaired the history the run was given' if self.mode == 'enforce' else 'Found (observe mode)'
            _warn([(OrphanedToolPairWarning, f'{problem.describe()}: {action}') for problem, action in done], outcome)
        # The run starts from the history as given, but Pydantic AI repairs it before anything reads it (merging
        # consecutive requests, dropping orphaned tool results), and before sending it: the consumed history is
        # taken in that shape, which is both what history processors see and what the model was sent.
        run._consumed = ConsumedHistory.of(repair_messages(ctx.messages, repair_last_response=False))
        run._instructions = last_instructions(ctx.messages)
        return run

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Name the run's conversation to the HTTP transports it sends through, so a shared `WireVerifier` keeps
        each conversation's requests apart (and `open_window` opens only this one's).
        """
        with conversation_scope(ctx.conversation_id):
            return await handler()

    def get_wrapper_toolset(self, toolset: AbstractToolset[AgentDepsT]) -> AbstractToolset[AgentDepsT] | None:
        """In enforce mode, keep each tool that history calls declared after it leaves the agent's tools."""
        return RetiredTools(toolset, self._memory.definitions, self._retired) if self.mode == 'enforce' else None

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Decide on what history processing did to the consumed prefix, and keep tools that history calls."""
        consumed = self._consumed if self._consumed is not None else ConsumedHistory.of([])
        proposed = list(request_context.messages)
        self._opened = newly_compacted(consumed, proposed) or provider_compacted(consumed)
        self._rewritten = False
        # Compaction is a window boundary: the prefix may change, the tool pairs still may not break.
        new = new_messages(consumed, proposed)
        judged = ConsumedHistory((*consumed.messages, *new), 0) if self._opened else consumed.adding(new)
        params = request_context.model_request_parameters
        declared = {tool.name: tool for tool in [*params.function_tools, *params.output_tools]}
        decision = decide_rewrite(judged, proposed, tools=declared, sending=True, declared_before=self._memory.seen)
        # How many leading messages are sent with the bytes the model consumed: all of the consumed prefix, unless
        # a divergent rewrite goes out as it is.
        self._verified = consumed.boundary
        attributes: dict[str, str | int] = {
            'logfire.msg': f'prefix_guard {decision.action}',
            'pydantic_ai_append.guard.action': decision.action,
            'pydantic_ai_append.guard.mode': self.mode,
            'pydantic_ai_append.guard.reason': decision.reason,
            'pydantic_ai_append.guard.boundary': judged.boundary,
            'pydantic_ai_append.guard.messages': len(proposed),
        }
        # On the run's tracer, so the span follows the agent's instrumentation settings.
        with ctx.tracer.start_as_current_span('prefix_guard', attributes=attributes):
            if decision.action != 'compact' and not self._opened:
                warn_tool_changes(self._tools, declared)
            if decision.action == 'compact':
                self._compact(ctx, request_context, consumed, decision)
            elif decision.action != 'patch':
                self._refuse(ctx, request_context, consumed, decision)
            elif decision.history is not None:
                # A compaction that comes to nothing in whole tool pairs: the history goes out as it was.
                self._send(ctx, request_context, decision.history)
            elif self._opened:
                self._verified = 0
        if self._retired:
            tell_retired(ctx, request_context, self._retired)
        if self._opened and self.verifier is not None:
            self.verifier.open_window()
        self._tools = declared
        self._memory.seen.update(declared)
        self._sent = list(request_context.messages)
        return request_context

    def _refuse(
        self,
        ctx: RunContext[AgentDepsT],
        request_context: ModelRequestContext,
        consumed: ConsumedHistory,
        decision: RewriteDecision,
    ) -> None:
        conditions: list[tuple[type[PrefixGuardWarning], str]] = [
            (OrphanedToolPairWarning, problem.describe())
            for problem in decision.problems
            if problem.tool_call_id not in self._found
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
        # A processor may have edited the very objects the history holds, so they are taken as consumed, not as now;
        # a refused compaction keeps the history it would have closed.
        self._opened = False
        kept = [
            *consumed.consumed_messages(),
            *consumed.messages[consumed.boundary :],
            *new_messages(consumed, request_context.messages),
        ]
        retry = decide_rewrite(consumed, kept, sending=True)
        if retry.action == 'abort':
            # The new messages themselves break a pair: no older shape of the history can be sent instead.
            error = retry.error()
            assert error is not None
            raise error
        self._send(ctx, request_context, kept)
        _warn(conditions, 'Refused, the consumed prefix kept')

    def _compact(
        self,
        ctx: RunContext[AgentDepsT],
        request_context: ModelRequestContext,
        consumed: ConsumedHistory,
        decision: RewriteDecision,
    ) -> None:
        """Apply a compaction as a new window, or refuse it as `on_defer='keep'` says (or a resumed turn needs)."""
        split = [(OrphanedToolPairWarning, problem.describe()) for problem in decision.problems]
        if self.mode == 'observe':
            self._opened = True
            self._verified = 0
            _warn(split, 'Sent anyway (observe mode)')
            return
        # A resumed turn (history ends with the suspended response) is sent with the instructions it was started
        # with, so it can't open the window a compaction needs; a later request of the conversation may compact.
        resuming = isinstance(request_context.messages[-1], ModelResponse)
        assert decision.history is not None
        if self.on_defer == 'keep' or resuming:
            self._refuse(ctx, request_context, consumed, replace(decision, action='defer'))
            return
        self._send(ctx, request_context, decision.history)
        self._opened = True
        self._verified = 0
        _warn(split, 'Compacted in whole tool pairs, the cut moved')

    def _send(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext, messages: Sequence[ModelMessage]
    ) -> None:
        """Send `messages` in place of the proposal, and put them in the run's history the same way."""
        request_context.messages = list(messages)
        ctx.messages[:] = messages
        self._rewritten = True

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
        opened = self._opened or opens_instruction_window(ctx.messages)
        if self._instructions is not None and sent != self._instructions and not opened:
            warnings.warn(
                'The instructions changed within a conversation, which moves the cached prefix; keep changing '
                'blocks in append mode (`AppendInstructions`) or change them at a window boundary.',
                InstructionsChangedWarning,
                stacklevel=2,
            )
        self._instructions = sent
        return response


def _warn(conditions: Sequence[tuple[type[PrefixGuardWarning], str]], outcome: str) -> None:
    """One warning for each condition, of the condition's own class, so each can be silenced on its own."""
    for category, condition in conditions:
        warnings.warn(f'{outcome}: {condition}', category, stacklevel=4)
