"""The benchmark runs at its smallest size, so it can't rot, and its shortcuts give what the agent gives.

Timings are printed by the benchmark and never asserted here; what is asserted is what can't vary: the wire
figures of append mode, the shape of the report, and that a history built without running the agent equals
one built by running it.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic_ai.messages import ModelMessage

from benchmarks.__main__ import main
from benchmarks.overhead import build_history, real_history
from benchmarks.scenario import Policy, memory, native_available, state

pytestmark = pytest.mark.anyio


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


def test_scenario_blocks_change_as_described():
    assert [state(turn) == state(turn - 1) for turn in range(2, 6)] == [False] * 4
    assert [memory(turn) == memory(turn - 1) for turn in range(2, 9)] == [True, True, False, True, True, True, False]
    assert 14_000 < len(memory(1).encode()) < 16_000


@pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
def test_smoke_run_writes_tables_json_and_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    # Before each timed run the benchmark collects garbage, so that no run pays for another's; in a test process that
    # is a full collection of a large heap (about 0.2 s, 56 times at this size). Timings aren't asserted here.
    monkeypatch.setattr(gc, 'collect', lambda generation=2: 0)
    json_path, plot_path = tmp_path / 'out.json', tmp_path / 'plot.svg'
    assert main(['--size', 'smoke', '--json', str(json_path), '--plot', str(plot_path)]) == 0

    printed = capsys.readouterr().out
    assert 'Targets' in printed and 'Wire bytes over 4 turns' in printed
    report = cast(dict[str, Any], json.loads(json_path.read_text()))
    policies = ['static', 'rewrite', 'append', *(['native'] if native_available() else [])]
    wire = cast(list[dict[str, Any]], report['wire'])
    assert [(row['path'], row['policy']) for row in wire] == [
        (path, policy)
        for path in ('openai-chat', 'openai-responses', 'anthropic-inline', 'anthropic-wrapped')
        for policy in policies
    ]
    appended = [row for row in wire if row['policy'] == 'append']
    assert {row['path']: (row['min_reuse_percent'], row['prefix_moves']) for row in appended} == {
        row['path']: (100.0, []) for row in appended
    }
    assert all(row['change_bytes_unique'] > 0 and row['largest_diff_bytes']['memory'] < 800 for row in appended)
    rewritten = [row for row in wire if row['policy'] == 'rewrite']
    assert all(row['prefix_moves'] and row['uncached_bytes'] > 2 * appended[0]['uncached_bytes'] for row in rewritten)
    assert {(row['profile'], row['turns']) for row in report['overhead']} == {
        (profile, turns) for profile in ('inline', 'wrapped') for turns in (2, 5)
    }
    verdicts = {row['target']: row['verdict'] for row in report['targets']}
    assert verdicts['verify a 1 MB prefix in under 1 ms'] in ('PASS', 'MISS')
    svg = plot_path.read_text()
    # The background, two legend swatches, then a reused and an uncached bar per request (5) per policy.
    assert svg.startswith('<svg') and svg.count('<rect') == 3 + 2 * 5 * len(policies)
