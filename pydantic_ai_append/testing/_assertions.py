"""Assertions on a recorded conversation: does each request keep the previous one's prefix, and how much of it?"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .._wire.causes import explain, why_and_fix
from .._wire.segments import Segment, common_prefix_length, divergence_message


def assert_prefix_stable(
    requests: Sequence[Sequence[Segment]], *, new_windows: Collection[int] = (), reads_discounted: bool = True
) -> None:
    """Assert that each request's segments start with the previous request's, byte for byte.

    Args:
        requests: Each request's segments in order, e.g. `WireConversation.requests`.
        new_windows: Indices of requests allowed to move the prefix, where a new window opens.
        reads_discounted: Whether the model's cache reads cost less than uncached input. Where they don't (as
            `genai-prices` has Groq's and Mistral's models), carried changes save nothing, so `AppendInstructions`
            with `windows='price'` opens a new window at each change, and the message says so.

    Raises:
        AssertionError: Naming the first request that breaks the prefix, its first divergent segment's index and
            kind, and an excerpt of both sides from the first differing byte; then why the prefix moved and the fix,
            where the plugin's elements in the requests tell it (`_wire.causes`).
    """
    __tracebackhide__ = True  # pytest shows the failure at the test's call, not inside this package
    for index in range(1, len(requests)):
        if index in new_windows:
            continue
        earlier, later = requests[index - 1], requests[index]
        position = common_prefix_length(earlier, later)
        if position < len(earlier):
            cause = explain(index, earlier, later, position, reads_discounted=reads_discounted)
            raise AssertionError(
                f'{divergence_message(index, earlier, later, position)}\n'
                f'{why_and_fix(index, cause, f"pass new_windows=({index},)")}'
            )


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
