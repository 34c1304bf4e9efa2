"""Tool calls and their results: which are paired, which are not, and where.

Providers reject a conversation in which a tool result has no call before it, or a call is never answered:
Anthropic wants each `tool_use` answered in the very next user turn, OpenAI each assistant `tool_calls` entry
answered by a `tool` message before the next assistant message. Pydantic AI merges consecutive requests before
sending them, so here a call in a [`ModelResponse`][pydantic_ai.messages.ModelResponse] is answered if one of
the requests between it and the next response carries a result with its id. Native (provider-run) tools are
called and answered inside one response, the result after the call.

What counts, on every supported release:

- calls: every [`BaseToolCallPart`][pydantic_ai.messages.BaseToolCallPart] in a response (function tools,
  output tools, tool search and capability loading, native tools);
- results: every [`BaseToolReturnPart`][pydantic_ai.messages.BaseToolReturnPart] (a native tool's in a response,
  the others in a request), and every `RetryPromptPart` that names a tool (a retry tied to a call).

The calls of the last response are awaiting their results, not orphaned: a run can end there (deferred tools,
approvals) and the results come with the next run. Messages about to be sent are held to more: once a request
follows the last response, each of its calls must be answered by then.

Pydantic AI repairs what it is sent (it drops an orphaned result and makes up a result for a call that has
none), so a broken pair doesn't fail the request: the model silently loses a result it was given, or is told a
call was interrupted that wasn't. That is why the pairs are checked before the repair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeAlias

from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
)

from .._compat import retried_call

PairProblemKind: TypeAlias = Literal['unanswered_call', 'orphaned_result', 'result_before_call', 'duplicate_result']
"""What is wrong with a tool call or result:

- `unanswered_call`: a call that a later response follows with no result for it in between;
- `orphaned_result`: a result whose id no call before it has;
- `result_before_call`: a result whose call comes after it;
- `duplicate_result`: a second result for a call that was already answered.
"""


class Position(NamedTuple):
    """Where a part is: the index of its message in the history, and its index among that message's parts."""

    message_index: int
    """The index of the message."""

    part_index: int
    """The index of the part within the message."""

    def __str__(self) -> str:
        return f'message {self.message_index}, part {self.part_index}'


@dataclass(frozen=True)
class ToolPairProblem:
    """A tool call without its result, or a result without its call, with where each side is.

    ```python
    from pydantic_ai_append.guard import ToolPairProblem
    from pydantic_ai_append.guard._pairing import Position

    problem = ToolPairProblem('orphaned_result', 'call_1', 'query_db', call=None, result=Position(2, 0))
    print(problem.describe())
    #> the result of `query_db` call 'call_1' at message 2, part 0 has no call before it
    ```
    """

    kind: PairProblemKind
    """What is wrong."""

    tool_call_id: str
    """The id of the call, as the call or the result states it."""

    tool_name: str | None
    """The tool's name, as the part states it."""

    call: Position | None
    """Where the call is, or `None` if there is none."""

    result: Position | None
    """Where the result is, or `None` if there is none."""

    @property
    def key(self) -> tuple[str, str, str | None]:
        """What the problem is, wherever it is: its kind, call id and tool name (positions move with a rewrite)."""
        return self.kind, self.tool_call_id, self.tool_name

    def describe(self) -> str:
        """One line naming the tool, the id and the positions involved."""
        tool = f'`{self.tool_name}` call {self.tool_call_id!r}'
        match self.kind:
            case 'unanswered_call':
                return f'{tool} at {self.call} gets no result before the next response'
            case 'orphaned_result':
                return f'the result of {tool} at {self.result} has no call before it'
            case 'result_before_call':
                return f'the result of {tool} at {self.result} comes before its call at {self.call}'
            case _:  # 'duplicate_result'
                return f'{tool} at {self.call} is answered twice, again at {self.result}'


def tool_pair_problems(messages: Sequence[ModelMessage], *, sending: bool = False) -> list[ToolPairProblem]:
    """Every tool call without its result and every result without its call in `messages`, in history order.

    Args:
        messages: A message history.
        sending: Whether `messages` are about to be sent. Then a call in the latest reply must be answered by
            the requests after it, if any follow it; otherwise it may still be awaiting its result.

    ```python
    from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

    from pydantic_ai_append.guard import tool_pair_problems

    history = [
        ModelRequest.user_text_prompt('How many users?'),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'select count(*) from users'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('query_db', 42, tool_call_id='c1')]),
    ]
    print(tool_pair_problems(history))
    #> []
    print([problem.describe() for problem in tool_pair_problems(history[2:])])
    #> ["the result of `query_db` call 'c1' at message 0, part 0 has no call before it"]
    ```
    """
    return _walk(messages, sending)[0]


