"""Framework overhead: how long one `agent.run` takes with a history of N turns, per variant, in process.

Each policy's agent runs on the history of its own (`histories`), beside the baselines the plugin's cost is told
from (`baselines`): `floor`, `injected`, and `reader-loaded`, which runs the `Reader` on the append history loaded
afresh, its hooks timed like the plugin's. The timed runs reuse one history's objects, as one process running a
conversation does; `append-loaded` gets the history freshly loaded from JSON before each run (outside the clock), as
a server that stores history between requests does, and `static-loaded` does the same with the static history: what
a fresh load costs Pydantic AI itself.

Runs are timed in process CPU time, in rounds that run every variant once in rotated order (`measure`), and the
append variants' hooks are timed inside each run. `time_change_counts` times the hooks on histories of one length
whose blocks stop changing at different turns, so the cost of each past change can be told from the cost of the
history's length.
"""

from __future__ import annotations

import gc
import itertools
import statistics
import time
from dataclasses import dataclass, field, replace

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest

from .baselines import Floor, Injected, Reader, change_texts
from .histories import Profile, build_history, count_changes, fresh, function_model, stored_bytes
from .measure import HookTimer, Spread, least_squares_slope, paired_ratios, rotated, time_hooks
from .scenario import CLOCK_CHANGE_TURN, MEMORY_EDIT_EVERY, Policy, build_agent, prompt

__all__ = (
    'ChangeTiming',
    'Rounds',
    'Timing',
    'Variant',
    'changes_until',
    'run_rounds',
    'time_change_counts',
    'time_runs',
)


@dataclass(frozen=True)
class Variant:
    """One variant of a round: the agent, the history it runs on, and how."""

    agent: Agent[int, str]
    history: list[ModelMessage]
    deps: int
    """The turn the agent's blocks are computed at."""

    loaded: bool = False
    """Whether the history is freshly loaded from JSON before each run (outside the clock)."""

    hooks: HookTimer | None = None
    """The timer the agent's append-mode hooks count into, if they are timed."""


@dataclass
class Rounds:
    """What `run_rounds` measured: one figure per variant per round, in round order."""

    seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """The CPU seconds of each variant's runs."""

    hook_seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """For the variants whose hooks are timed, the CPU seconds of those hooks in each run."""

    by_hook: dict[str, list[dict[str, float]]] = field(default_factory=dict[str, list[dict[str, float]]])
    """The same hook seconds, by hook."""

    order: list[str] = field(default_factory=list[str])
    """The variants in the order they ran, every round's after the one before."""


_CALLS = itertools.count()
"""Numbers the calls of `run_rounds`, whose variants are conversations no earlier call served."""


async def run_rounds(variants: dict[str, Variant], repeats: int, prompt_turn: int) -> Rounds:
    """Run every variant once per round, `repeats` rounds, in rotated order with a collection before each run."""
    call = next(_CALLS)
    rounds = Rounds({name: [] for name in variants})
    for name, variant in variants.items():
        if variant.hooks is not None:
            rounds.hook_seconds[name], rounds.by_hook[name] = [], []
    for round_index in range(repeats):
        for name in rotated(list(variants), round_index):
            variant = variants[name]
            history = fresh(variant.history) if variant.loaded else variant.history
            gc.collect()
            if variant.hooks is not None:
                variant.hooks.reset()
            rounds.order.append(name)
            start = time.process_time()
            # Each variant of each call is a conversation of its own, as each would be in a server: the plugin keeps
            # what it folded per conversation, and a conversation it saw with other objects (another call's
            # history) is one it takes for loaded afresh from then on.
            await variant.agent.run(
                prompt(prompt_turn), deps=variant.deps, message_history=history, conversation_id=f'{name}#{call}'
            )
            rounds.seconds[name].append(time.process_time() - start)
            if variant.hooks is not None:
                rounds.hook_seconds[name].append(variant.hooks.seconds)
                rounds.by_hook[name].append(dict(variant.hooks.by_hook))
    return rounds


@dataclass
class Timing:
    """The timed runs of one history size on one model profile, one figure per variant per round."""

    profile: Profile
    turns: int
    seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """The CPU seconds of each variant's runs, in round order."""

    hook_seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """For `append`, `append-loaded` and `reader-loaded`: the CPU seconds spent in their hooks in each run."""

    history_bytes: dict[str, int] = field(default_factory=dict[str, int])
    """The serialized size of each policy's history."""

    by_hook: dict[str, list[dict[str, float]]] = field(default_factory=dict[str, list[dict[str, float]]])
    """The hook seconds of each run, by hook."""

    def hook_ms_by_hook(self, variant: str) -> dict[str, float]:
        """The median CPU time of each hook in one of `variant`'s runs, in milliseconds."""
        hooks = sorted({hook for run in self.by_hook[variant] for hook in run})
        return {hook: statistics.median(run.get(hook, 0.0) for run in self.by_hook[variant]) * 1000 for hook in hooks}

    def median_ms(self, variant: str) -> float:
        """The median CPU time of `variant`'s runs, in milliseconds."""
        return statistics.median(self.seconds[variant]) * 1000

    def ratio(self, variant: str, to: str = 'static') -> Spread:
        """The per-round ratio of `variant`'s run to `to`'s."""
        return Spread.of(paired_ratios(self.seconds[variant], self.seconds[to]))

    def hook_share(self, variant: str) -> Spread:
        """Per round, the plugin's hooks in `variant`'s run as a share of the static variant's run."""
        return Spread.of(paired_ratios(self.hook_seconds[variant], self.seconds['static']))

    def hook_ms(self, variant: str) -> float:
        """The median CPU time of the plugin's hooks in one of `variant`'s runs, in milliseconds."""
        return statistics.median(self.hook_seconds[variant]) * 1000

    def loaded_excess(self) -> Spread:
        """Per round, what a fresh load adds to append mode over what it adds to static instructions.

        That is `(append-loaded / append) / (static-loaded / static)`: 1.0 when loading history costs append mode
        no more, relatively, than Pydantic AI's own cost of loading the static history.
        """
        append = paired_ratios(self.seconds['append-loaded'], self.seconds['append'])
        static = paired_ratios(self.seconds['static-loaded'], self.seconds['static'])
        return Spread.of(paired_ratios(append, static))


