"""What the tests that run agents against the fake provider share: a model class per API, and the tools they call."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from pydantic_ai.models import Model

from pydantic_ai_append.testing import Api
from pydantic_ai_append.testing.fake_provider import anthropic_model, openai_chat_model, openai_responses_model

ModelFactory = Callable[..., Model]


MODEL_FACTORIES: Mapping[Api, ModelFactory] = {
    'anthropic': anthropic_model,
    'openai-chat': openai_chat_model,
    'openai-responses': openai_responses_model,
}


# Tests that talk to the live fake provider need loopback even when the suite runs with `--block-network`.
live_loopback = pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])


def get_time() -> str:
    """Get the current time."""
    return '12:00'


def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f'Sunny in {city}'
