"""Windows opened by price, against the schedule of windows hindsight would have chosen, on the wire scenario (20
turns) and the coding agent.

Per scenario and path: static instructions, append mode keeping every change (`append-keep`: windows never opened by
price), the hindsight-optimal schedule, this package (`append`, windows by price) and native append mode at its best, in input
dollars and the longest request's input tokens.

The optimum is computed on the `append-keep` run's requests (`_shared.schedule.optimal_opens`): each request's
reported input tokens less its carried change elements (their bytes, four a token) and the tokens of the changes it
delivered, priced by the path's model (`_shared.prices`). Its dollars are the keep run's, less what it saves on that
model; the same model prices the rule's own schedule (`online_opens`), beside what the `append` run paid, to show the
model holds. At more turns than were run, the series is extrapolated, and every figure is the model's: the last
`REPEATED` requests are repeated, each growing by what its counterpart grew; static is then the model's common cost
(what every schedule pays: each request reads the one before and writes what it adds), and native is not shown.
OpenAI's reads in 128-token steps are left out of the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pydantic_ai.messages import ModelResponse

from pydantic_ai_append._shared.prices import CachePrices, prices_of
from pydantic_ai_append._shared.schedule import CHARS_PER_TOKEN, Step, extra_cost, online_opens, optimal_opens

from .tables import Verdict, table
from .tokens import PROVIDERS, token_result
from .wire import PATHS, PathName, WireResult
from .wire_tables import grouped

__all__ = (
    'OPTIMUM_RATIO',
    'PathWindows',
    'WindowFigures',
    'budgeted_steps',
    'by_path',
    'compaction_steps',
    'extended',
    'figures',
    'steps_of',
    'windows_json',
    'windows_sections',
    'windows_verdicts',
)

OPTIMUM_RATIO = 1.02
"""Windows by price cost at most this multiple of the hindsight-optimal schedule's input dollars."""

LONGEST_RATIO = 1.05
"""Their longest request is at most this multiple of the optimal schedule's."""

REPEATED = 200
"""How many of the last requests run are repeated to extrapolate a conversation."""


def prices_for(path: PathName) -> CachePrices:
    """The cache prices of the path's model, as the package finds them for a response of it."""
    api, model = PATHS[path]
    prices = prices_of(ModelResponse(parts=[], model_name=model, provider_name=PROVIDERS[api]))
    assert prices is not None, f'genai-prices and the provider defaults price {model}'
    return prices


def steps_of(keep: WireResult) -> list[Step]:
    """Each request of a conversation that kept every change: its tokens without carried changes, and what it
    delivered.
    """
    steps: list[Step] = []
    before = 0
    for request, usage in zip(keep.requests, keep.usages, strict=True):
        steps.append(
            Step(
                usage.input_tokens - request.change_bytes // CHARS_PER_TOKEN,
                max(request.change_bytes - before, 0) // CHARS_PER_TOKEN,
            )
        )
        before = request.change_bytes
    return steps


def compaction_steps(keep: WireResult) -> list[Step]:
    """`steps_of` a conversation that kept every change through compactions, with what each compaction changes: where
    one moved the prefix, a new window writes only what the cache still held (that request's cached tokens as run),
    and keeping writes again the changes after the move (all of them where the provider reads at cache points); where
    one cut changes too, keeping carries at most what the run carried after it.

    The conversation's length is the run's: a schedule that carries fewer changes is not trimmed later, as a token
    budget would trim it.
    """
    steps = steps_of(keep)
    # Anthropic and Bedrock read the cache at their cache points: after a move, the tools and instructions alone.
    at_points = PATHS[keep.path][0] in ('anthropic', 'bedrock-converse')
    for at in range(1, len(steps)):
        request, usage = keep.requests[at], keep.usages[at]
        if request.moved_at and at not in keep.opened:
            cut = request.change_bytes < keep.requests[at - 1].change_bytes
            kept = request.change_bytes // CHARS_PER_TOKEN if cut else None
            rewritten = None if at_points else request.moved_change_bytes // CHARS_PER_TOKEN
            steps[at] = steps[at]._replace(held=usage.cache_read_tokens, kept=kept, rewritten=rewritten)
    return steps


def budgeted_steps(keep: WireResult) -> list[Step]:
    """Each request of a conversation that a compaction holds to a token budget, as the model prices its schedules: at
    its tokens as run, changes included, and carrying nothing.

    Under a budget, the changes a request carries don't make it larger: they take the place of older messages, and the
    next cut comes sooner. Every schedule's requests then cost alike but for its new windows, and the optimum keeps
    every change. (Run in the plugin, the schedule `compaction_steps` finds best on the benchmark's sliding window cost
    $4.06 against $3.63 keeping every change on `claude-opus-4-8`, at `6a837fd`.)
    """
    return [Step(usage.input_tokens, 0) for usage in keep.usages]


