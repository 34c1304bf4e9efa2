"""Run the benchmark: `uv run python -m benchmarks [--json PATH] [--plot PATH] [--size smoke]`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pydantic_ai.messages import ModelMessage

from .overhead import Profile, Timing, build_history, real_history, time_runs
from .pieces import time_pieces
from .report import Results, machine, render_svg, render_text, to_json, verdicts
from .scenario import POLICIES, Policy, native_available
from .wire import PATHS, WireResult, run_conversation

SIZES = {
    # turns of the wire scenario, history sizes timed, timed rounds, rounds of each piece
    'default': (20, (10, 100, 1000), 15, 200),
    'smoke': (4, (2, 5), 2, 3),
}
NATIVE_MAX_TURNS = 100
"""Pydantic AI's own append mechanism is timed up to this history size: its histories are built by real runs,
which costs time quadratic in the size."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='python -m benchmarks', description=__doc__)
    parser.add_argument(
        '--size', choices=sorted(SIZES), default='default', help='how much to run (default: %(default)s)'
    )
    parser.add_argument('--json', type=Path, help='write every figure to this JSON file')
    parser.add_argument('--plot', type=Path, help='write an SVG plot of per-request reused and uncached bytes here')
    parser.add_argument(
        '--plot-path',
        choices=sorted(PATHS),
        default='anthropic-wrapped',
        help='the path the plot shows (default: %(default)s)',
    )
    parser.add_argument('--skip-overhead', action='store_true', help='leave out the in-process timings')
    parser.add_argument('--check', action='store_true', help='exit with status 1 if any target is missed')
    return parser


async def _wire(turns: int, policies: Sequence[Policy]) -> list[WireResult]:
    results: list[WireResult] = []
    for path in PATHS:
        for policy in policies:
            print(f'  wire: {path} / {policy}', file=sys.stderr)
            results.append(await run_conversation(path, policy, turns))
    return results


async def _overhead(sizes: Sequence[int], repeats: int, policies: Sequence[Policy]) -> list[Timing]:
    timings: list[Timing] = []
    for turns in sizes:
        print(f'  overhead: building histories of {turns} turns', file=sys.stderr)
        histories: dict[Policy, list[ModelMessage]] = {}
        for policy in policies:
            if policy == 'native':
                if turns <= NATIVE_MAX_TURNS:
                    histories[policy] = await real_history(policy, turns)
            else:
                histories[policy] = await build_history(policy, turns)
        profiles: tuple[Profile, ...] = ('inline', 'wrapped')
        for profile in profiles:
            print(f'  overhead: timing {turns} turns on the {profile} model', file=sys.stderr)
            timings.append(await time_runs(profile, turns, histories, repeats))
    return timings


async def run(size: str, *, overhead: bool = True) -> Results:
    """Run every measurement at `size`."""
    turns, sizes, repeats, piece_repeats = SIZES[size]
    policies: list[Policy] = [policy for policy in POLICIES if policy != 'native' or native_available()]
    wire = await _wire(turns, policies)
    timings = await _overhead(sizes, repeats, policies) if overhead else []
    print('  pieces', file=sys.stderr)
    return Results(turns, wire, timings, time_pieces(piece_repeats), machine())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables; with `--check`, return 1 if a target is missed."""
    args = _parser().parse_args(argv)
    results = asyncio.run(run(args.size, overhead=not args.skip_overhead))
    print(render_text(results))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(results), indent=2) + '\n')
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        args.plot.write_text(render_svg(results, args.plot_path))
    return 1 if args.check and any(verdict.met is False for verdict in verdicts(results)) else 0


if __name__ == '__main__':
    sys.exit(main())
