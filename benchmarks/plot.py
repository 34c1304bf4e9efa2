"""The plot of the wire scenario: each request's reused and uncached bytes on one path, one panel per policy.

It shows the wire table's totals request by request, so a request that reuses less of the one before stands out.
It is SVG written as text, with no plotting library.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from .wire import PathName, WireResult

__all__ = ('render_svg',)

_COLORS = {'reused': '#4c78a8', 'uncached': '#e45756'}


def render_svg(wire: Sequence[WireResult], path: PathName) -> str:
    """A plot of each request's reused and uncached bytes on one path, one panel per policy (keeping every change,
    which prices schedules of windows, left out).
    """
    panels = [result for result in wire if result.path == path and result.policy != 'append-keep']
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
