"""What the report says about the timed runs (`overhead`): their targets, their tables, and their JSON.

The plugin's hooks are judged as a share of the static variant's run in the same round, on a conversation served
before and on history freshly loaded (`HOOK_SHARE_LIMIT`, `HOOK_SHARE_LOADED_LIMIT`); append mode's whole run against
Pydantic AI's own append mode (`NATIVE_RATIO_LIMIT`); its stored history against the static one
(`HISTORY_SIZE_LIMIT`); and the hooks' growth with the number of past changes (`CHANGE_SLOPE_LIMIT`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .overhead import ChangeTiming, Timing
from .tables import Verdict, milliseconds, percent, ratio_cell, spread_json, table, times

__all__ = (
    'CHANGE_SLOPE_LIMIT',
    'HISTORY_SIZE_LIMIT',
    'HOOKED',
    'HOOK_SHARE_LIMIT',
    'HOOK_SHARE_LOADED_LIMIT',
    'NATIVE_RATIO_LIMIT',
    'VARIANTS',
    'change_verdicts',
    'changes_json',
    'changes_section',
    'overhead_json',
    'overhead_verdicts',
    'timing_sections',
)

SLOPE_MIN_TURNS = 100
"""The per-turn slope is shown only when the largest history timed is this long; shorter ones are noise."""
HOOK_SHARE_LIMIT = 0.015
"""The plugin's hooks, for a conversation the process served before, take at most this share of the static
variant's `agent.run` in the same round."""
HOOK_SHARE_LOADED_LIMIT = 0.03
"""... and at most this share of it on history freshly loaded from JSON."""
NATIVE_RATIO_LIMIT = 0.6
"""An append-mode run takes at most this many times the CPU of one in Pydantic AI's own append mode."""
HISTORY_SIZE_LIMIT = 1.10
"""Append mode's stored history at most this many times the static history's size, at the largest target size."""
CHANGE_SLOPE_LIMIT = 0.0025
"""The hooks' CPU time grows by at most this share of the run per 1,000 past changes in the window."""

VARIANTS = (
    'static',
    'static-loaded',
    'rewrite',
    'append',
    'append-loaded',
    'floor',
    'reader-loaded',
    'injected',
    'native',
)
"""Every variant timed, in the order tables show them."""

HOOKED = ('append', 'append-loaded', 'reader-loaded')
"""The variants whose hooks are timed, in the order tables show them."""


def _timing(timings: Sequence[Timing], profile: str, turns: int) -> Timing | None:
    return next((t for t in timings if t.profile == profile and t.turns == turns), None)


def _slope_us(timings: Sequence[Timing], profile: str, variant: str) -> tuple[float, int, int] | None:
    """Microseconds a request costs per turn of history, between the smallest and largest sizes timed."""
    sizes = sorted(t.turns for t in timings if t.profile == profile and variant in t.seconds)
    if len(sizes) < 2 or sizes[-1] < SLOPE_MIN_TURNS:
        return None
    low, high = _timing(timings, profile, sizes[0]), _timing(timings, profile, sizes[-1])
    assert low is not None and high is not None
    return (high.median_ms(variant) - low.median_ms(variant)) * 1000 / (sizes[-1] - sizes[0]), sizes[0], sizes[-1]


