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
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    CapabilityOrdering,
    ProcessHistory,
    SelectModel,
    WrapRunHandler,
)
from pydantic_ai.messages import InstructionPart, ModelRequest, ModelResponse, repair_messages
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import AgentDepsT
from pydantic_ai.toolsets import AbstractToolset

from .._blocks import WindowObserver
from .._capability import AppendInstructions
from .._reopening import MOVED_KEY
from .._shared.cache import BoundedCache
from .._wire.transport import conversation_scope
from ._consumed import ConsumedHistory
from ._errors import InstructionsChangedWarning, OrphanedToolPairWarning
from ._options import DeferPolicy, GuardMode, PrefixGuardSpecOptions, check_options, spec_options
from ._plan import GuardWarning, RequestPlan, outcome_warnings, plan_guarded_request
from ._proposal import last_instructions, opens_instruction_window
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

    _consumed: ConsumedHistory = field(default_factory=lambda: ConsumedHistory.of([]), init=False, repr=False)
    """What the model has consumed in this run so far: taken when the run starts, replaced after each response."""

    _instructions: str | None = field(default=None, init=False, repr=False)
    """The instructions the previous request was sent with, as sent: taken when the run starts, replaced after each
    response."""

    _plan: RequestPlan | None = field(default=None, init=False, repr=False)
    """What this guard does with the run's latest request, replaced when the next one is seen: the request's later
    hooks read it, and the next request compares its tools with the ones this declares."""

    _retired: set[str] = field(default_factory=set[str], init=False, repr=False)
    """Where this run's `RetiredTools` puts the retired tools each step declares, read into that step's plan."""

    _found: set[str] = field(default_factory=set[str], init=False, repr=False)
    """In observe mode, the calls whose broken pairs the run's given history was already warned about."""

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
            found = [(OrphanedToolPairWarning, f'{problem.describe()}: {action}') for problem, action in done]
            _warn(outcome_warnings(found, outcome))
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
        proposed = list(request_context.messages)
        params = request_context.model_request_parameters
        declared = {tool.name: tool for tool in [*params.function_tools, *params.output_tools]}
        plan = plan_guarded_request(
            self._consumed,
            proposed,
            declared,
            retired=frozenset(self._retired),
            mode=self.mode,
            on_defer=self.on_defer,
            declared_before=self._memory.seen,
            warned=self._found,
        )
        attributes: dict[str, str | int] = {
            'logfire.msg': f'prefix_guard {plan.action}',
            'pydantic_ai_append.guard.action': plan.action,
            'pydantic_ai_append.guard.decision': plan.decision.action,
            'pydantic_ai_append.guard.mode': self.mode,
            'pydantic_ai_append.guard.reason': plan.decision.reason,
            'pydantic_ai_append.guard.boundary': plan.boundary,
            'pydantic_ai_append.guard.messages': len(proposed),
        }
        # On the run's tracer, so the span follows the agent's instrumentation settings.
        with ctx.tracer.start_as_current_span('prefix_guard', attributes=attributes):
            if plan.compares_tools:
                warn_tool_changes(self._plan.declared if self._plan is not None else None, plan.declared)
            if plan.error is not None:
                raise plan.error
            if plan.rewritten:
                # What is sent in place of the proposal is put in the run's history the same way.
                request_context.messages = list(plan.sends)
                ctx.messages[:] = plan.sends
            _warn(plan.warnings)
        if plan.retired:
            tell_retired(ctx, request_context, plan.retired)
        if plan.opened:
            # What the cache still holds decides what a new instruction window would cost beyond keeping the window
            # (`AppendInstructions`); it is put on the request sent (or the suspended turn's response it resumes).
            pending = request_context.messages[-1]
            moved = {MOVED_KEY: self._consumed.unchanged(request_context.messages)}
            pending.metadata = {**(pending.metadata or {}), **moved}
            if self.verifier is not None:
                self.verifier.open_window()
        self._memory.seen.update(plan.declared)
        self._plan = plan
        return request_context

    async def after_model_request(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """Take what the model has now consumed, and check the instructions the request was sent with."""
        # `before_model_request` runs once per request step, before any attempt, so the plan is this request's.
        plan = self._plan
        assert plan is not None
        sent = InstructionPart.join(request_context.model_request_parameters.instruction_parts or [])
        if plan.rewritten:
            # The history put back holds this guard's request objects, and Pydantic AI 2.58 records the instructions
            # sent on the request it built, which the history no longer holds (the copy holds those it had before the
            # hooks); a resumed turn reads them from history.
            last = next(message for message in reversed(ctx.messages) if isinstance(message, ModelRequest))
            last.instructions = sent or last.instructions or None
        self._consumed = self._consumed.advance([*ctx.messages, response], sent=plan.sends, verified=plan.verified)
        opened = plan.opened or opens_instruction_window(ctx.messages)
        if self._instructions is not None and sent != self._instructions and not opened:
            warnings.warn(
                'The instructions changed within a conversation, which moves the cached prefix; keep changing '
                'blocks in append mode (`AppendInstructions`) or change them at a window boundary.',
                InstructionsChangedWarning,
                stacklevel=2,
            )
        self._instructions = sent
        return response


def _warn(told: Sequence[GuardWarning]) -> None:
    """Give each warning, pointing at what called the hook that gives it."""
    for category, text in told:
        warnings.warn(text, category, stacklevel=3)
