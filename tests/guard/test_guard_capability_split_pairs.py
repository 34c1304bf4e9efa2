"""A history processor that separates a tool call from its result, through an agent: refused, the consumed prefix kept.

Issue 38: a processor that deletes one result of a parallel tool call (two calls in one reply) from a message the model
already read, in place (it edits the very objects the run's history holds), was taken for a summary of that message.
The guard put a marker saying a message was elided into the middle of what the model had read, and Pydantic AI's own
repair then told the model the call "was interrupted before a result was produced", though it ran; no warning was
given. Deleting the call and keeping its result sent neither, behind the same marker, silently. The pairs were checked
against the edited objects, so the pair the processor broke looked like one the history already had; and a message
with parts deleted was taken for a summary, so even deleting a whole pair from the two messages put a marker in them.

Each form is run here as a user hits it, through an `Agent` with `ProcessHistory` and `PrefixGuard`, on every supported
release: the request goes out with what the model consumed, both results as they were, and one warning names the call
and the rule (or, for the whole pair deleted, the edit). What the model was sent is written down when it is sent, since
the processor edits the messages later.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator
from contextlib import contextmanager
from typing import Any, cast

from dirty_equals import IsStr
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append.guard import PrefixGuard, compact, tool_pair_problems

Processor = Callable[[list[ModelMessage]], list[ModelMessage]]


def described(messages: list[ModelMessage]) -> list[str]:
    """Each message as the model reads it: its kind, and each part's tool call id or content."""
    return [
        f'{message.kind}: '
        + ' | '.join(
            f'{part.part_kind} {part.tool_call_id}'
            + (f' {part.content}' if isinstance(part, BaseToolReturnPart) else '')
            if isinstance(part, BaseToolCallPart | BaseToolReturnPart)
            else f'{part.part_kind} {str(getattr(part, "content", ""))[:20]}'
            for part in message.parts
        )
        for message in messages
    ]


class ParallelCalls:
    """A model that calls `query_db` twice in one reply (`c1`, `c2`), then `c3` when `more` says so, then answers.

    It writes down what it is sent as it is sent.
    """

    def __init__(self, *, more: bool) -> None:
        self.more = more
        self.sent: list[list[str]] = []

    def model(self) -> FunctionModel:
        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.sent.append(described(messages))
            calls = sum(isinstance(part, ToolCallPart) for message in messages for part in message.parts)
            if calls == 0:
                return ModelResponse(
                    parts=[
                        ToolCallPart('query_db', {'sql': 'a'}, tool_call_id='c1'),
                        ToolCallPart('query_db', {'sql': 'b'}, tool_call_id='c2'),
                    ]
                )
            if calls == 2 and self.more:
                return ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'c'}, tool_call_id='c3')])
            return ModelResponse(parts=[TextPart('done')])

        return FunctionModel(answer)


def query_db(sql: str) -> str:
    """Run a read-only SQL query."""
    return f'rows {sql}'


def delete_in_place(kind: type[BaseToolCallPart | BaseToolReturnPart]) -> Processor:
    """A processor that deletes the part of `kind` with id `c2` from each message the model already read, in place."""

    def delete(messages: list[ModelMessage]) -> list[ModelMessage]:
        for message in messages[:-1]:
            parts = [part for part in message.parts if not (isinstance(part, kind) and part.tool_call_id == 'c2')]
            cast('Any', message).parts = parts
        return messages

    return delete


@contextmanager
def caught() -> Generator[list[str]]:
    """The warnings given inside the block, each as its class and its text."""
    found: list[str] = []
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter('always')
        yield found
    found += [f'{type(warning.message).__name__}: {warning.message}' for warning in given]


def test_a_result_deleted_in_place_from_a_parallel_call_is_refused():
    model = ParallelCalls(more=True)
    agent = Agent(
        model.model(),
        tools=[query_db],
        capabilities=[ProcessHistory(delete_in_place(BaseToolReturnPart)), PrefixGuard()],
    )
    with caught() as found:
        result = agent.run_sync('Query a, b, then c.').all_messages()
    # The third request is the first that sends the results of `c1` and `c2` again: the processor deletes one, the guard
    # sends both as the model read them, and says why.
    assert found == snapshot(
        [
            "OrphanedToolPairWarning: Refused, the consumed prefix kept: `query_db` call 'c2' at message 1, part 1 gets no result before the next response (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)"
        ]
    )
    assert model.sent[2] == snapshot(
        [
            'request: user-prompt Query a, b, then c.',
            'response: tool-call c1 | tool-call c2',
            'request: tool-return c1 rows a | tool-return c2 rows b',
            'response: tool-call c3',
            'request: tool-return c3 rows c',
        ]
    )
    assert (described(result)[2], tool_pair_problems(result)) == snapshot(
        ('request: tool-return c1 rows a | tool-return c2 rows b', [])
    )


