"""The coding agent with `PrefixGuard` and Pydantic AI Harness's compaction: the instructions kept across compactions,
and windows by price against keeping every change.

Harness pins `pydantic-ai-slim` exactly, so this runs in an environment of its own (`.ci/harness-env`):
`.venv-harness-0.62/bin/python -m benchmarks.compaction [--turns N]` writes `benchmarks/results/compaction.txt` and
`.json`. Per strategy and path, static instructions, append mode keeping every change (`append-keep`) and windows by
price (`append`), each with the strategy and the guard (default options): input dollars (the fake provider's caches,
`genai-prices`), the requests whose prefix a compaction moved (on the wire, where no instruction window opened), the
windows of the prefix the guard told its verifier of, the instruction windows append mode opened, and the longest
request. Before issue 37 every compaction opened an instruction window, writing the instructions again. Then, per
strategy, windows by price against the hindsight optimum, as `benchmarks/windows.py` prices schedules (`MODELS`: the
cleared run with each compaction's move and cut, the sliding window as held to a token budget), with its targets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai_harness.compaction import ClearToolResults, SlidingWindowCompaction

from pydantic_ai_append._shared.schedule import Step
from pydantic_ai_append.guard import PrefixGuard

from .coding import CODING
from .tables import Verdict, table
from .tokens import token_result
from .windows import budgeted_steps, by_path, compaction_steps, windows_json, windows_sections, windows_verdicts
from .wire import PathName, Variant, WireResult, run_conversation

STRATEGIES: dict[str, Callable[[], AbstractCapability[int]]] = {
    # Cleared in batches: about every 24 tool steps, the 6 latest pairs kept.
    'ClearToolResults': lambda: ClearToolResults(max_messages=60, keep_pairs=6),
    # The oldest turns dropped past about 20,000 tokens, the latest 60 messages (about 10 turns) kept.
    'SlidingWindowCompaction': lambda: SlidingWindowCompaction(max_tokens=20_000, keep_messages=60),
}
MODELS: dict[str, Callable[[WireResult], list[Step]]] = {
    # Tool results cleared: history keeps every change, and grows.
    'ClearToolResults': compaction_steps,
    # The oldest messages cut past a token budget: the changes carried take their place.
    'SlidingWindowCompaction': budgeted_steps,
}
"""How the schedules of windows are priced on each strategy's run keeping every change (`benchmarks/windows.py`)."""
PATHS_RUN: tuple[PathName, ...] = ('anthropic-inline', 'openai-chat')
VARIANTS: tuple[Variant, ...] = ('static', 'append-keep', 'append')
RESULTS = Path(__file__).parent / 'results'


@dataclass
class Compactions:
    """Counts the compactions the guard applies, as a `WireVerifier` would be told them."""

    count: int = 0

    def open_window(self, model: str | None = None) -> None:
        """Told by the guard of a request that opens a window of the prefix (a compaction)."""
        self.count += 1


@dataclass(frozen=True)
class Compacted:
    """One conversation with a compaction strategy and the guard."""

    strategy: str
    result: WireResult
    compactions: int

    @property
    def windows(self) -> int | None:
        """The instruction windows append mode opened (`None` for static instructions)."""
        return None if self.result.policy == 'static' else len(self.result.opened) + 1


def run_one(job: tuple[str, PathName, Variant, int]) -> Compacted:
    """Run one conversation, in a process of its own."""
    strategy, path, variant, turns = job
    counted = Compactions()
    capabilities = [STRATEGIES[strategy](), PrefixGuard[int](verifier=counted)]
    result = asyncio.run(run_conversation(path, variant, turns, scenario=CODING, capabilities=capabilities))
    return Compacted(strategy, result, counted.count)


