"""Run the benchmark: `uv run python -m benchmarks [--size smoke] [--only PARTS] [--paths PATHS] [--check] [--json F]
[--plot F]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import sys
from collections.abc import Collection, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pydantic_ai.messages import ModelMessage

from .breakpoints import BreakpointResult, run_breakpoints
from .caches import CacheTiming, time_caches
from .coding import CODING, run_coding_conversation
from .histories import Profile, build_history, real_history
from .huge import HugeResult, run_huge
from .overhead import ChangeTiming, Timing, time_change_counts, time_runs
from .pieces import PieceTiming, time_pieces
from .plot import render_svg
from .report import Results, machine, render_text, to_json, verdicts
from .scenario import POLICIES, Policy, native_available
from .servers import ManyConversations, time_instrumented, time_many_conversations
from .startup import time_startup
from .stores import StoreTiming, time_stores
from .wire import PATHS, PathName, Variant, WireResult, run_conversation


@dataclass(frozen=True)
class Size:
    """How much one size of the benchmark runs."""

    turns: int
    """Turns of the wire scenario."""

    histories: tuple[int, ...]
    """The history sizes (turns) one `agent.run` is timed on."""

    target_turns: tuple[int, ...]
    """The history sizes the timing targets are judged at."""

    rounds: int
    """Rounds of the timed runs, each running every variant once."""

    piece_repeats: int
    """Repeats of each piece on its own."""

    change_turns: int
    """The length of the histories whose number of changes varies."""

    huge_bytes: int
    """The size of the huge block."""

    huge_edits: int
    """The one-line edits made to the huge block."""

    conversations: int
    """The conversations one agent serves in turn in the many-conversations case."""

    conversation_turns: int
    """The length of each of those conversations' history."""

    served_per_round: int
    """The requests to those conversations in each round, each to the next conversation in turn."""

    instrumented_turns: tuple[int, ...]
    """The history sizes (turns) the instrumented tool-loop runs are timed on."""

    coding_turns: int
    """Turns of the coding agent's conversation."""

    coding_processes: int
    """The processes its conversations run in side by side (1: in this one); they measure bytes and tokens only."""

    store_turns: tuple[int, ...]
    """The history sizes (turns) the record store's runs are timed on."""

    cache_turns: tuple[int, ...]
    """The history sizes (turns) the process caches' runs are timed on."""

    extrapolated_turns: tuple[int, ...]
    """The lengths (turns) the coding agent's conversation is extrapolated to, to price schedules of windows."""


SIZES = {
    'default': Size(
        20,
        (10, 100, 300, 1000),
        (1000,),
        15,
        200,
        1000,
        10_000_000,
        3,
        100,
        300,
        10,
        (100, 300),
        200,
        2,
        (100, 1000),
        (100, 1000),
        (500, 1000),
    ),
    'smoke': Size(4, (2, 5), (5,), 2, 3, 40, 20_000, 2, 3, 5, 3, (5,), 3, 1, (5,), (5,), (6,)),
}
PARTS = (
    'wire',
    'breakpoints',
    'coding',
    'overhead',
    'changes',
    'huge',
    'many',
    'instrumented',
    'stores',
    'caches',
    'pieces',
    'startup',
)
"""The parts of the benchmark `--only` can choose from, in the order they run."""
TIMED_PARTS = frozenset(PARTS) - {'wire', 'breakpoints', 'coding', 'pieces'}
"""The parts `--skip-overhead` leaves out: the in-process timings."""
NATIVE_MAX_TURNS = 300
"""Pydantic AI's own append mechanism is timed up to this history size: its histories are built by real runs,
which costs time quadratic in the size."""


def _parts(value: str) -> tuple[str, ...]:
    chosen = tuple(part.strip() for part in value.split(',') if part.strip())
    unknown = [part for part in chosen if part not in PARTS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f'unknown parts {unknown} in {value!r}; choose from {", ".join(PARTS)}')
    return chosen


def _paths(value: str) -> tuple[PathName, ...]:
    chosen = tuple(path.strip() for path in value.split(',') if path.strip())
    unknown = [path for path in chosen if path not in PATHS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f'unknown paths {unknown} in {value!r}; choose from {", ".join(PATHS)}')
    return cast('tuple[PathName, ...]', chosen)


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
    parser.add_argument(
        '--only',
        type=_parts,
        default=PARTS,
        help=f'run only these parts, comma-separated, of {", ".join(PARTS)} (default: all)',
    )
    parser.add_argument(
        '--paths',
        type=_paths,
        default=tuple(PATHS),
        help=f'run the wire scenario and the coding agent only on these provider paths, comma-separated, of '
        f'{", ".join(PATHS)} (default: all)',
    )
    parser.add_argument('--check', action='store_true', help='exit with status 1 if any target is missed')
    return parser


async def _wire(turns: int, variants: Sequence[Variant], paths: Sequence[PathName]) -> list[WireResult]:
    results: list[WireResult] = []
    for path in paths:
        for variant in variants:
            print(f'  wire: {path} / {variant}', file=sys.stderr)
            results.append(await run_conversation(path, variant, turns))
    return results


async def _coding(size: Size, variants: Sequence[Variant], paths: Sequence[PathName]) -> list[WireResult]:
    turns, processes = size.coding_turns, size.coding_processes
    jobs: list[tuple[PathName, Variant, int]] = [(path, variant, turns) for path in paths for variant in variants]
    print(f'  coding: {len(jobs)} conversations of {turns} turns in {processes} processes', file=sys.stderr)
    if processes == 1:
        return [await run_conversation(path, variant, turns, scenario=CODING) for path, variant, _ in jobs]
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context('spawn')) as pool:
        return list(pool.map(run_coding_conversation, jobs))


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
        for profile in PROFILES:
            print(f'  overhead: timing {turns} turns on the {profile} model', file=sys.stderr)
            timings.append(await time_runs(profile, turns, histories, repeats))
    return timings


