"""A run cancelled mid-request: the history it leaves continues its window, with the prefix kept.

Cancelled while the model is answering, the request already holds its records; cancelled in a tool call, Pydantic AI
answers the call for the tool. Either way the next run delivers what changed since, after the same prefix. A run is
cancelled the ways a server cancels one: its asyncio task cancelled, or an anyio cancel scope around it cancelled
(`CancelScope.cancel()`) or past its deadline (`move_on_after`, and `fail_after`, which raises `TimeoutError`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import anyio
import pytest
from pydantic_ai import Agent, capture_run_messages
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, instruction_records

from .conversation import describe


@pytest.mark.anyio
@pytest.mark.parametrize('how', ['task', 'cancel-scope', 'move-on-after', 'fail-after'])
@pytest.mark.parametrize('where', ['model-call', 'tool-call'])
async def test_a_cancelled_run_leaves_a_history_that_continues_the_window(where: str, how: str):
    seen: list[tuple[str | None, list[str]]] = []
    hanging = asyncio.Event()
    hang = [False]
    # What the hanging call does to have the run cancelled, once it is hanging.
    cancel: list[Callable[[], None]] = [hanging.set]

    async def hang_forever() -> None:
        cancel[0]()
        await asyncio.Event().wait()

    async def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((info.instructions, [line for message in messages for line in describe(message)]))
        if hang[0] and where == 'model-call':
            await hang_forever()
        if hang[0] and where == 'tool-call' and not any(part.part_kind == 'tool-return' for part in messages[-1].parts):
            return ModelResponse(parts=[ToolCallPart('slow', '{}')])
        return ModelResponse(parts=[TextPart('ok')])

    value = ['first']
    context = AppendInstructions(id='todos')
    context.instructions(name='state')(lambda: value[0])
    agent = Agent(FunctionModel(reply), capabilities=[context])

    @agent.tool_plain
    async def slow() -> str:  # pyright: ignore[reportUnusedFunction]
        await hang_forever()
        raise AssertionError('never answered')  # pragma: no cover

    history = (await agent.run('one')).all_messages()
    prefix = seen[0][0]
    value[0], hang[0] = 'second', True
    with capture_run_messages() as captured:
        if how == 'task':
            run = asyncio.create_task(agent.run('two', message_history=history))
            await hanging.wait()
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
        elif how == 'cancel-scope':
            with anyio.CancelScope() as scope:
                cancel[0] = scope.cancel
                await agent.run('two', message_history=history)
            assert scope.cancelled_caught
        elif how == 'move-on-after':
            # No deadline until the call hangs, then one already past: the scope cancels the run at once.
            with anyio.move_on_after(None) as scope:
                cancel[0] = lambda: setattr(scope, 'deadline', anyio.current_time())
                await agent.run('two', message_history=history)
            assert scope.cancelled_caught
        else:
            with pytest.raises(TimeoutError):
                with anyio.fail_after(None) as scope:
                    cancel[0] = lambda: setattr(scope, 'deadline', anyio.current_time())
                    await agent.run('two', message_history=history)
    left = list(captured)
    value[0], hang[0] = 'third', False
    await agent.run('three', message_history=left)
    instructions, messages = seen[-1]
    assert instructions == prefix
    assert len(instruction_records(left)) == 2
    assert messages[-2:] == [
        'user: three',
        'user: <system><context id="capability:todos:state">\nthird\n</context></system>',
    ]
    # No tool call goes out without its result.
    calls = sum(line.startswith('call ') for line in messages)
    assert calls == sum(line.startswith('tool-return ') for line in messages) == (where == 'tool-call')
