"""What the benchmark prints and writes: readable tables, the targets with their verdicts, JSON, and the plot.

Every verdict is computed from the figures measured in the same run; a target that is missed says MISS with
the measured value, and a target that can't be judged (no native peer on this release) says n/a.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from importlib.metadata import version
from typing import Any

from .overhead import Timing
from .pieces import PieceTiming
from .wire import PathName, WireResult, summary

__all__ = ('Results', 'Verdict', 'machine', 'render_svg', 'render_text', 'to_json', 'verdicts')

VERIFY_LIMIT_US = 1000.0
OVERHEAD_LIMIT = 1.10
DIFF_SHARE_LIMIT = 5.0
REWRITE_FACTOR = 5.0
SLOPE_MIN_TURNS = 100
"""Per-turn cost and ratio targets are judged only on histories this long; shorter ones are noise."""


@dataclass(frozen=True)
class Results:
    """Everything one run of the benchmark measured."""

    turns: int
    wire: Sequence[WireResult]
    timings: Sequence[Timing]
    pieces: Sequence[PieceTiming]
    machine: dict[str, str]


@dataclass(frozen=True)
class Verdict:
    """One target, what was measured for it, and whether it was met (`None`: can't be judged here)."""

    target: str
    measured: str
    met: bool | None

    @property
    def label(self) -> str:
        """PASS, MISS or n/a."""
        return 'n/a' if self.met is None else 'PASS' if self.met else 'MISS'


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


def _by_path(results: Results) -> dict[PathName, dict[str, WireResult]]:
    grouped: dict[PathName, dict[str, WireResult]] = {}
    for result in results.wire:
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
    return [*_wire_verdicts(results), *_overhead_verdicts(results), *_piece_verdicts(results)]


def _wire_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    for path, policies in _by_path(results).items():
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
        native = policies.get('native')
        found.append(
            Verdict(
                f"{path}: uncached bytes no more than the native peer's",
                f'{append.uncached:,} vs {native.uncached:,}' if native else 'no native peer on this release',
                append.uncached <= native.uncached if native else None,
            )
        )
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


def _overhead_verdicts(results: Results) -> list[Verdict]:
    found: list[Verdict] = []
    for timing in results.timings:
        if timing.turns >= SLOPE_MIN_TURNS and 'append' in timing.seconds:
            ratio = timing.ratio('append')
            found.append(
                Verdict(
                    f'{timing.profile} model, {timing.turns} turns: append at most {OVERHEAD_LIMIT:.2f}x static',
                    f'{ratio:.2f}x (floor {timing.ratio("floor"):.2f}x, injected {timing.ratio("injected"):.2f}x)',
                    ratio <= OVERHEAD_LIMIT,
                )
            )
    for profile in sorted({t.profile for t in results.timings}):
        append_slope, static_slope = _slope_us(results, profile, 'append'), _slope_us(results, profile, 'static')
        if append_slope is not None and static_slope is not None:
            ratio = append_slope[0] / static_slope[0]
            found.append(
                Verdict(
                    f'{profile} model: cost per turn of history at most {OVERHEAD_LIMIT:.2f}x static',
                    f'{append_slope[0]:.0f} vs {static_slope[0]:.0f} us per turn ({ratio:.2f}x, '
                    f'{append_slope[1]} to {append_slope[2]} turns)',
                    ratio <= OVERHEAD_LIMIT,
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


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    aligned = ['<' if index == 0 else '>' for index in range(len(headers))]
    lines = [
        '| ' + ' | '.join(f'{cell:{aligned[i]}{widths[i]}}' for i, cell in enumerate(row)) + ' |'
        for row in [headers, *rows]
    ]
    lines.insert(
        1, '|' + '|'.join(('-' * (w + 1) + ':' if i else ':' + '-' * (w + 1)) for i, w in enumerate(widths)) + '|'
    )
    return '\n'.join(lines)


def render_text(results: Results) -> str:
    """The whole report as Markdown tables, readable in a terminal and pasteable into the README."""
    sections: list[str] = []
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
    sections.append(
        f'Wire bytes over {results.turns} turns ({len(results.wire[0].requests) if results.wire else 0} requests). '
        'Segment bytes count the cache-order pieces of each request, re-encoded canonically; reused ones repeat '
        'the previous request byte for byte.\n\n'
        + _table(
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
    if results.timings:
        variants = [
            v
            for v in ('static', 'rewrite', 'append', 'append-loaded', 'floor', 'injected', 'native')
            if any(v in t.seconds for t in results.timings)
        ]
        rows = [
            [timing.profile, str(timing.turns)]
            + [
                f'{timing.median_ms(v):.1f} ms ({timing.ratio(v):.2f}x)' if v in timing.seconds else '-'
                for v in variants
            ]
            for timing in results.timings
        ]
        repeats = len(next(iter(results.timings[0].seconds.values())))
        sections.append(
            f'One agent.run on a history of N turns (median of {repeats}, variants interleaved; ratio to static)\n\n'
            + _table(['model', 'N', *variants], rows)
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
            + _table(['model', *variants], slopes)
        )
    sections.append(
        'Pieces on their own (medians)\n\n'
        + _table(
            ['piece', 'time', 'size'],
            [[p.name, f'{p.microseconds:,.1f} us', f'{p.bytes:,} bytes'] for p in results.pieces],
        )
    )
    sections.append(
        'Targets\n\n'
        + _table(['target', 'measured', 'verdict'], [[v.target, v.measured, v.label] for v in verdicts(results)])
    )
    sections.append('Machine: ' + ', '.join(f'{key} {value}' for key, value in results.machine.items()))
    return '\n\n'.join(sections) + '\n'


def to_json(results: Results) -> dict[str, Any]:
    """Every figure of the run as JSON-able data."""
    return {
        'turns': results.turns,
        'machine': results.machine,
        'wire': [summary(result) for result in results.wire],
        'overhead': [
            {
                'profile': timing.profile,
                'turns': timing.turns,
                'median_ms': {v: round(timing.median_ms(v), 3) for v in timing.seconds},
                'ratio_to_static': {v: round(timing.ratio(v), 3) for v in timing.seconds},
                'runs_ms': {v: [round(s * 1000, 3) for s in runs] for v, runs in timing.seconds.items()},
            }
            for timing in results.timings
        ],
        'pieces': [
            {'name': p.name, 'microseconds': round(p.microseconds, 3), 'bytes': p.bytes} for p in results.pieces
        ],
        'targets': [{'target': v.target, 'measured': v.measured, 'verdict': v.label} for v in verdicts(results)],
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
