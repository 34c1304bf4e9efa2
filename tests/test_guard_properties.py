"""Properties of the guard's decision over generated histories and rewrites, on the pure model.

The model tests pin particular rewrites; these check the rules for any: a rewrite that changes the consumed
prefix is never patched, a rewrite that is applied (now, or at the next window boundary) never leaves a tool
call or result without its partner, and a decision is the same however often it is asked.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any, cast

from hypothesis import event, given
from hypothesis import strategies as st
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai_append.guard import ContextWindow, apply_rewrite, decide_rewrite, message_bytes, tool_pair_problems


@st.composite
def histories(draw: st.DrawFn) -> list[ModelMessage]:
    """Well-formed conversations: user turns, rounds of several tool calls answered in one or two requests."""
    messages: list[ModelMessage] = []
    ids = iter(range(1000))
    for turn in range(draw(st.integers(1, 4))):
        messages.append(ModelRequest(parts=[UserPromptPart(f'turn {turn}')]))
        for _ in range(draw(st.integers(0, 2))):
            call_ids = [f'c{next(ids)}' for _ in range(draw(st.integers(1, 3)))]
            messages.append(ModelResponse(parts=[ToolCallPart('tool', {'n': i}, tool_call_id=i) for i in call_ids]))
            split = draw(st.integers(1, len(call_ids)))
            for chunk in (call_ids[:split], call_ids[split:]):
                if chunk:
                    messages.append(ModelRequest(parts=[ToolReturnPart('tool', 'ok', tool_call_id=i) for i in chunk]))
        messages.append(ModelResponse(parts=[TextPart(f'answer {turn}')]))
    if draw(st.booleans()):
        messages.append(ModelRequest(parts=[UserPromptPart('pending')]))
    return messages


def _drop_part(message: ModelMessage, index: int) -> ModelMessage:
    if isinstance(message, ModelRequest):
        request_parts: list[ModelRequestPart] = [p for i, p in enumerate(message.parts) if i != index]
        return replace(message, parts=request_parts)
    response_parts: list[ModelResponsePart] = [p for i, p in enumerate(message.parts) if i != index]
    return replace(message, parts=response_parts)


def _edit_part(message: ModelMessage) -> ModelMessage:
    edited = copy.deepcopy(message)
    part = edited.parts[0]
    # Changed in place, as a careless history processor would: the window kept the bytes it consumed.
    if isinstance(part, ToolCallPart):
        cast(Any, part).args = {'edited': True}
    elif isinstance(part, TextPart | UserPromptPart | ToolReturnPart):
        cast(Any, part).content = 'edited'
    return edited


@st.composite
def rewrites(draw: st.DrawFn, messages: list[ModelMessage]) -> list[ModelMessage]:
    """One to three edits of the kinds history processors and compaction make."""
    proposed = list(messages)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(['drop_slice', 'drop_part', 'edit', 'append', 'swap', 'duplicate']))
        if kind == 'append' or not proposed or not all(message.parts for message in proposed):
            proposed.append(ModelRequest(parts=[UserPromptPart('appended')]))
            continue
        i = draw(st.integers(0, len(proposed) - 1))
        j = draw(st.integers(i, len(proposed)))
        if kind == 'drop_slice':
            del proposed[i:j]
        elif kind == 'drop_part':
            proposed[i] = _drop_part(proposed[i], draw(st.integers(0, len(proposed[i].parts) - 1)))
        elif kind == 'edit':
            proposed[i] = _edit_part(proposed[i])
        elif kind == 'swap':
            k = min(j, len(proposed) - 1)
            proposed[i], proposed[k] = proposed[k], proposed[i]
        else:
            proposed.insert(i, proposed[i])
    return proposed


def _problems(messages: list[ModelMessage] | tuple[ModelMessage, ...]) -> set[tuple[str, str]]:
    return {(problem.kind, problem.tool_call_id) for problem in tool_pair_problems(messages)}


@given(st.data())
def test_a_rewrite_that_changes_the_consumed_prefix_is_never_patched(data: st.DataObject):
    messages = data.draw(histories())
    window = ContextWindow.of(messages)
    proposed = data.draw(rewrites(messages))
    decision = decide_rewrite(window, proposed)
    prefix_kept = len(proposed) >= window.boundary and all(
        message_bytes(proposed[i]) == message_bytes(messages[i]) for i in range(window.boundary)
    )
    assert (decision.divergence is None) == prefix_kept
    if not prefix_kept:
        assert decision.action != 'patch'


@given(st.data())
def test_an_applied_rewrite_never_leaves_an_orphan(data: st.DataObject):
    messages = data.draw(histories())
    assert tool_pair_problems(messages) == []
    window = ContextWindow.of(messages)
    proposed = data.draw(rewrites(messages))
    decision = decide_rewrite(window, proposed)
    event(decision.action)
    if decision.action == 'abort':
        # The orphan (or the duplicate) is really there, and the old prefix is what is kept.
        assert _problems(proposed)
        return
    applied, _ = apply_rewrite(window, proposed)
    assert _problems(applied.messages) == set()
    assert _problems(applied.open_next().messages) == set()


@given(st.data())
def test_a_decision_is_the_same_however_often_it_is_asked(data: st.DataObject):
    messages = data.draw(histories())
    window = ContextWindow.of(messages)
    proposed = data.draw(rewrites(messages))
    first = decide_rewrite(window, proposed)
    assert decide_rewrite(window, proposed) == first
    # Nor does it depend on the objects: the same history loaded from JSON gets the same decision.
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(proposed))
    assert decide_rewrite(window, loaded) == first