PROFILES: tuple[Profile, ...] = ('inline', 'wrapped')


async def _changes(turns: int, rounds: int) -> list[ChangeTiming]:
    timings: list[ChangeTiming] = []
    for profile in PROFILES:
        print(f'  changes: timing {turns} turns with fewer and more changes on the {profile} model', file=sys.stderr)
        timings.append(await time_change_counts(profile, turns, rounds))
    return timings


async def _huge(block_bytes: int, edits: int) -> list[HugeResult]:
    results: list[HugeResult] = []
    for profile in PROFILES:
        print(f'  huge: {edits} edits of a {block_bytes:,}-byte block on the {profile} model', file=sys.stderr)
        results.append(await run_huge(profile, block_bytes, edits))
    return results


async def _many(size: Size) -> list[ManyConversations]:
    results: list[ManyConversations] = []
    for profile in PROFILES:
        print(
            f'  many: {size.conversations} conversations of {size.conversation_turns} turns in turn on the {profile} '
            'model',
            file=sys.stderr,
        )
        results.append(
            await time_many_conversations(
                profile, size.conversation_turns, size.conversations, size.served_per_round, size.rounds
            )
        )
    return results


async def _instrumented(sizes: Sequence[int], rounds: int) -> list[Timing]:
    timings: list[Timing] = []
    for turns in sizes:
        for profile in PROFILES:
            print(f'  instrumented: a tool loop of {turns} turns on the {profile} model', file=sys.stderr)
            timings.append(await time_instrumented(profile, turns, rounds))
    return timings


async def run(
    size: str, *, overhead: bool = True, only: Collection[str] = PARTS, paths: Sequence[PathName] = tuple(PATHS)
) -> Results:
    """Run every measurement at `size`; `overhead=False` leaves out the in-process timings, `only` runs just those, and
    the wire scenario and the coding agent run on `paths`.
    """
    chosen = SIZES[size]
    parts = set(only) - (set() if overhead else TIMED_PARTS)
    policies: list[Policy] = [policy for policy in POLICIES if policy != 'native' or native_available()]
    variants: list[Variant] = [*policies, *(['native-always'] if 'native' in policies else [])]
    # Each conversation also keeps every change, so that schedules of windows can be priced on its requests.
    wire = await _wire(chosen.turns, [*variants, 'append-keep'], paths) if 'wire' in parts else []
    breakpoints: list[BreakpointResult] = []
    if 'breakpoints' in parts:
        print("  breakpoints: the Anthropic paths under each of Pydantic AI's cache settings", file=sys.stderr)
        # Native append mode at its best only: its default differs from it on the wrapped path alone.
        breakpoints = await run_breakpoints(chosen.turns, [variant for variant in variants if variant != 'native'])
    coding_variants: list[Variant] = [*variants, 'append-keep']
    coding = await _coding(chosen, coding_variants, paths) if 'coding' in parts else []
    timings = await _overhead(chosen.histories, chosen.rounds, policies) if 'overhead' in parts else []
    changes = await _changes(chosen.change_turns, chosen.rounds) if 'changes' in parts else []
    huge = await _huge(chosen.huge_bytes, chosen.huge_edits) if 'huge' in parts else []
    many = await _many(chosen) if 'many' in parts else []
    instrumented = await _instrumented(chosen.instrumented_turns, chosen.rounds) if 'instrumented' in parts else []
    stores: list[StoreTiming] = []
    if 'stores' in parts:
        print('  stores: a run behind a UI adapter, with and without a record store', file=sys.stderr)
        stores = await time_stores(chosen.store_turns, chosen.rounds)
    caches: list[CacheTiming] = []
    if 'caches' in parts:
        print('  caches: a conversation in progress with each process cache off', file=sys.stderr)
        caches = await time_caches(chosen.cache_turns, chosen.rounds)
    pieces: list[PieceTiming] = []
    if 'pieces' in parts:
        print('  pieces', file=sys.stderr)
        pieces = time_pieces(chosen.piece_repeats)
    startup = []
    if 'startup' in parts:
        print('  startup: the cassette checker in processes of its own', file=sys.stderr)
        startup = time_startup(chosen.rounds)
    return Results(
        chosen.turns,
        wire,
        timings,
        pieces,
        machine(),
        target_turns=chosen.target_turns,
        changes=changes,
        huge=huge,
        many=many,
        instrumented=instrumented,
        breakpoints=breakpoints,
        coding=coding,
        coding_turns=chosen.coding_turns,
        extrapolated_turns=chosen.extrapolated_turns,
        startup=startup,
        stores=stores,
        caches=caches,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables; with `--check`, return 1 if a target is missed."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.plot is not None and 'wire' not in args.only:
        parser.error('--plot shows the wire bytes: add wire to --only')
    if args.plot is not None and args.plot_path not in args.paths:
        parser.error(f'--plot shows the path {args.plot_path}: add it to --paths, or choose one with --plot-path')
    results = asyncio.run(run(args.size, overhead=not args.skip_overhead, only=args.only, paths=args.paths))
    print(render_text(results))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(results), indent=2) + '\n')
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        args.plot.write_text(render_svg(results.wire, args.plot_path))
    return 1 if args.check and any(verdict.met is False for verdict in verdicts(results)) else 0


if __name__ == '__main__':
    sys.exit(main())
