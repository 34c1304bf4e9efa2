"""What `PrefixGuard` does with one request (`_plan`), through an agent and on the pure function.

Edge cases of the guard found in review: processors that edit in place, drop the latest reply, summarise, or
compact and break a pair in the same step; values that don't survive JSON.

Each test names the behaviour it pins; the agent tests use a `FunctionModel` that records what it was sent.

Properties of the guard's plan for a request, over generated histories and rewrites, on the pure function.

`PrefixGuard` works out what it does with a request in one pure step (`plan_guarded_request`) and its hooks carry that out.
The agent tests pin particular requests; these check the rules for any rewrite a history processor might make, which
no set of agent runs could list: the leading messages a plan counts as verified carry the bytes the model consumed, an
enforced plan keeps the consumed prefix unless it opens a window and never sends a broken tool pair, an observed one
sends what it was given, and a plan is the same however often it is asked.
"""

from __future__ import annotations

import datetime
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import pytest
from hypothesis import assume, event, given
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append.guard import (
    ConsumedHistory,
    PrefixGuard,
    compact,
    tool_pair_problems,
)
from pydantic_ai_append.guard._bytes import message_bytes
from pydantic_ai_append.guard._compaction import elided_count, elision_marker
from pydantic_ai_append.guard._options import GuardMode
from pydantic_ai_append.guard._plan import RequestPlan, plan_guarded_request

from .test_decision import histories, rewrites

pytestmark = [pytest.mark.anyio]


def shape(messages: list[ModelMessage]) -> list[str]:
    return [
        type(m).__name__[5:] + ':' + ','.join(str(getattr(p, 'content', p.part_kind))[:12] for p in m.parts)
        for m in messages
    ]


class Recording:
    """A model that calls `lookup` until it has made `calls` calls, then answers; it keeps what it was sent."""

    def __init__(self, calls: int = 0) -> None:
        self.calls = calls
        self.sent: list[list[ModelMessage]] = []

    def model(self) -> FunctionModel:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.sent.append(list(messages))
            made = sum(isinstance(p, ToolCallPart) for m in messages for p in m.parts)
            if made < self.calls:
                return ModelResponse(parts=[ToolCallPart('lookup', {'q': made}, tool_call_id=f'c{made}')])
            return ModelResponse(parts=[TextPart('ok')])

        return FunctionModel(answer)


def agent(model: FunctionModel, *capabilities: Any, result: object = 'r') -> Agent[None, str]:
    def lookup(q: int) -> object:
        """Look something up."""
        return result

    return Agent(model, deps_type=type(None), tools=[lookup], capabilities=list(capabilities))


