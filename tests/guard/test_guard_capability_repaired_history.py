"""A stored history in a shape Pydantic AI repairs before a run reads it, through the guard.

Pydantic AI merges consecutive requests (as a client may store them, or an older compaction left them), drops
tool results no call asked for and, from 2.68, moves a request's other parts after its tool results, before
history processors see the history and before it is sent. The guard must take what the model consumed in that
same shape, or every request of such a run looks like a rewrite of the consumed prefix; and a real edit of a
repaired message must still be refused.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import pytest
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

from pydantic_ai_append.guard import ConsumedPrefixChangedWarning, PrefixGuard
from pydantic_ai_append.guard._bytes import message_bytes

pytestmark = [pytest.mark.anyio]

Processor = Callable[[list[ModelMessage]], list[ModelMessage]]


def two_requests_in_a_row() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart('first')]),
        ModelRequest(parts=[UserPromptPart('second')]),
        ModelResponse(parts=[TextPart('ok')]),
    ]


def an_orphaned_result() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart('first'), ToolReturnPart('lookup', 'r', tool_call_id='never-called')]),
        ModelResponse(parts=[TextPart('ok')]),
    ]


def a_prompt_between_results() -> list[ModelMessage]:
    return [
        ModelRequest(parts=[UserPromptPart('first')]),
        ModelResponse(
            parts=[ToolCallPart('lookup', {}, tool_call_id='c1'), ToolCallPart('lookup', {}, tool_call_id='c2')]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart('lookup', 'r', tool_call_id='c1'),
                UserPromptPart('between'),
                ToolReturnPart('lookup', 'r', tool_call_id='c2'),
            ]
        ),
        ModelResponse(parts=[TextPart('ok')]),
    ]


def run_guarded(history: list[ModelMessage], processor: Processor | None) -> tuple[list[str], list[ModelMessage]]:
    """Run one step on `history` with the guard (and `processor`): the warnings, and what the model was sent."""
    sent: list[ModelMessage] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent[:] = messages
        return ModelResponse(parts=[TextPart('done')])

    capabilities: list[Any] = [ProcessHistory(processor)] if processor is not None else []
    agent = Agent(FunctionModel(answer), deps_type=type(None), capabilities=[*capabilities, PrefixGuard[None]()])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        agent.run_sync('next', message_history=history)
    return [f'{type(w.message).__name__}: {str(w.message).split(":")[0]}' for w in caught], sent


def unchanged(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages


@pytest.mark.parametrize('processor', [None, unchanged], ids=['no processor', 'a no-op processor'])
@pytest.mark.parametrize('history', [two_requests_in_a_row, an_orphaned_result, a_prompt_between_results])
def test_a_history_pydantic_ai_repairs_is_not_a_rewrite(
    history: Callable[[], list[ModelMessage]], processor: Processor | None
):
    seen: list[list[bytes]] = []

    def watched(messages: list[ModelMessage]) -> list[ModelMessage]:
        seen.append([message_bytes(message) for message in messages])
        return processor(messages) if processor is not None else messages

    found, sent = run_guarded(history(), watched if processor is not None else None)
    # An orphaned result is the guard's to mend too, which it says once (`test_repair.py` has the rest).
    assert found == (
        ['OrphanedToolPairWarning: Repaired the history the run was given'] if history is an_orphaned_result else []
    )
    if processor is not None:
        # Sent as the processor saw it: the guard put nothing of the unrepaired shape back.
        assert [message_bytes(message) for message in sent] == seen[0]


def test_two_requests_in_a_row_go_out_as_one():
    found, sent = run_guarded(two_requests_in_a_row(), unchanged)
    assert found == []
    assert [[str(getattr(part, 'content', '')) for part in message.parts] for message in sent] == [
        ['first', 'second'],
        ['ok'],
        ['next'],
    ]


def edit_merged_request(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A processor that changes the second prompt of the request Pydantic AI merged, in a copy."""
    merged = messages[0]
    assert isinstance(merged, ModelRequest)
    parts = [
        dataclasses.replace(part, content='EDITED')
        if isinstance(part, UserPromptPart) and part.content == 'second'
        else part
        for part in merged.parts
    ]
    return [dataclasses.replace(merged, parts=parts), *messages[1:]]


def test_an_edit_of_a_merged_request_is_still_refused():
    found, sent = run_guarded(two_requests_in_a_row(), edit_merged_request)
    assert found == ['ConsumedPrefixChangedWarning: Refused, the consumed prefix kept']
    first = sent[0]
    assert isinstance(first, ModelRequest)
    assert [part.content for part in first.parts if isinstance(part, UserPromptPart)] == ['first', 'second']


def test_the_edit_is_reported_as_a_change_of_the_merged_request():
    agent = Agent(
        FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('done')])),
        deps_type=type(None),
        capabilities=[ProcessHistory(edit_merged_request), PrefixGuard[None]()],
    )
    with pytest.warns(ConsumedPrefixChangedWarning, match=r'message 0 \(consumed\) would change .*EDITED'):
        agent.run_sync('next', message_history=two_requests_in_a_row())
