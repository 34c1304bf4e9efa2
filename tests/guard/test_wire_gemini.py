"""The wire verifier on Google Gemini: Pydantic AI's `GoogleModel` through the real `google-genai` SDK against the fake
provider's `generateContent`, live on loopback. In enforce mode the request that drops the oldest turn is refused
before it reaches the provider, streamed or not.
"""

from __future__ import annotations

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage

from pydantic_ai_append.guard import WirePrefixDivergenceError, WireVerifier
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, google_model

from ..fake_models import get_time, live_loopback

pytestmark = [pytest.mark.anyio, live_loopback]

SCRIPT = [Text('One.'), ToolCalls([('get_time', {})]), Text('Noon.'), Text('Three.')]
"""Run 1 is one request, run 2 calls a tool (two requests), run 3 is the request the verifier refuses."""


def drop_oldest_turn(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A history processor that forgets the first request and response: it moves the consumed prefix."""
    return messages[2:]


@pytest.mark.parametrize('stream', [False, True])
async def test_enforce_refuses_a_rewrite_that_breaks_the_prefix(stream: bool):
    verifier = WireVerifier(mode='enforce')
    async with verifier.http_client(timeout=60) as http_client:
        with FakeProvider(script=SCRIPT) as server:
            model = google_model(server.url, http_client=http_client)
            agent = Agent(model, instructions='Be brief.', tools=[get_time])
            history = (await agent.run('First?')).all_messages()
            history = (await agent.run('Time?', message_history=history)).all_messages()
            dropping = Agent(
                model, instructions='Be brief.', tools=[get_time], capabilities=[ProcessHistory(drop_oldest_turn)]
            )
            with pytest.raises(WirePrefixDivergenceError) as raised:
                if stream:
                    async with dropping.run_stream('Third?', message_history=history) as result:
                        await result.get_output()
                else:
                    await dropping.run('Third?', message_history=history)
    # Refused in the transport: the provider got the three requests of the first two runs only.
    assert (len(server.requests), server.errors) == (3, [])
    [divergence] = verifier.divergences
    assert (divergence.api, divergence.request, divergence.kind) == ('gemini', 3, 'message')
    assert '"First?"' in divergence.previous and '"Time?"' in (divergence.current or '')
    assert str(raised.value) == (
        f'{divergence.message}\nNot sent. If it opens a new window (compaction, new instructions), call '
        '`open_window()` on the verifier first.'
    )
