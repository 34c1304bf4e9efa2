"""Assertions on a recorded conversation: does each request keep the previous one's prefix, and how much of it?"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .._segments import Segment, common_prefix_length, excerpt, first_difference

__all__ = ('PrefixReuse', 'assert_prefix_stable', 'prefix_reuse')


def _divergence_message(index: int, earlier: Sequence[Segment], later: Sequence[Segment], position: int) -> str:
    head = f'request {index} does not extend request {index - 1} byte for byte: '
    hint = f'\n(if request {index} opens a new window, pass new_windows=({index},))'
    before = earlier[position]
    if position >= len(later):
        return (
            f'{head}it ends after {len(later)} segments, where request {index - 1} goes on with segment {position} '
            f'({before.kind}): {excerpt(before.data, 0)}{hint}'
        )
    after = later[position]
    offset = first_difference(before.data, after.data)
    return (
        f'{head}first divergent segment is {position} ({before.kind} in request {index - 1}, {after.kind} in request '
        f'{index}), at byte {offset} of it\n'
        f'  request {index - 1}: {excerpt(before.data, offset)}\n'
        f'  request {index}: {excerpt(after.data, offset)}{hint}'
    )


def assert_prefix_stable(requests: Sequence[Sequence[Segment]], *, new_windows: Collection[int] = ()) -> None:
    """Assert that each request's segments start with the previous request's, byte for byte.

    Args:
        requests: Each request's segments in order, e.g. `WireConversation.requests`.
        new_windows: Indices of requests allowed to move the prefix, where a new window opens.

    Raises:
        AssertionError: Naming the first request that breaks the prefix, its first divergent segment's index and
            kind, and an excerpt of both sides from the first differing byte.
    """
    __tracebackhide__ = True  # pytest shows the failure at the test's call, not inside this package
    for index in range(1, len(requests)):
        if index in new_windows:
            continue
        earlier, later = requests[index - 1], requests[index]
        position = common_prefix_length(earlier, later)
        if position < len(earlier):
            raise AssertionError(_divergence_message(index, earlier, later, position))


@dataclass(frozen=True)
class PrefixReuse:
    """How much of one request its predecessor already sent, in segment bytes."""

    index: int
    """The request's position, from 0."""
    reused_bytes: int
    """Bytes of the segments it shares, from the start, with the previous request (0 for the first request)."""
    new_bytes: int
    """Bytes of the segments after those."""
    total_bytes: int
    """Bytes of all its segments."""


def prefix_reuse(requests: Sequence[Sequence[Segment]]) -> list[PrefixReuse]:
    """Measure, per request, the bytes reused from the previous request's prefix and the new ones.

    Args:
        requests: Each request's segments in order, e.g. `WireConversation.requests`.

    Returns:
        One `PrefixReuse` per request.
    """
    report: list[PrefixReuse] = []
    previous: Sequence[Segment] = ()
    for index, current in enumerate(requests):
        shared = common_prefix_length(previous, current)
        reused = sum(len(segment.data) for segment in current[:shared])
        total = sum(len(segment.data) for segment in current)
        report.append(PrefixReuse(index, reused, total - reused, total))
        previous = current
    return report