def report(runs: Sequence[Compacted], turns: int) -> tuple[str, list[Verdict], dict[str, Any]]:
    """The tables, the verdicts and the JSON of the runs, and of each strategy's schedules of windows."""
    rows: list[list[str]] = []
    data: list[dict[str, Any]] = []
    by_key = {(run.strategy, run.result.path, run.result.policy): run for run in runs}
    for run in runs:
        tokens = token_result(run.result)
        longest = max(usage.input_tokens for usage in run.result.usages)
        rows.append(
            [
                run.strategy,
                run.result.path,
                run.result.policy,
                f'${tokens.cost:.4f}',
                f'{len(run.result.moves)}',
                f'{run.compactions}',
                '-' if run.windows is None else f'{run.windows}',
                f'{longest:,}',
            ]
        )
        data.append(
            {
                'strategy': run.strategy,
                'path': run.result.path,
                'variant': run.result.policy,
                'input_cost_usd': round(tokens.cost, 6),
                'prefix_moves': len(run.result.moves),
                'windows_told': run.compactions,
                'instruction_windows': run.windows,
                'longest_tokens': longest,
            }
        )
    found: list[Verdict] = []
    for strategy, path in {(run.strategy, run.result.path) for run in runs}:
        keep = by_key[(strategy, path, 'append-keep')]
        where = f'{path}, coding agent with the guard and {strategy}, {turns} turns'
        found.append(
            Verdict(
                f'{where}: keeping every change opens one instruction window across every compaction',
                f'{keep.windows} windows, {len(keep.result.moves)} prefix moves',
                keep.windows == 1 and bool(keep.result.moves),
            )
        )
    sections, schedules = _schedules(runs, turns, found)
    heading = (
        f'The coding agent over {turns} turns with `PrefixGuard` and a harness compaction strategy: input dollars, the '
        'requests whose prefix a compaction moved, the windows the guard told its verifier of, the instruction windows '
        'append mode opened, the longest request (input tokens)'
    )
    headers = ['strategy', 'path', 'variant', 'input cost', 'prefix moves', 'told', 'instruction windows', 'longest']
    text = '\n\n'.join([table(headers, rows), *sections])
    verdicts = sorted(found, key=lambda verdict: verdict.target)
    return f'{heading}\n\n{text}', verdicts, {'runs': data, 'windows': schedules}


def _schedules(runs: Sequence[Compacted], turns: int, found: list[Verdict]) -> tuple[list[str], dict[str, Any]]:
    """Each strategy's windows by price against the optimum: its tables and JSON, its verdicts added to `found`."""
    sections: list[str] = []
    schedules: dict[str, Any] = {}
    for strategy in STRATEGIES:
        results = [run.result for run in runs if run.strategy == strategy]
        scenario = f'the coding agent with the guard and {strategy}'
        paths = by_path(results, turns, (), scenario, stepped=MODELS[strategy])
        sections.extend(windows_sections(paths))
        schedules[strategy] = windows_json(paths)
        found.extend(windows_verdicts(paths))
    return sections, schedules


def main(argv: Sequence[str] | None = None) -> int:
    """Run every strategy, path and variant, print and write the report; non-zero if a target is missed."""
    parser = argparse.ArgumentParser(description='The coding agent with PrefixGuard and harness compaction.')
    parser.add_argument('--turns', type=int, default=200)
    parser.add_argument('--processes', type=int, default=2)
    args = parser.parse_args(argv)
    jobs = [
        (strategy, path, variant, args.turns) for strategy in STRATEGIES for path in PATHS_RUN for variant in VARIANTS
    ]
    with ProcessPoolExecutor(args.processes) as pool:
        runs = list(pool.map(run_one, jobs))
    text, verdicts, data = report(runs, args.turns)
    targets = table(['target', 'measured', 'verdict'], [[v.target, v.measured, v.label] for v in verdicts])
    output = f'{text}\n\nTargets\n\n{targets}\n'
    print(output)
    (RESULTS / 'compaction.txt').write_text(output)
    (RESULTS / 'compaction.json').write_text(json.dumps({'turns': args.turns, **data}, indent=2) + '\n')
    return 0 if all(verdict.met for verdict in verdicts) else 1


if __name__ == '__main__':
    raise SystemExit(main())
