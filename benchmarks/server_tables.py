"""What the report says about the server cases: the many-conversations target, the tables, and the JSON.

Many conversations served in turn by one agent are judged against one conversation on the same loaded history, in
the same rounds (`MANY_CONVERSATIONS_LIMIT`). The instrumented runs have no target: their table and JSON report the
hooks' share of the instrumented run, and what instrumentation adds to static and append runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .overhead import Timing
from .servers import INSTRUMENTED, MANY, ONE, ManyConversations, run_share
from .tables import Verdict, milliseconds, percent, ratio_cell, spread_json, table, times

__all__ = (
    'MANY_CONVERSATIONS_LIMIT',
    'instrumented_json',
    'instrumented_section',
    'many_json',
    'many_section',
    'many_verdicts',
)

MANY_CONVERSATIONS_LIMIT = 1.5
"""On a request to one of many conversations one agent serves in turn, on history loaded from JSON, the plugin's
hooks take at most this many times their time on one conversation's loaded history, in the same rounds."""


def many_verdicts(many: Sequence[ManyConversations]) -> list[Verdict]:
    """Judge each profile's many-conversations run against `MANY_CONVERSATIONS_LIMIT`."""
    found: list[Verdict] = []
    for result in many:
        ratio, hook_ms = result.hook_ratio(), result.hook_ms()
        found.append(
            Verdict(
                f'{result.profile} model, {result.conversations} conversations of {result.turns} turns served in turn: '
                f"the plugin's hooks per request at most {MANY_CONVERSATIONS_LIMIT:g}x one conversation's on loaded "
                'history',
                f'{times(ratio)[0]} ({hook_ms[MANY]:.2f} vs {hook_ms[ONE]:.2f} ms)',
                ratio.median <= MANY_CONVERSATIONS_LIMIT,
                times(ratio)[1],
            )
        )
    return found


def many_section(many: Sequence[ManyConversations]) -> str:
    """The table of the many-conversations runs, one row per model profile."""
    rows: list[list[str]] = []
    for result in many:
        hook_ms, run_ms = result.hook_ms(), result.run_ms()
        rows.append(
            [
                result.profile,
                f'{result.conversations} x {result.turns}',
                str(len(result.hook_seconds[0])) if result.hook_seconds else '0',
                f'{hook_ms[MANY]:.2f} ms',
                f'{hook_ms[ONE]:.2f} ms',
                ratio_cell(result.hook_ratio()),
                f'{hook_ms["first request"]:.2f} ms',
                f'{hook_ms["second request"]:.2f} ms',
                f'{run_ms[MANY]:.1f} ms',
                f'{run_ms[ONE]:.1f} ms',
            ]
        )
    rounds = len(many[0].one_seconds)
    return (
        'Many conversations served in turn by one agent, each request on history freshly loaded from JSON, beside '
        "one conversation on the same history in the same rounds: the hooks' CPU time per request (median of "
        f'{rounds} rounds, each the mean of its requests), the per-round ratio many / one (median, p25-p75), the '
        "hooks on each conversation's first and second requests in the process (served before the rounds), and "
        'agent.run per request\n\n'
        + table(
            [
                'model',
                'conversations x turns',
                'requests per round',
                'hooks, many',
                'hooks, one',
                'many / one',
                'hooks, first request',
                'hooks, second request',
                'agent.run, many',
                'agent.run, one',
            ],
            rows,
        )
    )


def instrumented_section(timings: Sequence[Timing]) -> str:
    """The table of the instrumented tool-loop runs, one row per model profile and history size."""
    rows = [
        [
            timing.profile,
            str(timing.turns),
            *(f'{timing.median_ms(variant):.1f} ms' for variant in INSTRUMENTED),
            *(
                f'{timing.hook_ms(variant):.2f} ms, {percent(run_share(timing, variant))[0]} '
                f'({percent(run_share(timing, variant))[1]})'
                for variant in ('append', 'append-instrumented')
            ),
            ratio_cell(timing.ratio('append-instrumented', to='static-instrumented')),
            ratio_cell(timing.ratio('append')),
            ratio_cell(timing.ratio('static-instrumented')),
        ]
        for timing in timings
    ]
    return (
        'Instrumented runs: a tool loop of N turns (each turn the model calls one tool, then answers), each run on '
        'history freshly loaded from JSON, with '
        "Pydantic AI's OpenTelemetry instrumentation recording spans (no exporter) and without it, in "
        f"{len(timings[0].seconds['static'])} rounds: medians, the hooks' CPU time and its share of the same run, and "
        'per-round ratios (median, p25-p75)\n\n'
        + table(
            [
                'model',
                'N',
                *INSTRUMENTED,
                'hooks in append',
                'hooks in append-instrumented',
                'append-instrumented / static-instrumented',
                'append / static',
                'static-instrumented / static',
            ],
            rows,
        )
    )


def many_json(many: ManyConversations) -> dict[str, Any]:
    """Every figure of one many-conversations run as JSON-able data."""
    return {
        'profile': many.profile,
        'turns': many.turns,
        'conversations': many.conversations,
        'requests_per_round': len(many.hook_seconds[0]) if many.hook_seconds else 0,
        'hook_ratio': spread_json(many.hook_ratio()),
        'hook_ms': {name: round(ms, 4) for name, ms in many.hook_ms().items()},
        'run_ms': {name: round(ms, 3) for name, ms in many.run_ms().items()},
        'first_request_hooks_ms': milliseconds(many.first_hook_seconds),
        'second_request_hooks_ms': milliseconds(many.second_hook_seconds),
        'hooks_ms': {
            MANY: [milliseconds(requests) for requests in many.hook_seconds],
            ONE: milliseconds(many.one_hook_seconds),
        },
        'runs_ms': {MANY: [milliseconds(requests) for requests in many.seconds], ONE: milliseconds(many.one_seconds)},
    }


def instrumented_json(timing: Timing) -> dict[str, Any]:
    """Every figure of one instrumented timing as JSON-able data."""
    return {
        'profile': timing.profile,
        'turns': timing.turns,
        'median_ms': {v: round(timing.median_ms(v), 3) for v in timing.seconds},
        'ratio': {
            f'{variant} / {to}': spread_json(timing.ratio(variant, to=to))
            for variant, to in (
                ('append-instrumented', 'static-instrumented'),
                ('append', 'static'),
                ('static-instrumented', 'static'),
                ('append-instrumented', 'append'),
            )
        },
        'hook_share_of_run': {v: spread_json(run_share(timing, v)) for v in timing.hook_seconds},
        'hook_ms_by_hook': {
            v: {hook: round(ms, 4) for hook, ms in timing.hook_ms_by_hook(v).items()} for v in timing.by_hook
        },
        'history_bytes': timing.history_bytes,
        'runs_ms': {v: milliseconds(runs) for v, runs in timing.seconds.items()},
        'hooks_ms': {v: milliseconds(runs) for v, runs in timing.hook_seconds.items()},
    }
