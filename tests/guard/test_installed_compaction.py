"""A compaction the user writes, through `PrefixGuard` with default options: history processors that keep the first
message and the last N, or only the last N, whatever that splits.

The same 32-run conversation as the harness strategies get (`tests/harness/test_harness_compaction.py`), with and
without the guard. The processors cut by message count alone, so their cut often falls between a tool call and its
result; the guard moves it to the nearest whole-pair cut, warns once for each such cut, and never sends either half
alone.
"""

from __future__ import annotations

import json

import pytest
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage

from pydantic_ai_append.testing import Api
from tests.compaction_scenario import (
    RUNS,
    WIRE_RUNS,
    broken_pairs,
    converse,
    converse_on_the_wire,
    stale_deliveries,
    unpaired_on_the_wire,
)


def keep_first_and_last(count: int):
    def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [messages[0], *messages[-count:]] if len(messages) > count + 1 else messages

    return processor


def keep_last(count: int):
    def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-count:] if len(messages) > count else messages

    return processor


@pytest.mark.parametrize(
    ('processor', 'splits'),
    [(keep_first_and_last(5), True), (keep_first_and_last(6), False), (keep_last(5), True)],
    ids=['first and last 5', 'first and last 6', 'last 5'],
)
def test_a_processor_cutting_by_count_is_applied_in_whole_pairs(processor: object, splits: bool):
    alone = converse(ProcessHistory(processor), guarded=False)  # pyright: ignore[reportArgumentType]
    guarded = converse(ProcessHistory(processor), guarded=True)  # pyright: ignore[reportArgumentType]
    assert len(guarded.requests) == 2 * RUNS
    # A conversation's turn is four messages, so keeping 6 cuts between turns, and 5 inside one. A cut inside splits
    # a pair, and the guard says where, naming the call (nothing else is warned about). Without the guard, Pydantic
    # AI would repair those requests silently, dropping the results it was sent. With it, no request and no stored
    # history has a split pair.
    assert bool(guarded.warnings) == splits
    assert all(
        warning.startswith('OrphanedToolPairWarning: Compacted in whole tool pairs, the cut moved: ')
        and "call 'call_" in warning
        for warning in guarded.warnings
    )
    assert [problems for request in guarded.requests if (problems := broken_pairs(request.messages))] == []
    assert [problems for history in guarded.histories if (problems := broken_pairs(history))] == []
    # Bounded as the processor bounds it: a cut moved later keeps fewer messages, one moved earlier at most a few more.
    assert max(guarded.lengths) <= max(alone.lengths) + 2
    assert max(guarded.parts) <= max(alone.parts) + 4
    compacted = guarded.prefix_moves()
    assert compacted and guarded.windows == len(compacted)
    assert set(guarded.instruction_moves()) <= set(compacted)
    assert stale_deliveries(guarded) == []


@pytest.mark.vcr
@pytest.mark.anyio
@pytest.mark.parametrize('api', ['openai-chat', 'anthropic'])
async def test_on_the_wire_every_call_goes_with_its_result(api: Api):
    bodies, warned = await converse_on_the_wire(api, ProcessHistory(keep_first_and_last(5)))
    assert len(bodies) == 2 * WIRE_RUNS
    # Read from the JSON as the provider reads it: every call answered, every result after its call.
    assert [problems for body in bodies if (problems := unpaired_on_the_wire(api, body))] == []
    # The processor split pairs, the guard moved its cuts (and said so), and the verifier saw the prefix move only
    # where the guard opened a window (`converse_on_the_wire` checks it saw no other divergence).
    assert warned and all('Compacted in whole tool pairs, the cut moved' in warning for warning in warned)
    # Bounded: the second half of the conversation sends no more than the first did.
    counts = [len(json.loads(body)['messages']) for body in bodies]
    assert max(counts[WIRE_RUNS:]) <= max(counts[:WIRE_RUNS])
