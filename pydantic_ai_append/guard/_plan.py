"""What `PrefixGuard` does with one request, worked out before anything is changed: its plan.

A request is judged once, in the hook that first sees it, and everything the guard does about it follows from that
judgement: the decision on the proposed history, the messages sent in its place (if any), whether the request opens a
new window, how much of it is checked to carry the bytes the model consumed, and the warnings it gives. Keeping that
in one frozen value, made by a pure function of the consumed history, the proposal and the guard's options, lets the
hooks read the same answer at every stage of the request instead of each setting part of it, and lets the rules be
read (and tested) apart from Pydantic AI's hooks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, TypeAlias

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.tools import ToolDefinition

from ._consumed import ConsumedHistory
from ._decision import RewriteDecision, decide_rewrite
from ._errors import (
    ConsumedPrefixChangedWarning,
    NonMonotonicRewriteError,
    OrphanedToolPairWarning,
    PrefixGuardWarning,
    RetiredToolReferencedWarning,
)
from ._options import DeferPolicy, GuardMode
from ._proposal import new_messages, newly_compacted, provider_compacted

PAIR_RULE = (
    'the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs'
)
"""The rule a rewrite that breaks a tool pair breaks, as its warning states it."""

GuardAction: TypeAlias = Literal['pass', 'patch', 'compact', 'defer', 'abort']
"""What the guard did with a request: sent it as proposed, or sent something else in its place as the decision on it
says, or refused it."""

GuardWarning: TypeAlias = tuple[type[PrefixGuardWarning], str]
"""A warning to give: its class (the condition, so each can be silenced on its own) and its text."""


def outcome_warnings(conditions: Sequence[GuardWarning], outcome: str) -> tuple[GuardWarning, ...]:
    """One warning for each condition, its text saying first what became of the request."""
    return tuple((category, f'{outcome}: {condition}') for category, condition in conditions)


@dataclass(frozen=True)
class RequestPlan:
    """What the guard does with one request: what it decided, what it sends, what it verified and what it warns.

    ```python
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

    from pydantic_ai_append.guard import ConsumedHistory
    from pydantic_ai_append.guard._plan import plan_guarded_request

    history = [ModelRequest.user_text_prompt('Hi'), ModelResponse(parts=[TextPart('Hello!')])]
    edited = [ModelRequest.user_text_prompt('Hi there'), history[1], ModelRequest.user_text_prompt('Bye')]
    plan = plan_guarded_request(
        ConsumedHistory.of(history), edited, {}, mode='enforce', on_defer='compact', declared_before=(), warned=()
    )
    print(plan.decision.action, plan.rewritten, plan.sends[0] is history[0])
    #> defer True True
    ```
    """

    decision: RewriteDecision
    """The decision on the proposed history, before the guard's mode and policies apply (its span's `decision`; `action`
    says what became of the request)."""

    boundary: int
    """The generation boundary the proposal was judged at: none of it consumed when the request opens a window."""

    declared: Mapping[str, ToolDefinition]
    """The tools the request declares (function and output tools), by name."""

    retired: frozenset[str]
    """The retired tools among them, declared only because history calls them: `tell_retired` tells the model of
    each, once, at the end of the request."""

    compares_tools: bool
    """Whether a tool list changed since the run's previous request is warned about: not when the proposal compacts
    history or opens a window, where the cached prefix starts again anyway."""

    sends: tuple[ModelMessage, ...]
    """The messages the request is sent with, as this guard leaves them (but the notices of `retired`, appended to the
    last): the proposal, or what is sent in its place."""

    rewritten: bool
    """Whether `sends` is a history of this guard's own, sent in place of the proposal and put in the run's history
    (the consumed prefix kept, or a compaction applied in whole tool pairs)."""

    opened: bool
    """Whether the request opens a new window, so the prefix it moves is not a divergence."""

    verified: int
    """How many leading messages of `sends` were checked to carry the bytes the model consumed."""

    warnings: tuple[GuardWarning, ...] = ()
    """The warnings to give, one for each condition, in order."""

    error: NonMonotonicRewriteError | None = None
    """Raised instead of sending, if no history can be sent: the request's new messages themselves break a pair."""

    @property
    def action(self) -> GuardAction:
        """What the guard did with the request (what its span reports; `decision` is what it judged): `'pass'` where
        the proposal goes out as it is (an ordinary request, or any in observe mode), `'patch'` where the history goes out
        as it was in place of a compaction that comes to nothing in whole tool pairs, `'compact'` where a compaction is
        applied, `'defer'` where the consumed prefix is kept in place of a rewrite of it, and `'abort'` where one that
        breaks a tool pair is dropped, or the request refused.
        """
        if self.error is not None:
            return 'abort'
        if not self.rewritten:
            return 'pass'
        if self.decision.action == 'compact':
            return 'compact' if self.opened else 'defer'
        return self.decision.action


