"""Tokens and dollars: what each wire conversation's provider reported, priced, and held against the limit.

The fake provider's simulated caches (`pydantic_ai_append.testing.fake_provider.caching`) report each request's
usage in the real fields; Pydantic AI reads it into `RequestUsage`, which counts what was read from and written to the
cache in its input tokens. Each conversation is priced with `genai-prices` (installed with Pydantic AI) for the model
name it sends.

The limit is the cheapest a conversation can be: every input token the previous request sent is read from the cache
at the read price, and every other input token pays the input price, or the cache write price where the provider
charges one to cache it (Anthropic, and Claude on Bedrock; Gemini's implicit cache charges none). A variant's cost is
reported as a multiple of the limit of its own requests. Only the input side is priced: every variant gets the same
scripted replies.

No client reaches that limit on OpenAI: its cache is read in whole steps (1,024 tokens, then 128 at a time), so the
last partial step of every previous request pays the input price again, whatever was sent. Static instructions, which
never change, show it. So on OpenAI the target is judged against the limit in those steps (`step_limit`: the tokens
the previous request sent, rounded down to a step, read), and both multiples are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from genai_prices import calc_price
from pydantic_ai.usage import RequestUsage

from pydantic_ai_append._telemetry.observe import openai_steps

from .tables import Verdict, table
from .wire import PATHS, PathName, WireResult

__all__ = (
    'LIMIT_RATIO',
    'PROVIDERS',
    'TokenResult',
    'token_result',
    'token_summary',
    'token_verdicts',
    'tokens_section',
)

LIMIT_RATIO = 1.05
"""With the recommended cache settings, append mode's input cost is at most this multiple of the limit."""

PROVIDERS = {
    'anthropic': 'anthropic',
    'openai-chat': 'openai',
    'openai-responses': 'openai',
    'gemini': 'google',
    'bedrock-converse': 'bedrock',
}
"""The provider of each API, as `genai-prices` names it (`bedrock` is its AWS Bedrock, by the name Pydantic AI gives
Bedrock's responses)."""
_WRITES_PRICED = {'anthropic', 'bedrock-converse'}
"""The APIs whose providers charge for writing to the cache."""
_STEPPED = {'openai-chat', 'openai-responses'}
"""The APIs whose providers read the cache in steps: 1,024 tokens, then 128 at a time."""


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

    step_limit: float
    """The limit in the provider's cache steps, where it reads in steps; else the limit."""

    @property
    def uncached(self) -> int:
        """The input tokens neither read from the cache nor written to it."""
        return self.input - self.read - self.written

    @property
    def over_limit(self) -> float:
        """The cost as a multiple of the limit."""
        return self.cost / self.limit if self.limit else 1.0

    @property
    def over_step_limit(self) -> float:
        """The cost as a multiple of the limit in the provider's cache steps."""
        return self.cost / self.step_limit if self.step_limit else 1.0


def _input_price(usage: RequestUsage, model: str, provider: str) -> float:
    return float(calc_price(usage, model, provider_id=provider).input_price)


def _ideal_price(result: WireResult, total: int, kept: int) -> float:
    """The price of a request of `total` input tokens that reads `kept` from the cache and caches the rest."""
    api = PATHS[result.path][0]
    written = total - kept if api in _WRITES_PRICED else 0
    usage = RequestUsage(input_tokens=total, cache_read_tokens=kept, cache_write_tokens=written)
    return _input_price(usage, result.model, PROVIDERS[api])


def token_result(result: WireResult) -> TokenResult:
    """Sum and price one conversation's reported usage, and price its limits."""
    api = PATHS[result.path][0]
    cost = limit = step_limit = 0.0
    before = 0
    for usage in result.usages:
        cost += _input_price(usage, result.model, PROVIDERS[api])
        kept = min(before, usage.input_tokens)
        limit += _ideal_price(result, usage.input_tokens, kept)
        step_limit += _ideal_price(result, usage.input_tokens, openai_steps(kept) if api in _STEPPED else kept)
        before = usage.input_tokens
    return TokenResult(
        input=sum(usage.input_tokens for usage in result.usages),
        read=sum(usage.cache_read_tokens for usage in result.usages),
        written=sum(usage.cache_write_tokens for usage in result.usages),
        cost=cost,
        limit=limit,
        step_limit=step_limit,
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
        'step_limit_usd': round(tokens.step_limit, 6),
        'over_step_limit': round(tokens.over_step_limit, 4),
    }


def tokens_section(results: Sequence[WireResult], heading: str) -> str:
    """Each conversation's input tokens, cost, and its multiples of the limits, under `heading`."""
    rows = [
        [
            result.path,
            result.policy,
            result.model,
            f'{tokens.input:,}',
            f'{tokens.read:,}',
            f'{tokens.written:,}',
            f'{tokens.uncached:,}',
            f'${tokens.cost:.4f}',
            f'${tokens.limit:.4f}',
            f'{tokens.over_limit:.3f}x',
            f'{tokens.over_step_limit:.3f}x',
        ]
        for result in results
        for tokens in [token_result(result)]
    ]
    columns = ['path', 'variant', 'model', 'input tokens', 'read', 'written', 'uncached', 'input cost', 'limit']
    return f'{heading}\n\n' + table([*columns, 'cost / limit', 'cost / limit in steps'], rows)


def token_verdicts(
    path: PathName, append: WireResult, natives: Sequence[WireResult], scenario: str, *, limit: bool = True
) -> list[Verdict]:
    """The token targets of one path's append-mode conversation: near the limit (unless not `limit`), and no dearer
    than native's best.
    """
    tokens = token_result(append)
    stepped = PATHS[path][0] in _STEPPED
    found: list[Verdict] = []
    if limit:
        found.append(
            Verdict(
                f"{path}, {scenario}: append mode's input cost at most {LIMIT_RATIO:g}x the limit"
                + (" in OpenAI's cache steps" if stepped else '')
                + ', with the recommended settings',
                f'{tokens.over_step_limit:.3f}x (${tokens.cost:.4f} vs ${tokens.step_limit:.4f})'
                + (f'; {tokens.over_limit:.3f}x the limit without steps' if stepped else ''),
                tokens.over_step_limit <= LIMIT_RATIO,
            )
        )
    if natives:
        cost, best = min((token_result(result).cost, result.policy) for result in natives)
        found.append(
            Verdict(
                f"{path}, {scenario}: append mode's input cost no more than the native peer's at its best",
                f'${tokens.cost:.4f} vs ${cost:.4f} ({best})',
                tokens.cost <= cost,
            )
        )
    return found
