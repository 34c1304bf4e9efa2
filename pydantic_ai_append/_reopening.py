"""Why a request that could keep its window opens a new one: its carried changes cost more than writing it again, or
the provider's cache has expired.

What the window has cost is read from history, so any process that continues the conversation reaches the same
decision: the changes the window delivered (their carriers' text, about four characters a token), the responses since
(each answered a request that read the changes delivered before it), and the last response, whose usage says how
large the request is and whose model and provider say what the cache costs (`_shared.prices`). The rule itself is
`_shared.schedule.keeps_window`. A cache is expired when Pydantic AI's `prompt_cache_outlook` says it has gone cold.

A window whose baseline `PrefixGuard` marked as cut (`CUT_KEY`: a compaction dropped messages of the conversation) is
kept, but where the cache expired. There the oldest changes go with the oldest messages, so what the rule counts on
saving ends at the next cut, and under a token budget the changes only take the place of messages: on the benchmark's
coding agent with a sliding window, each window opened by price there cost more than keeping it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, NamedTuple, cast

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.profiles import prompt_cache_outlook

from ._shared.prices import CachePrices, prices_of, reads_at_cache_points
from ._shared.schedule import CHARS_PER_TOKEN, Step, keeps_window, weighed
from ._telemetry.observe import served_model
from ._window import Window

CUT_KEY = 'pydantic_ai_append.cut'
"""The part metadata where `PrefixGuard` marks the carrier of a window's baseline that a compaction cut changes of."""

MOVED_KEY = 'pydantic_ai_append.moved'
"""The request metadata where `PrefixGuard` puts, on a request whose prefix a compaction moved, how many of the
consumed messages it sends unchanged and their bytes (`{'messages': ..., 'bytes': ...}`)."""


class Reopening(NamedTuple):
    """Why a request opens a new window, with what keeping it would have cost."""

    why: Literal['price', 'expired']
    """`'price'`: the window's changes cost more than writing the request again; `'expired'`: the cache is gone."""

    keeping: float | None
    """What the window's carried changes cost to read so far, with what keeping costs this request, in the prices'
    currency (`None` where none are known)."""

    opening: float | None
    """What writing the request again costs beyond reading it, in the same currency."""

    dropped: int
    """The tokens of the changes the window carried, and would deliver, which the new one drops (0 if unpriced)."""


@dataclass(frozen=True)
class PriceRule:
    """The `windows` policy that weighs a window's changes against writing the request again."""

    prices: CachePrices | None
    """The prices to weigh by; `None`: those of the model that served the last response."""

    def reopening(
        self,
        window: Window,
        messages: Sequence[ModelMessage],
        sizes: tuple[int, int],
        request_context: ModelRequestContext,
    ) -> Reopening | None:
        """Why the request (`request_context`, whose history is `messages`) opens a new window instead of keeping
        `window`, if it does. `sizes`: the characters of the changes it would deliver keeping it (their elements), and
        of the blocks' current values, which a new window states.
        """
        delivering, stating = sizes
        last = next((message for message in reversed(messages) if isinstance(message, ModelResponse)), None)
        if last is None or (len(window.found) == window.start and not delivering):
            return None  # nothing to read from, or no change to carry or to deliver
        prices = self.prices or prices_of(last)
        expired = _expired(last, messages, request_context, prices)
        if prices is None:
            return Reopening('expired', None, None, 0) if expired else None
        paid, carried, first = _paid(window, messages)
        step = Step(max(last.usage.input_tokens + last.usage.output_tokens - carried, 0), delivering // CHARS_PER_TOKEN)
        first = first or step.size
        if isinstance(moved := (messages[-1].metadata or {}).get(MOVED_KEY), dict):
            # The rest is written anyway: a new window costs its instructions and what the cache reads of history, and
            # keeping writes again the changes after the move.
            literal = request_context.model_request_parameters.instruction_parts or []
            held = stating + sum(len(part.content) for part in literal)
            if not reads_at_cache_points(last):
                unchanged = cast('dict[str, int]', moved)
                after = [part for at, _, part, _ in window.found[window.start :] if at >= unchanged['messages']]
                rewritten = sum(len(part.content) for part in after if part is not None) // CHARS_PER_TOKEN
                step = step._replace(rewritten=rewritten)
                held += unchanged['bytes']
            step = step._replace(held=held // CHARS_PER_TOKEN)
            first = step.opening
        keeping, opening = weighed(paid, step, carried, prices)
        baseline = window.found[window.start - 1][2]
        cut = baseline is not None and bool((baseline.metadata or {}).get(CUT_KEY))
        if expired or (step.size and not cut and not keeps_window(paid, step, carried, prices, first)):
            keeping, opening = keeping * prices.cache_read / 1e6, opening * prices.cache_read / 1e6
            return Reopening('expired' if expired else 'price', keeping, opening, carried + step.delivered)
        return None


def _expired(
    last: ModelResponse,
    messages: Sequence[ModelMessage],
    request_context: ModelRequestContext,
    prices: CachePrices | None,
) -> bool:
    """Whether the cache the request meets, that of the model that served `last` (if it can be told), has expired."""
    model = served_model(request_context.model, last)
    if model is None:
        return False
    retention = prices.retention if prices is not None else None
    retention = retention or model.resolve_cache_retention(request_context.model_settings)
    shortest = retention or model.profile.get('default_cache_retention')
    stamp = last.timestamp if last.timestamp.tzinfo else last.timestamp.replace(tzinfo=UTC)
    # A cache point in history can only lengthen the retention, and `prompt_cache_outlook` reads all of history for
    # them: it is asked only once the shortest retention has passed.
    if shortest is None or datetime.now(UTC) - stamp <= shortest:
        return False
    return prompt_cache_outlook(messages, profile=model.profile, retention=retention) == 'cold'


def _paid(window: Window, messages: Sequence[ModelMessage]) -> tuple[int, int, int]:
    """The tokens the window's requests read of its carried changes, those of the changes it carries (each response
    answered a request that read every change before it), and those of its first request (0 where no response says).
    """
    delivered: dict[int, int] = {}
    # After the window's baseline, history holds its changes alone (an empty carrier or a compaction would end it).
    for at, _, part, _ in window.found[window.start :]:
        delivered[at] = delivered.get(at, 0) + (len(part.content) if part is not None else 0) // CHARS_PER_TOKEN
    opened = window.found[window.start - 1][0]
    first = next((m.usage.input_tokens for m in messages[opened:] if isinstance(m, ModelResponse)), 0)
    paid = carried = pending = 0
    for at in range(min(delivered, default=len(messages)), len(messages)):
        if at in delivered:
            pending += delivered[at]
        elif isinstance(messages[at], ModelResponse):
            paid += carried
            carried += pending
            pending = 0
    return paid, carried + pending, first