def caught_warnings(run: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        run()
    return [f'{type(w.message).__name__}: {str(w.message).split(":")[0]}' for w in caught]


def edit_in_place_at_step(
    step: int, kind: type[ToolReturnPart | UserPromptPart], edit: Callable[[Any], object]
) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """A processor that, at its `step`-th request only, edits the content of every earlier part of `kind` in place."""
    steps = {'n': 0}

    def edit_once(messages: list[ModelMessage]) -> list[ModelMessage]:
        steps['n'] += 1
        if steps['n'] == step:
            for message in messages[:-1]:
                for part in message.parts:
                    if isinstance(part, kind):
                        cast('Any', part).content = edit(part.content)
        return messages

    return edit_once


def clear_results_at_step(step: int) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """A processor that, at its `step`-th request only, clears every earlier tool result in place."""
    return edit_in_place_at_step(step, ToolReturnPart, lambda content: '[cleared]')


def annotate_prompts_at_step(step: int) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """A processor that, at its `step`-th request only, adds a note to every earlier prompt in place: an edit."""
    return edit_in_place_at_step(step, UserPromptPart, lambda content: f'{content} (noted)')


def compact_then_drop_calls(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A processor that compacts, then breaks a pair by dropping every response that calls a tool."""
    kept = compact(messages, keep_from=2)
    return [m for m in kept if not any(isinstance(p, ToolCallPart) for p in m.parts)]


@pytest.mark.parametrize('mode', ['observe', 'enforce'])
def test_an_edit_made_once_is_reported_once(mode: str):
    model = Recording(calls=4)
    guarded = agent(
        model.model(), ProcessHistory(annotate_prompts_at_step(3)), PrefixGuard[None](mode=cast('Any', mode))
    )
    found = caught_warnings(lambda: guarded.run_sync('go'))
    # Observe mode sent the edit, so the model consumed it; enforce mode sent the original. Either way, once.
    assert [w.split(':')[0] for w in found] == ['ConsumedPrefixChangedWarning']


def test_a_processor_dropping_the_only_reply_between_two_prompts_sends_the_history_as_it_was():
    model = Recording()

    def drop_text_replies(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [m for m in messages if not (isinstance(m, ModelResponse) and isinstance(m.parts[0], TextPart))]

    # Without the reply the two prompts would be one request, which a later compaction that keeps "the first
    # message" would keep growing: the reply is kept, and what is left of the rewrite is nothing, sent unwarned.
    guard = PrefixGuard[None]()
    history = agent(model.model(), guard).run_sync('one').all_messages()
    trimming = agent(model.model(), ProcessHistory(drop_text_replies), guard)
    found = caught_warnings(lambda: trimming.run_sync('two', message_history=history))
    assert found == []
    assert shape(model.sent[-1]) == ['Request:one', 'Response:ok', 'Request:two']


def test_a_summary_standing_for_refused_turns_is_not_sent():
    model = Recording()
    guard = PrefixGuard[None](on_defer='keep')
    history: list[ModelMessage] = []
    for prompt in ['one', 'two']:
        history = agent(model.model(), guard).run_sync(prompt, message_history=history).all_messages()

    def summarise(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [ModelRequest.user_text_prompt('SUMMARY'), messages[-1]]

    summarising = agent(model.model(), ProcessHistory(summarise), guard)
    caught_warnings(lambda: summarising.run_sync('three', message_history=history))
    assert shape(model.sent[-1]) == ['Request:one', 'Response:ok', 'Request:two', 'Response:ok', 'Request:three']


def test_a_compaction_that_breaks_a_pair_is_refused_and_keeps_the_history():
    model = Recording()
    guard = PrefixGuard[None]()
    history = agent(model.model(), guard).run_sync('go').all_messages()
    model.calls = 1
    history = agent(model.model(), guard).run_sync('look', message_history=history).all_messages()

    compacting = agent(model.model(), ProcessHistory(compact_then_drop_calls), guard)
    found = caught_warnings(lambda: compacting.run_sync('again', message_history=history))
    assert found == ['OrphanedToolPairWarning: Refused, the consumed prefix kept']
    assert shape(model.sent[-1]) == [*shape(history), 'Request:again']


def test_compacting_a_compacted_history_counts_every_elided_message_and_opens_one_window():
    opened: list[str | None] = []

    class Observer:
        def open_window(self, model: str | None = None) -> None:
            opened.append(model)

    model = Recording(calls=3)
    steps = {'n': 0}

    def trim_once(messages: list[ModelMessage]) -> list[ModelMessage]:
        steps['n'] += 1
        return messages[-4:] if steps['n'] == 3 else messages

    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(elision_marker(10)), UserPromptPart('go on')]),
        ModelResponse(parts=[TextPart('ok')]),
    ]
    guard = PrefixGuard[None](on_defer='compact', verifier=Observer())
    found = caught_warnings(
        lambda: agent(model.model(), ProcessHistory(trim_once), guard).run_sync('next', message_history=history)
    )
    # The trim keeps the run's two tool pairs whole: applied, with one marker counting the 10 elided before and the
    # 3 elided now, in a request of its own before the first kept response.
    assert found == []
    assert opened == [None]
    assert shape(model.sent[2])[:2] == ['Request:<elided mess', 'Response:tool-call']
    assert elided_count(model.sent[2]) == 13


def test_a_restored_message_keeps_values_json_would_turn_into_strings():
    model = Recording(calls=4)
    guarded = agent(
        model.model(),
        ProcessHistory(clear_results_at_step(3)),
        PrefixGuard[None](on_defer='keep'),
        result=datetime.date(2026, 12, 1),
    )
    found = caught_warnings(lambda: guarded.run_sync('go'))
    # Restored once, with the date still a date: later requests match what was consumed.
    assert len(found) == 1
    results = [p.content for m in model.sent[-1] for p in m.parts if isinstance(p, ToolReturnPart)]
    assert results == [datetime.date(2026, 12, 1)] * 4


def test_in_observe_mode_a_compaction_that_breaks_a_pair_is_sent_and_opens_the_window():
    model = Recording()
    guard = PrefixGuard[None](mode='observe')
    history = agent(model.model(), guard).run_sync('go').all_messages()
    model.calls = 1
    history = agent(model.model(), guard).run_sync('look', message_history=history).all_messages()

    model.calls = 0
    compacting = agent(model.model(), ProcessHistory(compact_then_drop_calls), guard)
    found = caught_warnings(lambda: compacting.run_sync('again', message_history=history))
    assert found == ['OrphanedToolPairWarning: Sent anyway (observe mode)']
    assert shape(model.sent[-1])[0].startswith('Request:<elided mess')


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
    return plan_guarded_request(consumed, proposed, {}, mode=mode, on_defer='compact', declared_before=(), warned=())


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
