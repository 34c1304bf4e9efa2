"""The wire verifier on the providers Pydantic AI reaches over plain HTTP with an OpenAI-Chat-shaped body.

Mistral (the `mistralai` SDK, on `httpx2`), Groq (the `groq` SDK, which takes only an `httpx.AsyncClient`) and Hugging
Face (`huggingface_hub`'s `AsyncInferenceClient`, which makes its `httpx.AsyncClient`s through
`huggingface_hub.set_async_client_factory`) each run Pydantic AI's real model class through the real SDK against the
fake provider's Chat Completions endpoint, live on loopback. In enforce mode the request that drops the oldest turn
is refused before it reaches the provider.
"""

from __future__ import annotations

from typing import Any

import httpx
import httpx2
import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import ModelMessage

from pydantic_ai_append.guard import WirePrefixDivergenceError, WireVerifier
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls

from ..fake_models import get_time, live_loopback
from ..http_sdk_models import HTTP_SDK_MODELS

pytestmark = [pytest.mark.anyio, live_loopback]

SCRIPT = [Text('One.'), ToolCalls([('get_time', {})]), Text('Noon.'), Text('Three.')]
"""Run 1 is one request, run 2 calls a tool (two requests), run 3 is the request the verifier refuses."""


def drop_oldest_turn(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A history processor that forgets the first request and response: it moves the consumed prefix."""
    return messages[2:]


def refusal_in(error: BaseException | None) -> BaseException | None:
    """The verifier's refusal: the error itself, or the one the SDK wrapped it in (Groq's wraps every error)."""
    while error is not None and not isinstance(error, WirePrefixDivergenceError):
        error = error.__cause__
    return error


@pytest.mark.parametrize('provider', list(HTTP_SDK_MODELS))
async def test_enforce_refuses_a_rewrite_that_breaks_the_prefix(provider: str):
    verifier = WireVerifier(mode='enforce')

    def make_client(client_class: type[Any]) -> Any:
        return verifier.http_client(client_class=client_class)

    with FakeProvider(script=SCRIPT) as server:
        async with HTTP_SDK_MODELS[provider](make_client, server.url) as model:
            agent = Agent(model, instructions='Be brief.', tools=[get_time])
            history = (await agent.run('First?')).all_messages()
            history = (await agent.run('Time?', message_history=history)).all_messages()
            capabilities = [ProcessHistory(drop_oldest_turn)]
            dropping = Agent(model, instructions='Be brief.', tools=[get_time], capabilities=capabilities)
            # Groq's SDK wraps the refusal (after retrying it, each retry refused again) as a connection error.
            with pytest.raises(ModelAPIError if provider == 'groq' else WirePrefixDivergenceError) as raised:
                await dropping.run('Third?', message_history=history)
    # Refused in the transport: the provider got the three requests of the first two runs only.
    assert (len(server.requests), server.errors) == (3, [])
    [divergence] = verifier.divergences
    assert (divergence.api, divergence.request, divergence.kind) == (f'{provider}-chat', 3, 'message')
    assert '"First?"' in divergence.previous and '"Time?"' in (divergence.current or '')
    assert str(refusal_in(raised.value)) == (
        f'{divergence.message}\nNot sent. If it opens a new window (compaction, new instructions), call '
        '`open_window()` on the verifier first.'
    )


def cohere_reply(request: httpx.Request) -> httpx.Response:
    """Cohere's v2 Chat, offline: the fake provider doesn't speak it, so this stands in for it."""
    message = {'role': 'assistant', 'content': [{'type': 'text', 'text': 'OK.'}]}
    usage = {
        'billed_units': {'input_tokens': 10, 'output_tokens': 2},
        'tokens': {'input_tokens': 10, 'output_tokens': 2},
    }
    return httpx.Response(200, json={'id': 'c1', 'finish_reason': 'COMPLETE', 'message': message, 'usage': usage})


async def test_enforce_refuses_a_rewrite_on_cohere():
    from pydantic_ai.models.cohere import CohereModel
    from pydantic_ai.providers.cohere import CohereProvider

    verifier = WireVerifier(mode='enforce')
    sent: list[str] = []

    def cohere(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return cohere_reply(request)

    transport = httpx.MockTransport(cohere)
    async with verifier.http_client(client_class=httpx.AsyncClient, transport=transport) as http_client:
        model = CohereModel('command-r7b-12-2024', provider=CohereProvider(api_key='offline', http_client=http_client))
        agent = Agent(model, instructions='Be brief.')
        history = (await agent.run('First?')).all_messages()
        history = (await agent.run('Second?', message_history=history)).all_messages()
        dropping = Agent(model, instructions='Be brief.', capabilities=[ProcessHistory(drop_oldest_turn)])
        with pytest.raises(WirePrefixDivergenceError) as raised:
            await dropping.run('Third?', message_history=history)
    assert sent == ['/v2/chat'] * 2
    [divergence] = verifier.divergences
    assert (divergence.api, divergence.request, divergence.kind) == ('cohere-chat', 2, 'message')
    assert str(raised.value).startswith(divergence.message + '\nNot sent.')


async def test_enforce_refuses_a_rewrite_on_deepseek():
    # An OpenAI-SDK provider whose base URL has no `/v1`: its requests go to `/chat/completions`.
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.deepseek import DeepSeekProvider

    verifier = WireVerifier(mode='enforce')
    sent: list[str] = []

    def deepseek(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.url.path)
        choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
        body = {'id': 'c1', 'object': 'chat.completion', 'created': 0, 'model': 'deepseek-chat', 'choices': [choice]}
        return httpx2.Response(200, json=body)

    async with verifier.http_client(transport=httpx2.MockTransport(deepseek)) as http_client:
        model = OpenAIChatModel('deepseek-chat', provider=DeepSeekProvider(api_key='offline', http_client=http_client))
        agent = Agent(model, instructions='Be brief.')
        history = (await agent.run('First?')).all_messages()
        history = (await agent.run('Second?', message_history=history)).all_messages()
        dropping = Agent(model, instructions='Be brief.', capabilities=[ProcessHistory(drop_oldest_turn)])
        with pytest.raises(WirePrefixDivergenceError):
            await dropping.run('Third?', message_history=history)
    assert sent == ['/chat/completions'] * 2
    [divergence] = verifier.divergences
    assert (divergence.api, divergence.request, divergence.kind) == ('openai-chat', 2, 'message')
