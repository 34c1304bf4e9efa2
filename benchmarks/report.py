"""What the benchmark prints and writes: readable tables, the targets with their verdicts, JSON, and the plot.

Every verdict is computed from the figures measured in the same run; a target that is missed says MISS with
the measured value, and a target that can't be judged (no native peer on this release) says n/a.
"""

from __future__ import annotations

import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from importlib.metadata import version
from typing import Any

from .breakpoints import BreakpointResult, breakpoints_json, breakpoints_section
from .huge import HugeResult
from .overhead import ChangeTiming, Timing
from .pieces import PieceTiming
from .server_tables import instrumented_json, instrumented_section, many_json, many_section, many_verdicts
from .servers import ManyConversations
from .startup import STARTUP_LIMIT_SECONDS, StartupTiming, startup_sections
from .stores import StoreTiming, store_sections
from .tables import Verdict, percent, ratio_cell, spread_json, table, times
from .tokens import token_summary, token_verdicts, tokens_section
from .wire import PathName, WireResult, summary

__all__ = ('Results', 'Verdict', 'machine', 'render_svg', 'render_text', 'to_json', 'verdicts')

VERIFY_LIMIT_US = 1000.0
DIFF_SHARE_LIMIT = 5.0
REWRITE_FACTOR = 5.0
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
HUGE_SECONDS_LIMIT = 0.5
"""A one-line edit to the huge block is delivered in at most this many CPU seconds of the plugin's hooks."""
HUGE_GROWTH_LIMIT = 0.10
"""Over all of its edits, append mode's history grows by at most this share of one copy of the huge block more
than the static history does."""


@dataclass(frozen=True)
class Results:
    """Everything one run of the benchmark measured."""

    turns: int
    wire: Sequence[WireResult]
    timings: Sequence[Timing]
    pieces: Sequence[PieceTiming]
    machine: dict[str, str]
    target_turns: Sequence[int] = ()
    """The history sizes the timing targets are judged at."""
    changes: Sequence[ChangeTiming] = ()
    huge: Sequence[HugeResult] = ()
    many: Sequence[ManyConversations] = ()
    """Many conversations served in turn by one agent, one per model profile."""
    instrumented: Sequence[Timing] = ()
    """The instrumented tool-loop runs, with their uninstrumented peers."""
    breakpoints: Sequence[BreakpointResult] = ()
    """The wire scenario on the Anthropic paths under each of Pydantic AI's cache settings."""
    coding: Sequence[WireResult] = ()
    """The coding agent's long conversation (`coding`) on every path and variant."""
    coding_turns: int = 0
    startup: Sequence[StartupTiming] = ()
    """The cassette checker's commands, each run in a process of its own."""
    stores: Sequence[StoreTiming] = ()
    """A run behind a UI adapter, with and without a record store."""


def machine() -> dict[str, str]:
    """The machine and the versions the figures were taken on."""
    import os

    return {
        'python': platform.python_version(),
        'platform': platform.platform(terse=True),
        'processor': platform.processor() or platform.machine(),
        'cpus': str(os.cpu_count()),
        'pydantic-ai-slim': version('pydantic-ai-slim'),
        'pydantic-ai-append': version('pydantic-ai-append'),
    }


def _by_path(wire: Sequence[WireResult]) -> dict[PathName, dict[str, WireResult]]:
    grouped: dict[PathName, dict[str, WireResult]] = {}
    for result in wire:
        grouped.setdefault(result.path, {})[result.policy] = result
    return grouped


def _timing(results: Results, profile: str, turns: int) -> Timing | None:
    return next((t for t in results.timings if t.profile == profile and t.turns == turns), None)


def _slope_us(results: Results, profile: str, variant: str) -> tuple[float, int, int] | None:
    """Microseconds a request costs per turn of history, between the smallest and largest sizes timed."""
    sizes = sorted(t.turns for t in results.timings if t.profile == profile and variant in t.seconds)
    if len(sizes) < 2 or sizes[-1] < SLOPE_MIN_TURNS:
        return None
    low, high = _timing(results, profile, sizes[0]), _timing(results, profile, sizes[-1])
    assert low is not None and high is not None
    return (high.median_ms(variant) - low.median_ms(variant)) * 1000 / (sizes[-1] - sizes[0]), sizes[0], sizes[-1]


