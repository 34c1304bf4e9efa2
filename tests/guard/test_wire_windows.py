"""The guard and `AppendInstructions` tell the wire verifier when a request opens a new window.

A rewrite-mode block that changes, and a compaction, both move the prefix on purpose. With the verifier passed to
the capability that opens the window, an enforcing verifier lets that one request through and goes on comparing
from it; without it, the same request is refused. Real OpenAI Chat clients against the fake provider, recorded as
cassettes.
"""

from __future__ import annotations

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import PrefixGuard, WirePrefixDivergenceError, WireVerifier
from pydantic_ai_append.guard._compaction import elided_count
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, openai_chat_model

pytestmark = [pytest.mark.anyio, pytest.mark.vcr]


async def rewrite_mode_change(*, tell_verifier: bool) -> list[str]:
    verifier = WireVerifier(mode='enforce')
    mode = {'value': 'plan'}
    context = AppendInstructions[None](id='work', verifier=verifier if tell_verifier else None)

    @context.instructions(name='todos')
    def todos(ctx: RunContext[None]) -> str:
        return '- [ ] ship'

    @context.instructions(name='mode', on_change='rewrite')
    def work_mode(ctx: RunContext[None]) -> str:
        return f'Mode: {mode["value"]}.'

    outputs: list[str] = []
    with FakeProvider(script=[Text('One.'), Text('Two.'), Text('Three.')]) as server:
        async with verifier.http_client() as http_client:
            agent = Agent(
                openai_chat_model(server.url, http_client=http_client),
                deps_type=type(None),
                capabilities=[PrefixGuard[None](), context],
            )
            history: list[ModelMessage] = []
            for prompt in ['a', 'b', 'c']:
                result = await agent.run(prompt, message_history=history)
                outputs.append(result.output)
                history = result.all_messages()
                mode['value'] = 'act'
    return outputs


async def test_append_instructions_opens_the_verifiers_window():
    assert await rewrite_mode_change(tell_verifier=True) == ['One.', 'Two.', 'Three.']


async def test_without_being_told_the_verifier_refuses_the_new_window():
    with pytest.raises(WirePrefixDivergenceError, match=r'segment 2 \(message\) differs'):
        await rewrite_mode_change(tell_verifier=False)


def drop_oldest_40_percent(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages[int(len(messages) * 0.4) :]


async def test_a_compaction_opens_the_verifiers_window():
    verifier = WireVerifier(mode='enforce')
    guard = PrefixGuard[None](on_defer='compact', verifier=verifier)
    with FakeProvider(script=[Text('One.'), Text('Two.'), Text('Three.')]) as server:
        async with verifier.http_client() as http_client:
            model = openai_chat_model(server.url, http_client=http_client)
            history = (await Agent(model, deps_type=type(None), capabilities=[guard]).run('a')).all_messages()
            history = (
                await Agent(model, deps_type=type(None), capabilities=[guard]).run('b', message_history=history)
            ).all_messages()
            trimming = Agent(model, deps_type=type(None), capabilities=[ProcessHistory(drop_oldest_40_percent), guard])
            # A compaction the user installed: applied without a warning, and the verifier told of its window.
            result = await trimming.run('c', message_history=history)
    assert elided_count(result.all_messages()) == 2
    assert verifier.divergences == []
