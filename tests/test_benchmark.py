"""The benchmark runs at its smallest size, so it can't rot, and its shortcuts give what the agent gives.

Timings are printed by the benchmark and never asserted here; what is asserted is what can't vary: the wire
figures of append mode, the shape of the report, that a history built without running the agent equals one built
by running it, and the measurement machinery on synthetic figures and a hand-moved clock (ratios paired by round,
rotation, the hook timer leaving out the time a wrapping hook's handler takes, the change slope, the verdicts).
"""

from __future__ import annotations

import gc
import json
import statistics
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic_ai import Agent, AgentRunResult, RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, WrapRunHandler
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from benchmarks.__main__ import main
from benchmarks.histories import build_history, count_changes, function_model, real_history
from benchmarks.huge import HugeResult, block_value, run_huge
from benchmarks.measure import HookTimer, Spread, hook_names, least_squares_slope, paired_ratios, rotated, time_hooks
from benchmarks.overhead import ChangeTiming, Timing, Variant, changes_until, run_rounds
from benchmarks.report import Results, verdicts
from benchmarks.scenario import Policy, build_agent, memory, native_available, prompt, state
from benchmarks.servers import INSTRUMENTED, ManyConversations, tool_model, with_tool_calls
from benchmarks.windows import budgeted_steps, compaction_steps, extended, figures
from benchmarks.wire import RequestBytes, WireResult, run_conversation
from pydantic_ai_append import AppendInstructions, CachePrices
from pydantic_ai_append._shared.schedule import Step

pytestmark = pytest.mark.anyio

PATH_NAMES = ('openai-chat', 'openai-responses', 'anthropic-inline', 'anthropic-wrapped', 'gemini', 'bedrock-claude')
"""Every provider path the wire scenario and the coding agent run on, in the order they run."""


def parts_of(history: list[ModelMessage]) -> list[tuple[str, object, list[tuple[str, object, object]]]]:
    """What the plugin and Pydantic AI read back from a history: each part's kind, text and metadata."""
    return [
        (
            type(message).__name__,
            getattr(message, 'instructions', None),
            [
                (type(part).__name__, getattr(part, 'content', None), getattr(part, 'metadata', None))
                for part in message.parts
            ],
        )
        for message in history
    ]


@pytest.mark.parametrize('policy', ['static', 'rewrite', 'append'])
async def test_built_history_equals_real_runs(policy: Policy):
    real = await real_history(policy, 12)
    built = await build_history(policy, 12)
    assert parts_of(built) == parts_of(real)
    assert len(real) == 24


def tool_parts_of(history: list[ModelMessage]) -> list[list[tuple[object, object]]]:
    """The tool each part calls or returns from, with its arguments, message by message."""
    return [
        [(getattr(part, 'tool_name', None), getattr(part, 'args', None)) for part in message.parts]
        for message in history
    ]


@pytest.mark.parametrize('policy', ['static', 'append'])
async def test_tool_loop_history_equals_real_runs(policy: Policy):
    agent = build_agent(policy, tool_model('wrapped'))
    real: list[ModelMessage] = []
    for turn in range(1, 13):
        real = (await agent.run(prompt(turn), deps=turn, message_history=real)).all_messages()
    built = with_tool_calls(await build_history(policy, 12))
    assert parts_of(built) == parts_of(real)
    assert tool_parts_of(built) == tool_parts_of(real)
    assert len(real) == 48 and sum(isinstance(message, ModelRequest) for message in real) == 24


def test_scenario_blocks_change_as_described():
    assert [state(turn) == state(turn - 1) for turn in range(2, 6)] == [False] * 4
    assert [memory(turn) == memory(turn - 1) for turn in range(2, 9)] == [True, True, False, True, True, True, False]
    assert 14_000 < len(memory(1).encode()) < 16_000


@pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
def test_smoke_run_writes_tables_json_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    # Before each timed run the benchmark collects garbage, so that no run pays for another's; in a test process that
    # is a full collection of a large heap (about 0.2 s, well over a hundred times at this size). Timings aren't
    # asserted here.
    monkeypatch.setattr(gc, 'collect', lambda generation=2: 0)
    json_path, plot_path = tmp_path / 'out.json', tmp_path / 'plot.svg'
    assert main(['--size', 'smoke', '--json', str(json_path), '--plot', str(plot_path)]) == 0

    printed = capsys.readouterr().out
    assert 'Targets' in printed and 'Wire bytes over 4 turns' in printed
    report = cast('dict[str, Any]', json.loads(json_path.read_text()))
    policies = ['static', 'rewrite', 'append', *(['native', 'native-always'] if native_available() else [])]
    wire = cast('list[dict[str, Any]]', report['wire'])
    assert [(row['path'], row['policy']) for row in wire] == [
        (path, policy) for path in PATH_NAMES for policy in [*policies, 'append-keep']
    ]
    # Gemini and Claude on Bedrock take no inline system messages.
    assert {row['path']: row['delivery'] for row in wire if row['path'] in ('gemini', 'bedrock-claude')} == {
        'gemini': 'wrapped',
        'bedrock-claude': 'wrapped',
    }
    appended = [row for row in wire if row['policy'] == 'append']
    assert {row['path']: (row['min_reuse_percent'], row['prefix_moves']) for row in appended} == {
        row['path']: (100.0, []) for row in appended
    }
    assert all(row['change_bytes_unique'] > 0 and row['largest_diff_bytes']['memory'] < 800 for row in appended)
    rewritten = [row for row in wire if row['policy'] == 'rewrite']
    assert all(row['prefix_moves'] and row['uncached_bytes'] > 2 * appended[0]['uncached_bytes'] for row in rewritten)
    # With the recommended settings every path caches; rewrite mode moves its prefix and pays for it.
    assert all(row['cache_read_tokens'] > 0 and row['over_limit'] <= 1.05 for row in appended)
    assert all(row['over_limit'] > 2 for row in rewritten)
    assert 'Input tokens and dollars over the same 4 turns' in printed
    # The coding agent's conversation, on every path and variant, and keeping every change: append mode keeps its
    # prefix there too, but where it opens a window.
    coding = cast('list[dict[str, Any]]', report['coding'])
    assert [(row['path'], row['policy']) for row in coding] == [
        (path, policy) for path in PATH_NAMES for policy in [*policies, 'append-keep']
    ]
    assert all(
        row['min_reuse_percent'] == 100.0 and not row['prefix_moves'] for row in coding if row['policy'] == 'append'
    )
    assert all(row['over_step_limit'] <= row['over_limit'] for row in coding)
    # Each path's schedules of windows: as run, the optimum on the model, and for the coding agent extrapolated to 6
    # turns.
    windows = cast('list[dict[str, Any]]', report['windows'])
    assert [(row['scenario'], row['path'], sorted(row['model'])) for row in windows] == [
        *(('the wire scenario', path, ['4']) for path in PATH_NAMES),
        *(('the coding agent', path, ['3', '6']) for path in PATH_NAMES),
    ]
    assert all(
        row['model'][turns]['optimum_usd'] <= min(row['model'][turns]['keep_usd'], row['model'][turns]['rule_usd'])
        for row in windows
        for turns in row['model']
    )
    assert 'Windows by price on the wire scenario over 4 turns' in printed
    assert 'Windows by price on the coding agent over 3 turns' in printed
    # No breakpoint, no cache on Anthropic; the automatic one at the tail reaches the limit in append mode.
    costs = {(row['path'], row['variant'], row['setting']): row for row in report['breakpoints']}
    for path in ('anthropic-inline', 'anthropic-wrapped'):
        assert costs[path, 'append', 'none']['cache_read_tokens'] == 0
        tail = costs[path, 'append', 'tail']
        assert tail['input_cost_usd'] == pytest.approx(tail['limit_usd'])
    assert {(row['profile'], row['turns']) for row in report['overhead']} == {
        (profile, turns) for profile in ('inline', 'wrapped') for turns in (2, 5)
    }
    assert {(row['profile'], row['turns']) for row in report['changes']} == {('inline', 40), ('wrapped', 40)}
    # Three numbers of changes, each run by the plugin, on history kept in process and loaded from JSON.
    assert all(len(row['changes']) == 6 for row in report['changes'])
    assert all(set(row['slope_per_1000_changes']) == {'append', 'append-loaded'} for row in report['changes'])
    assert all(set(row['hook_share']) == {'append', 'append-loaded', 'reader-loaded'} for row in report['overhead'])
    assert [(row['profile'], len(row['hook_seconds'])) for row in report['huge']] == [('inline', 3), ('wrapped', 3)]
    targets = {row['target']: (row['verdict'], row['spread']) for row in report['targets']}
    assert targets['verify a 1 MB prefix in under 1 ms'][0] in ('PASS', 'MISS')
    share = targets[
        "inline model, 5 turns: the plugin's hooks on a conversation served before at most 1.5% of the static run"
    ]
    assert share[0] in ('PASS', 'MISS') and share[1].endswith('%') and '-' in share[1]
    assert 'spread (p25-p75)' in printed and "The plugin's share, per round" in printed
    assert 'Many conversations served in turn by one agent' in printed and 'Instrumented runs: a tool loop' in printed
    many = cast('list[dict[str, Any]]', report['many_conversations'])
    assert [(row['profile'], row['conversations'], row['turns'], row['requests_per_round']) for row in many] == [
        ('inline', 3, 5, 3),
        ('wrapped', 3, 5, 3),
    ]
    # Two rounds of three requests to the many conversations and one to the one, and each conversation's first two.
    assert all(
        [len(requests) for requests in row['hooks_ms']['many-conversations']] == [3, 3]
        and len(row['hooks_ms']['append-loaded']) == 2
        and len(row['first_request_hooks_ms']) == len(row['second_request_hooks_ms']) == 3
        and set(row['hook_ratio']) == {'median', 'p25', 'p75'}
        for row in many
    )
    served = targets[
        "inline model, 3 conversations of 5 turns served in turn: the plugin's hooks per request at most 1.5x one "
        "conversation's on loaded history"
    ]
    assert served[0] in ('PASS', 'MISS') and served[1].endswith('x') and '-' in served[1]
    instrumented = cast('list[dict[str, Any]]', report['instrumented'])
    assert [(row['profile'], row['turns']) for row in instrumented] == [('inline', 5), ('wrapped', 5)]
    assert all(
        list(row['median_ms']) == ['static', 'static-instrumented', 'append', 'append-instrumented']
        and set(row['hook_share_of_run']) == {'append', 'append-instrumented'}
        and 'append-instrumented / static-instrumented' in row['ratio']
        for row in instrumented
    )
    assert set(INSTRUMENTED) == set(instrumented[0]['median_ms'])
    # The checker's commands, each run twice in a process of its own (their CPU seconds are printed, not asserted).
    startup = cast('list[dict[str, Any]]', report['startup'])
    assert [(row['command'], len(row['cpu_seconds'])) for row in startup] == [
        ('check --help', 2),
        ('check one small cassette', 2),
    ]
    # The record store's variants, two rounds each on a history of 5 turns, whose entry holds its records.
    stores = cast('list[dict[str, Any]]', report['stores'])
    assert [(row['turns'], {k: len(v) for k, v in row['cpu_seconds'].items()}) for row in stores] == [
        (5, {'kept': 2, 'lost': 2, 'memory': 2, 'sqlite': 2})
    ]
    assert stores[0]['entry_bytes'] > 0
    # Where windows open by price, the entry holds the open window's records, at most every record of the conversation.
    assert 0 < stores[0]['priced']['entry_bytes'] <= stores[0]['priced']['every_record_bytes']
    assert 'The record store behind a UI adapter' in printed
    svg = plot_path.read_text()
    # The background, two legend swatches, then a reused and an uncached bar per request (5) per policy.
    assert svg.startswith('<svg') and svg.count('<rect') == 3 + 2 * 5 * len(policies)


