"""Properties of the guard's plan for a request, over generated histories and rewrites, on the pure function.

`PrefixGuard` works out what it does with a request in one pure step (`plan_request`) and its hooks carry that out.
The agent tests pin particular requests; these check the rules for any rewrite a history processor might make, which
no set of agent runs could list: the leading messages a plan counts as verified carry the bytes the model consumed, an
enforced plan keeps the consumed prefix unless it opens a window and never sends a broken tool pair, an observed one
sends what it was given, and a plan is the same however often it is asked.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import assume, event, given
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart

from pydantic_ai_append.guard import ConsumedHistory, tool_pair_problems
from pydantic_ai_append.guard._bytes import message_bytes
from pydantic_ai_append.guard._options import GuardMode
from pydantic_ai_append.guard._plan import RequestPlan, plan_request

from .test_decision_properties import histories, rewrites


def _encoded(messages: tuple[ModelMessage, ...] | list[ModelMessage]) -> list[bytes]:
    return [message_bytes(message) for message in messages]


@st.composite
def requests(draw: st.DrawFn) -> tuple[ConsumedHistory, list[ModelMessage]]:
    """What a run consumed, and a request proposed after it: a rewrite of that history, then the step's new request.

    Only histories the new request can follow: one whose latest reply awaits its calls' results is answered by the
    results, which a prompt is not.
    """
    messages = draw(histories())
    new = ModelRequest(parts=[UserPromptPart('next')])
    assume(not tool_pair_problems([*messages, new], sending=True))
    return ConsumedHistory.of(messages), [*draw(rewrites(messages)), new]


def _plan(consumed: ConsumedHistory, proposed: list[ModelMessage], mode: GuardMode) -> RequestPlan:
    return plan_request(consumed, proposed, {}, mode=mode, on_defer='compact', declared_before=(), warned=())


@given(requests(), st.sampled_from(['observe', 'enforce']))
def test_what_a_plan_counts_as_verified_carries_the_consumed_bytes(
    request: tuple[ConsumedHistory, list[ModelMessage]], mode: GuardMode
):
    consumed, proposed = request
    plan = _plan(consumed, proposed, mode)
    event(f'{mode} {plan.decision.action}')
    assert plan.verified <= consumed.boundary
    assert _encoded(plan.sends[: plan.verified]) == list(consumed.consumed[: plan.verified])


@given(requests())
def test_an_enforced_plan_keeps_the_consumed_prefix_or_opens_a_window_and_never_breaks_a_pair(
    request: tuple[ConsumedHistory, list[ModelMessage]],
):
    consumed, proposed = request
    plan = _plan(consumed, proposed, 'enforce')
    event(plan.decision.action)
    if plan.error is not None:
        # Nothing is sent: the new request itself breaks a pair, so no older shape of the history can go instead.
        assert tool_pair_problems(proposed, sending=True)
        return
    if not plan.opened:
        assert _encoded(plan.sends[: consumed.boundary]) == list(consumed.consumed)
    assert tool_pair_problems(plan.sends, sending=True) == []


@given(requests())
def test_an_observed_plan_sends_what_it_was_given(request: tuple[ConsumedHistory, list[ModelMessage]]):
    consumed, proposed = request
    plan = _plan(consumed, proposed, 'observe')
    assert plan.error is None
    if plan.rewritten:
        # A compaction that comes to nothing in whole tool pairs goes out as the history was, in either mode.
        assert plan.decision.action == 'patch'
        assert _encoded(plan.sends[: consumed.boundary]) == list(consumed.consumed)
    else:
        assert plan.sends == tuple(proposed)
    # A patch is the rule kept, and a compaction in whole pairs is warned about only where its cut had to move; a
    # rewrite of what the model consumed that is neither is always said.
    if plan.decision.action == 'patch':
        assert plan.warnings == ()
    elif plan.decision.action != 'compact':
        assert plan.warnings != ()


@given(requests(), st.sampled_from(['observe', 'enforce']))
def test_a_plan_is_the_same_however_often_it_is_asked(
    request: tuple[ConsumedHistory, list[ModelMessage]], mode: GuardMode
):
    consumed, proposed = request
    given_bytes = _encoded(proposed)
    first = _plan(consumed, proposed, mode)
    again = _plan(consumed, proposed, mode)
    # An error is an exception object, equal only to itself: it is compared by what it says.
    assert replace(again, error=None) == replace(first, error=None)
    assert str(again.error) == str(first.error)
    assert _encoded(proposed) == given_bytes
