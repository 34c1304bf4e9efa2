"""`prompt_wire` on Google Gemini: Pydantic AI's `GoogleModel` through the real `google-genai` SDK against the fake
provider's `generateContent` and its stream, live on loopback. The fixture names the API `gemini`, finds the prefix
stable across a block change, sums the same cache summary as the capability from `usageMetadata`, and renders the
transcript of a tool loop as it does the other APIs'.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.google import GoogleModelSettings

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, google_model

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


def get_time(city: str) -> str:
    """Get the time in a city."""
    return '12:00'


async def test_the_transcript_reads_a_gemini_tool_loop(prompt_wire: PromptWire):
    memory = AppendInstructions[list[str]](id='memory', windows='keep')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))
    # Without 2.68's framing announcement, which 2.58 doesn't make, the transcript is the same on both.
    settings = GoogleModelSettings(framing_announcement='never')
    script = [ToolCalls([('get_time', {'city': 'Paris'})]), Text('Noon.'), Text('Noted.')]
    async with prompt_wire.http_client(timeout=60) as http_client:
        with FakeProvider(script=script) as server:
            model = google_model(server.url, http_client=http_client)
            agent = Agent(
                model,
                deps_type=list[str],
                instructions='Be brief.',
                tools=[get_time],
                model_settings=settings,
                capabilities=[memory],
            )
            history = (await agent.run('Time in Paris?', deps=['a'])).all_messages()
            await agent.run('Thanks.', deps=['a', 'b'], message_history=history)
    prompt_wire.assert_prefix_stable()
    # Roles as Gemini names them; the call's id, which the result repeats, as a placeholder.
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 481 bytes
+ system: Be brief.
+ system: <context id="capability:memory:notes">
+     a
+     </context>
+ system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
+ tool get_time: Get the time in a city.
+     parameters_json_schema: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
+ user: Time in Paris?

request 1: reuses 481 of 778 bytes
  system: Be brief.
  system: <context id="capability:memory:notes">
      a
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  tool get_time: Get the time in a city.
      parameters_json_schema: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
  user: Time in Paris?
+ model: get_time({"city":"Paris"}) [call#1]
+         thoughtSignature: c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=
+ user: result get_time [call#1]: {"return_value":"12:00"}

request 2: reuses 778 of 952 bytes
  system: Be brief.
  system: <context id="capability:memory:notes">
      a
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  tool get_time: Get the time in a city.
      parameters_json_schema: {"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}
  user: Time in Paris?
  model: get_time({"city":"Paris"}) [call#1]
          thoughtSignature: c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=
  user: result get_time [call#1]: {"return_value":"12:00"}
+ model: Noon.
+ user: Thanks.
+     <system><context id="capability:memory:notes">
+     a
+     b
+     </context></system>
""")