def overhead_verdicts(timings: Sequence[Timing], target_turns: Sequence[int]) -> list[Verdict]:
    """Judge the timed runs of the history sizes in `target_turns`, and append mode against native append."""
    found: list[Verdict] = []
    judged = [t for t in timings if t.turns in target_turns and 'append' in t.hook_seconds]
    for timing in judged:
        where = f'{timing.profile} model, {timing.turns} turns'
        for variant, limit, what in (
            ('append', HOOK_SHARE_LIMIT, 'a conversation served before'),
            ('append-loaded', HOOK_SHARE_LOADED_LIMIT, 'history loaded from JSON'),
        ):
            share = timing.hook_share(variant)
            found.append(
                Verdict(
                    f"{where}: the plugin's hooks on {what} at most {limit:.1%} of the static run",
                    f'{percent(share)[0]} ({timing.hook_ms(variant):.2f} ms)',
                    share.median <= limit,
                    percent(share)[1],
                )
            )
    for timing in timings:
        if 'native' in timing.seconds and timing.turns >= 100:
            ratio = timing.ratio('append', to='native')
            found.append(
                Verdict(
                    f'{timing.profile} model, {timing.turns} turns: append at most {NATIVE_RATIO_LIMIT:g}x native',
                    times(ratio)[0],
                    ratio.median <= NATIVE_RATIO_LIMIT,
                    times(ratio)[1],
                )
            )
    sized = [t for t in judged if t.turns == max(target_turns) and t.history_bytes]
    if sized:
        sizes = sized[0].history_bytes
        ratio = sizes['append'] / sizes['static']
        found.append(
            Verdict(
                f'{sized[0].turns} turns: append-mode history at most {HISTORY_SIZE_LIMIT:.2f}x the static history',
                f'{ratio:.3f}x ({sizes["append"]:,} vs {sizes["static"]:,} bytes)',
                ratio <= HISTORY_SIZE_LIMIT,
            )
        )
    return found


def change_verdicts(changes: Sequence[ChangeTiming]) -> list[Verdict]:
    """Judge the hooks' time per 1,000 past changes, on each profile, against `CHANGE_SLOPE_LIMIT`."""
    found: list[Verdict] = []
    for timing in changes:
        slope = timing.slope('append')
        counts = sorted({timing.changes[name] for name in timing.changes})
        found.append(
            Verdict(
                f"{timing.profile} model, {timing.turns} turns: the hooks' time per 1,000 past changes at most "
                f'{CHANGE_SLOPE_LIMIT:.2%} of the run',
                f'{percent(slope)[0]} ({", ".join(f"{count:,}" for count in counts)} changes)',
                slope.median <= CHANGE_SLOPE_LIMIT,
                percent(slope)[1],
            )
        )
    return found


def timing_sections(timings: Sequence[Timing]) -> list[str]:
    """The tables of the timed runs: each variant's run, the plugin's share of it, and the cost of one more turn."""
    variants = [v for v in VARIANTS if any(v in t.seconds for t in timings)]
    return [_runs_section(timings, variants), _share_section(timings), _slopes_section(timings, variants)]


def _runs_section(timings: Sequence[Timing], variants: Sequence[str]) -> str:
    """Each variant's median run, and its ratio to the static variant's."""
    rows = [
        [timing.profile, str(timing.turns)]
        + [
            f'{timing.median_ms(v):.1f} ms, {ratio_cell(timing.ratio(v))}' if v in timing.seconds else '-'
            for v in variants
        ]
        for timing in timings
    ]
    rounds = len(next(iter(timings[0].seconds.values())))
    return (
        f'One agent.run on a history of N turns, in process CPU time: the median of {rounds} rounds, each running '
        'every variant once in rotated order after a collection; the ratio to static is the median of per-round '
        'ratios (p25-p75)\n\n' + table(['model', 'N', *variants], rows)
    )


def _share_section(timings: Sequence[Timing]) -> str:
    """The hooks' time in each hooked variant, beside the ratios that tell the plugin's own cost."""
    hook_rows = [
        [
            timing.profile,
            str(timing.turns),
            *(
                f'{timing.hook_ms(v):.2f} ms, {percent(timing.hook_share(v))[0]} ({percent(timing.hook_share(v))[1]})'
                if v in timing.hook_seconds
                else '-'
                for v in HOOKED
            ),
            ratio_cell(timing.ratio('append', to='floor')),
            ratio_cell(timing.loaded_excess()) if 'static-loaded' in timing.seconds else '-',
            f'{timing.history_bytes["append"] / timing.history_bytes["static"]:.3f}x'
            if {'append', 'static'} <= timing.history_bytes.keys()
            else '-',
        ]
        for timing in timings
        if 'append' in timing.hook_seconds
    ]
    return (
        "The plugin's share, per round (median, p25-p75): its hooks' CPU time inside the run and that time as a share "
        "of the static variant's run in the same round, beside a hook that only reads every part's type on loaded "
        'history (the floor of any exact reader); append over floor; what a fresh load adds to append over what '
        'it adds to static; stored history size over static'
        '\n\n'
        + table(
            [
                'model',
                'N',
                'hooks in append',
                'hooks in append-loaded',
                'hooks in reader-loaded',
                'append / floor',
                '(append-loaded / append) / (static-loaded / static)',
                'history size',
            ],
            hook_rows,
        )
    )


