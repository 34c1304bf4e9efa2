"""The wire verifier on AWS Bedrock: Pydantic AI's `BedrockConverseModel` through a real boto3 client, instrumented with
`WireVerifier.instrument_bedrock`, against the fake provider's Converse and ConverseStream, live on loopback.

botocore sends without an httpx client, so the verifier is registered on the client's own events. In enforce mode a
request that drops the oldest turn is refused before it reaches the provider, streamed or not, and botocore does not
retry the refusal; in observe mode it is sent with a warning. A retry botocore makes of a throttled request is checked
once, and two conversations sharing one client keep their own chains.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import boto3  # pyright: ignore[reportMissingTypeStubs]
import pytest
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import WirePrefixDivergenceError, WirePrefixDivergenceWarning, WireVerifier
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls

from ..bedrock_hooks import SETTINGS, ThrottleOnce, instrumented_model
from ..fake_models import get_time, live_loopback

pytestmark = [pytest.mark.anyio, live_loopback]

SCRIPT = [Text('One.'), ToolCalls([('get_time', {})]), Text('Noon.'), Text('Three.')]
"""Run 1 is one request, run 2 calls a tool (two requests), run 3 is the request that breaks the prefix."""

SPAN = 'wire prefix {api} {model} request {request_index}'


def drop_oldest_turn(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A history processor that forgets the first request and response: it moves the consumed prefix."""
    return messages[2:]


def request_indices(capfire: CaptureLogfire) -> list[int]:
    spans = capfire.exporter.exported_spans_as_dict()
    return [span['attributes']['pydantic_ai_append.wire.request_index'] for span in spans if span['name'] == SPAN]


async def three_runs(verifier: WireVerifier, server: FakeProvider, *, stream: bool) -> None:
    """Two runs, then a third whose history processor drops the oldest turn: streamed or not."""
    # Instrumented twice, as code that doesn't know it already was might: each request is still checked once.
    model = instrumented_model(server, verifier.instrument_bedrock, verifier.instrument_bedrock)
    agent = Agent(model, instructions='Be brief.', tools=[get_time], model_settings=SETTINGS)
    history = (await agent.run('First?')).all_messages()
    history = (await agent.run('Time?', message_history=history)).all_messages()
    dropping = Agent(
        model,
        instructions='Be brief.',
        tools=[get_time],
        model_settings=SETTINGS,
        capabilities=[ProcessHistory(drop_oldest_turn)],
    )
    if stream:
        async with dropping.run_stream('Third?', message_history=history) as result:
            await result.get_output()
    else:
        await dropping.run('Third?', message_history=history)


@pytest.mark.parametrize('stream', [False, True])
async def test_enforce_refuses_a_rewrite_that_breaks_the_prefix(stream: bool, capfire: CaptureLogfire):
    verifier = WireVerifier(mode='enforce')
    with FakeProvider(script=SCRIPT) as server, pytest.raises(WirePrefixDivergenceError) as raised:
        await three_runs(verifier, server, stream=stream)
    # Refused in botocore's `before-send`: the provider got the three requests of the first two runs only, and
    # botocore sent the refused one no second time (one span each, one divergence).
    assert (len(server.requests), server.errors) == (3, [])
    assert request_indices(capfire) == [0, 1, 2, 3]
    [divergence] = verifier.divergences
    assert (divergence.api, divergence.model) == ('bedrock-converse', 'us.anthropic.claude-sonnet-4-5-20250929-v1:0')
    assert (divergence.request, divergence.kind) == (3, 'message')
    assert '"First?"' in divergence.previous and '"Time?"' in (divergence.current or '')
    assert str(raised.value) == (
        f'{divergence.message}\nNot sent. If it opens a new window (compaction, new instructions), call '
        '`open_window()` on the verifier first.'
    )
    # As itself: neither botocore nor Pydantic AI wrapped it.
    assert raised.value.__cause__ is None


async def test_observe_warns_and_sends():
    verifier = WireVerifier()
    with (
        FakeProvider(script=SCRIPT) as server,
        pytest.warns(WirePrefixDivergenceWarning, match=r'^bedrock-converse request 3 to model '),
    ):
        await three_runs(verifier, server, stream=True)
    assert (len(server.requests), len(verifier.divergences)) == (4, 1)


