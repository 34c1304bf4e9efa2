"""Histories that arrive broken, built the ways they arise in practice, mended by the guard before anything is sent.

Pydantic AI issue 4728: a tool call stored without its result (its tool cancelled or its process stopped, the
conversation stored on past it) or a result stored without its call (trimmed by code outside the run). Pydantic AI
mends such a history silently; the guard mends it in whole tool pairs, the same way on every release, says so once
naming each call, and never runs a tool to answer a call.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Literal

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append.guard import OrphanedToolPairWarning, PrefixGuard, tool_pair_problems
from pydantic_ai_append.guard._repair import NOT_RUN, repaired


class Deployer:
    """An agent whose model deploys once, then answers; it writes down what each request sent and each deploy."""

    def __init__(self, guard: PrefixGuard[None] | None) -> None:
        self.sent: list[list[ModelMessage]] = []
        self.deploys = 0

        def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            self.sent.append(list(messages))
            asked = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
            if asked == ['Deploy the service.'] and not any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
                return ModelResponse(parts=[ToolCallPart('deploy', {}, tool_call_id='d1')])
            return ModelResponse(parts=[TextPart('ok')])

        def deploy() -> str:
            """Deploy the service."""
            self.deploys += 1
            return 'deployed'

        self.agent = Agent(
            FunctionModel(answer), deps_type=type(None), tools=[deploy], capabilities=[guard] if guard else []
        )


def stored_after_the_process_stopped() -> list[ModelMessage]:
    # The process stopped after the model's call was stored and before the tool returned; the chat server stored
    # the user's next message when it came, as chat servers do before they run the agent.
    return [
        ModelRequest.user_text_prompt('Deploy the service.'),
        ModelResponse(parts=[ToolCallPart('deploy', {}, tool_call_id='d1')]),
        ModelRequest.user_text_prompt('Is it done?'),
    ]


def trimmed_by_the_store() -> list[ModelMessage]:
    # A store that keeps the last three messages of each conversation: it cut the call and kept its result.
    return [
        ModelRequest(parts=[ToolReturnPart('deploy', 'deployed', tool_call_id='d1')]),
        ModelResponse(parts=[TextPart('Deployed.')]),
        ModelRequest.user_text_prompt('Thanks. And the logs?'),
    ]


def run(history: list[ModelMessage], guard: PrefixGuard[None] | None) -> tuple[Deployer, list[str]]:
    deployer = Deployer(guard)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        deployer.agent.run_sync(message_history=history)
    return deployer, [f'{type(w.message).__name__}: {w.message}' for w in caught]


def shape(messages: list[ModelMessage]) -> list[str]:
    return [
        ' '.join(
            f'{type(part).__name__}({getattr(part, "tool_call_id", None) or str(getattr(part, "content", ""))[:24]})'
            for part in message.parts
        )
        for message in messages
    ]


@pytest.mark.parametrize('policy', ['answer', 'drop'])
def test_a_call_stored_without_its_result_is_mended_before_it_is_sent(policy: Literal['answer', 'drop']):
    deployer, found = run(stored_after_the_process_stopped(), PrefixGuard[None](repair=policy))
    # Never run to answer the call, and the request went out mended, once, naming the call.
    assert deployer.deploys == 0
    action = 'answered as not run' if policy == 'answer' else 'dropped'
    assert found == [
        "OrphanedToolPairWarning: Repaired the history the run was given: `deploy` call 'd1' at message 1, part 0 "
        + f'gets no result before the next response: {action}'
    ]
    sent = deployer.sent[0]
    assert tool_pair_problems(sent, sending=True) == []
    if policy == 'answer':
        assert shape(sent) == snapshot(
            [
                'UserPromptPart(Deploy the service.)',
                'ToolCallPart(d1)',
                'ToolReturnPart(d1) UserPromptPart(Is it done?)',
            ]
        )
        returned = sent[2].parts[0]
        assert isinstance(returned, ToolReturnPart) and returned.content == NOT_RUN
    else:
        assert shape(sent) == snapshot(['UserPromptPart(Deploy the service.) UserPromptPart(Is it done?)'])


def test_without_the_guard_pydantic_ai_answers_the_call_silently():
    # The negative control: the same history is mended by Pydantic AI too, with its own words and no warning.
    deployer, found = run(stored_after_the_process_stopped(), None)
    assert found == [] and deployer.deploys == 0
    returned = deployer.sent[0][2].parts[0]
    assert isinstance(returned, ToolReturnPart) and returned.content != NOT_RUN


def test_a_result_stored_without_its_call_is_dropped_and_named():
    deployer, found = run(trimmed_by_the_store(), PrefixGuard[None]())
    assert found == [
        "OrphanedToolPairWarning: Repaired the history the run was given: the result of `deploy` call 'd1' at "
        + 'message 0, part 0 has no call before it: dropped'
    ]
    assert shape(deployer.sent[0]) == snapshot(['TextPart(Deployed.)', 'UserPromptPart(Thanks. And the logs?)'])
    assert deployer.deploys == 0


def test_the_mended_history_is_what_the_run_keeps_so_the_next_run_warns_nothing():
    guard = PrefixGuard[None]()
    deployer = Deployer(guard)
    with pytest.warns(OrphanedToolPairWarning, match="call 'd1'"):
        history = deployer.agent.run_sync(message_history=stored_after_the_process_stopped()).all_messages()
    assert tool_pair_problems(history) == []
    # Mended once: the next run of the conversation starts from the mended history, with its prefix as sent.
    again = deployer.agent.run_sync('And now?', message_history=history)
    assert deployer.sent[1][: len(deployer.sent[0])] == deployer.sent[0]
    assert again.output == 'ok' and deployer.deploys == 0


def test_observe_mode_only_says_what_it_found():
    deployer, found = run(stored_after_the_process_stopped(), PrefixGuard[None](mode='observe'))
    assert [line.split(':')[1].strip() for line in found] == ['Found (observe mode)']
    # Pydantic AI's own mending applies, in its words.
    returned = deployer.sent[0][2].parts[0]
    assert isinstance(returned, ToolReturnPart) and returned.content != NOT_RUN


def test_calls_of_the_latest_reply_are_left_to_pydantic_ai():
    # A history that ends with the model's calls may still get them answered: resuming the run runs them (that is
    # Pydantic AI's rule, not a repair), and a new prompt is refused.
    history = stored_after_the_process_stopped()[:2]
    deployer, found = run(history, PrefixGuard[None]())
    assert found == [] and deployer.deploys == 1
    with pytest.raises(UserError, match='unprocessed tool calls'):
        Deployer(PrefixGuard[None]()).agent.run_sync('Is it done?', message_history=history)


def test_mending_goes_on_until_every_pair_is_whole():
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt('go'),
        # A result before its call, a call answered twice, and a provider's own call never answered.
        ModelRequest(parts=[ToolReturnPart('f', 'early', tool_call_id='c1')]),
        ModelResponse(parts=[ToolCallPart('f', {}, tool_call_id='c1'), ToolCallPart('g', {}, tool_call_id='c2')]),
        ModelRequest(
            parts=[ToolReturnPart('g', 'once', tool_call_id='c2'), ToolReturnPart('g', 'twice', tool_call_id='c2')]
        ),
        ModelResponse(parts=[NativeToolCallPart('web_search', {'q': 'x'}, tool_call_id='n1'), TextPart('done')]),
        ModelRequest.user_text_prompt('thanks'),
        # Two replies in a row (as a store may keep them), the first with a call: its answer gets a request.
        ModelResponse(parts=[ToolCallPart('h', {}, tool_call_id='c3')]),
        ModelResponse(parts=[TextPart('welcome')]),
    ]
    mended, done = repaired(history, 'answer')
    assert [(problem.kind, problem.tool_call_id, action) for problem, action in done] == snapshot(
        [
            ('result_before_call', 'c1', 'dropped'),
            ('duplicate_result', 'c2', 'dropped'),
            ('unanswered_call', 'c1', 'answered as not run'),
            ('unanswered_call', 'n1', 'dropped'),
            ('unanswered_call', 'c3', 'answered as not run'),
        ]
    )
    assert tool_pair_problems(mended) == []
    assert shape(mended) == snapshot(
        [
            'UserPromptPart(go)',
            'ToolCallPart(c1) ToolCallPart(c2)',
            'ToolReturnPart(c1) ToolReturnPart(c2)',
            'TextPart(done)',
            'UserPromptPart(thanks)',
            'ToolCallPart(c3)',
            'ToolReturnPart(c3)',
            'TextPart(welcome)',
        ]
    )


@pytest.mark.anyio
async def test_a_tool_cancelled_mid_call_leaves_a_history_that_goes_on_without_running_it_again():
    # A server cancels the run's task while the tool runs, and stores what the run had captured.
    calls: list[str] = []
    started = asyncio.Event()

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
        if prompts == ['Deploy the service.'] and not any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[ToolCallPart('deploy', {}, tool_call_id='d1')])
        return ModelResponse(parts=[TextPart('ok')])

    agent = Agent(FunctionModel(answer), deps_type=type(None), capabilities=[PrefixGuard[None]()])

    @agent.tool_plain
    async def deploy() -> str:  # pyright: ignore[reportUnusedFunction]
        calls.append('deploy')
        started.set()
        await asyncio.Event().wait()
        raise AssertionError('never returns')  # pragma: no cover

    with capture_run_messages() as captured:
        run = asyncio.create_task(agent.run('Deploy the service.'))
        await started.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    stored = list(captured)
    # What a cancelled run leaves: the call, then an empty request marked interrupted, with no result in it.
    assert shape(stored) == snapshot(['UserPromptPart(Deploy the service.)', 'ToolCallPart(d1)', ''])
    with pytest.warns(OrphanedToolPairWarning, match="call 'd1' .* answered as not run"):
        result = await agent.run('Is it done?', message_history=stored)
    returned = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert calls == ['deploy'] and returned == [NOT_RUN] and tool_pair_problems(result.all_messages()) == []
