"""What each process-wide cache of the plugin buys: one `agent.run` with every cache, against the same run with one off.

Each cache is kept only for a figure it buys (STYLE.md), and this part is where that figure comes from. On a history
of the chat scenario (`build_history`, a change every turn), kept in process as a conversation in progress keeps it,
each round runs, in rotated order, one conversation per variant:

- `all`: every cache of `process_caches()` on;
- `no <cache>`: that cache off (it keeps nothing), the others on;
- `none`: every cache off.

A variant's conversation runs twice before the timed run, so each cache holds what it holds in a conversation in
progress. The figure is each variant's CPU time over `all`'s in the same round, the median of those ratios with their
quartiles: above 1, the cache saves that much.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai_append._shared.cache import process_caches

from .histories import build_history, function_model
from .measure import Spread, paired_ratios, rotated
from .scenario import build_agent, prompt
from .tables import table

__all__ = ('CacheTiming', 'cache_sections', 'caches_json', 'time_caches')


@dataclass(frozen=True)
class CacheTiming:
    """The runs of one history size, one CPU figure per variant per round."""

    turns: int
    """The turns of the history each run goes on from."""

    seconds: dict[str, list[float]]
    """The CPU seconds of each variant's timed runs, by variant, in round order."""

    def ratio(self, variant: str) -> Spread:
        """Per round, `variant`'s run over `all`'s."""
        return Spread.of(paired_ratios(self.seconds[variant], self.seconds['all']))

    def median_ms(self, variant: str) -> float:
        """The median CPU time of `variant`'s runs, in milliseconds."""
        return statistics.median(self.seconds[variant]) * 1000


def _variants() -> dict[str, frozenset[str]]:
    """Each variant's name, with the caches it turns off."""
    names = sorted(process_caches())
    return {'all': frozenset(), **{f'no {name}': frozenset({name}) for name in names}, 'none': frozenset(names)}


def _turn_off(names: frozenset[str]) -> None:
    """Empty every cache, and let those in `names` keep nothing from now on."""
    for name, cache in process_caches().items():
        cache.clear()
        cache.max_entries = 0 if name in names else sys.maxsize


async def _time(turns: int, rounds: int) -> CacheTiming:
    history = await build_history('append', turns)
    agent = build_agent('append', function_model('inline'), record_store=None)
    variants = _variants()
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    try:
        for round_index in range(rounds):
            for name in rotated(list(variants), round_index):
                _turn_off(variants[name])
                conversation = f'{name}#{turns}#{round_index}'
                for _ in range(2):
                    await agent.run(
                        prompt(turns + 1), deps=turns + 1, message_history=history, conversation_id=conversation
                    )
                gc.collect()
                start = time.process_time()
                await agent.run(
                    prompt(turns + 1), deps=turns + 1, message_history=history, conversation_id=conversation
                )
                seconds[name].append(time.process_time() - start)
    finally:
        _turn_off(frozenset())
    return CacheTiming(turns, seconds)


async def time_caches(sizes: Sequence[int], rounds: int) -> list[CacheTiming]:
    """Time the variants on a history of each size, `rounds` rounds."""
    return [await _time(turns, rounds) for turns in sizes]


def cache_sections(timings: Sequence[CacheTiming]) -> list[str]:
    """The report's table of what each cache buys, if it was timed."""
    rows: list[list[str]] = []
    for timing in timings:
        for variant in list(timing.seconds)[1:]:
            spread = timing.ratio(variant)
            rows.append(
                [
                    str(timing.turns),
                    variant,
                    f'{timing.median_ms("all"):.1f} ms',
                    f'{timing.median_ms(variant):.1f} ms',
                    f'{spread.median:.2f}x ({spread.p25:.2f}-{spread.p75:.2f})',
                ]
            )
    if not rows:
        return []
    return [
        'The process caches: one agent.run on a conversation in progress with every cache, against the same run with '
        'a cache off (CPU, median of per-round ratios, p25-p75; above 1x the cache saves that share)\n\n'
        + table(['turns', 'variant', 'all caches', 'variant time', 'over all caches'], rows)
    ]


def caches_json(timings: Sequence[CacheTiming]) -> list[dict[str, object]]:
    """The figures of the part, as JSON-able data."""
    return [
        {'turns': t.turns, 'cpu_seconds': {k: [round(s, 5) for s in v] for k, v in t.seconds.items()}} for t in timings
    ]
