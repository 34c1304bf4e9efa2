"""What a provider charges for its prompt cache: the prices a window's carried changes are weighed by.

A window's carried changes are read again, at the cache-read price, by every request after the one that delivered
them; a new window writes the whole request again, at the cache-write price. `CachePrices` holds a model's three
input prices. `prices_of` finds them for the model that served a response: from `genai-prices` (through Pydantic AI's
`ModelResponse.cost`) where it has the model, else the provider's documented ratios (`PROVIDER_DEFAULTS`); a model of
no known provider (a test model, a function model) has none.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import cast

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelResponse
from pydantic_ai.usage import RequestUsage

from .cache import ENTRY_BYTES, BoundedCache


@dataclass(frozen=True)
class CachePrices:
    """A model's input prices with its prompt cache, per million tokens in any one currency, and how long a cached
    prefix lives.

    Give it to `AppendInstructions(windows=...)` for prices negotiated with the provider or a model `genai-prices`
    doesn't have. Only the ratios decide when a window gives way to a new one.

    ```python
    from datetime import timedelta

    from pydantic_ai_append import CachePrices

    negotiated = CachePrices(input=2.4, cache_read=0.24, cache_write=3.0, retention=timedelta(hours=1))
    print(negotiated.threshold)
    #> 11.5
    ```
    """

    input: float
    """The price of an input token the cache neither reads nor writes."""

    cache_read: float
    """The price of an input token read from the cache."""

    cache_write: float
    """The price of an input token written to the cache (the input price where writing costs nothing extra)."""

    retention: timedelta | None = None
    """How long the provider keeps a prefix after the request that last used it; `None`: what the model's profile
    and settings say (Pydantic AI's `prompt_cache_outlook`)."""

    def __post_init__(self) -> None:
        for name in ('input', 'cache_read', 'cache_write'):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise UserError(f'`CachePrices.{name}` takes a positive number, not {value!r}.')
        if self.cache_write < self.cache_read:
            raise UserError(
                f'`CachePrices.cache_write` ({self.cache_write!r}) is below `cache_read` ({self.cache_read!r}): a '
                'cache costs at least as much to write as to read.'
            )
        retention = cast('object', self.retention)
        if retention is not None and (not isinstance(retention, timedelta) or retention <= timedelta()):
            raise UserError(f'`CachePrices.retention` takes a positive `timedelta` or `None`, not {self.retention!r}.')

    @property
    def threshold(self) -> float:
        """How many times a request's tokens its window's carried changes may be read for before writing the request
        again is cheaper: `cache_write / cache_read - 1`.
        """
        return self.cache_write / self.cache_read - 1


PROVIDER_DEFAULTS: dict[str, CachePrices] = {
    'anthropic': CachePrices(input=1, cache_read=0.1, cache_write=1.25),
    'openai': CachePrices(input=1, cache_read=0.1, cache_write=1),
    'google': CachePrices(input=1, cache_read=0.1, cache_write=1),
}
"""Each provider's documented ratios, by the start of the provider name Pydantic AI gives its responses, for a model
`genai-prices` doesn't have: Anthropic's 5-minute writes at 1.25x the input price and reads at 0.1x; OpenAI's and
Google's implicit caching, reads at 0.1x (the newer models'), writes at the input price."""

CACHE_POINT_PROVIDERS = ('anthropic', 'bedrock')
"""The providers, by the start of the provider name, that read a cached prefix only at the request's cache points
(and at most 20 content blocks before each, Anthropic's and Bedrock's "Prompt caching" pages), where the others read
the longest prefix they cached."""


def reads_at_cache_points(response: ModelResponse) -> bool:
    """Whether the provider that served `response` reads its cache only at cache points: where history moves, it then
    reads the tools and instructions alone.
    """
    return (response.provider_name or '').startswith(CACHE_POINT_PROVIDERS)


_MILLION = 1_000_000

_PRICES = BoundedCache[tuple[str | None, str | None, str | None], tuple[CachePrices | None]](
    max_entries=4096, max_bytes=sys.maxsize, name='cache prices', pooled=True
)
"""Each model's prices, by provider name, URL and model name: each request a window carries changes on asks for them,
and finding them again costs about 0.3 ms against 0.3 us (the benchmark's pieces: `price a model's cache`, and
`..., kept`)."""


def prices_of(response: ModelResponse) -> CachePrices | None:
    """The cache prices of the model that served `response`, if its provider is known."""
    key = (response.provider_name, response.provider_url, response.model_name)
    kept = _PRICES.get(key)
    if kept is None:
        # In a tuple, so a model with no prices is kept too.
        kept = (looked_up(response),)
        _PRICES.put(key, kept, size=ENTRY_BYTES)
    return kept[0]


def looked_up(response: ModelResponse) -> CachePrices | None:
    """The cache prices of the model that served `response`, found again (what `prices_of` keeps)."""

    def price(usage: RequestUsage) -> float:
        return float(replace(response, usage=usage).cost().input_price)

    try:
        found = CachePrices(
            input=price(RequestUsage(input_tokens=_MILLION)),
            cache_read=price(RequestUsage(input_tokens=_MILLION, cache_read_tokens=_MILLION)),
            cache_write=price(RequestUsage(input_tokens=_MILLION, cache_write_tokens=_MILLION)),
        )
    except (LookupError, AssertionError, ValueError, UserError):
        # No price for the model (or no model name): the provider's documented ratios stand in.
        provider = response.provider_name or ''
        return next((prices for name, prices in PROVIDER_DEFAULTS.items() if provider.startswith(name)), None)
    return found


def reads_discounted(provider: str, model: str | None) -> bool:
    """Whether a cache read of `model` (served by `provider`, as Pydantic AI names it) costs less than uncached input:
    by its prices (`prices_of`), and where none are known, taken to.
    """
    prices = prices_of(ModelResponse(parts=[], model_name=model, provider_name=provider))
    return prices is None or prices.cache_read < prices.input
