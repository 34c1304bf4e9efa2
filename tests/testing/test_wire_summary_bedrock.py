"""`PromptWire.cache_summary` on AWS Bedrock Converse: Pydantic AI's `BedrockConverseModel` through the real boto3
client against the fake provider's `converse` and `converse-stream`, live on loopback. The wire's summary, read from
each reply's `usage` (JSON, or the `metadata` event of the binary event stream), is the capability's for the same run.

The fixture records each exchange through botocore's hooks (`instrument_bedrock`), a ConverseStream reply as the
event stream botocore read.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterable
from dataclasses import replace
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import AgentStreamEvent, ModelMessage
from pydantic_ai.models.bedrock import BedrockModelSettings

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, bedrock_model

from ..fake_models import live_loopback

pytestmark = [live_loopback, pytest.mark.anyio]

CLAUDE = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
RULES = 'Follow the house rules. ' * 400  # about 2,400 tokens: above Claude Sonnet 4.5's 1,024


async def discard(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
    async for _ in events:
        pass


async def converse(
    prompt_wire: PromptWire, server: FakeProvider, model: str, *, streamed: bool, cache: bool = True
) -> list[ModelMessage]:
    """Three turns with a block appended to, the notes changed before the third, recorded by `prompt_wire`."""
    bedrock = bedrock_model(server.url, model, cache=cache)
    prompt_wire.instrument_bedrock(bedrock.client)  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    memory = AppendInstructions[list[str]](id='memory')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))
    agent = Agent(bedrock, deps_type=list[str], instructions=RULES, capabilities=[memory])
    # With `max_tokens` set, newer releases call `converse` rather than streaming behind the scenes; an event stream
    # handler makes the model call `converse-stream`, as `agent.run_stream` does.
    settings = BedrockModelSettings(max_tokens=1_024)
    handler = discard if streamed else None
    history: list[ModelMessage] = []
    for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
        result = await agent.run(
            f'turn {turn}', deps=notes, message_history=history, model_settings=settings, event_stream_handler=handler
        )
        history = result.all_messages()
    return history


@pytest.mark.parametrize('streamed', [False, True], ids=['converse', 'converse-stream'])
async def test_the_fixtures_summary_is_the_capabilitys_on_bedrock(prompt_wire: PromptWire, streamed: bool):
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        history = await converse(prompt_wire, server, CLAUDE, streamed=streamed)
    assert [exchange.response_body[:1] for exchange in prompt_wire.exchanges] == [b'\x00' if streamed else b'{'] * 3
    prompt_wire.assert_prefix_stable()
    summary = prompt_wire.cache_summary()
    assert summary == prompt_wire.cache_summary('bedrock-converse')
    # Tokens, expected reads and cost are the capability's. Rewrite mode's estimate differs a little, as documented:
    # the wire counts the bytes sent before the changed block, with the JSON of each system block and, on 2.68, the
    # announcement of `<system>` blocks Pydantic AI puts first in `system`; the capability counts its instructions.
    expected = AppendInstructions.cache_summary(history)
    assert replace(summary, rewrite_cost_usd=0.0) == replace(expected, rewrite_cost_usd=0.0)
    # Each request read the whole of the one before it at its cache point, and the change was appended.
    assert (summary.requests, summary.shortfalls, summary.unpriced) == (3, 0, 0)
    assert summary.cache_read_tokens == summary.expected_read_tokens > 0
    assert summary.cache_write_tokens > 0
    assert summary.saving_usd > 0
    assert expected.saving_usd > 0


async def test_a_model_that_caches_nothing_is_expected_to_read_nothing(prompt_wire: PromptWire):
    # Llama on Bedrock caches nothing, and Pydantic AI sends it no cache point: the capability expects no read of a
    # model whose profile says it doesn't cache until the conversation shows a read, and nor does the wire.
    llama = 'meta.llama3-3-70b-instruct-v1:0'
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        history = await converse(prompt_wire, server, llama, streamed=False)
    summary = prompt_wire.cache_summary()
    # With nothing cached, price opens a new window on the change; what never reopening would have cost needs the
    # change that window dropped, which only the capability's records say: the wire prices it as it was sent.
    expected = AppendInstructions.cache_summary(history)
    assert replace(summary, never_reopened_cost_usd=0.0) == replace(expected, never_reopened_cost_usd=0.0)
    assert (summary.requests, summary.cache_read_tokens, summary.expected_read_tokens) == (3, 0, 0)


async def test_without_boto3_the_cache_use_shown_decides_what_is_expected(
    prompt_wire: PromptWire, monkeypatch: pytest.MonkeyPatch
):
    # Claude without cache points reads nothing: the capability, which knows Claude caches only at them, expects the
    # previous request all the same (a shortfall, `no_breakpoint`), and so does the wire, from Pydantic AI's profile
    # of the model. Without boto3 that profile can't be read, and the wire expects a read only once one was shown.
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        history = await converse(prompt_wire, server, CLAUDE, streamed=False, cache=False)
    summary = prompt_wire.cache_summary()
    assert summary == AppendInstructions.cache_summary(history)
    assert (summary.cache_read_tokens, summary.shortfalls) == (0, 2)
    monkeypatch.setitem(sys.modules, 'pydantic_ai.providers.bedrock', None)
    assert (prompt_wire.cache_summary().expected_read_tokens, prompt_wire.cache_summary().shortfalls) == (0, 0)
