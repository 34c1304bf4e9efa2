"""When a window's carried changes cost more than a new window: the rule a request decides by, and the schedule
hindsight would have chosen, which the benchmark holds the rule to.

Every request of a window reads again the changes the window delivered before it (at the cache-read price) and writes
the ones it delivers (at the cache-write price). A new window states the blocks' current values in the prefix instead,
and so writes the whole request again: what it costs beyond reading it is the price of ending the carried changes.
Whatever else a request costs, every schedule of windows pays alike. So, per request, in tokens:

- kept: `cache_read * carried + cache_write * delivered`, where `carried` is what the window delivered before it
  (`cache_write * carried` where a compaction moved the prefix, which writes them again: `Step.keeping`);
- opened: `(cache_write - cache_read) * size`, where `size` is the request's tokens without carried changes.

`keeps_window` is the online rule, ski rental's: keep the window while what its carried changes have cost so far (their
reads), with what keeping costs this request, stays under the price of a new window. A delivery a request has made is
not counted on: every schedule but one opening at that very request pays it. As requests grow, a new window costs
more the later it opens: in the hindsight optimum of a growing conversation, what a window's changes have cost by the
time the next one opens lies between a new window's price at the window's first request and its price then (0.8-2.2
times the first and 0.3-0.9 times the second over the benchmark's coding agent, 0.9-1.2 and 0.4-0.9 on a linear
series), so the rule takes the mean of the two.

Its cost beyond what every schedule pays is at most `2 * g + 1` times the hindsight optimum's, where `g` is how many
times the largest request outgrows the smallest between two of the rule's windows: between two openings, the rule
pays less than two new windows' price at the largest request, and its deliveries, each cheaper than a new window; over
the same requests the optimum pays a new window's price at the smallest or the same reads, and every delivery it
doesn't open a window at. (Without deliveries or growth this is deterministic ski rental, at most twice the optimum;
`tests/_shared/test_schedule.py` checks the bound on adversarial series.) `optimal_opens` is that optimum, a dynamic
programme over the requests (quadratic in their number).

A compaction changes two things. Where it moves the prefix, the rest of the request is written whatever the schedule,
and a new window costs only what the cache still held (`Step.held`: the tools and instructions, and on a provider that
reads the longest cached prefix, the history before the move): the rule prices it so, at that request alone. Where it
cuts messages, the changes before the cut go with them (`Step.kept`), and the rule keeps the window from then on: what
it counted on saving ends at the next cut, and under a token budget carried changes only take the place of older
messages. The bound above is not claimed across compactions; the benchmark holds the rule to the optimum there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .prices import CachePrices

CHARS_PER_TOKEN = 4
"""How many characters of text make a token where no tokenizer is at hand, the usual figure for English and code."""


class Step(NamedTuple):
    """One request of a conversation, as a schedule of windows prices it."""

    size: int
    """Its tokens without carried changes: what a new window writes."""

    delivered: int
    """The tokens of the changes it delivers if it keeps the window."""

    held: int | None = None
    """Where a compaction moved the request's prefix: the tokens the cache still holds of it, all that a new window
    writes beyond keeping (`None`: `size`)."""

    rewritten: int | None = None
    """Where a compaction moved the prefix: the most tokens of carried changes that keeping writes again, those after
    the move (`None`: all of them, as where the provider reads the tools and instructions alone)."""

    kept: int | None = None
    """Where a compaction cut messages: the most tokens of changes keeping the window still carries, those the cut left
    and the values it states again (`None`: no cut). The window is kept from then on, as `_reopening` keeps it."""

    def left(self, carried: float) -> float:
        """What is left of `carried`, the tokens of changes a window carried before this request, after its cut."""
        return carried if self.kept is None else min(carried, self.kept)

    @property
    def opening(self) -> int:
        """What a new window writes beyond keeping, in tokens."""
        return self.size if self.held is None else self.held

    def keeping(self, carried: float, write: float) -> float:
        """What keeping the window costs this request, in cache-read tokens, given the tokens of the changes it
        carries and what a write costs in reads: it reads them, and writes again those after a compaction's move.
        """
        again = 0 if self.held is None else carried if self.rewritten is None else min(carried, self.rewritten)
        return carried - again + write * (again + self.delivered)


def weighed(paid: float, step: Step, carried: float, prices: CachePrices) -> tuple[float, float]:
    """What a request's window has cost in its carried changes, with what keeping it costs this request, and what a
    new window costs beyond reading the request, both in cache-read tokens: the two sides `keeps_window` weighs.

    Args:
        paid: What the window's requests since it opened paid to read its carried changes, in tokens.
        step: The request.
        carried: The tokens of the changes the window delivered before this request, which keeping reads again.
        prices: The model's cache prices.
    """
    return paid + step.keeping(carried, prices.cache_write / prices.cache_read), prices.threshold * step.opening


def keeps_window(paid: float, step: Step, carried: float, prices: CachePrices, first: int) -> bool:
    """Whether a request keeps its window rather than open a new one: the arguments as `weighed` takes them, and
    `first`, the size of the request the window opened at (which a new window's price is averaged with).
    """
    keeping, opening = weighed(paid, step, carried, prices)
    return keeping < (opening + prices.threshold * first) / 2


def online_opens(steps: Sequence[Step], prices: CachePrices) -> list[int]:
    """The requests `keeps_window` opens a window at (the first always opens one)."""
    opens = [0]
    paid = carried = 0.0
    cut = False
    for at, step in enumerate(steps[1:], 1):
        carried, cut = step.left(carried), cut or step.kept is not None
        first = step.opening if step.held is not None else steps[opens[-1]].size
        if cut or keeps_window(paid, step, carried, prices, first):
            paid += carried
            carried += step.delivered
        else:
            opens.append(at)
            paid = carried = 0.0
            cut = False
    return opens


def extra_cost(steps: Sequence[Step], opens: Sequence[int], prices: CachePrices) -> float:
    """What a schedule opening windows at `opens` pays beyond what every schedule pays, in cache-read tokens."""
    chosen = set(opens)
    total = carried = 0.0
    write = prices.cache_write / prices.cache_read
    for at, step in enumerate(steps):
        if at in chosen:
            total += (write - 1) * step.opening if at else 0.0
            carried = 0.0
        else:
            carried = step.left(carried)
            total += step.keeping(carried, write)
            carried += step.delivered
    return total


def optimal_opens(steps: Sequence[Step], prices: CachePrices) -> list[int]:
    """The schedule `extra_cost` finds cheapest, chosen with hindsight."""
    write = prices.cache_write / prices.cache_read
    # best[end]: the least cost of the requests before `end`, their last window ending there; `first[end]` is where
    # that window opened.
    best = [0.0] + [float('inf')] * len(steps)
    first = [0] * (len(steps) + 1)
    for start in range(len(steps)):
        cost = best[start] + ((write - 1) * steps[start].opening if start else 0.0)
        carried = 0.0
        for end in range(start + 1, len(steps) + 1):
            if cost < best[end]:
                best[end], first[end] = cost, start
            if end < len(steps):
                step = steps[end]
                carried = step.left(carried)
                cost += step.keeping(carried, write)
                carried += step.delivered
    opens: list[int] = []
    end = len(steps)
    while end > 0:
        opens.append(first[end])
        end = first[end]
    return opens[::-1]
