"""Where Anthropic's cache breakpoints pay off: the wire scenario on both Anthropic paths under each of Pydantic
AI's own cache settings, priced against the limit (`tokens`).

Anthropic caches only up to a breakpoint, so a stable prefix is worth nothing without one. The settings compared
are Pydantic AI's public `AnthropicModelSettings`:

- `none`: no breakpoint;
- `instructions`: one after the system prompt (`anthropic_cache_instructions`), which append mode keeps stable;
- `tail`: the automatic one on the conversation's last block (`anthropic_cache`), which moves with it and finds
  the previous request's within 20 blocks;
- `recommended`: both, and one after the tool definitions (`wire.RECOMMENDED_SETTINGS`);
- `unified`: Pydantic AI's provider-neutral `cache=True`, which places its breakpoints itself.

Append mode is also run with its clock block in rewrite mode (`append, clock rewritten`): the window's blocks are
sent as literal instruction parts and rewrite-mode ones as dynamic parts after them, so Pydantic AI's breakpoint
after the instructions lands between the two, and is still read when the rewritten block changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from pydantic_ai.settings import ModelSettings

from .scenario import CHAT_CLOCK_REWRITTEN
from .tables import table
from .tokens import TokenResult, token_result
from .wire import RECOMMENDED_SETTINGS, PathName, Variant, run_conversation

__all__ = ('SETTINGS', 'BreakpointResult', 'breakpoints_json', 'breakpoints_section', 'run_breakpoints')

SETTINGS: dict[str, ModelSettings] = {
    'none': ModelSettings(),
    'instructions': cast('ModelSettings', {'anthropic_cache_instructions': True}),
    'tail': cast('ModelSettings', {'anthropic_cache': True}),
    'recommended': RECOMMENDED_SETTINGS['anthropic'],
    'unified': cast('ModelSettings', {'cache': True}),
}
"""Each setting compared, by name."""

ANTHROPIC_PATHS: tuple[PathName, ...] = ('anthropic-inline', 'anthropic-wrapped')
MIXED = 'append, clock rewritten'


@dataclass(frozen=True)
class BreakpointResult:
    """One conversation of one variant under one setting."""

    path: PathName
    variant: str
    """The variant, or `append, clock rewritten`."""

    setting: str
    tokens: TokenResult


async def run_breakpoints(turns: int, variants: Sequence[Variant]) -> list[BreakpointResult]:
    """Run the scenario on each Anthropic path, for each variant under each setting."""
    results: list[BreakpointResult] = []
    for path in ANTHROPIC_PATHS:
        for variant in variants:
            for name, settings in SETTINGS.items():
                result = await run_conversation(path, variant, turns, settings)
                results.append(BreakpointResult(path, variant, name, token_result(result)))
        for name, settings in SETTINGS.items():
            result = await run_conversation(path, 'append', turns, settings, CHAT_CLOCK_REWRITTEN)
            results.append(BreakpointResult(path, MIXED, name, token_result(result)))
    return results


def breakpoints_section(results: Sequence[BreakpointResult], turns: int) -> str:
    """The input cost of each variant under each setting, and its multiple of the limit."""
    variants = list(dict.fromkeys(result.variant for result in results))
    tokens = {(result.path, result.variant, result.setting): result.tokens for result in results}
    rows = [
        [
            path,
            name,
            *(
                f'${found.cost:.4f} ({found.over_limit:.2f}x)'
                for found in (tokens[path, variant, name] for variant in variants)
            ),
        ]
        for path in dict.fromkeys(result.path for result in results)
        for name in SETTINGS
    ]
    return (
        f"Anthropic's breakpoints: the input cost of the same {turns} turns under each of Pydantic AI's cache "
        'settings, and its multiple of the limit\n\n' + table(['path', 'setting', *variants], rows)
    )


def breakpoints_json(results: Sequence[BreakpointResult]) -> list[dict[str, Any]]:
    """Every conversation's figures as JSON-able data."""
    return [
        {
            'path': result.path,
            'variant': result.variant,
            'setting': result.setting,
            'input_cost_usd': round(result.tokens.cost, 6),
            'limit_usd': round(result.tokens.limit, 6),
            'cache_read_tokens': result.tokens.read,
            'cache_write_tokens': result.tokens.written,
        }
        for result in results
    ]
