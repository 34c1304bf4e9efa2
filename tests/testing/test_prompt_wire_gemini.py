"""`prompt_wire` on Google Gemini: Pydantic AI's `GoogleModel` through the real `google-genai` SDK against the fake
provider's `generateContent` and its stream, live on loopback. The fixture names the API `gemini`, finds the prefix
stable across a block change, and sums the same cache summary as the capability from `usageMetadata`.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from fake_provider import FakeProvider, Text, google_model
from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire

from ..fake_models import live_loopback

pytestmark = [live_loopback, pytest.mark.anyio]

RULES = 'Follow the house rules. ' * 600  # about 3,600 tokens: above the 2,048 Gemini 2.5 Flash caches from


@pytest.mark.parametrize('stream', [False, True])
async def test_the_fixture_reads_gemini(prompt_wire: PromptWire, stream: bool):
    memory = AppendInstructions[list[str]](id='memory', windows='keep')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))
    history: list[ModelMessage] = []
    async with prompt_wire.http_client(timeout=60) as http_client:
        with FakeProvider(script=lambda request: Text('Noted.')) as server:
            agent = Agent(
                google_model(server.url, http_client=http_client),
                deps_type=list[str],
                instructions=RULES,
                capabilities=[memory],
            )
            # The notes change on the third turn: the block's change is appended, the prefix kept.
            for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
                if stream:
                    async with agent.run_stream(f'turn {turn}', deps=notes, message_history=history) as result:
                        await result.get_output()
                    history = result.all_messages()
                else:
                    history = (await agent.run(f'turn {turn}', deps=notes, message_history=history)).all_messages()
    assert prompt_wire.conversation().api == 'gemini'
    assert {request.path.rsplit(':', 1)[-1] for request in prompt_wire.exchanges} == {
        'streamGenerateContent' if stream else 'generateContent'
    }
    prompt_wire.assert_prefix_stable()
    assert [row.reused_bytes > 0 for row in prompt_wire.prefix_reuse()] == [False, True, True]
    summary = prompt_wire.cache_summary()
    assert (summary.requests, summary.cache_read_tokens > 0) == (3, True)
    # Rewrite mode's cost is an estimate on both sides, which `test_wire_summary.py` holds to what rewrite
    # mode really reads. `agent.run_stream` stores no figures in the history (docs/telemetry.md), so only
    # the provider's own counts and their price are compared there.
    expected = AppendInstructions.cache_summary(history)
    if stream:
        fields = ('requests', 'cache_read_tokens', 'cache_write_tokens', 'uncached_input_tokens', 'cost_usd')
        assert [getattr(summary, name) for name in fields] == [getattr(expected, name) for name in fields]
    else:
        assert replace(summary, rewrite_cost_usd=0.0) == replace(expected, rewrite_cost_usd=0.0)
