"""Pydantic AI models pointed at a running `FakeProvider`, one per API it serves.

Each is the real model class over the real provider SDK, so what a test sees on the wire is what a user's agent
sends; only the base URL, a dummy API key and an HTTP client that keeps no idle connections differ (for Bedrock,
whose boto3 client sends through botocore's own HTTP stack, dummy AWS credentials).

Each helper imports its model class when called, so a test needs only the SDK of the API it uses (`openai` for
both OpenAI models, `anthropic`, `google-genai`, `boto3`): without it, the helper raises Pydantic AI's `ImportError`,
which names the `pydantic-ai-slim` extra to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx2

if TYPE_CHECKING:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.bedrock import BedrockConverseModel
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

__all__ = ('anthropic_model', 'bedrock_model', 'google_model', 'openai_chat_model', 'openai_responses_model')

_DUMMY_API_KEY = 'fake-provider-key'


def _openai_provider(base_url: str, http_client: httpx2.AsyncClient | None) -> OpenAIProvider:
    """The provider both OpenAI models send through, at the server's `/v1` prefix."""
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIProvider(
        base_url=base_url.rstrip('/') + '/v1', api_key=_DUMMY_API_KEY, http_client=http_client or _unpooled_client()
    )


def openai_chat_model(
    base_url: str, model_name: str = 'gpt-5.2', *, http_client: httpx2.AsyncClient | None = None
) -> OpenAIChatModel:
    """Build an `OpenAIChatModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send.
        http_client: The client to send through, e.g. `WireCapture.http_client()` or `prompt_wire.http_client()`; the caller closes it.
            A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1/chat/completions`.
    """
    from pydantic_ai.models.openai import OpenAIChatModel

    return OpenAIChatModel(model_name, provider=_openai_provider(base_url, http_client))


def openai_responses_model(
    base_url: str, model_name: str = 'gpt-5.2', *, http_client: httpx2.AsyncClient | None = None
) -> OpenAIResponsesModel:
    """Build an `OpenAIResponsesModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send.
        http_client: The client to send through, e.g. `WireCapture.http_client()` or `prompt_wire.http_client()`; the caller closes it.
            A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1/responses`.
    """
    from pydantic_ai.models.openai import OpenAIResponsesModel

    return OpenAIResponsesModel(model_name, provider=_openai_provider(base_url, http_client))


def anthropic_model(
    base_url: str, model_name: str = 'claude-sonnet-4-6', *, http_client: httpx2.AsyncClient | None = None
) -> AnthropicModel:
    """Build an `AnthropicModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send.
        http_client: The client to send through, e.g. `WireCapture.http_client()` or `prompt_wire.http_client()`; the caller closes it.
            A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1/messages`.
    """
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    # The Anthropic SDK adds `/v1` itself, unlike the OpenAI one.
    provider = AnthropicProvider(
        base_url=base_url.rstrip('/'), api_key=_DUMMY_API_KEY, http_client=http_client or _unpooled_client()
    )
    return AnthropicModel(model_name, provider=provider)


def bedrock_model(
    base_url: str, model_name: str = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', *, cache: bool = True
) -> BedrockConverseModel:
    """Build a `BedrockConverseModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The Bedrock model id to send.
        cache: Whether the model's settings turn on Bedrock's prompt caching of the instructions, the tool
            definitions and the messages (`bedrock_cache_instructions`, `bedrock_cache_tool_definitions`,
            `bedrock_cache_messages`), which is what a user sets for Bedrock to cache the kept prefix.

    Returns:
        A model whose requests go to `POST {base_url}/model/{model_name}/converse`, or `/converse-stream` when
        the agent streams.
    """
    from pydantic_ai.models.bedrock import BedrockConverseModel, BedrockModelSettings
    from pydantic_ai.providers.bedrock import BedrockProvider

    # Explicit keys and a region, so boto3 looks for no credentials or region in the environment or on the network.
    provider = BedrockProvider(
        base_url=base_url,
        region_name='us-east-1',
        aws_access_key_id='fake-provider-key-id',
        aws_secret_access_key=_DUMMY_API_KEY,
    )
    settings = BedrockModelSettings(
        bedrock_cache_instructions=cache, bedrock_cache_tool_definitions=cache, bedrock_cache_messages=cache
    )
    return BedrockConverseModel(model_name, provider=provider, settings=settings)


def google_model(
    base_url: str, model_name: str = 'gemini-2.5-flash', *, http_client: httpx2.AsyncClient | None = None
) -> GoogleModel:
    """Build a `GoogleModel` that talks to a `FakeProvider` through the Gemini API's `google-genai` client.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send; its implicit caching follows `testing.fake_provider._gemini_cache`.
        http_client: The client to send through; the caller closes it. Its timeout must not be httpx's default
            5 seconds, which Pydantic AI warns of. A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1beta/models/{model_name}:generateContent`, or
        `:streamGenerateContent?alt=sse` when streamed.
    """
    from pydantic_ai.models.google import GoogleModel
    from pydantic_ai.providers.google import GoogleProvider

    # The SDK adds the API version and the model's path itself, and sends the key in `x-goog-api-key`.
    provider = GoogleProvider(
        base_url=base_url.rstrip('/'), api_key=_DUMMY_API_KEY, http_client=http_client or _unpooled_client()
    )
    return GoogleModel(model_name, provider=provider)


def _unpooled_client() -> httpx2.AsyncClient:
    # Nobody closes a client the helpers make, so it keeps no idle connections: one left open in the pool
    # would raise `ResourceWarning` when collected, which the test suite turns into an error. The timeout is
    # a minute, not httpx's 5 seconds, which the Google provider warns of.
    return httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0), timeout=60)
