"""What the report says about the huge block: its two targets, its table, and its JSON.

A one-line edit to a block of megabytes is judged on the time the plugin's hooks take to deliver it
(`HUGE_SECONDS_LIMIT`) and on how much more the stored history grows than the static history does
(`HUGE_GROWTH_LIMIT`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .huge import HugeResult
from .tables import Verdict, table

__all__ = ('HUGE_GROWTH_LIMIT', 'HUGE_SECONDS_LIMIT', 'huge_json', 'huge_section', 'huge_verdicts')

HUGE_SECONDS_LIMIT = 0.5
"""A one-line edit to the huge block is delivered in at most this many CPU seconds of the plugin's hooks."""
HUGE_GROWTH_LIMIT = 0.10
"""Over all of its edits, append mode's history grows by at most this share of one copy of the huge block more
than the static history does."""


def _megabytes(size: int) -> str:
    return f'{size / 1e6:.1f} MB' if size >= 100_000 else f'{size / 1e6:.2f} MB'


def huge_verdicts(huge: Sequence[HugeResult]) -> list[Verdict]:
    """Judge each profile's edits to the huge block against both limits."""
    found: list[Verdict] = []
    for result in huge:
        where = f'{result.profile} model, a {_megabytes(result.block_bytes)} block'
        slowest = max(result.edit_hook_seconds)
        found.append(
            Verdict(
                f"{where}: each one-line edit in at most {HUGE_SECONDS_LIMIT:g} s of the plugin's hooks",
                f'slowest {slowest:.3f} s ({", ".join(f"{seconds:.3f}" for seconds in result.edit_hook_seconds)})',
                slowest <= HUGE_SECONDS_LIMIT,
            )
        )
        copies = result.extra_growth / result.block_bytes
        found.append(
            Verdict(
                f'{where}: {len(result.edit_hook_seconds)} edits grow the history by at most {HUGE_GROWTH_LIMIT:.0%} '
                'of one copy more than static',
                f'{copies:.1%} of a copy ({result.extra_growth:,} bytes)',
                copies <= HUGE_GROWTH_LIMIT,
            )
        )
    return found


def huge_section(huge: Sequence[HugeResult]) -> str:
    """The table of the huge block's turns, one row per model profile."""
    rows = [
        [
            result.profile,
            f'{result.block_bytes:,}',
            ', '.join(f'{seconds:.3f}' for seconds in result.hook_seconds),
            ', '.join(f'{seconds:.3f}' for seconds in result.run_seconds),
            ', '.join(f'{size:,}' for size in result.append_bytes),
            ', '.join(f'{size:,}' for size in result.static_bytes),
            f'{result.extra_growth:,}',
        ]
        for result in huge
    ]
    return (
        'A huge block: a first turn, then one-line edits, history through JSON between turns; CPU seconds and '
        'stored bytes after each turn\n\n'
        + table(
            [
                'model',
                'block bytes',
                'hooks (s)',
                'agent.run (s)',
                'append history bytes',
                'static history bytes',
                'extra growth',
            ],
            rows,
        )
    )


def huge_json(huge: HugeResult) -> dict[str, Any]:
    """One profile's huge-block figures as JSON-able data."""
    return {
        'profile': huge.profile,
        'block_bytes': huge.block_bytes,
        'hook_seconds': [round(s, 4) for s in huge.hook_seconds],
        'run_seconds': [round(s, 4) for s in huge.run_seconds],
        'append_history_bytes': huge.append_bytes,
        'static_history_bytes': huge.static_bytes,
    }
