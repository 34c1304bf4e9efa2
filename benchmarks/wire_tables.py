"""What the report says about the wire scenario and the coding agent: their targets, and the table of wire bytes.

Both conversations are judged the same way, path by path: append mode keeps every in-window request's prefix, and
spends no more tokens than Pydantic AI's own append mode at its best (`tokens`). The wire scenario is also judged
against rewrite mode and on the size of a one-line edit to its 15 KB block.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tables import Verdict, table
from .tokens import token_verdicts
from .wire import PathName, WireResult

__all__ = ('DIFF_SHARE_LIMIT', 'REWRITE_FACTOR', 'coding_verdicts', 'grouped', 'wire_section', 'wire_verdicts')

DIFF_SHARE_LIMIT = 5.0
"""A one-line edit to the 15 KB block is delivered in at most this percentage of its bytes."""
REWRITE_FACTOR = 5.0
"""Append mode sends at least this many times fewer uncached bytes than rewrite mode."""


def grouped(wire: Sequence[WireResult]) -> dict[PathName, dict[str, WireResult]]:
    """Conversations by path, then by variant."""
    found: dict[PathName, dict[str, WireResult]] = {}
    for result in wire:
        found.setdefault(result.path, {})[result.policy] = result
    return found


def _natives(policies: dict[str, WireResult]) -> list[WireResult]:
    return [policies[name] for name in ('native', 'native-always') if name in policies]


def _reuse_verdict(where: str, append: WireResult) -> Verdict:
    """Whether append mode's every in-window request at `where` reused all of the request before it."""
    return Verdict(
        f'{where}: every in-window request reuses 100.0% of the previous one',
        f'lowest {append.min_reuse:.1f}%, prefix moved {len(append.moves)} times',
        append.min_reuse == 100.0 and not append.moves,
    )


def wire_verdicts(wire: Sequence[WireResult], turns: int) -> list[Verdict]:
    """Judge append mode on each path of the wire scenario of `turns` turns."""
    found: list[Verdict] = []
    for path, policies in grouped(wire).items():
        append = policies.get('append')
        if append is None:
            continue
        found.append(_reuse_verdict(path, append))
        natives = _natives(policies)
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
        found.extend(token_verdicts(path, append, natives, f'{turns} turns'))
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


def coding_verdicts(coding: Sequence[WireResult], turns: int) -> list[Verdict]:
    """Judge append mode on each path of the coding agent's conversation of `turns` turns."""
    found: list[Verdict] = []
    scenario = f'coding agent, {turns} turns'
    for path, policies in grouped(coding).items():
        append = policies.get('append')
        if append is None:
            continue
        found.append(_reuse_verdict(f'{path}, {scenario}', append))
        # The limit takes every request as reading the one before, which a window opened by price doesn't: the coding
        # agent's windows are held to the hindsight-optimal schedule instead (`windows`).
        found.extend(token_verdicts(path, append, _natives(policies), scenario, limit=False))
    return found


def wire_section(wire: Sequence[WireResult], turns: int) -> str:
    """The table of the wire scenario's bytes, one row per path and policy."""
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
        for result in wire
    ]
    return (
        f'Wire bytes over {turns} turns ({len(wire[0].requests)} requests). '
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
