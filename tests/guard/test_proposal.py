"""A provider's own compaction, run by Pydantic AI's `AnthropicCompaction` and `OpenAICompaction`, through the guard.

The fake provider compacts as the real APIs do (a compaction block or item with the reply, or the Responses compact
endpoint called from a hook). With `AppendInstructions` and `PrefixGuard` (default options) and a `WireVerifier` in
enforce mode, each compaction opens exactly one new window: the request after it states the todo list's current value
in its instructions, the verifier is told (so it refuses nothing), and nothing is warned about.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Callable
from typing import Any, cast

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicCompaction
from pydantic_ai.models.openai import OpenAICompaction

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import PrefixGuard, WireVerifier
from pydantic_ai_append.testing import WireCapture
from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    ToolCalls,
    anthropic_model,
    openai_responses_model,
)

from ..fake_models import live_loopback

LONG = 'Remember this: ' + 'lorem ipsum ' * 100
"""A prompt long enough to pass the 400-token threshold the fake counts against."""

VARIANTS: dict[str, tuple[Callable[..., Model], Callable[[], AbstractCapability[Any]], str]] = {
    'anthropic': (anthropic_model, lambda: AnthropicCompaction(token_threshold=400), 'system'),
    'openai stateful': (openai_responses_model, lambda: OpenAICompaction(token_threshold=400), 'instructions'),
    'openai stateless': (
        openai_responses_model,
        lambda: OpenAICompaction(message_count_threshold=4),
        'instructions',
    ),
}


def instructions_of(body: dict[str, Any], key: str) -> str:
    value = body.get(key) or ''
    return value if isinstance(value, str) else ''.join(block['text'] for block in value)


@live_loopback
@pytest.mark.anyio
@pytest.mark.parametrize('variant', list(VARIANTS))
async def test_a_provider_compaction_opens_one_new_window(variant: str):
    factory, compaction, key = VARIANTS[variant]
    state = {'todo': 'v0'}
    context = AppendInstructions[None](id='todos')

    @context.instructions(name='state')
    def todos(ctx: RunContext[None]) -> str:  # pyright: ignore[reportUnusedFunction]
        return state['todo']

    def get_time() -> str:
        """The time."""
        return 'noon'

    verifier = WireVerifier(mode='enforce')
    capture = WireCapture()
    script = [ToolCalls([('get_time', {})]), Text('It is noon.'), Text('Noted.'), Text('Still noon.')]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with FakeProvider(script=script) as server:
            async with capture.http_client(transport=verifier.transport()) as http_client:
                agent = Agent(
                    factory(server.url, http_client=http_client),
                    deps_type=type(None),
                    tools=[get_time],
                    capabilities=[compaction(), PrefixGuard[None](verifier=verifier), context],
                )
                history: list[ModelMessage] = []
                for todo, prompt in [('v0', 'What time is it?'), ('v1', LONG), ('v2', 'And now?')]:
                    state['todo'] = todo
                    history = (await agent.run(prompt, message_history=history)).all_messages()
    assert server.compactions and server.errors == []
    assert any(isinstance(m, ModelResponse) and isinstance(m.parts[0], CompactionPart) for m in history)
    assert [str(warning.message) for warning in caught] == []
    assert verifier.divergences == []
    # The instructions move only on a request right after a new compaction (a new window, stating the value current
    # then; one opened inside a run, where the value has not changed, states the same), and the last request's latest
    # word on the todo list is its current value.
    sent = [json.loads(exchange.request_body) for exchange in capture.exchanges if exchange.path.endswith(('es', 'ns'))]
    instructions = [instructions_of(body, key) for body in sent]
    moves = {index for index in range(1, len(sent)) if instructions[index] != instructions[index - 1]}
    compactions = [_first_compaction(body) for body in sent]
    after_compaction = {
        index for index in range(1, len(sent)) if compactions[index] and compactions[index] != compactions[index - 1]
    }
    assert moves and moves <= after_compaction
    assert latest_todo(sent[-1], key) == 'v2'


_STATED = re.compile(r'<context id="capability:todos:state">\n(.*?)\n')


def strings(value: object) -> list[str]:
    """Every string in a JSON value, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(cast('dict[str, object]', value).values())
    return [text for item in cast('list[object]', value) for text in strings(item)] if isinstance(value, list) else []


def latest_todo(body: dict[str, Any], key: str) -> str:
    """The todo list's value as a request body last states it: in the latest change after the prefix, or in it."""
    stated = [found for text in strings(body.get('messages') or body.get('input')) for found in _STATED.findall(text)]
    return stated[-1] if stated else _STATED.findall(instructions_of(body, key))[-1]


def _first_compaction(body: dict[str, Any]) -> str | None:
    """The compaction (block or item) a request body starts with, as JSON, if it starts with one."""
    messages = cast('list[dict[str, Any]]', body.get('messages') or body.get('input') or [{}])
    first = messages[0]
    content: object = first.get('content')
    blocks = cast('list[dict[str, Any]]', content) if isinstance(content, list) else [first]
    found = [block for block in blocks if block.get('type') == 'compaction']
    return json.dumps(found[0]) if found else None