def test_a_part_of_a_parallel_call_deleted_in_place_on_a_later_run_is_refused():
    found: dict[str, list[str]] = {}
    for name, kind in [('result', BaseToolReturnPart), ('call', BaseToolCallPart)]:
        model = ParallelCalls(more=False)
        guard = PrefixGuard[None]()
        history = (
            Agent(model.model(), deps_type=type(None), tools=[query_db], capabilities=[guard])
            .run_sync('Query a and b.')
            .all_messages()
        )
        agent = Agent(
            model.model(),
            deps_type=type(None),
            tools=[query_db],
            capabilities=[ProcessHistory(delete_in_place(kind)), guard],
        )
        with caught() as found[name]:
            result = agent.run_sync('Thanks.', message_history=history).all_messages()
        # What the model read, both calls and both results, then the new prompt.
        assert model.sent[-1] == [*model.sent[-2], 'response: text done', 'request: user-prompt Thanks.']
        assert tool_pair_problems(result) == []
    assert found == snapshot(
        {
            'result': [
                "OrphanedToolPairWarning: Refused, the consumed prefix kept: `query_db` call 'c2' at message 1, part 1 gets no result before the next response (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)"
            ],
            'call': [
                "OrphanedToolPairWarning: Refused, the consumed prefix kept: the result of `query_db` call 'c2' at message 2, part 1 has no call before it (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)"
            ],
        }
    )


def test_each_request_that_deletes_a_call_is_refused_and_observe_mode_sends_it_once():
    found: dict[str, list[str]] = {}
    for mode in ('enforce', 'observe'):
        guard = PrefixGuard[None](mode=mode)
        deleting = ProcessHistory[None](delete_in_place(BaseToolCallPart))
        agent = Agent(
            ParallelCalls(more=True).model(), deps_type=type(None), tools=[query_db], capabilities=[deleting, guard]
        )
        with caught() as found[mode]:
            agent.run_sync('Query a, b, then c.')
    # Enforce mode refuses it at each request, the processor deleting the call again from the history put back; observe
    # mode sends it, and says both what it breaks and what it changes, once: the model consumed it.
    assert found == snapshot(
        {
            'enforce': [
                "OrphanedToolPairWarning: Refused, the consumed prefix kept: the result of `query_db` call 'c2' at message 2, part 1 has no call before it (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)",
                "OrphanedToolPairWarning: Refused, the consumed prefix kept: the result of `query_db` call 'c2' at message 2, part 1 has no call before it (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)",
            ],
            'observe': [
                "OrphanedToolPairWarning: Sent anyway (observe mode): the result of `query_db` call 'c2' at message 2, part 1 has no call before it (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)",
                IsStr(
                    regex=r'ConsumedPrefixChangedWarning: Sent anyway \(observe mode\): message 1 \(consumed\) would change .*'
                ),
            ],
        }
    )


def test_a_result_deleted_in_place_by_a_processor_that_also_compacts_is_refused():
    model = ParallelCalls(more=False)
    guard = PrefixGuard[None]()
    greeting = [ModelRequest.user_text_prompt('Hello.'), ModelResponse(parts=[TextPart('Hi.')])]
    agent = Agent(model.model(), deps_type=type(None), tools=[query_db], capabilities=[guard])
    history = agent.run_sync('Query a and b.', message_history=greeting).all_messages()
    deleting = delete_in_place(BaseToolReturnPart)

    def delete_then_compact(messages: list[ModelMessage]) -> list[ModelMessage]:
        # The cut before the tool exchange is whole; the deletion inside what it keeps is not.
        return compact(deleting(messages), keep_from=2)

    agent = Agent(
        model.model(), deps_type=type(None), tools=[query_db], capabilities=[ProcessHistory(delete_then_compact), guard]
    )
    with caught() as found:
        result = agent.run_sync('Thanks.', message_history=history).all_messages()
    assert found == snapshot(
        [
            "OrphanedToolPairWarning: Refused, the consumed prefix kept: `query_db` call 'c2' at message 1, part 1 gets no result before the next response (the rule: a rewrite that separates a tool call from its result is refused unless it compacts in whole tool pairs)"
        ]
    )
    assert model.sent[-1] == [*model.sent[-2], 'response: text done', 'request: user-prompt Thanks.']
    assert tool_pair_problems(result) == []


def test_a_whole_pair_deleted_in_place_from_parallel_calls_is_an_edit():
    model = ParallelCalls(more=False)
    guard = PrefixGuard[None]()
    history = Agent(model.model(), deps_type=type(None), tools=[query_db], capabilities=[guard]).run_sync(
        'Query a and b.'
    )
    call, result = delete_in_place(BaseToolCallPart), delete_in_place(BaseToolReturnPart)
    deleting = ProcessHistory[None](lambda messages: result(call(messages)))
    agent = Agent(model.model(), deps_type=type(None), tools=[query_db], capabilities=[deleting, guard])
    with caught() as found:
        agent.run_sync('Thanks.', message_history=history.all_messages())
    # Each message keeps the other call's parts, so none was elided: this is no compaction, and no marker says one
    # was. It is refused as an edit of what the model read.
    assert found == snapshot(
        [
            IsStr(
                regex=r'ConsumedPrefixChangedWarning: Refused, the consumed prefix kept: message 1 \(consumed\) would change .*'
            )
        ]
    )
    assert model.sent[-1] == [*model.sent[-2], 'response: text done', 'request: user-prompt Thanks.']