@pytest.mark.parametrize('stream', [False, True])
async def test_append_instructions_keep_the_prefix_across_a_block_change(stream: bool):
    todos = ['write tests']
    context = AppendInstructions[None](id='desk')
    context.instructions(name='todos')(lambda ctx: '\n'.join(todos))
    verifier = WireVerifier(mode='enforce')
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        agent = Agent(
            instrumented_model(server, verifier.instrument_bedrock), deps_type=type(None), capabilities=[context]
        )
        history: list[ModelMessage] = []
        for turn in range(3):
            if stream:
                async with agent.run_stream(f'turn {turn}', message_history=history) as result:
                    await result.get_output()
                history = result.all_messages()
            else:
                history = (
                    await agent.run(f'turn {turn}', message_history=history, model_settings=SETTINGS)
                ).all_messages()
            todos.append(f'item {turn}')
    assert (len(server.requests), server.errors, verifier.divergences) == (3, [], [])


async def test_a_retried_request_is_checked_once(capfire: CaptureLogfire):
    verifier = WireVerifier(mode='enforce')
    throttle = ThrottleOnce(1)
    with FakeProvider(script=[Text('One.'), Text('Two.'), Text('Three.')]) as server:
        agent = Agent(
            instrumented_model(server, verifier.instrument_bedrock, throttle.register), model_settings=SETTINGS
        )
        history: list[ModelMessage] = []
        for prompt in ['a', 'b', 'c']:
            history = (await agent.run(prompt, message_history=history)).all_messages()
    # The second request's first attempt was answered 503 and botocore sent it again: three requests, three checks.
    assert (len(server.requests), verifier.divergences) == (3, [])
    assert request_indices(capfire) == [0, 1, 2]


async def test_concurrent_conversations_keep_their_own_chains():
    verifier = WireVerifier(mode='enforce')
    mode = {'value': 'plan'}
    # Told of the windows it opens: a changed rewrite-mode block moves the prefix on purpose.
    planning = AppendInstructions[None](id='work', verifier=verifier)
    planning.instructions(name='todos')(lambda ctx: '- [ ] ship')

    @planning.instructions(name='mode', on_change='rewrite')
    def work_mode(ctx: RunContext[None]) -> str:
        return f'Mode: {mode["value"]}.'

    # Not told: the window it opens once its history lost the baseline moves the prefix unannounced.
    notes = AppendInstructions[None](id='notes')
    notes.instructions(name='notes')(lambda ctx: 'Keep notes.')

    with FakeProvider(script=lambda request: Text('OK.')) as server:
        model = instrumented_model(server, verifier.instrument_bedrock)

        async def moving_window() -> None:
            agent = Agent(model, deps_type=type(None), model_settings=SETTINGS, capabilities=[planning])
            history = (await agent.run('a')).all_messages()
            mode['value'] = 'act'
            await agent.run('b', message_history=history)

        async def breaking() -> None:
            agent = Agent(model, deps_type=type(None), model_settings=SETTINGS, capabilities=[notes])
            history = (await agent.run('x')).all_messages()
            history = (await agent.run('y', message_history=history)).all_messages()
            dropping = Agent(
                model,
                deps_type=type(None),
                model_settings=SETTINGS,
                capabilities=[ProcessHistory[None](drop_oldest_turn), notes],
            )
            await dropping.run('z', message_history=history)

        results = await asyncio.gather(moving_window(), breaking(), return_exceptions=True)
    # The window one run opened is its conversation's alone: the other conversation's break is still refused. Each
    # request was checked in botocore's worker thread, in a copy of its run's context, which names its conversation.
    assert [type(result) for result in results] == [type(None), WirePrefixDivergenceError]
    [divergence] = verifier.divergences
    assert (divergence.request, len(server.requests)) == (2, 4)


def test_a_client_of_another_service_is_refused():
    s3 = cast(
        'Any',
        boto3.client(  # pyright: ignore[reportUnknownMemberType]
            's3', region_name='us-east-1', aws_access_key_id='key-id', aws_secret_access_key='secret'
        ),
    )
    with pytest.raises(UserError, match=r"is not a boto3 'bedrock-runtime' client \(its service is 's3'\)"):
        WireVerifier().instrument_bedrock(s3)
    with pytest.raises(UserError, match=r"^'client' is not a boto3 'bedrock-runtime' client \(its service is None\)"):
        WireVerifier().instrument_bedrock('client')
