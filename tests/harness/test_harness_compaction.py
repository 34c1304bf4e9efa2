"""Pydantic AI Harness's compaction capabilities through `PrefixGuard` with default options, as a user installs them.

Each strategy of the installed harness release runs the same 32-run conversation (parallel tool calls, a todo list in
append mode that changes every run) with and without the guard. The guard must apply each compaction in whole tool
pairs, keep history as short as the compaction alone does and the instructions as they were sent (the todo list's
current value at the tail); it must not warn (any warning fails).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelAPIError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import CachePrices
from pydantic_ai_append.testing import Api
from tests.compaction_scenario import (
    RUNS,
    WIRE_RUNS,
    broken_pairs,
    converse,
    converse_on_the_wire,
    file_key,
    judge_model,
    stale_deliveries,
    summary_model,
    unpaired_on_the_wire,
)

pytest.importorskip(
    'pydantic_ai_harness', reason='needs pydantic-ai-harness: run in an environment from .ci/harness-env'
)

from pydantic_ai_harness import compaction

_TOKENS = 1_500
"""A token budget the conversation passes every few runs (about 4 characters a token)."""


def failing_model() -> FunctionModel:
    def fail(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ModelAPIError('summarizer', 'the summarizer is down')

    return FunctionModel(fail)


STRATEGIES: dict[str, Callable[[], Any]] = {
    'SlidingWindowCompaction': lambda: compaction.SlidingWindowCompaction(max_messages=12, keep_messages=6),
    'SlidingWindowCompaction with receipts': lambda: compaction.SlidingWindowCompaction(
        max_messages=12, keep_messages=6, receipts=True
    ),
    'ClearToolResults': lambda: compaction.ClearToolResults(max_messages=8, keep_pairs=2),
    'DeduplicateFileReads': lambda: compaction.DeduplicateFileReads(file_key=file_key),
    'SummarizingCompaction': lambda: compaction.SummarizingCompaction(
        model=summary_model(), max_messages=12, keep_messages=6
    ),
    'TieredCompaction': lambda: compaction.TieredCompaction(
        tiers=[
            # A tier's own trigger is required but not consulted: the tiered budget decides.
            compaction.ClearToolResults(max_tokens=_TOKENS, keep_pairs=2),
            compaction.SummarizingCompaction(model=summary_model(), max_tokens=_TOKENS, keep_messages=6),
        ],
        target_tokens=_TOKENS,
    ),
    'FallbackCompaction': lambda: compaction.FallbackCompaction(
        fallback_chain=[
            compaction.SummarizingCompaction(model=failing_model(), max_tokens=_TOKENS, keep_messages=6),
            compaction.SlidingWindowCompaction(max_messages=12, keep_messages=6),
        ],
        max_tokens=_TOKENS,
    ),
    'ClampOversizedMessages': lambda: compaction.ClampOversizedMessages(
        max_part_chars=2_000, keep_head_chars=200, keep_tail_chars=200
    ),
}
# From harness 0.62: a judge that keeps, reduces or drops each earlier step, and a tool the model asks with. Read
# with `getattr`, as 0.58 has neither and is type-checked too.
relevance: Any = getattr(compaction, 'RelevanceCompaction', None)
on_request: Any = getattr(compaction, 'CompactOnRequest', None)
if relevance is not None:  # pragma: no branch
    STRATEGIES['RelevanceCompaction'] = lambda: relevance(judge_model(), max_tokens=_TOKENS, keep_tokens=400)
    STRATEGIES['CompactOnRequest'] = lambda: on_request(
        compaction.SlidingWindowCompaction(max_messages=1, keep_messages=6)
    )


@pytest.mark.parametrize('strategy', list(STRATEGIES))
def test_a_harness_compaction_is_applied_in_whole_pairs_keeping_the_instructions(strategy: str):
    alone = converse(STRATEGIES[strategy](), guarded=False)
    guarded = converse(STRATEGIES[strategy](), guarded=True)
    # Every run made its requests, and the compaction did something in this conversation.
    assert len(guarded.requests) == len(alone.requests) == 2 * RUNS
    assert guarded.opened, 'the strategy never compacted this conversation'
    # History stays as short as the compaction alone keeps it, plus at most the marker.
    assert max(guarded.lengths) <= max(alone.lengths) + 1
    assert guarded.lengths[-1] <= alone.lengths[-1] + 1
    assert max(guarded.parts) <= max(alone.parts) + 1
    # No tool call without its result, nor a result without its call, on any request or in the history kept.
    assert [problems for request in guarded.requests if (problems := broken_pairs(request.messages))] == []
    assert [problems for history in guarded.histories if (problems := broken_pairs(history))] == []
    # The messages moved only where the guard applied a compaction, and the instructions never: the compactions kept
    # the todo list's window (with no cache prices, nothing opens a new one).
    assert set(guarded.prefix_moves()) <= set(guarded.opened)
    assert guarded.instruction_moves() == []
    # Every request carries the todo list's current value, in the prefix or as the latest change after it.
    assert stale_deliveries(guarded) == []
    # Nothing here is a rewrite to refuse: no warning, from the guard or anything else.
    assert guarded.warnings == []


@pytest.mark.parametrize(('strategy', 'reopens'), [('SlidingWindowCompaction', False), ('ClearToolResults', True)])
def test_with_cache_prices_the_instructions_move_only_where_a_window_was_opened_by_price(strategy: str, reopens: bool):
    # A cache that halves the price. Clearing tool results keeps every change in history, and the todo list's window
    # gives way every few runs; a sliding window of six messages cuts the changes before they cost that much.
    guarded = converse(
        STRATEGIES[strategy](), guarded=True, windows=CachePrices(input=1, cache_read=0.5, cache_write=1)
    )
    assert guarded.opened and bool(guarded.priced_windows()) == reopens
    assert guarded.instruction_moves() == guarded.priced_windows()
    assert stale_deliveries(guarded) == [] and guarded.warnings == []


def test_a_window_whose_history_a_sliding_window_cut_is_kept():
    # A cache write that costs little more than a read: the todo list's window gives way before the first trim, and is
    # kept from then on (the guard marks its baseline, which goes after the first window's on the first request kept).
    cheap = CachePrices(input=1, cache_read=0.1, cache_write=0.12)
    guarded = converse(STRATEGIES['SlidingWindowCompaction'](), guarded=True, windows=cheap)
    priced = guarded.priced_windows()
    assert priced and max(priced) < min(guarded.opened)
    assert guarded.instruction_moves() == priced
    assert stale_deliveries(guarded) == [] and guarded.warnings == []


@pytest.mark.vcr
@pytest.mark.anyio
@pytest.mark.parametrize('api', ['openai-chat', 'anthropic'])
async def test_on_the_wire_a_sliding_window_sends_every_call_with_its_result(api: Api):
    bodies, warned = await converse_on_the_wire(
        api, compaction.SlidingWindowCompaction(max_messages=8, keep_messages=4)
    )
    assert len(bodies) == 2 * WIRE_RUNS and warned == []
    # Read from the JSON as the provider reads it: every call answered, every result after its call.
    assert [problems for body in bodies if (problems := unpaired_on_the_wire(api, body))] == []
    # Bounded: the second half of the conversation sends no more than the first did.
    counts = [len(json.loads(body)['messages']) for body in bodies]
    assert max(counts[WIRE_RUNS:]) <= max(counts[:WIRE_RUNS])