async def time_runs(profile: Profile, turns: int, histories: dict[Policy, list[ModelMessage]], repeats: int) -> Timing:
    """Time one `agent.run` per variant on the given histories, `repeats` rounds, variants rotated per round."""
    model = function_model(profile)
    hooks = HookTimer()
    variants: dict[str, Variant] = {
        policy: Variant(
            build_agent(policy, model, hooks), history, turns + 1, hooks=hooks if policy == 'append' else None
        )
        for policy, history in histories.items()
    }
    if 'static' in histories:
        variants['static-loaded'] = replace(variants['static'], loaded=True)
    if 'append' in histories:
        append_history = histories['append']
        first = append_history[0]
        assert isinstance(first, ModelRequest)
        floor = Agent(model, deps_type=int, instructions=first.instructions, capabilities=[Floor()])
        variants['floor'] = Variant(floor, append_history, turns + 1)
        reader_hooks = HookTimer()
        reader = Agent(
            model, deps_type=int, instructions=first.instructions, capabilities=[time_hooks(Reader(), reader_hooks)]
        )
        variants['reader-loaded'] = Variant(reader, append_history, turns + 1, loaded=True, hooks=reader_hooks)
        if 'static' in histories:
            # The static history has the same requests at the same indexes, without records.
            injected = Agent(
                model,
                deps_type=int,
                instructions=first.instructions,
                capabilities=[Injected(change_texts(append_history))],
            )
            variants['injected'] = Variant(injected, histories['static'], turns + 1)
        variants['append-loaded'] = replace(variants['append'], loaded=True)
    rounds = await run_rounds(variants, repeats, turns + 1)
    sizes = {policy: stored_bytes(history) for policy, history in histories.items() if policy in ('static', 'append')}
    return Timing(profile, turns, rounds.seconds, rounds.hook_seconds, sizes, rounds.by_hook)


CHANGE_SHARES = (0.0, 0.5, 1.0)
"""How far into the history its blocks keep changing, in the histories of `time_change_counts`."""


@dataclass
class ChangeTiming:
    """Append mode's hooks on histories of one length with different numbers of changes, on one model profile."""

    profile: Profile
    turns: int
    changes: dict[str, int] = field(default_factory=dict[str, int])
    """For each variant (`append` or `append-loaded`, at one number of changes), the changes its history holds."""

    seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """The CPU seconds of each variant's runs, in round order."""

    hook_seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """The CPU seconds of the hooks in each of those runs."""

    def slope(self, kind: str) -> Spread:
        """Per round, the hooks' CPU time per 1,000 changes, as a share of the run with the most changes.

        Each round's slope is the least-squares line through that round's hook times of `kind` (`append` or
        `append-loaded`) against the number of changes in the history, so a round compares runs seconds apart.
        """
        names = [name for name in self.changes if name.split('@')[0] == kind]
        most = max(names, key=self.changes.__getitem__)
        xs = [float(self.changes[name]) for name in names]
        rounds = len(self.seconds[most])
        slopes = [
            least_squares_slope(xs, [self.hook_seconds[name][index] for name in names])
            * 1000
            / self.seconds[most][index]
            for index in range(rounds)
        ]
        return Spread.of(slopes)


def changes_until(turns: int, share: float) -> int:
    """The turn until which the blocks change, about `share` of `turns` in (at most `turns`).

    It is a multiple of 4 turns before `turns`, so the request after it changes the same blocks as the request
    after `turns` does (memory changes every 4th turn), and it is past the clock's one change.
    """
    wanted = max(CLOCK_CHANGE_TURN, round(share * turns))
    return turns - MEMORY_EDIT_EVERY * max(0, (turns - wanted) // MEMORY_EDIT_EVERY)


async def time_change_counts(profile: Profile, turns: int, repeats: int) -> ChangeTiming:
    """Time append mode's hooks on histories of `turns` turns whose blocks stop changing at different turns.

    Every history has as many messages; only the number of change records in it differs, and each timed request
    records and delivers the same new changes, so the hook time's slope against the number of changes is the
    per-request cost of each past change already delivered.
    """
    model = function_model(profile)
    hooks = HookTimer()
    agent = build_agent('append', model, hooks)
    variants: dict[str, Variant] = {}
    counts: dict[str, int] = {}
    for share in CHANGE_SHARES:
        last = changes_until(turns, share)
        history = await build_history('append', turns, changes_until=last)
        changes = count_changes(history)
        for kind, runner, loaded in (
            ('append', agent, False),
            ('append-loaded', agent, True),
        ):
            name = f'{kind}@{changes}'
            variants[name] = Variant(runner, history, last + 1, loaded=loaded, hooks=hooks)
            counts[name] = changes
    rounds = await run_rounds(variants, repeats, turns + 1)
    return ChangeTiming(profile, turns, counts, rounds.seconds, rounds.hook_seconds)
