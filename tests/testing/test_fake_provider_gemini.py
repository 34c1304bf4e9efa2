"""The fake provider speaking Google Gemini (`pydantic_ai_append.testing.fake_provider._gemini`), live on loopback: Pydantic AI's `GoogleModel`
over the real `google-genai` SDK runs agents against it, as JSON and streamed, and its implicit cache shows
`AppendInstructions` keeping the prefix across changes where rewritten instructions lose it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.usage import RequestUsage

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing.fake_provider import FakeProvider, FakeRequest, Text, ToolCalls, Turn, google_model

from ..fake_models import get_time, live_loopback

HOUSE_STYLE = 'Follow the house style. ' * 400
"""About 9,600 bytes of instructions: 2,400 tokens, over gemini-2.5-flash's minimum of 2,048."""


def time_script(request: FakeRequest) -> Turn:
    # Call the tool until the last content is its result, then answer.
    last = request.json['contents'][-1]['parts'][-1]
    return Text('It is noon.') if 'functionResponse' in last else ToolCalls([('get_time', {})])


@live_loopback
@pytest.mark.anyio
async def test_gemini_serves_agent_runs_json_and_streamed():
    with FakeProvider(script=time_script) as server:
        agent = Agent(google_model(server.url), tools=[get_time])
        result = await agent.run('What time is it?')
        async with agent.run_stream('What time is it now?') as stream:
            streamed = await stream.get_output()
    assert (result.output, streamed, server.errors) == ('It is noon.', 'It is noon.', [])
    assert [exchange.api for exchange in server.exchanges] == ['gemini'] * 4
    # The call's id comes back with its result, so the bodies don't vary between runs.
    assert json.loads(server.requests[1])['contents'][1:] == snapshot(
        [
            {
                'parts': [
                    {
                        'functionCall': {'id': 'call_fake_0_0', 'args': {}, 'name': 'get_time'},
                        'thoughtSignature': 'c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=',
                    }
                ],
                'role': 'model',
            },
            {
                'parts': [
                    {
                        'functionResponse': {
                            'id': 'call_fake_0_0',
                            'name': 'get_time',
                            'response': {'return_value': '12:00'},
                        }
                    }
                ],
                'role': 'user',
            },
        ]
    )
    assert server.exchanges[3].response_body.split(b'\r\n\r\n') == snapshot(
        [
            b'data: {"candidates":[{"content":{"parts":[{"text":"It is"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":108,"totalTokenCount":108,"promptTokensDetails":[{"modality":"TEXT","tokenCount":108}]},"modelVersion":"gemini-2.5-flash","responseId":"fake-gemini-0003"}',
            b'data: {"candidates":[{"content":{"parts":[{"text":" noon."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":108,"candidatesTokenCount":2,"totalTokenCount":110,"promptTokensDetails":[{"modality":"TEXT","tokenCount":108}]},"modelVersion":"gemini-2.5-flash","responseId":"fake-gemini-0003"}',
            b'',
        ]
    )


@live_loopback
@pytest.mark.anyio
async def test_gemini_refusals_reach_the_agent_as_gemini_errors():
    with FakeProvider(script=[]) as server:
        agent = Agent(google_model(server.url))
        with pytest.raises(ModelHTTPError) as error:
            await agent.run('Hello')
        async with httpx2.AsyncClient(base_url=server.url) as client:
            not_json = await client.post('/v1beta/models/gemini-2.5-flash:generateContent', content=b'not json')
    assert (error.value.status_code, error.value.model_name) == (400, 'gemini-2.5-flash')
    assert not_json.json() == snapshot(
        {'error': {'code': 400, 'message': "request body is not JSON: b'not json'", 'status': 'INVALID_ARGUMENT'}}
    )
    assert server.errors[0] == snapshot(
        'FakeProvider script is exhausted: request 0 to /v1beta/models/gemini-2.5-flash:generateContent has no turn '
        'left; add one to the script'
    )


@dataclass
class Deps:
    todos: list[str] = field(default_factory=list[str])


def todo_agent(model_url: str, *, append: bool) -> Agent[Deps, str]:
    """An agent whose to-do list is an instruction block: kept by `AppendInstructions`, or rewritten by Pydantic AI."""

    def state(ctx: RunContext[Deps]) -> str | None:
        return '\n'.join(f'- [ ] {todo}' for todo in ctx.deps.todos) or None

    if not append:
        agent = Agent(google_model(model_url), deps_type=Deps, instructions=[HOUSE_STYLE, state], tools=[get_time])
        return agent
    context = AppendInstructions[Deps](id='todos')
    context.instructions(name='state')(state)
    return Agent(
        google_model(model_url), deps_type=Deps, instructions=HOUSE_STYLE, tools=[get_time], capabilities=[context]
    )


async def converse(agent: Agent[Deps, str], *, stream: bool) -> list[ModelMessage]:
    """Three runs: a tool loop, then one after a to-do is added, then one after the list is cleared (a withdrawal)."""
    deps = Deps(todos=['write tests'])
    history: list[ModelMessage] = []
    for prompt, change in [('What time is it?', None), ('Anything else?', 'write docs'), ('All done.', '')]:
        if change is not None:
            deps.todos = [*deps.todos, change] if change else []
        if stream:
            async with agent.run_stream(prompt, deps=deps, message_history=history) as run:
                await run.get_output()
            history = run.all_messages()
        else:
            history = (await agent.run(prompt, deps=deps, message_history=history)).all_messages()
    return history


@live_loopback
@pytest.mark.anyio
@pytest.mark.parametrize('stream', [False, True], ids=['json', 'streamed'])
async def test_append_instructions_keep_the_gemini_implicit_cache_across_changes(stream: bool):
    def script(request: FakeRequest) -> Turn:
        return time_script(request) if 'What time' in json.dumps(request.json['contents'][-1]) else Text('OK.')

    usages: dict[bool, list[RequestUsage]] = {}
    for append in (True, False):
        # A server each, so neither reads what the other cached.
        with FakeProvider(script=script) as server:
            messages = await converse(todo_agent(server.url, append=append), stream=stream)
        assert server.errors == []
        usages[append] = [message.usage for message in messages if isinstance(message, ModelResponse)]
    kept, rewritten = usages[True], usages[False]
    assert len(kept) == len(rewritten) == 4
    # Kept: every request reads all of the one before it from the cache, the change requests too.
    assert [usage.cache_read_tokens for usage in kept] == [0, *(usage.input_tokens for usage in kept[:-1])]
    # Rewritten: from the first change on, only the house style is read: its part of the system instruction, 9,599
    # bytes of text once Pydantic AI strips the trailing space and 17 of framing, is 2,404 tokens. The to-do list and
    # the whole conversation after it are paid again.
    assert [usage.cache_read_tokens for usage in rewritten] == [0, rewritten[0].input_tokens, 2_404, 2_404]
