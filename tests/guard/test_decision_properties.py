"""Properties of the guard's decision over generated histories and rewrites, on the pure model.

The model tests pin particular rewrites; these check the rules for any: a rewrite that changes the consumed
prefix is never patched, a rewrite that is applied (now, or at the next window boundary) never leaves a tool
call or result without its partner, and a decision is the same however often it is asked.
"""

from __future__ import annotations

import copy
import warnings
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
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from pydantic_ai_append.guard import ConsumedHistory, apply_rewrite, decide_rewrite, tool_pair_problems
from pydantic_ai_append.guard._bytes import message_bytes


def _retry(call_id: str) -> ModelRequestPart:
    # Deprecated in newer releases, which load it as a `ToolReturnPart(outcome='retried')`; 2.58 histories hold it.
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return RetryPromptPart('try again', tool_name='tool', tool_call_id=call_id)  # pyright: ignore[reportDeprecated]


@st.composite
def histories(draw: st.DrawFn, *, retries: bool = True) -> list[ModelMessage]:
    """Well-formed conversations of every kind of tool pair Pydantic AI makes.

    User turns; rounds of several function calls answered in one or two requests (some by a retry tied to the
    call), with native tool calls answered inside their own response; an output tool call answered after the final
    response; and possibly a last reply whose calls are still awaiting their results.
    """
    messages: list[ModelMessage] = []
    ids = iter(range(1000))
    for turn in range(draw(st.integers(1, 4))):
        messages.append(ModelRequest(parts=[UserPromptPart(f'turn {turn}')]))
        for _ in range(draw(st.integers(0, 2))):
            call_ids = [f'c{next(ids)}' for _ in range(draw(st.integers(1, 3)))]
            parts: list[ModelResponsePart] = []
            for _ in range(draw(st.integers(0, 1))):
                native = f'n{next(ids)}'
                parts += [
                    NativeToolCallPart('web_search', {'q': native}, tool_call_id=native),
                    NativeToolReturnPart('web_search', 'found', tool_call_id=native),
                ]
            parts += [ToolCallPart('tool', {'n': i}, tool_call_id=i) for i in call_ids]
            messages.append(ModelResponse(parts=parts))
            split = draw(st.integers(1, len(call_ids)))
            for chunk in (call_ids[:split], call_ids[split:]):
                if chunk:
                    messages.append(
                        ModelRequest(
                            parts=[
                                _retry(i)
                                if retries and draw(st.booleans())
                                else ToolReturnPart('tool', 'ok', tool_call_id=i)
                                for i in chunk
                            ]
                        )
                    )
        if draw(st.booleans()):
            output = f'o{next(ids)}'
            messages.append(ModelResponse(parts=[ToolCallPart('final_result', {'answer': turn}, tool_call_id=output)]))
            messages.append(
                ModelRequest(parts=[ToolReturnPart('final_result', 'Final result processed.', tool_call_id=output)])
            )
        messages.append(ModelResponse(parts=[TextPart(f'answer {turn}')]))
    ending = draw(st.sampled_from(['reply', 'prompt', 'awaiting']))
    if ending == 'prompt':
        messages.append(ModelRequest(parts=[UserPromptPart('pending')]))
    elif ending == 'awaiting':
        messages.append(ModelRequest(parts=[UserPromptPart('one more')]))
        messages.append(ModelResponse(parts=[ToolCallPart('tool', {}, tool_call_id=f'c{next(ids)}')]))
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
        cast('Any', part).args = {'edited': True}
    elif isinstance(part, TextPart | UserPromptPart | ToolReturnPart):
        cast('Any', part).content = 'edited'
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
        elif kind in ('drop_part', 'edit'):
            index = draw(st.integers(0, len(proposed[i].parts) - 1))
            # Rebuilding a request with a deprecated retry part in it (newer releases) translates the part, and warns.
            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                proposed[i] = _drop_part(proposed[i], index) if kind == 'drop_part' else _edit_part(proposed[i])
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
    window = ConsumedHistory.of(messages)
    proposed = data.draw(rewrites(messages))
    decision = decide_rewrite(window, proposed)
    prefix_kept = len(proposed) >= window.boundary and all(
        message_bytes(proposed[i]) == message_bytes(messages[i]) for i in range(window.boundary)
    )
    assert (decision.divergence is None) == prefix_kept
    if not prefix_kept and decision.action == 'patch':
        # A compaction that comes to nothing in whole tool pairs: what is sent is the history as it was.
        assert decision.history is not None
        assert [message_bytes(message) for message in decision.history] == [
            message_bytes(message) for message in messages
        ]


@given(st.data())
def test_an_applied_rewrite_never_leaves_an_orphan(data: st.DataObject):
    messages = data.draw(histories())
    assert tool_pair_problems(messages) == []
    window = ConsumedHistory.of(messages)
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
    # Without deprecated retry parts, which a newer release loads from JSON as the part that replaced them.
    messages = data.draw(histories(retries=False))
    window = ConsumedHistory.of(messages)
    proposed = data.draw(rewrites(messages))
    first = decide_rewrite(window, proposed)
    assert decide_rewrite(window, proposed) == first
    # Nor does it depend on the objects: the same history loaded from JSON gets the same decision, and a compaction
    # the same messages (as sent: JSON gives their times another, equal, time zone object).
    loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(proposed))
    again = decide_rewrite(window, loaded)
    assert replace(again, history=None) == replace(first, history=None)
    assert [message_bytes(message) for message in again.history or ()] == [
        message_bytes(message) for message in first.history or ()
    ]
