"""A conversation's prompt-cache use and cost, totalled from its history: what `AppendInstructions.cache_summary` and
the `testing` fixture report.

Each `ModelResponse` holds its usage as the provider reported it, and the figures `observe` stored in its metadata
(the tokens expected to be read, those rewrite mode would have read, and those never reopening a window by price would
have sent and read), so a history is its own ledger.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from pydantic_ai.messages import ModelMessage, ModelResponse

from .._history import RECORD_KEY


@dataclass(frozen=True)
class CacheSummary:
    """A conversation's prompt-cache use as its provider reported it, and its cost against rewrite mode's."""

    requests: int
    """The responses counted."""

    cache_read_tokens: int
    """Input tokens the provider read from its cache."""

    cache_write_tokens: int
    """Input tokens the provider wrote to its cache (Anthropic charges for these)."""

    uncached_input_tokens: int
    """Input tokens neither read nor written."""

    expected_read_tokens: int
    """Input tokens the plugin expected to be read: each request's previous one, where its window went on."""

    shortfalls: int
    """Requests that read less than expected."""

    cost_usd: float
    """What the priced responses cost, by `genai-prices`."""

    rewrite_cost_usd: float
    """What the same requests would have cost in rewrite mode (see the module docstring for the estimate)."""

    never_reopened_cost_usd: float
    """What they would have cost had no window been opened by price or expiry: every change those windows dropped
    read again by each later request, and the previous request read whole where one opened."""

    unpriced: int
    """Responses `genai-prices` could not price (an unknown model), left out of both costs."""

    @property
    def saving_usd(self) -> float:
        """What append mode saved against rewrite mode."""
        return self.rewrite_cost_usd - self.cost_usd

    @property
    def reopening_saving_usd(self) -> float:
        """What the windows opened by price or expiry saved against never reopening one."""
        return self.never_reopened_cost_usd - self.cost_usd


def summary(messages: Sequence[ModelMessage]) -> CacheSummary:
    """The cache use and cost of every response in `messages`, as the provider reported them."""
    responses = [message for message in messages if isinstance(message, ModelResponse)]
    expected = [figures(response)[0] for response in responses]
    priced = [cost for response in responses if (cost := costs(response)) is not None]
    return CacheSummary(
        requests=len(responses),
        cache_read_tokens=sum(response.usage.cache_read_tokens for response in responses),
        cache_write_tokens=sum(response.usage.cache_write_tokens for response in responses),
        uncached_input_tokens=sum(uncached(response) for response in responses),
        expected_read_tokens=sum(expected),
        shortfalls=sum(
            response.usage.cache_read_tokens < tokens for response, tokens in zip(responses, expected, strict=True)
        ),
        cost_usd=sum(cost for cost, _, _ in priced),
        rewrite_cost_usd=sum(rewrite for _, rewrite, _ in priced),
        never_reopened_cost_usd=sum(kept for _, _, kept in priced),
        unpriced=len(responses) - len(priced),
    )


def figures_of(response: ModelResponse) -> dict[str, int]:
    """The figures `observe` stored on `response`, those that are counts."""
    stored = (response.metadata or {}).get(RECORD_KEY)
    items = cast('dict[str, object]', stored).items() if isinstance(stored, dict) else ()
    return {name: value for name, value in items if isinstance(value, int)}


def figures(response: ModelResponse) -> tuple[int, int]:
    """The tokens `observe` expected `response`'s request to read, and those rewrite mode would have read."""
    stored = figures_of(response)
    expected, rewrite = stored.get('expected_read_tokens'), stored.get('rewrite_read_tokens')
    if expected is None or rewrite is None:
        return 0, response.usage.cache_read_tokens
    return expected, rewrite


def uncached(response: ModelResponse) -> int:
    """The input tokens of `response`'s request the provider neither read from its cache nor wrote to it."""
    usage = response.usage
    return usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens


def costs(response: ModelResponse) -> tuple[float, float, float] | None:
    """What `response` cost, and what it would have cost in rewrite mode and never reopening a window by price or
    expiry; `None` if it can't be priced.
    """
    usage = response.usage
    moved = usage.cache_read_tokens - figures(response)[1]
    # What rewrite mode can't read it writes to the cache where the provider wrote this request, or else re-sends.
    written = usage.cache_write_tokens + moved if usage.cache_write_tokens else usage.cache_write_tokens
    rewrite = replace(usage, cache_read_tokens=usage.cache_read_tokens - moved, cache_write_tokens=written)
    # Never reopening, it sends the changes dropped since and reads more; what it doesn't read is written, or sent
    # uncached, as this request's was.
    stored = figures_of(response)
    sent = usage.input_tokens + stored.get('kept_tokens', 0)
    read = stored.get('kept_read_tokens', usage.cache_read_tokens)
    kept = replace(usage, input_tokens=sent, cache_read_tokens=read)
    if usage.cache_write_tokens:
        kept = replace(kept, cache_write_tokens=max(sent - read - uncached(response), 0))
    try:
        cost = float(response.cost().total_price)
        # Most requests cost rewrite mode and never reopening what they cost: each price is looked up once (a tenth of
        # a millisecond each).
        other = [
            cost if each == usage else float(replace(response, usage=each).cost().total_price)
            for each in (rewrite, kept)
        ]
    except (LookupError, ValueError, AssertionError):
        return None
    return cost, other[0], other[1]
