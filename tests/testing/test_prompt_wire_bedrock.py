"""`prompt_wire` and `WireCapture` on AWS Bedrock: Pydantic AI's `BedrockConverseModel` through a real boto3 client,
instrumented with `instrument_bedrock`, against the fake provider's Converse and ConverseStream, live on loopback.

The fixture names the API `bedrock-converse`, keeps each reply as the client read it (ConverseStream's binary event
stream as it came), finds the prefix stable across a block change, and renders the transcript, a tool loop's too, as it
does the other APIs'. A retry botocore
makes is kept as the attempt it is, and a capture keeps what the verifier refused or only what it let through,
by the order the two were registered in.
"""

from __future__ import annotations

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.bedrock import BedrockModelSettings

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import WirePrefixDivergenceError, WireVerifier
from pydantic_ai_append.testing import PromptWire, WireCapture
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls

from ..bedrock_hooks import SETTINGS, ThrottleOnce, instrumented_model
from ..fake_models import live_loopback

pytestmark = [live_loopback, pytest.mark.anyio]


@pytest.mark.parametrize('stream', [False, True])
async def test_the_fixture_reads_bedrock(prompt_wire: PromptWire, stream: bool):
    memory = AppendInstructions[list[str]](id='memory')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))
    history: list[ModelMessage] = []
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        model = instrumented_model(server, prompt_wire.instrument_bedrock, prompt_wire.instrument_bedrock)
        # Without 2.68's one-time framing announcement, which 2.58 doesn't make, the transcript is the same on both.
        settings = BedrockModelSettings(max_tokens=1_024, framing_announcement='never')
        agent = Agent(
            model, deps_type=list[str], instructions='Be brief.', model_settings=settings, capabilities=[memory]
        )
        # The notes change on the third turn: the block's change is appended, the prefix kept.
        for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
            if stream:
                async with agent.run_stream(f'turn {turn}', deps=notes, message_history=history) as result:
                    await result.get_output()
                history = result.all_messages()
            else:
                history = (await agent.run(f'turn {turn}', deps=notes, message_history=history)).all_messages()
    assert prompt_wire.conversation().api == 'bedrock-converse'
    # Instrumented twice, kept once; each reply as the client read it, an event stream as the provider sent it.
    assert [exchange.path.rsplit('/', 1)[-1] for exchange in prompt_wire.exchanges] == [
        'converse-stream' if stream else 'converse'
    ] * 3
    assert [exchange.request_body for exchange in prompt_wire.exchanges] == server.requests
    assert [exchange.response_body for exchange in prompt_wire.exchanges] == [
        exchange.response_body for exchange in server.exchanges
    ]
    assert prompt_wire.exchanges[0].response_body[:1] == (b'\x00' if stream else b'{')
    prompt_wire.assert_prefix_stable()
    assert [row.reused_bytes > 0 for row in prompt_wire.prefix_reuse()] == [False, True, True]
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 257 bytes
+ system: Be brief.
+ system: <context id="capability:memory:notes">
+     a
+     </context>
+ system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
+ user: turn 0

request 1: reuses 257 of 352 bytes
  system: Be brief.
  system: <context id="capability:memory:notes">
      a
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  user: turn 0
+ assistant: Noted.
+ user: turn 1

request 2: reuses 352 of 534 bytes
  system: Be brief.
  system: <context id="capability:memory:notes">
      a
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  user: turn 0
  assistant: Noted.
  user: turn 1
+ assistant: Noted.
+ user: turn 2
+     <system><context id="capability:memory:notes">
+     a
+     b
+     </context></system>
""")


def get_time(city: str) -> str:
    """Get the time in a city."""
    return '12:00'


async def test_the_transcript_reads_a_bedrock_tool_loop(prompt_wire: PromptWire):
    memory = AppendInstructions[list[str]](id='memory')
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))
    settings = BedrockModelSettings(max_tokens=1_024, framing_announcement='never')
    script = [ToolCalls([('get_time', {'city': 'Paris'})]), Text('Noon.'), Text('Noted.')]
    with FakeProvider(script=script) as server:
        model = instrumented_model(server, prompt_wire.instrument_bedrock)
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
    # Roles as Converse names them; the call's `toolUseId`, which the result repeats, as a placeholder.
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 467 bytes
+ tool get_time: Get the time in a city.
+     inputSchema: {"json":{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}}
+ system: Be brief.
+ system: <context id="capability:memory:notes">
+     a
+     </context>
+ system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
+ user: Time in Paris?

request 1: reuses 467 of 710 bytes
  tool get_time: Get the time in a city.
      inputSchema: {"json":{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}}
  system: Be brief.
  system: <context id="capability:memory:notes">
      a
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  user: Time in Paris?
+ assistant: get_time({"city":"Paris"}) [call#1]
+ user: result [call#1]: 12:00
+         status: success

request 2: reuses 710 of 892 bytes
  tool get_time: Get the time in a city.
      inputSchema: {"json":{"additionalProperties":false,"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}}
  system: Be brief.
  system: <context id="capability:memory:notes">
      a
      </context>
  system: Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
  user: Time in Paris?
  assistant: get_time({"city":"Paris"}) [call#1]
  user: result [call#1]: 12:00
          status: success
+ assistant: Noon.
+ user: Thanks.
+     <system><context id="capability:memory:notes">
+     a
+     b
+     </context></system>
""")


async def test_a_retry_is_kept_as_the_attempt_it_is():
    capture = WireCapture()
    with FakeProvider(script=[Text('One.'), Text('Two.')]) as server:
        agent = Agent(instrumented_model(server, capture.instrument_bedrock, ThrottleOnce(1).register))
        history = (await agent.run('a', model_settings=SETTINGS)).all_messages()
        await agent.run('b', message_history=history, model_settings=SETTINGS)
    # botocore sent the second request twice, the first attempt answered 503: each attempt is an exchange, as an SDK's
    # retry through an HTTP client is, with the reply the client read to it.
    assert [exchange.request_body for exchange in capture.exchanges] == [server.requests[0], *[server.requests[1]] * 2]
    assert [exchange.response_body for exchange in capture.exchanges] == [
        server.exchanges[0].response_body,
        ThrottleOnce.BODY,
        server.exchanges[1].response_body,
    ]


@pytest.mark.parametrize('capture_first', [True, False])
async def test_a_capture_keeps_what_the_verifier_refused_if_registered_before_it(capture_first: bool):
    capture = WireCapture()
    verifier = WireVerifier(mode='enforce')
    instruments = [capture.instrument_bedrock, verifier.instrument_bedrock]
    with FakeProvider(script=[Text('One.'), Text('Two.')]) as server:
        model = instrumented_model(server, *(instruments if capture_first else reversed(instruments)))
        history = (await Agent(model).run('a', model_settings=SETTINGS)).all_messages()
        history = (await Agent(model).run('b', message_history=history, model_settings=SETTINGS)).all_messages()
        dropping = Agent(model, capabilities=[ProcessHistory(lambda messages: messages[2:])])
        with pytest.raises(WirePrefixDivergenceError):
            await dropping.run('c', message_history=history, model_settings=SETTINGS)
    assert (len(server.requests), len(capture.exchanges)) == (2, 3 if capture_first else 2)
    if capture_first:
        # Refused before a reply: nothing was read.
        assert capture.exchanges[-1].response_chunks == []
