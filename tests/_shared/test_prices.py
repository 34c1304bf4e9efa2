"""Cache prices (`_shared.prices`): found by `genai-prices` for the model that served a response, the provider's
documented ratios where it lacks the model, none for a model of no known provider; and `CachePrices`'s checks.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelResponse, TextPart

from pydantic_ai_append import CachePrices
from pydantic_ai_append._shared.prices import prices_of, reads_at_cache_points


def served_by(model_name: str, provider_name: str | None, provider_url: str | None = None) -> ModelResponse:
    return ModelResponse(
        parts=[TextPart('ok')], model_name=model_name, provider_name=provider_name, provider_url=provider_url
    )


def test_prices_of_the_model_that_served_the_response():
    found = {
        name: prices_of(served_by(model, provider, url))
        for name, model, provider, url in [
            ('sonnet', 'claude-sonnet-4-6', 'anthropic', 'http://127.0.0.1:8080'),
            ('gpt', 'gpt-5.2', 'openai', 'https://api.openai.com/v1'),
            ('unpriced anthropic', 'claude-from-the-future', 'anthropic', None),
            ('unpriced google', 'gemini-from-the-future', 'google-gla', None),
            ('a function model', 'scripted', 'function', None),
            ('no provider', 'scripted', None, None),
        ]
    }
    assert {
        name: prices and (prices.input, prices.cache_read, prices.cache_write) for name, prices in found.items()
    } == snapshot(
        {
            'sonnet': (3.0, 0.3, 3.75),
            'gpt': (1.75, 0.175, 1.75),
            'unpriced anthropic': (1, 0.1, 1.25),
            'unpriced google': (1, 0.1, 1),
            'a function model': None,
            'no provider': None,
        }
    )


def test_the_threshold_is_how_many_reads_a_write_costs_beyond_one():
    assert CachePrices(input=3, cache_read=0.3, cache_write=3.75).threshold == pytest.approx(11.5)
    assert CachePrices(input=1.75, cache_read=0.175, cache_write=1.75).threshold == pytest.approx(9)


BAD_PRICES: list[dict[str, Any]] = [
    {'input': 0, 'cache_read': 0.1, 'cache_write': 1},
    {'input': 1, 'cache_read': float('nan'), 'cache_write': 1},
    {'input': 1, 'cache_read': 0.1, 'cache_write': '1.25'},
    {'input': 1, 'cache_read': 0.5, 'cache_write': 0.25},
    {'input': 1, 'cache_read': 0.1, 'cache_write': 1, 'retention': 300},
    {'input': 1, 'cache_read': 0.1, 'cache_write': 1, 'retention': timedelta(0)},
]


def test_bad_prices_are_refused_with_the_value():
    refused: list[str] = []
    for options in BAD_PRICES:
        with pytest.raises(UserError) as raised:
            CachePrices(**options)
        refused.append(str(raised.value))
    assert refused == snapshot(
        [
            '`CachePrices.input` takes a positive number, not 0.',
            '`CachePrices.cache_read` takes a positive number, not nan.',
            "`CachePrices.cache_write` takes a positive number, not '1.25'.",
            '`CachePrices.cache_write` (0.25) is below `cache_read` (0.5): a cache costs at least as much to write as to read.',
            '`CachePrices.retention` takes a positive `timedelta` or `None`, not 300.',
            '`CachePrices.retention` takes a positive `timedelta` or `None`, not datetime.timedelta(0).',
        ]
    )


def test_anthropic_and_bedrock_read_their_cache_at_cache_points():
    providers = ['anthropic', 'bedrock', 'openai', 'google-gla', None]
    found = [reads_at_cache_points(served_by('m', provider)) for provider in providers]
    assert found == [True, True, False, False, False]
