"""`AppendInstructions` and Pydantic AI's realtime sessions (`Agent.realtime`): a session is refused as it starts.

A session resolves the agent's instructions as it connects and calls none of the model-request hooks the capability
states its blocks and delivers their changes in, so the session's model would never see the blocks. No provider's
realtime API is reachable offline, so these tests open sessions on a realtime model of their own, which records what
each connection was opened with, over a connection that never speaks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.agent import AgentRealtime
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.realtime import RealtimeModel, RealtimeModelSettings
from pydantic_ai.realtime.codec import RealtimeConnection, RealtimeInput
from pydantic_ai.realtime.lifecycle import RealtimeFrame

from pydantic_ai_append import AppendInstructions

pytestmark = pytest.mark.anyio


class SilentConnection(RealtimeConnection):
    """A connection to a model that never speaks: it yields no frame until the session closes it."""

    async def send(self, content: RealtimeInput) -> None:
        del content  # the tests only open and close sessions, which sends nothing

    async def frames(self) -> AsyncIterator[RealtimeFrame]:
        await asyncio.Event().wait()
        yield []  # never reached: the wait above ends only when the session closes, which cancels it


class RecordingRealtimeModel(RealtimeModel):
    """A realtime model whose connections record the messages (with the session's instructions) they opened with."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[Sequence[ModelMessage]] = []

    @property
    def model_name(self) -> str:
        return 'recording-realtime'

    @property
    def system(self) -> str:
        return 'recording'

    @asynccontextmanager
    async def connect(
        self,
        *,
        messages: Sequence[ModelMessage],
        model_settings: RealtimeModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> AsyncGenerator[RealtimeConnection]:
        self.opened.append(messages)
        yield SilentConnection()


def todo_agent() -> Agent[list[str], str]:
    todos = AppendInstructions[list[str]](id='todos')

    @todos.instructions(name='state')
    def state(ctx: RunContext[list[str]]) -> str | None:
        return '\n'.join(ctx.deps) or None

    return Agent(deps_type=list[str], instructions='Be brief.', capabilities=[todos])


REFUSAL = snapshot(
    "`AppendInstructions` 'todos' can't serve a realtime session (model 'recording-realtime'): a session calls none "
    'of the model-request hooks that send its blocks, so the model would never see them. Open the session on an '
    'agent without `AppendInstructions`; its own named instructions (`@agent.instructions(name=...)`) reach a '
    'session.'
)


async def test_a_realtime_session_of_an_agent_with_append_instructions_is_refused_before_it_connects():
    model = RecordingRealtimeModel()
    with pytest.raises(UserError) as error:
        async with todo_agent().realtime(model, deps=['write tests']).session():
            pass
    assert str(error.value) == REFUSAL
    assert model.opened == []


async def mint_client_secret(realtime: AgentRealtime[list[str]]) -> object:
    return await realtime.create_client_secret()


async def answer_webrtc_offer(realtime: AgentRealtime[list[str]]) -> object:
    return await realtime.answer_webrtc_offer('v=0')


@pytest.mark.parametrize('signal', [mint_client_secret, answer_webrtc_offer])
async def test_a_browser_call_for_an_agent_with_append_instructions_is_refused(
    signal: Callable[[AgentRealtime[list[str]]], Awaitable[object]],
):
    # A client secret and a WebRTC answer carry the session's instructions to the provider, so they would lack the
    # blocks too; the recording model supports neither, and would refuse both with a message of its own.
    with pytest.raises(UserError) as error:
        await signal(todo_agent().realtime(RecordingRealtimeModel(), deps=['write tests']))
    assert str(error.value) == REFUSAL


async def test_the_agents_own_named_instructions_reach_a_session_on_the_same_model():
    agent = Agent(deps_type=list[str], instructions='Be brief.')

    @agent.instructions(name='state')
    def state(ctx: RunContext[list[str]]) -> str | None:
        return '\n'.join(ctx.deps) or None

    model = RecordingRealtimeModel()
    async with agent.realtime(model, deps=['write tests']).session():
        pass
    [messages] = model.opened
    assert isinstance(request := messages[-1], ModelRequest)
    assert request.instructions == snapshot('Be brief.\n\nwrite tests')