def verdicts(results: Results) -> list[Verdict]:
    """Judge every target against the figures of this run."""
    return [
        *_wire_verdicts(results),
        *_coding_verdicts(results),
        *_overhead_verdicts(results),
        *_change_verdicts(results),
        *_huge_verdicts(results),
        *many_verdicts(results.many),
        *_piece_verdicts(results),
        *(
            Verdict(
                f'pydantic-ai-append {timing.command} in under {STARTUP_LIMIT_SECONDS:g} s of CPU, start-up included',
                f'{timing.median:.2f} s',
                timing.median < STARTUP_LIMIT_SECONDS,
                f'{timing.quartiles[0]:.2f}-{timing.quartiles[1]:.2f} s',
            )
            for timing in results.startup
        ),
    ]


def _wire_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    for path, policies in _by_path(results.wire).items():
        append = policies.get('append')
        if append is None:
            continue
        found.append(
            Verdict(
                f'{path}: every in-window request reuses 100.0% of the previous one',
                f'lowest {append.min_reuse:.1f}%, prefix moved {len(append.moves)} times',
                append.min_reuse == 100.0 and not append.moves,
            )
        )
        natives = [policies[name] for name in ('native', 'native-always') if name in policies]
        native = min(natives, key=lambda result: result.uncached, default=None)
        found.append(
            Verdict(
                f"{path}: uncached bytes no more than the native peer's at its best",
                f'{append.uncached:,} vs {native.uncached:,} ({native.policy})'
                if native
                else 'no native peer on this release',
                append.uncached <= native.uncached if native else None,
            )
        )
        found.extend(token_verdicts(path, append, natives, f'{results.turns} turns'))
        rewrite = policies.get('rewrite')
        if rewrite is not None:
            factor = rewrite.uncached / append.uncached if append.uncached else float('inf')
            found.append(
                Verdict(
                    f'{path}: at least {REWRITE_FACTOR:g}x fewer uncached bytes than rewrite mode',
                    f'{factor:.1f}x ({rewrite.uncached:,} vs {append.uncached:,})',
                    factor >= REWRITE_FACTOR,
                )
            )
        if 'memory' in append.largest_diff:
            share = 100 * append.largest_diff['memory'] / append.block_bytes['memory']
            found.append(
                Verdict(
                    f'{path}: a one-line edit to the 15 KB block in at most {DIFF_SHARE_LIMIT:g}% of its bytes',
                    f'{share:.1f}% ({append.largest_diff["memory"]:,} of {append.block_bytes["memory"]:,} bytes)',
                    share <= DIFF_SHARE_LIMIT,
                )
            )
    return found


def _coding_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    scenario = f'coding agent, {results.coding_turns} turns'
    for path, policies in _by_path(results.coding).items():
        append = policies.get('append')
        if append is None:
            continue
        found.append(
            Verdict(
                f'{path}, {scenario}: every in-window request reuses 100.0% of the previous one',
                f'lowest {append.min_reuse:.1f}%, prefix moved {len(append.moves)} times',
                append.min_reuse == 100.0 and not append.moves,
            )
        )
        natives = [policies[name] for name in ('native', 'native-always') if name in policies]
        found.extend(token_verdicts(path, append, natives, scenario))
    return found


def _overhead_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    judged = [t for t in results.timings if t.turns in results.target_turns and 'append' in t.hook_seconds]
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
    for timing in results.timings:
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
    sized = [t for t in judged if t.turns == max(results.target_turns) and t.history_bytes]
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


def _change_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    for timing in results.changes:
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


def _megabytes(size: int) -> str:
    return f'{size / 1e6:.1f} MB' if size >= 100_000 else f'{size / 1e6:.2f} MB'


