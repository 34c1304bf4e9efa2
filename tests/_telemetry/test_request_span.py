"""What only the plugin knows, on each request's `append_instructions` span (`_telemetry.window`): the window the
request belongs to, why a window opened, and each change's form and size; and, on the `append_instructions cache`
span, nothing Pydantic AI's own span of the request already says.
"""

from __future__ import annotations

from typing import Any

import pytest
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, SystemPromptPart
from pydantic_ai.models.anthropic import AnthropicCompaction

from pydantic_ai_append import AppendInstructions, strip_records
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, anthropic_model

from ..fake_models import live_loopback
from .test_observe import RULES, TAIL

pytestmark = [live_loopback, pytest.mark.anyio]

PLAN = '\n'.join(f'step {number}: a part of the plan the agent follows' for number in range(20))
EDITED = PLAN.replace('step 7: a part', 'step 7: the part')

WINDOW_KEYS = ('window', 'window_reason', 'changes', 'change_forms', 'change_chars')


def spans(capfire: CaptureLogfire, name: str) -> list[dict[str, Any]]:
    return [span['attributes'] for span in capfire.exporter.exported_spans_as_dict() if span['name'] == name]


def window_facts(capfire: CaptureLogfire) -> list[tuple[Any, ...]]:
    return [
        tuple(span.get(f'pydantic_ai_append.{key}') for key in WINDOW_KEYS)
        for span in spans(capfire, 'append_instructions')
    ]


def carriers(history: list[ModelMessage]) -> list[SystemPromptPart]:
    """The parts of `history` that carry the plugin's records, in order."""
    return [
        part for message in history for part in message.parts if isinstance(part, SystemPromptPart) and part.metadata
    ]


def planning_agent(mode: list[str], **options: Any) -> AppendInstructions[str | None]:
    planner = AppendInstructions[str | None](id='planner', **options)

    @planner.instructions(name='plan')
    def plan(ctx: RunContext[str | None]) -> str | None:  # pyright: ignore[reportUnusedFunction]
        return ctx.deps

    @planner.instructions(name='mode', on_change='rewrite')
    def current_mode() -> str:  # pyright: ignore[reportUnusedFunction]
        return f'Mode: {mode[0]}'

    return planner


async def converse(agent: Agent[str | None, str], plans: list[str | None], history: list[ModelMessage]) -> Any:
    for turn, plan in enumerate(plans):
        history = (await agent.run(f'turn {turn}', deps=plan, message_history=history)).all_messages()
    return history


async def test_each_request_says_its_window_why_it_opened_and_how_each_change_went(capfire: CaptureLogfire):
    mode = ['plan']
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        planner = planning_agent(mode)
        agent = Agent(anthropic_model(server.url), deps_type=str | None, instructions=RULES, capabilities=[planner])
        agent.model_settings = TAIL
        agent.instrument = True
        history = await converse(agent, ['first draft', PLAN, EDITED, None], [])
        mode[0] = 'act'  # a rewrite-mode block changed: the prefix moves, and a new window opens
        history = await converse(agent, [PLAN], history)
        # History from a client that kept roles and text alone: the next request can't go on from any record.
        await converse(agent, [PLAN], strip_records(history))
    assert server.errors == []
    # Each size is that of the element the model was sent, as history keeps it.
    full, diff, withdrawal = [len(part.content) for part in carriers(history) if part.content]
    assert window_facts(capfire) == [
        (1, 'first', (), (), ()),
        (1, None, ('capability:planner:plan',), ('full',), (full,)),
        (1, None, ('capability:planner:plan',), ('diff',), (diff,)),
        (1, None, ('capability:planner:plan',), ('withdrawal',), (withdrawal,)),
        (2, 'prefix_moved', (), (), ()),
        (1, 'records_lost', (), (), ()),
    ]
    assert full == len(f'<context id="capability:planner:plan">\n{PLAN}\n</context>')
    assert diff < full
    assert [span['logfire.msg'] for span in spans(capfire, 'append_instructions')][:4] == [
        'append_instructions planner: window 1 opened (first)',
        'append_instructions planner: window 1, 1 change (full)',
        'append_instructions planner: window 1, 1 change (diff)',
        'append_instructions planner: window 1, 1 change (withdrawal)',
    ]


async def test_the_cache_span_holds_only_what_pydantic_ais_own_span_of_the_request_does_not(capfire: CaptureLogfire):
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        agent = Agent(
            anthropic_model(server.url), deps_type=str | None, instructions=RULES, capabilities=[planning_agent(['a'])]
        )
        agent.model_settings = TAIL
        agent.instrument = True
        history = await converse(agent, ['first draft', 'first draft', PLAN], [])
    responses = [message for message in history if isinstance(message, ModelResponse)]
    chats = [span for span in spans(capfire, 'chat claude-sonnet-4-6')]
    # Pydantic AI's span of each request has its cache use, what it expects read back, and its cost.
    assert [
        (
            chat.get('gen_ai.usage.details.cache_read_tokens', 0),
            chat['gen_ai.usage.details.cache_write_tokens'],
            chat['operation.cost'],
            'pydantic_ai.cache.established_tokens' in chat,
        )
        for chat in chats
    ] == [
        (
            response.usage.cache_read_tokens,
            response.usage.cache_write_tokens,
            float(response.cost().total_price),
            True,
        )
        for response in responses
    ]
    # The plugin's span adds what that span can't know: what the request would have cost in rewrite mode and never
    # reopening a window, and what append mode saved.
    cache = spans(capfire, 'append_instructions cache')
    assert [sorted(key for key in span if key.startswith('pydantic_ai_append.')) for span in cache] == 3 * [
        [
            'pydantic_ai_append.cost.never_reopened_usd',
            'pydantic_ai_append.cost.rewrite_usd',
            'pydantic_ai_append.cost.saving_usd',
        ]
    ]
    assert [span['pydantic_ai_append.cost.saving_usd'] > 0 for span in cache] == [False, False, True]
    assert cache[2]['logfire.msg'] == (
        f'append_instructions cache: saved ${cache[2]["pydantic_ai_append.cost.saving_usd"]:.6f} against rewrite mode'
    )


async def test_a_window_a_compaction_opened_says_so(capfire: CaptureLogfire):
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        capabilities = [AnthropicCompaction(token_threshold=1000), planning_agent(['a'])]
        agent = Agent(anthropic_model(server.url), deps_type=str | None, capabilities=capabilities)
        agent.instrument = True
        history = await converse(agent, ['first draft'], [])
        # Long enough to pass the threshold: the provider compacts this request, and the next goes on from its summary.
        prompt = 'Remember this: ' + 'lorem ipsum ' * 400
        history = (await agent.run(prompt, deps='first draft', message_history=history)).all_messages()
        await converse(agent, ['first draft'], history)
    assert (server.compactions, server.errors) == ([1], [])
    assert [facts[:2] for facts in window_facts(capfire)] == [(1, 'first'), (1, None), (2, 'compaction')]


async def test_a_record_that_fails_its_check_opens_a_window_that_says_so(capfire: CaptureLogfire):
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        model = anthropic_model(server.url)
        signed = Agent(model, deps_type=str | None, capabilities=[planning_agent(['a'], signing_key='old key')])
        history = await converse(signed, ['first draft'], [])
        agent = Agent(model, deps_type=str | None, capabilities=[planning_agent(['a'], signing_key='new key')])
        agent.instrument = True
        await converse(agent, ['first draft'], history)
    # The record that fails the check still counts as the window it opened: this is the conversation's second.
    assert [facts[:2] for facts in window_facts(capfire)] == [(2, 'unreadable_record')]