# --- The measurement machinery, on synthetic figures and stub hooks: these can fail, unlike the timings themselves.


def test_spread_is_the_median_and_quartiles():
    assert Spread.of([5.0, 1.0, 3.0, 2.0, 4.0]) == Spread(3.0, 2.0, 4.0)
    assert Spread.of([7.0]) == Spread(7.0, 7.0, 7.0)
    with pytest.raises(ValueError, match='no values'):
        Spread.of([])


def test_ratios_are_paired_by_round_not_taken_of_medians():
    # Round 2 ran on a slow machine: both variants took 10x longer. Paired, the ratio is 2 in every round; the ratio
    # of the medians is not.
    append, static = [2.0, 20.0, 2.2], [1.0, 10.0, 1.1]
    assert paired_ratios(append, static) == [2.0, 2.0, 2.0]
    assert statistics.median(append) / statistics.median(static) == pytest.approx(2.0)
    skewed_append, skewed_static = [2.0, 20.0, 4.0], [1.0, 10.0, 20.0]
    assert Spread.of(paired_ratios(skewed_append, skewed_static)).median == 2.0
    assert statistics.median(skewed_append) / statistics.median(skewed_static) == pytest.approx(0.4)
    with pytest.raises(ValueError, match='pair them by round'):
        paired_ratios([1.0], [1.0, 2.0])


