"""`prompt_wire` on the providers reached over plain HTTP with an OpenAI-Chat-shaped body: Mistral, Groq (whose SDK
takes only an `httpx.AsyncClient`) and Hugging Face, each through Pydantic AI's real model class and its SDK against the
fake provider, live on loopback. The fixture names each API as itself and sums the same cache summary as the capability.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from fake_provider import FakeProvider, Text
from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire

from ..fake_models import live_loopback
from ..http_sdk_models import HTTP_SDK_MODELS

pytestmark = [live_loopback, pytest.mark.anyio]

RULES = 'Follow the house rules. ' * 400  # about 2,400 tokens: above the minimum the fake caches from


@pytest.mark.parametrize('provider', list(HTTP_SDK_MODELS))
async def test_the_fixture_reads_each_api_as_itself(prompt_wire: PromptWire, provider: str):
    memory = AppendInstructions[list[str]](id='memory', windows='keep')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))

    def make_client(client_class: type[Any]) -> Any:
        return prompt_wire.http_client(client_class=client_class)

    history: list[ModelMessage] = []
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        async with HTTP_SDK_MODELS[provider](make_client, server.url) as model:
            agent = Agent(model, deps_type=list[str], instructions=RULES, capabilities=[memory])
            for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
                history = (await agent.run(f'turn {turn}', deps=notes, message_history=history)).all_messages()
    assert prompt_wire.conversation().api == f'{provider}-chat'
    prompt_wire.assert_prefix_stable()
    assert [row.reused_bytes > 0 for row in prompt_wire.prefix_reuse()] == [False, True, True]
    summary = prompt_wire.cache_summary()
    assert summary == AppendInstructions.cache_summary(history)
    # Mistral and Groq report the cached tokens Pydantic AI reads; its Hugging Face model reads none.
    assert (summary.requests, summary.cache_read_tokens > 0) == (3, provider != 'huggingface')


def cohere_reply(request: httpx.Request) -> httpx.Response:
    """Cohere's v2 Chat, offline (the fake provider doesn't speak it), reporting a cache read once it has replied."""
    messages = json.loads(request.content)['messages']
    message = {'role': 'assistant', 'content': [{'type': 'text', 'text': 'Noted.'}]}
    tokens = {'input_tokens': 600 + 100 * len(messages), 'output_tokens': 2}
    replied = any(item['role'] == 'assistant' for item in messages)
    usage = {'billed_units': tokens, 'tokens': tokens, 'cached_tokens': 500 if replied else 0}
    return httpx.Response(
        200, json={'id': f'c{len(messages)}', 'finish_reason': 'COMPLETE', 'message': message, 'usage': usage}
    )


async def test_the_fixture_reads_cohere_as_itself(prompt_wire: PromptWire):
    from pydantic_ai.models.cohere import CohereModel
    from pydantic_ai.providers.cohere import CohereProvider

    memory = AppendInstructions[list[str]](id='memory', windows='keep')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))
    http_client = prompt_wire.http_client(client_class=httpx.AsyncClient, transport=httpx.MockTransport(cohere_reply))
    model = CohereModel('command-r7b-12-2024', provider=CohereProvider(api_key='offline', http_client=http_client))
    agent = Agent(model, deps_type=list[str], instructions='Be brief.', capabilities=[memory])
    history: list[ModelMessage] = []
    for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
        history = (await agent.run(f'turn {turn}', deps=notes, message_history=history)).all_messages()
    assert prompt_wire.conversation().api == 'cohere-chat'
    prompt_wire.assert_prefix_stable()
    summary = prompt_wire.cache_summary()
    assert summary == AppendInstructions.cache_summary(history)
    assert (summary.requests, summary.cache_read_tokens) == (3, 1000)
