"""What the benchmark prints and writes: readable tables, the targets with their verdicts, and JSON.

Every verdict is computed from the figures measured in the same run; a target that is missed says MISS with
the measured value, and a target that can't be judged (no native peer on this release) says n/a. Each part's
targets, tables and JSON live beside the others of that part (`wire_tables`, `overhead_tables`, `huge_tables`,
`server_tables`, and the parts that report themselves); this module puts them together in the order they run.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from .breakpoints import BreakpointResult, breakpoints_json, breakpoints_section
from .caches import CacheTiming, cache_sections, caches_json
from .huge import HugeResult
from .huge_tables import huge_json, huge_section, huge_verdicts
from .overhead import ChangeTiming, Timing
from .overhead_tables import (
    change_verdicts,
    changes_json,
    changes_section,
    overhead_json,
    overhead_verdicts,
    timing_sections,
)
from .pieces import PieceTiming
from .server_tables import instrumented_json, instrumented_section, many_json, many_section, many_verdicts
from .servers import ManyConversations
from .startup import STARTUP_LIMIT_SECONDS, StartupTiming, startup_sections
from .stores import StoreTiming, store_sections
from .tables import Verdict, table
from .tokens import token_summary, tokens_section
from .windows import PathWindows, by_path, windows_json, windows_sections, windows_verdicts
from .wire import WireResult, summary
from .wire_tables import coding_verdicts, wire_section, wire_verdicts

__all__ = ('Results', 'Verdict', 'machine', 'render_text', 'to_json', 'verdicts')

VERIFY_LIMIT_US = 1000.0
"""Each `verify` piece takes under this many microseconds."""


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

    extrapolated_turns: Sequence[int] = ()
    """The lengths the coding conversation is extrapolated to, to price schedules of windows (`windows`)."""

    startup: Sequence[StartupTiming] = ()
    """The cassette checker's commands, each run in a process of its own."""

    stores: Sequence[StoreTiming] = ()
    """A run behind a UI adapter, with and without a record store."""

    caches: Sequence[CacheTiming] = ()
    """A conversation in progress with each process cache off."""

    @functools.cached_property
    def windows(self) -> list[PathWindows]:
        """Each path's schedules of windows, priced once for the tables, the targets and the JSON alike (the
        optimum of an extrapolated conversation takes seconds).
        """
        chat = by_path(self.wire, self.turns, (), 'the wire scenario')
        return [*chat, *by_path(self.coding, self.coding_turns, self.extrapolated_turns, 'the coding agent')]


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


def verdicts(results: Results) -> list[Verdict]:
    """Judge every target against the figures of this run."""
    return [
        *wire_verdicts(results.wire, results.turns),
        *coding_verdicts(results.coding, results.coding_turns),
        *windows_verdicts(results.windows),
        *overhead_verdicts(results.timings, results.target_turns),
        *change_verdicts(results.changes),
        *huge_verdicts(results.huge),
        *many_verdicts(results.many),
        *_piece_verdicts(results.pieces),
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


def _piece_verdicts(pieces: Sequence[PieceTiming]) -> list[Verdict]:
    """Judge each `verify` piece against `VERIFY_LIMIT_US`."""
    found: list[Verdict] = []
    for piece in pieces:
        if piece.name.startswith('verify'):
            found.append(
                Verdict(
                    f'{piece.name} in under {VERIFY_LIMIT_US / 1000:g} ms',
                    f'{piece.microseconds:.0f} us',
                    piece.microseconds < VERIFY_LIMIT_US,
                )
            )
    return found


def render_text(results: Results) -> str:
    """The whole report as Markdown tables, readable in a terminal and pasteable into the README."""
    sections: list[str] = []
    if results.wire:
        sections.append(wire_section(results.wire, results.turns))
        sections.append(
            tokens_section(
                results.wire,
                f"Input tokens and dollars over the same {results.turns} turns, as the fake provider's simulated "
                'caches report them (4 bytes of compact JSON a token), priced with genai-prices for the model sent; '
                'the limit reads every token the previous request sent at the cache read price, and pays the input '
                "price (Anthropic and Bedrock: the cache write price) for the rest; in steps, as OpenAI's cache reads "
                'it',
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
    sections.extend(windows_sections(results.windows))
    if results.breakpoints:
        sections.append(breakpoints_section(results.breakpoints, results.turns))
    if results.timings:
        sections.extend(timing_sections(results.timings))
    if results.changes:
        sections.append(changes_section(results.changes))
    if results.huge:
        sections.append(huge_section(results.huge))
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
    sections.extend(cache_sections(results.caches))
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
                'priced': {
                    'windows': t.priced.windows,
                    'entry_bytes': t.priced.entry_bytes,
                    'every_record_bytes': t.priced.every_record_bytes,
                },
                'cpu_seconds': {k: [round(s, 5) for s in v] for k, v in t.seconds.items()},
            }
            for t in results.stores
        ],
        'caches': caches_json(results.caches),
        'coding_turns': results.coding_turns,
        # Without each request's bytes: 528 requests a conversation would make the file a megabyte.
        'coding': [summary(result, per_request=False) | token_summary(result) for result in results.coding],
        'windows': windows_json(results.windows),
        'overhead': [overhead_json(timing) for timing in results.timings],
        'changes': [changes_json(timing) for timing in results.changes],
        'huge': [huge_json(huge) for huge in results.huge],
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
