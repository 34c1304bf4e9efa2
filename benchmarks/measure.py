"""How the benchmark measures: CPU time, rounds in rotated order, paired ratios with their spread, and a hook timer.

A shared machine's load drifts by more than the differences measured, so the figures are built to cancel it:

- Every run is timed in process CPU time (`time.process_time`), which another process's load doesn't add to.
- Each round runs every variant once, in an order rotated by one each round (`rotated`), after a full garbage
  collection, so that neither a variant's place in the round nor the garbage of the run before it favours it.
- A ratio of two variants is taken per round, from runs seconds apart, and the figure is the median of those
  per-round ratios, with their 25th and 75th percentiles as the spread (`paired_ratios`, `Spread`).
- The plugin's own share is measured inside the run: `time_hooks` gives the capability a subclass whose hooks add
  their CPU time to a `HookTimer`, which the benchmark reads after the run. The time a wrapping hook spends inside
  its handler (the rest of the run) is not the hook's and is left out.
"""

from __future__ import annotations

import functools
import inspect
import statistics
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic_ai.capabilities import AbstractCapability

__all__ = (
    'HookTimer',
    'Spread',
    'hook_names',
    'least_squares_slope',
    'paired_ratios',
    'rotated',
    'time_hooks',
)

CapabilityT = TypeVar('CapabilityT', bound=AbstractCapability[Any])


@dataclass(frozen=True)
class Spread:
    """The median of some figures, with their 25th and 75th percentiles."""

    median: float
    p25: float
    p75: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The median and quartiles of `values` (one value is its own spread)."""
        if not values:
            raise ValueError('no values to take the spread of')
        if len(values) == 1:
            return cls(values[0], values[0], values[0])
        low, _, high = statistics.quantiles(values, n=4, method='inclusive')
        return cls(statistics.median(values), low, high)

    def scaled(self, factor: float) -> Spread:
        """The same spread with every figure multiplied by `factor`."""
        return Spread(self.median * factor, self.p25 * factor, self.p75 * factor)


def rotated(names: Sequence[str], round_index: int) -> list[str]:
    """The order in which round `round_index` runs `names`: rotated left by one more place each round."""
    if not names:
        return []
    shift = round_index % len(names)
    return [*names[shift:], *names[:shift]]


def paired_ratios(numerators: Sequence[float], denominators: Sequence[float]) -> list[float]:
    """The ratio of each round's numerator to the same round's denominator."""
    if len(numerators) != len(denominators):
        raise ValueError(f'{len(numerators)} numerators for {len(denominators)} denominators; pair them by round')
    return [numerator / denominator for numerator, denominator in zip(numerators, denominators, strict=True)]


def least_squares_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """The slope of the least-squares line through the points `(xs[i], ys[i])`."""
    if len(xs) != len(ys) or len(set(xs)) < 2:
        raise ValueError('a slope needs points at two or more distinct x values, one y for each x')
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread_x = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread_x


@dataclass
class HookTimer:
    """CPU seconds spent in a capability's hooks, in total and by hook, since the last `reset`.

    Nested sections count once (a hook that calls another timed hook), and `outside` leaves out a stretch of a
    section, such as a wrapping hook's handler.
    """

    clock: Callable[[], float] = time.process_time
    """The clock read at each boundary; process CPU time unless a test gives another."""

    seconds: float = 0.0
    """Seconds counted since the last `reset`."""

    by_hook: dict[str, float] = field(default_factory=dict[str, float])
    """The same seconds, by the outermost hook they were spent in."""

    _depth: int = 0
    _hook: str = ''
    _since: float = 0.0

    def reset(self) -> None:
        """Forget what was counted, before a run."""
        self.seconds = 0.0
        self.by_hook = {}

    def _start(self, hook: str) -> None:
        self._depth += 1
        if self._depth == 1:
            self._hook = hook
            self._since = self.clock()

    def _stop(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            spent = self.clock() - self._since
            self.seconds += spent
            self.by_hook[self._hook] = self.by_hook.get(self._hook, 0.0) + spent

    @contextmanager
    def section(self, hook: str) -> Generator[None, None, None]:
        """Count the time inside the `with` block as `hook`'s."""
        self._start(hook)
        try:
            yield
        finally:
            self._stop()

    @contextmanager
    def outside(self) -> Generator[None, None, None]:
        """Count none of the time inside the `with` block, even within a section."""
        depth, hook = self._depth, self._hook
        if depth:
            self._depth = 1
            self._stop()
        try:
            yield
        finally:
            if depth:
                self._start(hook)
                self._depth = depth


def hook_names(capability_type: type[AbstractCapability[Any]]) -> list[str]:
    """The hooks of `AbstractCapability` that `capability_type` implements itself: its public methods there."""
    names: list[str] = []
    for name, base in vars(AbstractCapability).items():
        if name.startswith('_') or not inspect.isfunction(base):
            continue
        if getattr(capability_type, name) is not base:
            names.append(name)
    return names


def _timed(name: str, method: Callable[..., Any], timer: HookTimer) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(method):
        raise TypeError(f'hook {name!r} is an async generator, which the hook timer cannot time')
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def timed_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            if 'handler' in kwargs:
                kwargs['handler'] = _untimed(kwargs['handler'], timer)
            with timer.section(name):
                return await method(self, *args, **kwargs)

        return timed_async

    @functools.wraps(method)
    def timed_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
        with timer.section(name):
            return method(self, *args, **kwargs)

    return timed_sync


def _untimed(handler: Callable[..., Any], timer: HookTimer) -> Callable[..., Any]:
    async def untimed(*args: Any, **kwargs: Any) -> Any:
        with timer.outside():
            return await handler(*args, **kwargs)

    return untimed


def time_hooks(capability: CapabilityT, timer: HookTimer) -> CapabilityT:
    """Make `capability` count the CPU time of its own hooks into `timer`.

    Its class is swapped for a subclass that overrides the same hooks, and only those (Pydantic AI looks at which
    hooks a class overrides to decide what to call), each timing the original. A copy made by `for_run` keeps the
    subclass and the timer.
    """
    base = type(capability)
    namespace: dict[str, Any] = {name: _timed(name, getattr(base, name), timer) for name in hook_names(base)}
    capability.__class__ = cast('type[CapabilityT]', type(f'Timed{base.__name__}', (base,), namespace))
    return capability