def extended(steps: Sequence[Step], count: int) -> list[Step]:
    """`steps` extrapolated to `count` requests: the last `REPEATED` repeated, each growing as its counterpart did."""
    grown = list(steps)
    start = max(len(steps) - REPEATED, 1)
    while len(grown) < count:
        at = start + (len(grown) - len(steps)) % (len(steps) - start)
        growth = steps[at].size - steps[at - 1].size
        grown.append(Step(grown[-1].size + growth, steps[at].delivered))
    return grown[:count]


@dataclass(frozen=True)
class WindowFigures:
    """One conversation's input dollars under each schedule of windows, and its longest request, by the model."""

    common: float
    """What every schedule pays: each request reads the one before and writes what it adds."""

    keep: float
    """Never opening a window by price."""

    optimum: float
    """The hindsight-optimal schedule."""

    rule: float
    """The price rule's schedule."""

    longest: dict[str, int]
    """The longest request's tokens, by schedule (`keep`, `optimum`, `rule`)."""

    windows: dict[str, int]
    """How many windows each schedule opens."""


def figures(steps: Sequence[Step], prices: CachePrices) -> WindowFigures:
    """Price each schedule of `steps` by the model."""
    per_token = prices.cache_read / 1e6
    common = 0.0
    for before, step in zip([Step(0, 0), *steps], steps, strict=False):
        common += prices.cache_read * before.size + prices.cache_write * max(step.size - before.size, 0)
    schedules = {'keep': [0], 'optimum': optimal_opens(steps, prices), 'rule': online_opens(steps, prices)}
    costs = {name: common / 1e6 + extra_cost(steps, opens, prices) * per_token for name, opens in schedules.items()}
    return WindowFigures(
        common / 1e6,
        costs['keep'],
        costs['optimum'],
        costs['rule'],
        {name: _longest(steps, opens) for name, opens in schedules.items()},
        {name: len(opens) for name, opens in schedules.items()},
    )


def _longest(steps: Sequence[Step], opens: Sequence[int]) -> int:
    """The most tokens a request of the schedule sends: its own, and every change its window delivered to it."""
    chosen = set(opens)
    longest = carried = 0.0
    for at, step in enumerate(steps):
        carried = 0.0 if at in chosen else step.left(carried) + step.delivered
        longest = max(longest, step.size + carried)
    return round(longest)


@dataclass(frozen=True)
class PathWindows:
    """One path's coding conversation as run, with the schedules the model prices on its `append-keep` run."""

    path: PathName
    scenario: str
    """The conversation run: `'the wire scenario'` (20 turns) or `'the coding agent'`."""

    runs: dict[str, WireResult]
    """The runs, by variant."""

    dollars: dict[str, float]
    """What each variant's run paid for its input."""

    models: dict[int, WindowFigures]
    """The model's figures on the `append-keep` run's requests, by turns: as run, and extrapolated."""

    turns: int
    """The turns run."""

    @property
    def model(self) -> WindowFigures:
        """The model's figures on the requests run."""
        return self.models[self.turns]

    def anchored(self, figure: float) -> float:
        """A schedule's dollars by the model, taken from the `append-keep` run's: what it saves on the model."""
        return self.dollars['append-keep'] - (self.model.keep - figure)

    def longest(self, variant: str) -> int:
        """The most input tokens a request of the variant's run sent."""
        return max(usage.input_tokens for usage in self.runs[variant].usages)


