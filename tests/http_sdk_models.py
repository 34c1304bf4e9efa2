"""Pydantic AI's model classes for the providers reached over plain HTTP with an OpenAI-Chat-shaped body, pointed at
the fake provider: Mistral (the `mistralai` SDK, on `httpx2`), Groq (the `groq` SDK, which takes only an
`httpx.AsyncClient`) and Hugging Face (`huggingface_hub`'s `AsyncInferenceClient`, which makes its `httpx.AsyncClient`s
through `huggingface_hub.set_async_client_factory`). The fake provider answers each at its Chat Completions endpoint.

Each is a context manager taking `http_client`, a function that makes the client of the class given (a
`WireVerifier`'s or a `prompt_wire`'s `http_client`), and the fake provider's URL.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from typing import Any, Literal

import httpx
import httpx2
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text

MakeClient = Callable[[type[Any]], Any]
"""Make an HTTP client of the class given: `httpx2.AsyncClient` or `httpx.AsyncClient`."""

_KEY = 'fake-provider-key'


@asynccontextmanager
async def groq(http_client: MakeClient, url: str) -> AsyncGenerator[Model]:
    from pydantic_ai.models.groq import GroqModel
    from pydantic_ai.providers.groq import GroqProvider

    async with http_client(httpx.AsyncClient) as client:
        yield GroqModel(
            'llama-3.3-70b-versatile', provider=GroqProvider(api_key=_KEY, base_url=url, http_client=client)
        )


@asynccontextmanager
async def mistral(http_client: MakeClient, url: str) -> AsyncGenerator[Model]:
    from pydantic_ai.models.mistral import MistralModel
    from pydantic_ai.providers.mistral import MistralProvider

    async with http_client(httpx2.AsyncClient) as client:
        provider = MistralProvider(api_key=_KEY, base_url=url, http_client=client)
        yield MistralModel('mistral-large-latest', provider=provider)


_HF_CLIENT = ContextVar[MakeClient | None]('hf_client', default=None)
"""Who makes the `httpx.AsyncClient` of the next `AsyncInferenceClient`, within `huggingface`."""


def _hf_client() -> httpx.AsyncClient:
    make = _HF_CLIENT.get()
    if make is None:  # pragma: no cover - outside `huggingface`: a client as the SDK's default makes, without its hooks
        return httpx.AsyncClient(follow_redirects=True, timeout=None)
    return make(httpx.AsyncClient)


@asynccontextmanager
async def huggingface(http_client: MakeClient, url: str) -> AsyncGenerator[Model]:
    import huggingface_hub
    from huggingface_hub import AsyncInferenceClient
    from pydantic_ai.models.huggingface import HuggingFaceModel
    from pydantic_ai.providers.huggingface import HuggingFaceProvider

    # The SDK makes a client per `AsyncInferenceClient` through a global factory, the way its docs say to give it
    # one, and closes it with the `AsyncInferenceClient`. It has no public way to read the factory back, so the one
    # set here stays, and makes the test's client only within this block.
    huggingface_hub.set_async_client_factory(_hf_client)
    token = _HF_CLIENT.set(http_client)
    try:
        async with AsyncInferenceClient(base_url=url, api_key='hf_fake') as hf_client:
            provider = HuggingFaceProvider(hf_client=hf_client, api_key='hf_fake')
            yield HuggingFaceModel('Qwen/Qwen3-8B', provider=provider)
    finally:
        _HF_CLIENT.reset(token)


HTTP_SDK_MODELS: Mapping[str, Callable[[MakeClient, str], AbstractAsyncContextManager[Model]]] = {
    'groq': groq,
    'mistral': mistral,
    'huggingface': huggingface,
}
"""Each provider's model, by the name its API has in `pydantic_ai_append` without `-chat`."""

RULES = 'Follow the house rules. ' * 400  # about 2,400 tokens: above the minimum the fake caches from


async def three_turns(
    prompt_wire: PromptWire, provider: str, windows: Literal['keep', 'price'] = 'keep'
) -> list[ModelMessage]:
    """Three turns of an agent with a block whose notes grow before the third, through `provider`'s model against the
    fake provider, recorded by `prompt_wire`; the history they leave.
    """
    memory = AppendInstructions[list[str]](id='memory', windows=windows)
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))

    def make_client(client_class: type[Any]) -> Any:
        return prompt_wire.http_client(client_class=client_class)

    history: list[ModelMessage] = []
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        async with HTTP_SDK_MODELS[provider](make_client, server.url) as model:
            agent = Agent(model, deps_type=list[str], instructions=RULES, capabilities=[memory])
            for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
                history = (await agent.run(f'turn {turn}', deps=notes, message_history=history)).all_messages()
    return history
