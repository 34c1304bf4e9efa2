"""`PromptWire.cache_summary`: a conversation's cache use and cost read from the wire alone, the same as the
capability's `cache_summary` of the run's history, on each API, streamed or not, and figured by hand from bodies.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from dataclasses import asdict, replace
from typing import Any, Literal

import httpx2
import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import Api, PromptWire
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, anthropic_model, google_model

from ..fake_models import MODEL_FACTORIES, ModelFactory, live_loopback

pytestmark = [live_loopback, pytest.mark.anyio]

RULES = 'Follow the house rules. ' * 400  # about 2,400 tokens: above the minimum the fake caches from
TAIL: ModelSettings = {'anthropic_cache': True}  # type: ignore[typeddict-unknown-key]


def make_agent(model: Model) -> Agent[list[str], str]:
    memory = AppendInstructions[list[str]](id='memory')

    @memory.instructions(name='notes')
    def notes(ctx: RunContext[list[str]]) -> str:  # pyright: ignore[reportUnusedFunction]
        return '\n'.join(ctx.deps)

    return Agent(model, deps_type=list[str], instructions=RULES, capabilities=[memory], model_settings=TAIL)


async def discard(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
    async for _ in events:
        pass


async def converse(agent: Agent[list[str], str], notes: list[list[str]], *, streamed: bool) -> list[ModelMessage]:
    # An event stream handler makes the model stream its reply, as `agent.run_stream` does (Anthropic always does).
    handler = discard if streamed else None
    history: list[ModelMessage] = []
    for turn, deps in enumerate(notes):
        result = await agent.run(f'turn {turn}', deps=deps, message_history=history, event_stream_handler=handler)
        history = result.all_messages()
    return history


@pytest.mark.parametrize('streamed', [False, True], ids=['whole', 'streamed'])
@pytest.mark.parametrize('api', list(MODEL_FACTORIES))
async def test_the_fixtures_summary_is_the_capabilitys_for_the_same_run(
    prompt_wire: PromptWire, api: Api, streamed: bool
):
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        model = MODEL_FACTORIES[api](server.url, http_client=prompt_wire.http_client())
        history = await converse(make_agent(model), [['a'], ['a'], ['a']], streamed=streamed)
    assert [b'data:' in exchange.response_body for exchange in prompt_wire.exchanges] == [
        streamed or api == 'anthropic'
    ] * 3
    summary = prompt_wire.cache_summary()
    assert summary == AppendInstructions.cache_summary(history)
    # Each request read the whole previous one, as expected, and no change was delivered to save on.
    assert summary.cache_read_tokens == summary.expected_read_tokens > 0
    assert (summary.requests, summary.shortfalls, summary.unpriced, summary.saving_usd) == (3, 0, 0, 0)


@pytest.mark.parametrize('api', list(MODEL_FACTORIES))
async def test_a_delivered_change_caps_rewrite_modes_read_at_the_block_in_the_bytes_sent(
    prompt_wire: PromptWire, api: Api
):
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        model = MODEL_FACTORIES[api](server.url, http_client=prompt_wire.http_client())
        history = await converse(make_agent(model), [['a'], ['a'], ['a', 'b']], streamed=False)
    # Rewrite mode would have moved the prefix at the block's opening in the instructions of the third request.
    sent = b''.join(segment.data for segment in prompt_wire.requests()[2])
    head = sent.index(b'<context id=\\"capability:memory:notes\\">') // 4
    # The capability estimates the same tokens from the instructions it renders, without what Pydantic AI adds
    # around them (the JSON of each message, 2.68's framing announcement): put the wire's figure in its place.
    third = [message for message in history if isinstance(message, ModelResponse)][2]
    figures = {'expected_read_tokens': third.usage.cache_read_tokens, 'rewrite_read_tokens': head}
    mended = [replace(third, metadata={'pydantic_ai_append': figures}) if m is third else m for m in history]
    summary = prompt_wire.cache_summary()
    assert summary == AppendInstructions.cache_summary(mended)
    assert summary.saving_usd > 0


def anthropic_request(system: list[str], *messages: dict[str, Any]) -> bytes:
    blocks = [{'type': 'text', 'text': text, 'cache_control': {'type': 'ephemeral'}} for text in system]
    return json.dumps({'model': 'claude-sonnet-4-6', 'system': blocks, 'messages': list(messages)}).encode()


def anthropic_reply(read: int, written: int, uncached: int) -> httpx2.Response:
    usage = {
        'input_tokens': uncached,
        'cache_creation_input_tokens': written,
        'cache_read_input_tokens': read,
        'output_tokens': 10,
    }
    content = [{'type': 'text', 'text': 'Noted.'}]
    message = {'id': 'msg_1', 'type': 'message', 'role': 'assistant', 'model': 'claude-sonnet-4-6', 'usage': usage}
    return httpx2.Response(200, json={**message, 'content': content, 'stop_reason': 'end_turn'})


async def test_a_conversation_figured_by_hand(prompt_wire: PromptWire):
    rules, block = 'Rules.', '<context id="capability:todos:list">\n- a\n</context>'
    user = {'role': 'user', 'content': 'Hi'}
    call: dict[str, Any] = {
        'role': 'assistant',
        'content': [{'type': 'tool_use', 'id': 't1', 'name': 'todos', 'input': {}}],
    }
    change = '<system>\n<context id="capability:todos:list">\n- a\n- b\n</context>\n</system>'
    result = {'type': 'tool_result', 'tool_use_id': 't1', 'content': 'ok', 'is_error': False}
    answered = {'role': 'user', 'content': [result, {'type': 'text', 'text': change}]}
    replies = iter(
        [
            anthropic_reply(read=0, written=2000, uncached=100),
            anthropic_reply(read=2100, written=60, uncached=40),
            httpx2.Response(529, json={'type': 'error', 'error': {'type': 'overloaded_error', 'message': 'Busy'}}),
            httpx2.Response(502, text='<html>Bad gateway</html>'),
            anthropic_reply(read=0, written=2300, uncached=0),
        ]
    )
    exchanges = [
        anthropic_request([rules, block], user),
        anthropic_request([rules, block], user, call, answered),
        *[anthropic_request([rules, block.replace('- a', '- a\n- b')], user)] * 3,  # a new window, sent 3 times
    ]
    transport = prompt_wire.transport(httpx2.MockTransport(lambda request: next(replies)))
    async with httpx2.AsyncClient(transport=transport) as client:
        for body in exchanges:
            await client.post('https://api.anthropic.com/v1/messages', content=body)
    # The error and the page that isn't JSON are left out. The second request read the whole first one (2,100
    # tokens, as expected) and delivered a change; rewrite mode would have read only the bytes before the block's
    # opening: `{"type":"text","text":"Rules."}` and `{"type":"text","text":"`, 54 bytes, 13 tokens, and written the
    # other 2,087. At $3 a million uncached, $3.75 written, $0.30 read and $15 out:
    cost = (100 * 3 + 2000 * 3.75 + 150) + (40 * 3 + 60 * 3.75 + 2100 * 0.3 + 150) + (2300 * 3.75 + 150)
    rewrite = cost - (2100 - 13) * 0.3 + (2100 - 13) * 3.75
    assert asdict(prompt_wire.cache_summary()) == {
        'requests': 3,
        'cache_read_tokens': 2100,
        'cache_write_tokens': 4360,
        'uncached_input_tokens': 140,
        'expected_read_tokens': 2100,
        'shortfalls': 0,
        'cost_usd': pytest.approx(cost / 1e6),
        'rewrite_cost_usd': pytest.approx(rewrite / 1e6),
        # The wire doesn't say why a window opened: never reopening is what the conversation cost.
        'never_reopened_cost_usd': pytest.approx(cost / 1e6),
        'unpriced': 0,
    }


async def test_replies_without_usage_count_as_requests_of_no_tokens_and_failed_ones_not_at_all(prompt_wire: PromptWire):
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    reply = {'id': 'c', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': [choice]}
    # The OpenAI SDK sends the first request again after a gateway's error page.
    replies = iter([httpx2.Response(502, text='<html>Bad gateway</html>'), *[httpx2.Response(200, json=reply)] * 2])
    http_client = prompt_wire.http_client(transport=httpx2.MockTransport(lambda request: next(replies)))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
    agent = Agent(model, instructions='Be brief.')
    history = (await agent.run('Hello')).all_messages()
    history = (await agent.run('Again', message_history=history)).all_messages()
    summary = prompt_wire.cache_summary()
    assert len(prompt_wire.exchanges) == 3
    assert summary == AppendInstructions.cache_summary(history)
    assert (summary.requests, summary.cache_read_tokens, summary.uncached_input_tokens, summary.cost_usd) == (
        2,
        0,
        0,
        0,
    )


def rewrite_saving(response: ModelResponse, read: int) -> float:
    """What `response`'s request would have cost more had it read only `read` tokens from cache, as the summaries price
    rewrite mode: what it can't read it writes where the request wrote, or else sends uncached.
    """
    usage = response.usage
    moved = usage.cache_read_tokens - read
    written = usage.cache_write_tokens + moved if usage.cache_write_tokens else 0
    rewrite = replace(response, usage=replace(usage, cache_read_tokens=read, cache_write_tokens=written))
    return float(rewrite.cost().total_price - response.cost().total_price)


async def run_notes(model: Model, on_change: Literal['append', 'rewrite']) -> ModelResponse:
    """Three turns whose notes change on the third; the third response."""
    memory = AppendInstructions[list[str]](id='memory', windows='keep')
    memory.instructions(name='notes', on_change=on_change)(lambda ctx: '\n'.join(ctx.deps))
    # A breakpoint after the instructions too, so that rewrite mode can read the rules before the changed block.
    settings: ModelSettings = {'anthropic_cache_instructions': True, 'anthropic_cache_messages': True}  # type: ignore[typeddict-unknown-key]
    agent = Agent(model, deps_type=list[str], instructions=RULES * 2, capabilities=[memory], model_settings=settings)
    history = await converse(agent, [['a'], ['a'], ['a', 'b']], streamed=False)
    return [message for message in history if isinstance(message, ModelResponse)][-1]


@pytest.mark.parametrize(
    ('factory', 'model_name'),
    [(google_model, 'gemini-2.5-flash'), (anthropic_model, 'claude-sonnet-4-6')],
    ids=['gemini', 'anthropic'],
)
async def test_the_saving_is_what_rewrite_mode_reads(prompt_wire: PromptWire, factory: ModelFactory, model_name: str):
    async with prompt_wire.http_client(timeout=60) as http_client:
        with FakeProvider(script=lambda request: Text('Noted.')) as server:
            appended = await run_notes(factory(server.url, model_name, http_client=http_client), 'append')
            history = [appended]  # its run's figures are stored on it
        with FakeProvider(script=lambda request: Text('Noted.')) as server:
            rewritten = await run_notes(factory(server.url, model_name), 'rewrite')
    # What the third request would have read had the change moved the prefix, as the provider counts it. On 2.68,
    # GoogleModel's prefix has Pydantic AI's announcement of `<system>` blocks only because the capability asks for it,
    # and rewrite mode's doesn't; Claude Sonnet 4.6's profile has it announced in both.
    saving = rewrite_saving(appended, rewritten.usage.cache_read_tokens)
    assert saving > 0
    # Both count 4 bytes a token of what comes before the changed block, the provider its own blocks: within 20.
    tolerance = rewrite_saving(appended, appended.usage.cache_read_tokens - 20)
    assert prompt_wire.cache_summary().saving_usd == pytest.approx(saving, abs=tolerance)
    assert AppendInstructions.cache_summary(history).saving_usd == pytest.approx(saving, abs=tolerance)


async def test_a_conversation_that_names_no_model_is_counted_and_left_unpriced(prompt_wire: PromptWire):
    # An OpenAI-compatible server that names no model, in the request or the reply: no profile to ask, no price.
    hello = [{'role': 'system', 'content': 'Rules.'}, {'role': 'user', 'content': 'Hi'}]
    later = [*hello, {'role': 'assistant', 'content': 'OK.'}, {'role': 'user', 'content': 'Again'}]
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    usage = {'prompt_tokens': 1500, 'completion_tokens': 2, 'prompt_tokens_details': {'cached_tokens': 1024}}
    reply = {'id': 'c', 'object': 'chat.completion', 'created': 0, 'choices': [choice], 'usage': usage}
    transport = prompt_wire.transport(httpx2.MockTransport(lambda request: httpx2.Response(200, json=reply)))
    async with httpx2.AsyncClient(transport=transport) as client:
        for messages in (hello, later):
            await client.post('https://llm.example/v1/chat/completions', json={'messages': messages})
    summary = prompt_wire.cache_summary()
    # The second request was expected to read the first's 1,500 tokens in OpenAI's steps: 1,024 and 3 of 128.
    assert (summary.requests, summary.cache_read_tokens, summary.expected_read_tokens, summary.unpriced) == (
        2,
        2048,
        1408,
        2,
    )
