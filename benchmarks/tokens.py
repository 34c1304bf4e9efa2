"""Tokens and dollars: what each wire conversation's provider reported, priced, and held against the limit.

The fake provider's simulated caches (`fake_provider.caching`) report each request's usage in the real fields;
Pydantic AI reads it into `RequestUsage`, which counts what was read from and written to the cache in its input
tokens. Each conversation is priced with `genai-prices` (installed with Pydantic AI) for the model name it sends.

The limit is the cheapest a conversation can be: every input token the previous request sent is read from the cache
at the read price, and every other input token pays the input price, or the cache write price where the provider
charges one to cache it (Anthropic). A variant's cost is reported as a multiple of the limit of its own requests.
Only the input side is priced: every variant gets the same scripted replies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from genai_prices import calc_price
from pydantic_ai.usage import RequestUsage

from .wire import PATHS, WireResult

__all__ = ('TokenResult', 'token_result', 'token_summary')

_PROVIDERS = {'anthropic': 'anthropic', 'openai-chat': 'openai', 'openai-responses': 'openai'}
_WRITES_PRICED = {'anthropic'}
"""The APIs whose providers charge for writing to the cache."""


@dataclass(frozen=True)
class TokenResult:
    """One conversation's input tokens and their price."""

    input: int
    """Every input token, read and written ones included."""
    read: int
    written: int
    cost: float
    """The input side's price in dollars."""
    limit: float
    """The limit's price in dollars (see the module docstring)."""

    @property
    def uncached(self) -> int:
        """The input tokens neither read from the cache nor written to it."""
        return self.input - self.read - self.written

    @property
    def over_limit(self) -> float:
        """The cost as a multiple of the limit."""
        return self.cost / self.limit if self.limit else 1.0


def _input_price(usage: RequestUsage, model: str, provider: str) -> float:
    return float(calc_price(usage, model, provider_id=provider).input_price)


def token_result(result: WireResult) -> TokenResult:
    """Sum and price one conversation's reported usage, and price its limit."""
    api = PATHS[result.path][0]
    provider = _PROVIDERS[api]
    cost = limit = 0.0
    before = 0
    for usage in result.usages:
        cost += _input_price(usage, result.model, provider)
        kept = min(before, usage.input_tokens)
        added = usage.input_tokens - kept
        ideal = RequestUsage(
            input_tokens=usage.input_tokens,
            cache_read_tokens=kept,
            cache_write_tokens=added if api in _WRITES_PRICED else 0,
        )
        limit += _input_price(ideal, result.model, provider)
        before = usage.input_tokens
    return TokenResult(
        input=sum(usage.input_tokens for usage in result.usages),
        read=sum(usage.cache_read_tokens for usage in result.usages),
        written=sum(usage.cache_write_tokens for usage in result.usages),
        cost=cost,
        limit=limit,
    )


def token_summary(result: WireResult) -> dict[str, Any]:
    """The conversation's token figures as JSON-able data."""
    tokens = token_result(result)
    return {
        'model': result.model,
        'input_tokens': tokens.input,
        'cache_read_tokens': tokens.read,
        'cache_write_tokens': tokens.written,
        'uncached_tokens': tokens.uncached,
        'input_cost_usd': round(tokens.cost, 6),
        'limit_usd': round(tokens.limit, 6),
        'over_limit': round(tokens.over_limit, 4),
    }