def _huge_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    for huge in results.huge:
        where = f'{huge.profile} model, a {_megabytes(huge.block_bytes)} block'
        slowest = max(huge.edit_hook_seconds)
        found.append(
            Verdict(
                f"{where}: each one-line edit in at most {HUGE_SECONDS_LIMIT:g} s of the plugin's hooks",
                f'slowest {slowest:.3f} s ({", ".join(f"{seconds:.3f}" for seconds in huge.edit_hook_seconds)})',
                slowest <= HUGE_SECONDS_LIMIT,
            )
        )
        copies = huge.extra_growth / huge.block_bytes
        found.append(
            Verdict(
                f'{where}: {len(huge.edit_hook_seconds)} edits grow the history by at most {HUGE_GROWTH_LIMIT:.0%} '
                'of one copy more than static',
                f'{copies:.1%} of a copy ({huge.extra_growth:,} bytes)',
                copies <= HUGE_GROWTH_LIMIT,
            )
        )
    return found


def _piece_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    for piece in results.pieces:
        if piece.name.startswith('verify'):
            found.append(
                Verdict(
                    f'{piece.name} in under {VERIFY_LIMIT_US / 1000:g} ms',
                    f'{piece.microseconds:.0f} us',
                    piece.microseconds < VERIFY_LIMIT_US,
                )
            )
    return found


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


