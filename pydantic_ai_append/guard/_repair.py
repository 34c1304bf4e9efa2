"""Histories that arrive broken, mended in whole tool-pair units before anything is sent.

A conversation's stored history can hold a tool call without its result (a tool timed out or its process died after
the call was stored, and the user's next message was stored after it) or a result without its call (code outside the
run trimmed the call away). Pydantic AI mends such a history silently when a run starts. The guard mends it first, the
same way every time, and says so once, naming each call: a result without its call is dropped (nothing can pair it),
and a call without its result is answered with a result saying it was not run (`repair='answer'`), or dropped
(`repair='drop'`). No tool is run to answer a call. A call that a provider runs itself (a native tool) can only be
dropped. The calls of the history's latest reply are left alone: they may still be answered, by resuming the run or
by deferred tool results, and Pydantic AI refuses a new prompt after them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Literal, TypeAlias

from pydantic_ai.messages import (
    BaseToolCallPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    NativeToolCallPart,
    ToolReturnPart,
)

from ._pairing import Position, ToolPairProblem, tool_pair_problems

RepairPolicy: TypeAlias = Literal['answer', 'drop']
"""What becomes of a tool call that a history never answered: answered as not run, or dropped."""

NOT_RUN = (
    'This call has no result: the run was interrupted before it returned (the tool was cancelled or its process '
    'stopped), and it was not run again. Check its effects before calling it again.'
)
"""The result a call that a history never answered is given with `repair='answer'`."""


def repaired(
    messages: Sequence[ModelMessage], policy: RepairPolicy
) -> tuple[list[ModelMessage], list[tuple[ToolPairProblem, str]]]:
    """`messages` with every broken tool pair mended, and each problem found with what was done about it.

    ```python
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart

    from pydantic_ai_append.guard._repair import repaired

    history = [
        ModelRequest.user_text_prompt('Deploy.'),
        ModelResponse(parts=[ToolCallPart('deploy', {}, tool_call_id='c1')]),
        ModelRequest.user_text_prompt('Is it done?'),
    ]
    mended, done = repaired(history, 'answer')
    print([f'{problem.tool_call_id}: {action}' for problem, action in done])
    #> ['c1: answered as not run']
    ```
    """
    mended = list(messages)
    done: list[tuple[ToolPairProblem, str]] = []
    # Mending one problem can show another (a result dropped for coming before its call leaves that call
    # unanswered), so this goes on until none is left; each round removes a part or answers a call, so it ends.
    while problems := _problems(mended):
        problem = problems[0]
        if problem.kind != 'unanswered_call':
            assert problem.result is not None
            mended = _without(mended, problem.result)
            done.append((problem, 'dropped'))
            continue
        assert problem.call is not None
        call = mended[problem.call.message_index].parts[problem.call.part_index]
        if policy == 'drop' or isinstance(call, NativeToolCallPart):
            mended = _without(mended, problem.call)
            done.append((problem, 'dropped'))
        else:
            assert isinstance(call, BaseToolCallPart)
            mended = _answered(
                mended, problem.call.message_index, ToolReturnPart(call.tool_name, NOT_RUN, call.tool_call_id)
            )
            done.append((problem, 'answered as not run'))
    return mended, done


def _problems(messages: Sequence[ModelMessage]) -> list[ToolPairProblem]:
    # A history that ends with a request is about to be sent: the calls before it must all be answered. One that ends
    # with a reply may still get its calls answered.
    return tool_pair_problems(messages, sending=bool(messages) and isinstance(messages[-1], ModelRequest))


def _without(messages: list[ModelMessage], position: Position) -> list[ModelMessage]:
    """`messages` without the part at `position`, and without its message if that is left empty."""
    message = messages[position.message_index]
    parts = [part for index, part in enumerate(message.parts) if index != position.part_index]
    kept = [replace(message, parts=parts)] if parts else []
    return [*messages[: position.message_index], *kept, *messages[position.message_index + 1 :]]


def _answered(messages: list[ModelMessage], call_index: int, result: ToolReturnPart) -> list[ModelMessage]:
    """`messages` with `result` first in the request after the response at `call_index` (a new one if none follows)."""
    after = call_index + 1
    following = messages[after] if after < len(messages) else None
    if isinstance(following, ModelRequest):
        parts: list[ModelRequestPart] = [result, *following.parts]
        return [*messages[:after], replace(following, parts=parts), *messages[after + 1 :]]
    assert following is None or isinstance(following, ModelResponse)
    return [*messages[:after], ModelRequest(parts=[result]), *messages[after:]]
