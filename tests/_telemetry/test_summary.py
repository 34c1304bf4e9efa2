"""`CacheSummary` (`_telemetry.summary`): a conversation's totals read back from its history, on histories built by
hand: one the plugin never saw, and figures a client mangled. The totals of real runs are checked beside their spans in
`test_observe.py`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic_ai.messages import ModelResponse, TextPart

from pydantic_ai_append import AppendInstructions


def test_the_summary_counts_history_the_plugin_never_saw_without_claiming_a_saving():
    from pydantic_ai.usage import RequestUsage

    known = ModelResponse(
        parts=[TextPart('a')],
        usage=RequestUsage(input_tokens=3000, cache_read_tokens=2000, output_tokens=10),
        model_name='claude-sonnet-4-6',
        provider_name='anthropic',
    )
    unknown = replace(known, model_name='a-model-nobody-prices')
    summary = AppendInstructions.cache_summary([known, unknown])
    assert (summary.requests, summary.cache_read_tokens, summary.uncached_input_tokens) == (2, 4000, 2000)
    assert (summary.expected_read_tokens, summary.shortfalls, summary.unpriced) == (0, 0, 1)
    assert summary.cost_usd == pytest.approx(float(known.cost().total_price))
    assert summary.saving_usd == 0


def test_figures_a_client_mangled_count_as_none():
    from pydantic_ai.usage import RequestUsage

    response = ModelResponse(
        parts=[TextPart('a')],
        usage=RequestUsage(input_tokens=3000, cache_read_tokens=2000),
        model_name='claude-sonnet-4-6',
        provider_name='anthropic',
        metadata={'pydantic_ai_append': {'expected_read_tokens': 'all of it', 'rewrite_read_tokens': 0}},
    )
    summary = AppendInstructions.cache_summary([response, replace(response, metadata={'pydantic_ai_append': 7})])
    assert (summary.expected_read_tokens, summary.saving_usd) == (0, 0)
