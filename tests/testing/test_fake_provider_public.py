"""The fake provider as a user's test suite imports it, `pydantic_ai_append.testing.fake_provider`: the SDK of the API a
test uses is all it needs, and each exchange says what its request cost.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModelSettings
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    ToolCalls,
    anthropic_model,
    bedrock_model,
    google_model,
    openai_chat_model,
    openai_responses_model,
)

from ..fake_models import get_time, live_loopback

ROOT = Path(__file__).parent.parent.parent

SDKS = {
    'openai_chat_model': 'openai',
    'openai_responses_model': 'openai',
    'anthropic_model': 'anthropic',
    'google_model': 'google.genai',
    'bedrock_model': 'boto3',
}
"""The SDK each model helper's model class is built on, by the helper's name."""

ALL_SDKS = (
    'openai',
    'anthropic',
    'google.genai',
    'boto3',
    'botocore',
    'mistralai',
    'groq',
    'cohere',
    'huggingface_hub',
)
"""Every provider SDK Pydantic AI's model classes take, the ones a user of one API may not have installed."""


@pytest.mark.parametrize('helper', list(SDKS))
def test_one_apis_sdk_is_enough(helper: str):
    # A process where importing any other SDK fails, as in a project that installed only `pydantic-ai-slim[openai]`
    # (or `[anthropic]`, ...): the module imports, serves an agent run through the helper's model, and a helper of
    # another API says which extra it needs when called.
    blocked = [sdk for sdk in ALL_SDKS if sdk != SDKS[helper] and not (helper == 'bedrock_model' and sdk == 'botocore')]
    other = 'anthropic_model' if SDKS[helper] != 'anthropic' else 'openai_chat_model'
    code = textwrap.dedent(f"""
        import sys

        for name in {blocked!r}:
            sys.modules[name] = None

        from pydantic_ai import Agent

        from pydantic_ai_append.testing import fake_provider

        with fake_provider.FakeProvider(script=[fake_provider.Text('Hello!')]) as server:
            result = Agent(fake_provider.{helper}(server.url)).run_sync('Hi')
        print(result.output, server.exchanges[0].usage.output_tokens)
        try:
            fake_provider.{other}('http://127.0.0.1:1')
        except ImportError as error:
            print('pydantic-ai-slim[' in str(error))
    """)
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr[-2000:], done.stdout) == (0, '', 'Hello! 1\nTrue\n')


def long_instructions() -> str:
    # Past every fake cache's minimum (4,096 tokens for the Gemini models after 2.5), so the second run reads from it.
    return ''.join(f'Rule {number}: answer in one word.\n' for number in range(700))


MODELS: dict[str, tuple[Callable[[str], Model], ModelSettings | None]] = {
    # Anthropic caches only at a breakpoint, which the agent's settings place after the instructions.
    'anthropic': (anthropic_model, AnthropicModelSettings(anthropic_cache_instructions=True)),
    'openai-chat': (openai_chat_model, None),
    'openai-responses': (openai_responses_model, None),
    'gemini': (google_model, None),
    'bedrock-converse': (bedrock_model, None),
}

USAGE_FIELDS = ('input_tokens', 'cache_read_tokens', 'cache_write_tokens', 'output_tokens')


def counts(usage: RequestUsage) -> tuple[int, ...]:
    return tuple(getattr(usage, name) for name in USAGE_FIELDS)


@live_loopback
@pytest.mark.anyio
@pytest.mark.parametrize('api', list(MODELS))
async def test_each_exchange_reports_the_usage_and_cost_the_agent_saw(api: str):
    make_model, settings = MODELS[api]
    script = [ToolCalls([('get_time', {})]), Text('Noon.'), Text('Still noon.')]
    with FakeProvider(script=script) as server:
        agent = Agent(
            make_model(server.url), tools=[get_time], instructions=long_instructions(), model_settings=settings
        )
        history = (await agent.run('What time is it?')).all_messages()
        history = (await agent.run('And now?', message_history=history)).all_messages()
    responses = [message for message in history if isinstance(message, ModelResponse)]
    assert [counts(exchange.usage) for exchange in server.exchanges] == [counts(r.usage) for r in responses]
    assert [exchange.cost_usd for exchange in server.exchanges] == [float(r.cost().total_price) for r in responses]
    # The second and third requests read the instructions from the cache, at the read price: each cost less than it
    # would have with every input token uncached.
    assert [bool(exchange.usage.cache_read_tokens) for exchange in server.exchanges] == [False, True, True]
    uncached = [replace(r, usage=replace(r.usage, cache_read_tokens=0, cache_write_tokens=0)) for r in responses[1:]]
    assert all(
        (exchange.cost_usd or 0) < float(response.cost().total_price)
        for exchange, response in zip(server.exchanges[1:], uncached, strict=True)
    )


@live_loopback
def test_a_model_genai_prices_has_no_price_for_costs_none():
    with FakeProvider(script=[Text('Hello!')]) as server:
        Agent(openai_chat_model(server.url, 'my-fine-tune')).run_sync('Hi')
    exchange = server.exchanges[0]
    assert (exchange.path, exchange.usage.output_tokens, exchange.cost_usd) == ('/v1/chat/completions', 1, None)