def tool_pairs(messages: Sequence[ModelMessage]) -> list[tuple[Position, Position]]:
    """Where each answered tool call and its result are, as `(call, result)`, in the order of the results."""
    return _walk(messages, sending=False)[1]


def _walk(
    messages: Sequence[ModelMessage], sending: bool
) -> tuple[list[ToolPairProblem], list[tuple[Position, Position]]]:
    problems: list[ToolPairProblem] = []
    pairs: list[tuple[Position, Position]] = []
    # Calls of the latest response still waiting for a result, and every call answered so far, by id.
    awaiting: dict[str, tuple[str, Position]] = {}
    answered: dict[str, Position] = {}
    later_calls = _call_positions(messages)
    for message_index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            problems += [
                ToolPairProblem('unanswered_call', call_id, name, call=position, result=None)
                for call_id, (name, position) in awaiting.items()
            ]
            awaiting = {}
            native: dict[str, tuple[str, Position]] = {}
            for part_index, part in enumerate(message.parts):
                position = Position(message_index, part_index)
                if isinstance(part, NativeToolCallPart):
                    native[part.tool_call_id] = (part.tool_name, position)
                elif isinstance(part, NativeToolReturnPart):
                    problems += _answer(
                        native, answered, later_calls, pairs, part.tool_call_id, part.tool_name, position
                    )
                elif isinstance(part, BaseToolCallPart):
                    awaiting[part.tool_call_id] = (part.tool_name, position)
            is_last = message_index == len(messages) - 1
            problems += [
                ToolPairProblem('unanswered_call', call_id, name, call=position, result=None)
                for call_id, (name, position) in native.items()
                if not is_last
            ]
        else:
            for part_index, part in enumerate(message.parts):
                # A retry that names no tool answers no call (the response as a whole was unusable).
                answer = (part.tool_call_id, part.tool_name) if isinstance(part, BaseToolReturnPart) else None
                if (answer := answer or retried_call(part)) is not None:
                    position = Position(message_index, part_index)
                    problems += _answer(awaiting, answered, later_calls, pairs, *answer, position)
    if sending and messages and not isinstance(messages[-1], ModelResponse):
        problems += [
            ToolPairProblem('unanswered_call', call_id, name, call=position, result=None)
            for call_id, (name, position) in awaiting.items()
        ]
    return problems, pairs


def _answer(
    awaiting: dict[str, tuple[str, Position]],
    answered: dict[str, Position],
    later_calls: dict[str, list[Position]],
    pairs: list[tuple[Position, Position]],
    tool_call_id: str,
    tool_name: str | None,
    position: Position,
) -> list[ToolPairProblem]:
    """Pair one result with the call awaiting it, or say why it can't be."""
    waiting = awaiting.pop(tool_call_id, None)
    if waiting is not None:
        answered[tool_call_id] = waiting[1]
        pairs.append((waiting[1], position))
        return []
    if tool_call_id in answered:
        return [
            ToolPairProblem('duplicate_result', tool_call_id, tool_name, call=answered[tool_call_id], result=position)
        ]
    after = [call for call in later_calls.get(tool_call_id, []) if call > position]
    if after:
        return [ToolPairProblem('result_before_call', tool_call_id, tool_name, call=after[0], result=position)]
    return [ToolPairProblem('orphaned_result', tool_call_id, tool_name, call=None, result=position)]


def _call_positions(messages: Sequence[ModelMessage]) -> dict[str, list[Position]]:
    """Where each call id is called, in history order."""
    calls: dict[str, list[Position]] = {}
    for message_index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            for part_index, part in enumerate(message.parts):
                if isinstance(part, BaseToolCallPart):
                    calls.setdefault(part.tool_call_id, []).append(Position(message_index, part_index))
    return calls


def called_tools(messages: Sequence[ModelMessage]) -> dict[str, int]:
    """Each function or output tool that `messages` call, with the index of the first message that calls it.

    Native tools are left out: the provider runs them, so no request declares them.
    """
    called: dict[str, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, BaseToolCallPart) and not isinstance(part, NativeToolCallPart):
                    called.setdefault(part.tool_name, index)
    return called
