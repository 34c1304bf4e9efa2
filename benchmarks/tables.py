"""The report's building blocks: a verdict, a Markdown table, and how a spread of figures is written.

Every part of the report writes its figures the same way, so they live here, where `report` and the report of the
server cases (`server_tables`) both take them from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .measure import Spread

__all__ = ('Verdict', 'milliseconds', 'percent', 'ratio_cell', 'spread_json', 'table', 'times')


@dataclass(frozen=True)
class Verdict:
    """One target, what was measured for it, and whether it was met (`None`: can't be judged here)."""

    target: str
    measured: str
    met: bool | None
    spread: str = '-'
    """The p25-p75 spread of the measured figure over the rounds, where it has one."""

    @property
    def label(self) -> str:
        """PASS, MISS or n/a."""
        return 'n/a' if self.met is None else 'PASS' if self.met else 'MISS'


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, the first column aligned left and the others right."""
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


def percent(spread: Spread) -> tuple[str, str]:
    """A spread of shares: the median, and the p25-p75 range, as percentages."""
    return f'{spread.median:.2%}', f'{spread.p25:.2%}-{spread.p75:.2%}'


def times(spread: Spread) -> tuple[str, str]:
    """A spread of ratios: the median, and the p25-p75 range, to three places."""
    return f'{spread.median:.3f}x', f'{spread.p25:.3f}-{spread.p75:.3f}x'


def ratio_cell(spread: Spread) -> str:
    """A spread of ratios in one table cell, the p25-p75 range in brackets."""
    return f'{spread.median:.2f}x ({spread.p25:.2f}-{spread.p75:.2f})'


def spread_json(spread: Spread) -> dict[str, float]:
    """A spread as JSON-able data."""
    return {'median': round(spread.median, 4), 'p25': round(spread.p25, 4), 'p75': round(spread.p75, 4)}


def milliseconds(seconds: Sequence[float]) -> list[float]:
    """Seconds as milliseconds, rounded for JSON."""
    return [round(second * 1000, 3) for second in seconds]