def plan_guarded_request(
    consumed: ConsumedHistory,
    proposed: Sequence[ModelMessage],
    declared: Mapping[str, ToolDefinition],
    *,
    retired: frozenset[str] = frozenset(),
    mode: GuardMode,
    on_defer: DeferPolicy,
    declared_before: Collection[str],
    warned: Collection[str],
) -> RequestPlan:
    """The plan for a request that proposes `proposed` after `consumed`.

    Args:
        consumed: What the model has consumed in the run so far.
        proposed: The messages history processing handed on.
        declared: The tools the request declares, by name.
        retired: The retired tools among them (`RetiredTools`).
        mode: The guard's `mode`.
        on_defer: The guard's `on_defer`.
        declared_before: Every tool the conversation declared before: only those count as retired.
        warned: The tool calls whose broken pairs the run's given history was already warned about.
    """
    opened = newly_compacted(consumed, proposed) or provider_compacted(consumed)
    # Compaction is a window boundary: the prefix may change, the tool pairs still may not break (judged against what
    # the model consumed, as a processor may have edited it in place).
    new = new_messages(consumed, proposed)
    judged = ConsumedHistory((*consumed.as_consumed(), *new), 0) if opened else consumed.adding(new)
    decision = decide_rewrite(judged, proposed, tools=declared, sending=True, declared_before=declared_before)
    plan = RequestPlan(
        decision=decision,
        boundary=judged.boundary,
        declared=declared,
        retired=retired,
        compares_tools=decision.action != 'compact' and not opened,
        sends=tuple(proposed),
        rewritten=False,
        opened=opened,
        # All of the consumed prefix is sent with the bytes the model consumed, unless a divergent rewrite goes out
        # as it is.
        verified=consumed.boundary,
    )
    if decision.action == 'compact':
        return _compaction(plan, consumed, new, mode=mode, on_defer=on_defer, warned=warned)
    if decision.action != 'patch':
        return _refusal(plan, consumed, new, mode=mode, warned=warned)
    if decision.history is not None:
        # A compaction that comes to nothing in whole tool pairs: the history goes out as it was.
        return replace(plan, sends=decision.history, rewritten=True)
    if opened:
        return replace(plan, verified=0)
    return plan


def _compaction(
    plan: RequestPlan,
    consumed: ConsumedHistory,
    new: Sequence[ModelMessage],
    *,
    mode: GuardMode,
    on_defer: DeferPolicy,
    warned: Collection[str],
) -> RequestPlan:
    """`plan` with a compaction applied as a new window, or refused as `on_defer='keep'` says (or a resumed turn
    needs).
    """
    decision = plan.decision
    split: list[GuardWarning] = []
    for problem in decision.problems:
        split.append((OrphanedToolPairWarning, problem.describe()))
    if mode == 'observe':
        return replace(plan, opened=True, verified=0, warnings=outcome_warnings(split, 'Sent anyway (observe mode)'))
    # A resumed turn (history ends with the suspended response) is sent with the instructions it was started
    # with, so it can't open the window a compaction needs; a later request of the conversation may compact. Until
    # this returns, `plan.sends` is the proposal.
    resuming = isinstance(plan.sends[-1], ModelResponse)
    assert decision.history is not None
    if on_defer == 'keep' or resuming:
        return _refusal(plan, consumed, new, mode=mode, warned=warned)
    return replace(
        plan,
        sends=decision.history,
        rewritten=True,
        opened=True,
        verified=0,
        warnings=outcome_warnings(split, 'Compacted in whole tool pairs, the cut moved'),
    )


def _refusal(
    plan: RequestPlan,
    consumed: ConsumedHistory,
    new: Sequence[ModelMessage],
    *,
    mode: GuardMode,
    warned: Collection[str],
) -> RequestPlan:
    """`plan` with a rewrite that is neither a patch nor an applied compaction refused: in enforce mode the consumed
    prefix is sent as it was, with the new messages after it; in observe mode the proposal goes out, warned about.
    A rewrite refused for a broken tool pair gets one warning for each call, naming it and `PAIR_RULE`.
    """
    decision = plan.decision
    conditions: list[GuardWarning] = []
    for problem in decision.problems:
        if problem.tool_call_id not in warned:
            conditions.append((OrphanedToolPairWarning, f'{problem.describe()} ({PAIR_RULE})'))
    for name in decision.retired_tools:
        conditions.append(
            (RetiredToolReferencedWarning, f'history calls `{name}`, which this request does not declare')
        )
    if decision.divergence is not None and (mode == 'observe' or not decision.problems):
        # Enforce mode refuses a rewrite that breaks a pair for that reason, which the pair's warning gives: the change
        # to the consumed prefix is how it breaks the pair, not a second reason.
        conditions.append((ConsumedPrefixChangedWarning, decision.divergence.describe()))
    if mode == 'observe' or (decision.divergence is None and not decision.problems):
        # In enforce mode, that is a tool missing that this guard never declared as a function tool (an output
        # tool of another run, say): there is no definition to declare again, and no older shape of the
        # messages would change that.
        outcome = 'Sent anyway (observe mode)' if mode == 'observe' else 'Sent as it is'
        verified = plan.verified
        if decision.divergence is not None:
            verified = decision.divergence.message_index
        elif plan.opened:
            verified = 0
        return replace(plan, verified=verified, warnings=outcome_warnings(conditions, outcome))
    # A processor may have edited the very objects the history holds, so they are taken as consumed, not as now;
    # a refused compaction keeps the history it would have closed.
    kept = (*consumed.as_consumed(), *new)
    retry = decide_rewrite(consumed, kept, sending=True)
    if retry.action == 'abort':
        # The new messages themselves break a pair: no older shape of the history can be sent instead.
        return replace(plan, opened=False, error=retry.error())
    return replace(
        plan,
        sends=kept,
        rewritten=True,
        opened=False,
        warnings=outcome_warnings(conditions, 'Refused, the consumed prefix kept'),
    )