def _slopes_section(timings: Sequence[Timing], variants: Sequence[str]) -> str:
    """What one more turn of history costs each variant's run, on each profile."""
    slopes = [
        [profile]
        + [
            f'{slope[0]:.0f} us (N {slope[1]} to {slope[2]})'
            if (slope := _slope_us(timings, profile, v)) is not None
            else '-'
            for v in variants
        ]
        for profile in sorted({t.profile for t in timings})
    ]
    return (
        'Cost of one more turn of history: the slope of the medians between the smallest and largest N timed\n\n'
        + table(['model', *variants], slopes)
    )


def _change_kinds(timing: ChangeTiming) -> list[str]:
    """The kinds of variant `timing` has, in the order tables show them."""
    kinds = {name.split('@')[0] for name in timing.changes}
    return [kind for kind in HOOKED if kind in kinds]


def changes_section(changes: Sequence[ChangeTiming]) -> str:
    """The table of the hooks' time against the number of past changes, one row per profile and kind."""
    rows: list[list[str]] = []
    for timing in changes:
        for kind in _change_kinds(timing):
            names = sorted((n for n in timing.changes if n.split('@')[0] == kind), key=timing.changes.__getitem__)
            points = ', '.join(
                f'{timing.changes[n]:,}: {statistics.median(timing.hook_seconds[n]) * 1000:.2f} ms' for n in names
            )
            slope = timing.slope(kind)
            rows.append([timing.profile, str(timing.turns), kind, points, f'{percent(slope)[0]} ({percent(slope)[1]})'])
    return (
        "The hooks' CPU time against the number of past changes in the window: histories of N turns whose blocks "
        'stop changing at different turns; the slope is the least-squares fit of each round, per 1,000 changes, as '
        "a share of that round's run with the most changes (median, p25-p75)\n\n"
        + table(['model', 'N', 'variant', 'changes: median hook time', 'slope per 1,000 changes'], rows)
    )


def overhead_json(timing: Timing) -> dict[str, Any]:
    """One history size's timed runs on one profile as JSON-able data."""
    return {
        'profile': timing.profile,
        'turns': timing.turns,
        'median_ms': {v: round(timing.median_ms(v), 3) for v in timing.seconds},
        'ratio_to_static': {v: spread_json(timing.ratio(v)) for v in timing.seconds},
        'hook_share': {v: spread_json(timing.hook_share(v)) for v in timing.hook_seconds},
        'hook_ms_by_hook': {
            v: {hook: round(ms, 4) for hook, ms in timing.hook_ms_by_hook(v).items()} for v in timing.by_hook
        },
        'history_bytes': timing.history_bytes,
        'runs_ms': {v: milliseconds(runs) for v, runs in timing.seconds.items()},
        'hooks_ms': {v: milliseconds(runs) for v, runs in timing.hook_seconds.items()},
    }


def changes_json(timing: ChangeTiming) -> dict[str, Any]:
    """One profile's runs with different numbers of past changes as JSON-able data."""
    return {
        'profile': timing.profile,
        'turns': timing.turns,
        'changes': timing.changes,
        'slope_per_1000_changes': {kind: spread_json(timing.slope(kind)) for kind in _change_kinds(timing)},
        'runs_ms': {v: milliseconds(runs) for v, runs in timing.seconds.items()},
        'hooks_ms': {v: milliseconds(runs) for v, runs in timing.hook_seconds.items()},
    }