def by_path(
    results: Sequence[WireResult],
    turns: int,
    extrapolated: Sequence[int],
    scenario: str,
    stepped: Callable[[WireResult], list[Step]] = steps_of,
) -> list[PathWindows]:
    """Each path whose conversation ran with and without windows by price, priced once for every report; `stepped`
    reads the run keeping every change (`compaction_steps` where a compaction ran).
    """
    found: list[PathWindows] = []
    for path, variants in grouped(results).items():
        if 'append' not in variants or 'append-keep' not in variants:
            continue
        steps, prices = stepped(variants['append-keep']), prices_for(path)
        models = {turns: figures(steps, prices)} | {
            more: figures(extended(steps, len(steps) * more // turns), prices) for more in extrapolated
        }
        dollars = {variant: token_result(result).cost for variant, result in variants.items()}
        found.append(PathWindows(path, scenario, variants, dollars, models, turns))
    return found


def windows_sections(paths: Sequence[PathWindows]) -> list[str]:
    """Each scenario's input dollars and longest request under each schedule of windows, as run and extrapolated
    (none if it didn't run keeping every change).
    """
    scenarios = {found.scenario: [other for other in paths if other.scenario == found.scenario] for found in paths}
    return [section for group in scenarios.values() for section in _scenario_sections(group)]


def _scenario_sections(paths: Sequence[PathWindows]) -> list[str]:
    rows: list[list[str]] = []
    for found in paths:
        dollars = found.dollars
        natives = [dollars[name] for name in ('native', 'native-always') if name in dollars]
        optimum = found.anchored(found.model.optimum)
        rows.append(
            [
                found.path,
                f'${dollars["static"]:.4f}' if 'static' in dollars else '-',
                f'${dollars["append-keep"]:.4f} ({dollars["append-keep"] / optimum:.3f}x)',
                f'${optimum:.4f} ({found.model.windows["optimum"]})',
                f'${dollars["append"]:.4f} ({dollars["append"] / optimum:.3f}x)',
                f'${found.anchored(found.model.rule):.4f} ({found.model.windows["rule"]})',
                f'${min(natives):.4f}' if natives else '-',
                f'{found.longest("append-keep"):,} / {found.model.longest["optimum"]:,} / {found.longest("append"):,}',
            ]
        )
    turns = paths[0].turns
    sections = [
        f'Windows by price on {paths[0].scenario} over {turns} turns: input dollars of static instructions, of append '
        'mode keeping every change, of the hindsight-optimal schedule (the windows it opens), of windows by price '
        '(as run, and by the model: the windows it opens) and of native append mode at its best; the longest '
        "request's input tokens keeping every change, in the optimal schedule and by price (see `benchmarks/windows.py` "
        'for the model)\n\n'
        + table(
            ['path', 'static', 'keep', 'optimum', 'price', 'price (model)', 'native best', 'longest: keep/opt/price'],
            rows,
        )
    ]
    if len(paths[0].models) > 1:
        sections.append(_extrapolated_section(paths))
    return sections


def _extrapolated_section(paths: Sequence[PathWindows]) -> str:
    rows: list[list[str]] = []
    for found in paths:
        for more, model in found.models.items():
            if more == found.turns:
                continue
            rows.append(
                [
                    found.path,
                    str(more),
                    f'${model.common:.2f}',
                    f'${model.keep:.2f} ({model.keep / model.common:.3f}x)',
                    f'${model.optimum:.2f} ({model.optimum / model.common:.3f}x, {model.windows["optimum"]})',
                    f'${model.rule:.2f} ({model.rule / model.optimum:.3f}x the optimum, {model.windows["rule"]})',
                    f'{model.longest["keep"]:,} / {model.longest["optimum"]:,} / {model.longest["rule"]:,}',
                ]
            )
    return (
        f'The same, extrapolated from the {paths[0].turns}-turn run keeping every change, every figure by the model: '
        'static is the cost every schedule pays, against which keeping and the optimum are shown'
        '\n\n'
        + table(
            ['path', 'turns', 'static', 'keep', 'optimum (windows)', 'price (windows)', 'longest: keep/opt/price'], rows
        )
    )


def windows_verdicts(paths: Sequence[PathWindows]) -> list[Verdict]:
    """Windows by price against the optimum and against keeping every change, on each path."""
    found: list[Verdict] = []
    for path in paths:
        where = f'{path.path}, {path.scenario}, {path.turns} turns'
        price, keep, optimum = path.dollars['append'], path.dollars['append-keep'], path.anchored(path.model.optimum)
        found.append(
            Verdict(
                f'{where}: windows by price cost at most {OPTIMUM_RATIO:g}x the hindsight-optimal schedule',
                f'{price / optimum:.3f}x (${price:.4f} vs ${optimum:.4f})',
                price <= OPTIMUM_RATIO * optimum,
            )
        )
        found.append(
            Verdict(
                f'{where}: windows by price cost no more than keeping every change',
                f'${price:.4f} vs ${keep:.4f}',
                price <= keep,
            )
        )
        longest, best = path.longest('append'), path.model.longest['optimum']
        found.append(
            Verdict(
                f"{where}: the longest request by price at most {LONGEST_RATIO:g}x the optimal schedule's",
                f'{longest / best:.3f}x ({longest:,} vs {best:,} tokens)',
                longest <= LONGEST_RATIO * best,
            )
        )
    return found


def windows_json(paths: Sequence[PathWindows]) -> list[dict[str, object]]:
    """Each path's schedules of windows, as run and by the model, and extrapolated, as JSON-able data."""
    return [
        {
            'path': path.path,
            'scenario': path.scenario,
            'run_usd': {variant: round(cost, 6) for variant, cost in path.dollars.items()},
            'optimum_usd': round(path.anchored(path.model.optimum), 6),
            'longest_tokens': {variant: path.longest(variant) for variant in path.runs},
            'model': {
                str(length): {
                    'common_usd': round(model.common, 6),
                    'keep_usd': round(model.keep, 6),
                    'optimum_usd': round(model.optimum, 6),
                    'rule_usd': round(model.rule, 6),
                    'longest_tokens': model.longest,
                    'windows': model.windows,
                }
                for length, model in path.models.items()
            },
        }
        for path in paths
    ]