def _timing_sections(results: Results) -> list[str]:
    variants = [v for v in VARIANTS if any(v in t.seconds for t in results.timings)]
    rows = [
        [timing.profile, str(timing.turns)]
        + [
            f'{timing.median_ms(v):.1f} ms, {ratio_cell(timing.ratio(v))}' if v in timing.seconds else '-'
            for v in variants
        ]
        for timing in results.timings
    ]
    rounds = len(next(iter(results.timings[0].seconds.values())))
    sections = [
        f'One agent.run on a history of N turns, in process CPU time: the median of {rounds} rounds, each running '
        'every variant once in rotated order after a collection; the ratio to static is the median of per-round '
        'ratios (p25-p75)\n\n' + table(['model', 'N', *variants], rows)
    ]
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
        for timing in results.timings
        if 'append' in timing.hook_seconds
    ]
    sections.append(
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
    slopes = [
        [profile]
        + [
            f'{slope[0]:.0f} us (N {slope[1]} to {slope[2]})'
            if (slope := _slope_us(results, profile, v)) is not None
            else '-'
            for v in variants
        ]
        for profile in sorted({t.profile for t in results.timings})
    ]
    sections.append(
        'Cost of one more turn of history: the slope of the medians between the smallest and largest N timed\n\n'
        + table(['model', *variants], slopes)
    )
    return sections


def _change_kinds(timing: ChangeTiming) -> list[str]:
    """The kinds of variant `timing` has, in the order tables show them."""
    kinds = {name.split('@')[0] for name in timing.changes}
    return [kind for kind in HOOKED if kind in kinds]


def _changes_section(changes: Sequence[ChangeTiming]) -> str:
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


def _huge_section(huge: Sequence[HugeResult]) -> str:
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


def _wire_section(results: Results) -> str:
    wire_rows = [
        [
            result.path,
            result.policy,
            f'{result.body_bytes:,}',
            f'{result.total:,}',
            f'{result.total - result.uncached:,}',
            f'{result.uncached:,}',
            f'{result.min_reuse:.1f}%',
            ', '.join(f'#{request} at {segment} ({kind})' for request, segment, kind in result.moves[:3])
            + (f' +{len(result.moves) - 3}' if len(result.moves) > 3 else '')
            or '-',
            f'{result.unique_change_bytes:,} / {result.carried_change_bytes:,}',
        ]
        for result in results.wire
    ]
    return (
        f'Wire bytes over {results.turns} turns ({len(results.wire[0].requests)} requests). '
        'Segment bytes count the cache-order pieces of each request, re-encoded canonically; reused ones repeat '
        'the previous request byte for byte.\n\n'
        + table(
            [
                'path',
                'policy',
                'body bytes',
                'segment bytes',
                'reused',
                'uncached',
                'lowest reuse',
                'prefix moved (request at segment)',
                'changes unique / carried',
            ],
            wire_rows,
        )
    )


def render_text(results: Results) -> str:
    """The whole report as Markdown tables, readable in a terminal and pasteable into the README."""
    sections: list[str] = []
    if results.wire:
        sections.append(_wire_section(results))
        sections.append(
            tokens_section(
                results.wire,
                f"Input tokens and dollars over the same {results.turns} turns, as the fake provider's simulated "
                'caches report them (4 bytes of compact JSON a token), priced with genai-prices for the model sent; '
                'the limit reads every token the previous request sent at the cache read price, and pays the input '
                "price (Anthropic: the cache write price) for the rest; in steps, as OpenAI's cache reads it",
            )
        )
    if results.coding:
        sections.append(
            tokens_section(
                results.coding,
                f'The coding agent over {results.coding_turns} turns ({len(results.coding[0].requests)} requests: '
                'tool loops, a memory file and a todo list), in input tokens and dollars as above',
            )
        )
    if results.breakpoints:
        sections.append(breakpoints_section(results.breakpoints, results.turns))
    if results.timings:
        sections.extend(_timing_sections(results))
    if results.changes:
        sections.append(_changes_section(results.changes))
    if results.huge:
        sections.append(_huge_section(results.huge))
    if results.many:
        sections.append(many_section(results.many))
    if results.instrumented:
        sections.append(instrumented_section(results.instrumented))
    if results.pieces:
        sections.append(
            'Pieces on their own (medians)\n\n'
            + table(
                ['piece', 'time', 'size'],
                [[p.name, f'{p.microseconds:,.1f} us', f'{p.bytes:,} bytes'] for p in results.pieces],
            )
        )
    sections.extend(store_sections(results.stores))
    sections.extend(startup_sections(results.startup))
    sections.append(
        'Targets\n\n'
        + table(
            ['target', 'measured', 'spread (p25-p75)', 'verdict'],
            [[v.target, v.measured, v.spread, v.label] for v in verdicts(results)],
        )
    )
    sections.append('Machine: ' + ', '.join(f'{key} {value}' for key, value in results.machine.items()))
    return '\n\n'.join(sections) + '\n'


def to_json(results: Results) -> dict[str, Any]:
    """Every figure of the run as JSON-able data."""
    return {
        'turns': results.turns,
        'machine': results.machine,
        'wire': [summary(result) | token_summary(result) for result in results.wire],
        'startup': [{'command': t.command, 'cpu_seconds': [round(s, 4) for s in t.seconds]} for t in results.startup],
        'stores': [
            {
                'turns': t.turns,
                'entry_bytes': t.entry_bytes,
                'cpu_seconds': {k: [round(s, 5) for s in v] for k, v in t.seconds.items()},
            }
            for t in results.stores
        ],
        'coding_turns': results.coding_turns,
        # Without each request's bytes: 528 requests a conversation would make the file a megabyte.
        'coding': [summary(result, per_request=False) | token_summary(result) for result in results.coding],
        'overhead': [
            {
                'profile': timing.profile,
                'turns': timing.turns,
                'median_ms': {v: round(timing.median_ms(v), 3) for v in timing.seconds},
                'ratio_to_static': {v: spread_json(timing.ratio(v)) for v in timing.seconds},
                'hook_share': {v: spread_json(timing.hook_share(v)) for v in timing.hook_seconds},
                'hook_ms_by_hook': {
                    v: {hook: round(ms, 4) for hook, ms in timing.hook_ms_by_hook(v).items()} for v in timing.by_hook
                },
                'history_bytes': timing.history_bytes,
                'runs_ms': {v: [round(s * 1000, 3) for s in runs] for v, runs in timing.seconds.items()},
                'hooks_ms': {v: [round(s * 1000, 3) for s in runs] for v, runs in timing.hook_seconds.items()},
            }
            for timing in results.timings
        ],
        'changes': [
            {
                'profile': timing.profile,
                'turns': timing.turns,
                'changes': timing.changes,
                'slope_per_1000_changes': {kind: spread_json(timing.slope(kind)) for kind in _change_kinds(timing)},
                'runs_ms': {v: [round(s * 1000, 3) for s in runs] for v, runs in timing.seconds.items()},
                'hooks_ms': {v: [round(s * 1000, 3) for s in runs] for v, runs in timing.hook_seconds.items()},
            }
            for timing in results.changes
        ],
        'huge': [
            {
                'profile': huge.profile,
                'block_bytes': huge.block_bytes,
                'hook_seconds': [round(s, 4) for s in huge.hook_seconds],
                'run_seconds': [round(s, 4) for s in huge.run_seconds],
                'append_history_bytes': huge.append_bytes,
                'static_history_bytes': huge.static_bytes,
            }
            for huge in results.huge
        ],
        'breakpoints': breakpoints_json(results.breakpoints),
        'many_conversations': [many_json(many) for many in results.many],
        'instrumented': [instrumented_json(timing) for timing in results.instrumented],
        'pieces': [
            {'name': p.name, 'microseconds': round(p.microseconds, 3), 'bytes': p.bytes} for p in results.pieces
        ],
        'targets': [
            {'target': v.target, 'measured': v.measured, 'spread': v.spread, 'verdict': v.label}
            for v in verdicts(results)
        ],
    }


_COLORS = {'reused': '#4c78a8', 'uncached': '#e45756'}


def render_svg(results: Results, path: PathName) -> str:
    """A plot of each request's reused and uncached bytes on one path, one panel per policy."""
    panels = [result for result in results.wire if result.path == path]
    if not panels:
        raise ValueError(f'no wire results for path {path!r}')
    panel_height, left, top, gap, plot_width = 150, 70, 40, 3, 680
    count = max(len(result.requests) for result in panels)
    bar = max(4, min(24, plot_width // count - gap))
    width = max(760, left + count * (bar + gap) + 20)
    height = top + len(panels) * (panel_height + 40) + 30
    peak = max(request.total for result in panels for request in result.requests)
    scale = panel_height / peak
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            'font-family="sans-serif" font-size="11">'
        ),
        f'<rect width="{width}" height="{height}" fill="white"/>',
        (
            f'<text x="{left}" y="18" font-size="13">Bytes of each request on {escape(path)}: reused from the '
            'previous request (cached) and uncached</text>'
        ),
    ]
    for legend_index, (name, color) in enumerate(_COLORS.items()):
        x = left + legend_index * 110
        out.append(f'<rect x="{x}" y="26" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 14}" y="35">{name}</text>')
    for panel_index, result in enumerate(panels):
        base = top + 20 + panel_index * (panel_height + 40) + panel_height
        out.append(
            f'<text x="{left}" y="{base - panel_height - 6}">{escape(result.policy)}: {result.uncached:,} uncached '
            f'of {result.total:,} bytes</text>'
        )
        out.append(f'<line x1="{left - 4}" y1="{base}" x2="{width - 10}" y2="{base}" stroke="#999"/>')
        out.append(f'<text x="{left - 8}" y="{base}" text-anchor="end">0</text>')
        out.append(f'<text x="{left - 8}" y="{base - panel_height + 10}" text-anchor="end">{peak // 1000:,} KB</text>')
        for index, request in enumerate(result.requests):
            x = left + index * (bar + gap)
            reused_height = request.reused * scale
            uncached_height = request.uncached * scale
            out.append(
                f'<rect x="{x}" y="{base - reused_height:.1f}" width="{bar}" height="{reused_height:.1f}" '
                f'fill="{_COLORS["reused"]}"/>'
            )
            out.append(
                f'<rect x="{x}" y="{base - reused_height - uncached_height:.1f}" width="{bar}" '
                f'height="{uncached_height:.1f}" fill="{_COLORS["uncached"]}"/>'
            )
    last_base = top + 20 + (len(panels) - 1) * (panel_height + 40) + panel_height
    out.append(f'<text x="{left}" y="{last_base + 18}">request 1 to {count}</text>')
    out.append('</svg>')
    return '\n'.join(out) + '\n'