def test_rotation_puts_every_variant_at_every_place():
    names = ['a', 'b', 'c']
    orders = [rotated(names, index) for index in range(4)]
    assert orders == [['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['a', 'b', 'c']]
    assert rotated([], 3) == []


def test_least_squares_slope():
    assert least_squares_slope([0.0, 10.0, 20.0], [1.0, 3.0, 5.0]) == pytest.approx(0.2)
    assert least_squares_slope([0.0, 1.0, 2.0], [0.0, 1.0, 0.0]) == pytest.approx(0.0)
    with pytest.raises(ValueError, match='two or more distinct'):
        least_squares_slope([1.0, 1.0], [0.0, 1.0])


class FakeClock:
    """A clock the test moves by hand, so the hook timer's sums are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Burner(AbstractCapability[Any]):
    """Hooks that spend known time before, inside and after the rest of the run."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    async def wrap_run(self, ctx: RunContext[Any], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        self.clock.now += 1
        result = await handler()
        self.clock.now += 2
        return result

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        self.clock.now += 10
        return request_context

    def get_ordering(self) -> CapabilityOrdering | None:
        return self.nested()

    def nested(self) -> CapabilityOrdering | None:
        return None


async def test_hook_timer_counts_only_the_hooks_own_time():
    clock = FakeClock()
    timer = HookTimer(clock=clock)

    def slow_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        clock.now += 1000  # inside `wrap_run`'s handler: the model's time, not the hook's
        return ModelResponse(parts=[TextPart('done')])

    capability = time_hooks(Burner(clock), timer)
    assert type(capability).__name__ == 'TimedBurner' and isinstance(capability, Burner)
    agent = Agent(FunctionModel(slow_model), capabilities=[capability])
    timer.reset()
    await agent.run('hi')
    assert clock.now > 1000
    assert timer.seconds == 13
    assert timer.by_hook == {'wrap_run': 3, 'before_model_request': 10}


def test_hook_timer_counts_nested_sections_once_and_leaves_out_handlers():
    clock = FakeClock()
    timer = HookTimer(clock=clock)
    with timer.section('outer'):
        clock.now += 1
        with timer.section('inner'):
            clock.now += 2
            with timer.outside():
                clock.now += 100
            clock.now += 4
    with timer.outside():
        clock.now += 100
    assert (timer.seconds, timer.by_hook) == (7, {'outer': 7})
    timer.reset()
    assert (timer.seconds, timer.by_hook) == (0, {})


def test_timed_capability_overrides_the_same_hooks():
    # Pydantic AI looks at which hooks a class overrides; the timed subclass must override the same ones, and time all
    # of them (a hook added to `AppendInstructions` later is timed too).
    assert hook_names(Burner) == ['get_ordering', 'wrap_run', 'before_model_request']
    capability = time_hooks(AppendInstructions[int](id='timed'), HookTimer())
    assert hook_names(type(capability)) == hook_names(AppendInstructions)
    assert {'before_model_request', 'wrap_run'} <= set(hook_names(AppendInstructions))
    assert all(name in vars(type(capability)) for name in hook_names(AppendInstructions))


def test_hook_timer_refuses_an_async_generator_hook():
    class Streaming(AbstractCapability[Any]):
        # An async generator, as event stream wrappers are written; the hook's declared type is a coroutine's.
        async def wrap_run_event_stream(  # pyright: ignore[reportIncompatibleMethodOverride]
            self, ctx: RunContext[Any], *, stream: AsyncIterable[Any]
        ) -> AsyncIterator[Any]:  # pragma: no cover
            async for event in stream:
                yield event

    with pytest.raises(TypeError, match='async generator'):
        time_hooks(Streaming(), HookTimer())


async def test_append_hooks_take_part_of_a_real_run():
    hooks = HookTimer()
    history = await build_history('append', 30)
    rounds = await run_rounds(
        {
            'append': Variant(build_agent('append', function_model('inline'), hooks), history, 31, hooks=hooks),
            'loaded': Variant(build_agent('append', function_model('inline'), hooks), history, 31, True, hooks),
            'static': Variant(build_agent('static', function_model('inline')), history, 31),
        },
        repeats=3,
        prompt_turn=31,
    )
    assert rounds.order == ['append', 'loaded', 'static', 'loaded', 'static', 'append', 'static', 'append', 'loaded']
    assert {name: len(runs) for name, runs in rounds.seconds.items()} == {'append': 3, 'loaded': 3, 'static': 3}
    assert set(rounds.hook_seconds) == {'append', 'loaded'}
    for name in ('append', 'loaded'):
        assert all(0 < hook < run for hook, run in zip(rounds.hook_seconds[name], rounds.seconds[name], strict=True))
        assert {'before_model_request', 'wrap_run'} <= set(rounds.by_hook[name][0])


def test_timing_figures_from_synthetic_rounds():
    timing = Timing(
        'inline',
        100,
        seconds={
            'static': [1.0, 10.0, 1.0],
            'static-loaded': [1.2, 12.0, 1.2],
            'append': [2.0, 20.0, 2.0],
            'append-loaded': [3.0, 30.0, 2.4],
            'floor': [1.0, 10.0, 2.0],
        },
        hook_seconds={'append': [0.1, 1.0, 0.04], 'append-loaded': [0.3, 3.0, 0.6]},
        history_bytes={'static': 100, 'append': 120},
    )
    assert timing.ratio('append') == Spread(2.0, 2.0, 2.0)
    assert timing.ratio('append', to='floor') == Spread(2.0, 1.5, 2.0)
    # The hooks' share is of the static variant's run in the same round.
    share = timing.hook_share('append')
    assert (share.median, share.p25, share.p75) == pytest.approx((0.1, 0.07, 0.1))
    assert timing.loaded_excess().median == pytest.approx(1.5 / 1.2)
    native = Timing('inline', 100, seconds={'append': [1.0, 2.0, 3.0], 'native': [2.0, 2.0, 2.0]})
    results = Results(0, [], [timing, native], [], {}, target_turns=(100,))
    assert {verdict.target: verdict.label for verdict in verdicts(results)} == {
        "inline model, 100 turns: the plugin's hooks on a conversation served before at most 1.5% of the static run": (
            'MISS'
        ),
        "inline model, 100 turns: the plugin's hooks on history loaded from JSON at most 3.0% of the static run": 'MISS',
        'inline model, 100 turns: append at most 0.6x native': 'MISS',
        '100 turns: append-mode history at most 1.10x the static history': 'MISS',
    }
    assert main_exit_code(results) == 1


def main_exit_code(results: Results) -> int:
    """What `--check` returns for `results`."""
    return 1 if any(verdict.met is False for verdict in verdicts(results)) else 0


def test_change_slope_from_synthetic_rounds():
    # Hook time 1 ms plus 0.02 ms per change; the run with the most changes takes 100 ms in both rounds.
    changes = {'append@0': 0, 'append@500': 500, 'append@1000': 1000}
    hooks = {name: [0.001 + 0.00002 * count] * 2 for name, count in changes.items()}
    timing = ChangeTiming('inline', 1000, changes, {name: [0.1, 0.1] for name in changes}, hooks)
    assert timing.slope('append').median == pytest.approx(0.2)  # 20 ms per 1,000 changes, of a 100 ms run
    flat = ChangeTiming('inline', 1000, changes, timing.seconds, {name: [0.001, 0.001] for name in changes})
    assert flat.slope('append') == Spread(0.0, 0.0, 0.0)
    labels = [v.label for v in verdicts(Results(0, [], [], [], {}, changes=[timing, flat]))]
    assert labels == ['MISS', 'PASS']


async def test_histories_with_fewer_changes_have_as_many_messages():
    assert [changes_until(1000, share) for share in (0.0, 0.5, 1.0)] == [12, 500, 1000]
    assert all(changes_until(1000, share) % 4 == 1000 % 4 for share in (0.1, 0.3, 0.77))
    assert changes_until(8, 0.0) == 8
    full = await build_history('append', 40)
    fewer = await build_history('append', 40, changes_until=12)
    assert len(full) == len(fewer) == 80
    assert count_changes(fewer) < count_changes(full)
    real = await real_history('append', 12)
    assert parts_of(fewer[:24]) == parts_of(real)
    assert all(len(message.parts) == 1 for message in fewer[24:])


def test_huge_block_edits_one_line_per_turn():
    first, second, third = (block_value(50_000, turn).splitlines() for turn in (1, 2, 3))
    assert len(first) == len(second) == len(third)
    assert sum(a != b for a, b in zip(first, second, strict=True)) == 1
    assert sum(a != b for a, b in zip(second, third, strict=True)) == 1
    assert 45_000 < len(block_value(50_000, 1)) <= 50_000
    # Most lines repeat, as in a large file: the case that makes a line diff slow.
    assert len(set(first)) < len(first) / 3


async def test_huge_block_growth_is_measured_beyond_static():
    result = await run_huge('inline', 20_000, 2)
    assert len(result.hook_seconds) == len(result.run_seconds) == 3
    assert all(0 < hook < run for hook, run in zip(result.hook_seconds, result.run_seconds, strict=True))
    assert len(result.edit_hook_seconds) == 2
    # Each turn stores the instructions again, in both policies; only the records differ.
    assert result.static_bytes[1] - result.static_bytes[0] > result.block_bytes
    assert result.extra_growth == (result.append_bytes[2] - result.append_bytes[0]) - (
        result.static_bytes[2] - result.static_bytes[0]
    )
    huge = HugeResult('inline', 1000, [0.1, 0.2, 0.6], [1.0, 1.0, 1.0], [10, 20, 30], [10, 15, 20])
    assert [v.label for v in verdicts(Results(0, [], [], [], {}, huge=[huge]))] == ['MISS', 'PASS']


def test_many_conversations_figures_from_synthetic_rounds():
    # Round 2 ran on a slow machine; paired by round, the hooks on the many conversations take 1.2x, 1.2x and 3x.
    many = ManyConversations(
        'inline',
        300,
        100,
        first_hook_seconds=[0.01, 0.02, 0.03],
        second_hook_seconds=[0.004, 0.005, 0.006],
        hook_seconds=[[0.002, 0.004], [0.03, 0.03], [0.006, 0.006]],
        seconds=[[0.1, 0.1], [1.0, 1.0], [0.1, 0.1]],
        one_hook_seconds=[0.0025, 0.025, 0.002],
        one_seconds=[0.1, 1.0, 0.1],
    )
    assert many.per_request() == pytest.approx([0.003, 0.03, 0.006])
    ratio = many.hook_ratio()
    assert (ratio.median, ratio.p25, ratio.p75) == pytest.approx((1.2, 1.2, 2.1))
    assert many.hook_ms() == pytest.approx(
        {'many-conversations': 6.0, 'append-loaded': 2.5, 'first request': 20.0, 'second request': 5.0}
    )
    assert many.run_ms() == pytest.approx({'many-conversations': 100.0, 'append-loaded': 100.0})
    met = replace(many, one_hook_seconds=[0.003, 0.03, 0.006])
    assert [v.label for v in verdicts(Results(0, [], [], [], {}, many=[many, met]))] == ['PASS', 'PASS']
    missed = replace(many, one_hook_seconds=[0.001, 0.01, 0.002])
    assert [(v.label, v.measured) for v in verdicts(Results(0, [], [], [], {}, many=[missed]))] == [
        ('MISS', '3.000x (6.00 vs 2.00 ms)')
    ]


async def test_each_call_of_run_rounds_serves_conversations_of_its_own():
    # The plugin keeps what it folded per conversation: a variant of a later call, on another history, must not be
    # the conversation an earlier call served, or the plugin takes its history for one loaded afresh.
    seen: list[str | None] = []

    class Recorder(AbstractCapability[Any]):
        async def before_model_request(
            self, ctx: RunContext[Any], request_context: ModelRequestContext
        ) -> ModelRequestContext:
            seen.append(ctx.conversation_id)
            return request_context

    agent = Agent(function_model('inline'), deps_type=int, capabilities=[Recorder()])
    for turns in (2, 3):
        await run_rounds({'static': Variant(agent, await build_history('static', turns), turns + 1)}, 2, turns + 1)
    assert len(seen) == 4 and seen[0] == seen[1] != seen[2] == seen[3]


@pytest.mark.block_network
def test_only_runs_the_parts_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gc, 'collect', lambda generation=2: 0)
    json_path = tmp_path / 'out.json'
    assert main(['--size', 'smoke', '--only', 'many', '--json', str(json_path)]) == 0
    report = cast('dict[str, Any]', json.loads(json_path.read_text()))
    assert {name for name, rows in report.items() if isinstance(rows, list) and rows} == {
        'many_conversations',
        'targets',
    }
    assert 'Wire bytes' not in capsys.readouterr().out
    for argv in (['--only', 'many,everything'], ['--only', 'many', '--plot', str(tmp_path / 'plot.svg')]):
        with pytest.raises(SystemExit):
            main(['--size', 'smoke', *argv])
    assert 'unknown parts' in capsys.readouterr().err


@pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
def test_paths_runs_the_conversations_on_the_paths_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    json_path = tmp_path / 'out.json'
    assert (
        main(['--size', 'smoke', '--only', 'wire', '--paths', 'gemini,bedrock-claude', '--json', str(json_path)]) == 0
    )
    report = cast('dict[str, Any]', json.loads(json_path.read_text()))
    assert sorted({row['path'] for row in report['wire']}) == ['bedrock-claude', 'gemini']
    for argv in (['--paths', 'gemini,vertex'], ['--paths', 'gemini', '--plot', str(tmp_path / 'plot.svg')]):
        with pytest.raises(SystemExit):
            main(['--size', 'smoke', '--only', 'wire', *argv])
    errors = capsys.readouterr().err
    assert "unknown paths ['vertex']" in errors and '--plot shows the path anthropic-wrapped' in errors


@pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
async def test_bedrock_conversation_caches_by_the_settings_it_sends():
    # Bedrock caches only at cache points; Pydantic AI's unified `cache` places them where the model has no Bedrock
    # cache settings of its own.
    unified = await run_conversation('bedrock-claude', 'append', 2, cache_settings=ModelSettings(cache=True))
    unset = await run_conversation('bedrock-claude', 'append', 2, cache_settings=ModelSettings())
    assert [usage.cache_read_tokens > 0 for usage in unified.usages] == [False, True]
    assert [usage.cache_read_tokens for usage in unset.usages] == [0, 0]


def test_schedules_of_windows_are_priced_by_the_model():
    # A request growing 100 tokens a request, a 50-token change at every other one, at Anthropic's ratios.
    steps = [Step(5_000 + 100 * at, 50 * (at % 2)) for at in range(400)]
    prices = CachePrices(input=1, cache_read=0.1, cache_write=1.25)
    found = figures(steps, prices)
    assert found.optimum <= found.rule <= found.keep and found.common < found.optimum
    assert found.windows['keep'] == 1 and found.windows['optimum'] > 1
    # Keeping every change, the last request carries all 200 of them.
    assert found.longest['keep'] == steps[-1].size + 50 * 200
    # Extrapolated, the last requests repeat, each growing by what its counterpart grew.
    longer = extended(steps[:10], 14)
    assert [step.delivered for step in longer[10:]] == [50, 0, 50, 0]
    assert [step.size for step in longer[9:]] == [5_900, 6_000, 6_100, 6_200, 6_300]


def test_a_compaction_run_is_priced_with_its_moves_and_cuts():
    # Changes carried 400 bytes more each request, until a compaction at the fifth moves the prefix (the cache held 300
    # tokens of it) and cuts all but 400 bytes of them.
    result = WireResult('anthropic-inline', 'append-keep', 'inline')
    moves: list[tuple[int, str] | None] = [None, None, None, None, (3, 'message'), None]
    changes = [0, 400, 800, 1_200, 400, 800]
    result.requests = [RequestBytes(0, 0, 0, move, change, 0) for move, change in zip(moves, changes, strict=True)]
    result.usages = [RequestUsage(input_tokens=1_000 * at, cache_read_tokens=300 * (at == 5)) for at in range(1, 7)]
    steps = compaction_steps(result)
    assert steps[3:] == [Step(3_700, 100), Step(4_900, 0, held=300, kept=100), Step(5_800, 100)]
    # On a provider that reads the longest cached prefix, keeping writes again only the changes after the move.
    result.path, result.requests[4] = 'openai-chat', replace(result.requests[4], moved_change_bytes=200)
    assert compaction_steps(result)[4] == Step(4_900, 0, held=300, kept=100, rewritten=50)
    # Bedrock, like Anthropic, reads at its cache points.
    assert compaction_steps(replace(result, path='bedrock-claude'))[4] == Step(4_900, 0, held=300, kept=100)
    # Held to a token budget, a schedule is priced by its new windows alone.
    assert budgeted_steps(result) == [Step(1_000 * at, 0) for at in range(1, 7)]


def test_a_request_that_opens_a_window_is_no_move_of_its_prefix():
    requests = [
        RequestBytes(100, 0, 0, None, 0),
        RequestBytes(200, 100, 100, None, 10),
        RequestBytes(150, 3, 200, (1, 'instructions'), 0),
        RequestBytes(250, 150, 150, None, 20),
        RequestBytes(300, 200, 250, (4, 'message'), 20),
    ]
    opened = WireResult('openai-chat', 'append', 'inline', requests=requests, opened=[2])
    assert (opened.min_reuse, opened.moves) == (80.0, [(4, 4, 'message')])
    kept = replace(opened, opened=[])
    assert (kept.min_reuse, kept.moves) == (1.5, [(2, 1, 'instructions'), (4, 4, 'message')])
