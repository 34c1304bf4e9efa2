"""Changes on Mistral: its API refuses a request whose last message is a system message.

Pydantic AI's profile for Mistral takes mid-conversation system messages, so a change would go out as the request's
last message with role `system`, which Mistral's chat completions refuse (`Expected last role User or Tool (or
Assistant with prefix True) for serving but got system`; see `docs/delivery.md` for the sources). The plugin sends
Mistral each change as `<system>`-wrapped user text instead, as Pydantic AI sends a model without inline system
messages, and marked as its own frame where Pydantic AI notes text that imitates `<system>`.

The wire test runs Pydantic AI's `MistralModel` through the real `mistralai` SDK against the fake provider, whose
Chat Completions endpoint is the shape Mistral's API shares (the dev group installs the SDK). The scripted-model test
shows the same path through the agent without the SDK (a `FunctionModel` whose provider is `mistral`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.concurrency import ConcurrencyLimitedModel
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append._wire.segments import segments
from pydantic_ai_append.testing import assert_prefix_stable
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls

from .fake_models import live_loopback

pytestmark = pytest.mark.anyio


@dataclass
class Todos:
    items: list[str] = field(default_factory=lambda: ['write tests'])


def build_agent(model: Model) -> Agent[Todos, str]:
    context = AppendInstructions[Todos](id='todos', windows='keep')
    context.instructions(name='state')(lambda ctx: '\n'.join(f'- [ ] {item}' for item in ctx.deps.items))
    agent = Agent(model, deps_type=Todos, instructions='Be brief.', capabilities=[context])

    @agent.tool
    def add_todo(ctx: RunContext[Todos], item: str) -> str:
        ctx.deps.items.append(item)
        return f'added {item}'

    return agent


async def converse(agent: Agent[Todos, str]) -> None:
    """Three requests: a change before the second run's prompt, and one the tool makes before the third request."""
    todos = Todos()
    history: list[ModelMessage] = (await agent.run('What is first?', deps=todos)).all_messages()
    todos.items.append('write docs')
    await agent.run('Add shipping.', deps=todos, message_history=history)


class MistralScripted(FunctionModel):
    """A scripted model on Mistral's path: its provider is `mistral`, its profile takes inline system messages."""

    def __init__(self) -> None:
        super().__init__(self._reply, profile=ModelProfile(supports_inline_system_prompts=True))
        self.last: list[str] = []
        """The last part of each request, by kind and text."""

    @property
    def system(self) -> str:
        return 'mistral'

    def _reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        part = request.parts[-1]
        assert isinstance(part, UserPromptPart)
        items = [part.content] if isinstance(part.content, str) else part.content
        texts = [item if isinstance(item, str) else str(getattr(item, 'content', item)) for item in items]
        self.last.append(f'{part.part_kind}: {"".join(texts)}')
        if len(self.last) == 2:
            return ModelResponse(parts=[ToolCallPart('add_todo', {'item': 'ship'}, tool_call_id='call_1')])
        return ModelResponse(parts=[TextPart('ok')])


async def test_a_change_never_ends_a_request_to_mistral_as_a_system_message():
    model = MistralScripted()
    await converse(build_agent(model))
    assert model.last == snapshot(
        [
            'user-prompt: What is first?',
            """\
user-prompt: <system><context id="capability:todos:state">
- [ ] write tests
- [ ] write docs
</context></system>\
""",
            """\
user-prompt: <system><context id="capability:todos:state">
- [ ] write tests
- [ ] write docs
- [ ] ship
</context></system>\
""",
        ]
    )


async def test_a_change_never_ends_a_request_to_mistral_inside_a_fallback_model():
    # Its fellow member takes inline system messages; Mistral, serving, must get the changes as user text all the same.
    mistral = MistralScripted()
    inline = FunctionModel(
        lambda messages, info: ModelResponse(parts=[TextPart('ok')]),
        profile=ModelProfile(supports_inline_system_prompts=True),
    )
    await converse(build_agent(ConcurrencyLimitedModel(FallbackModel(mistral, inline), limiter=2)))
    assert [text.split(':')[0] for text in mistral.last] == ['user-prompt'] * 3


@live_loopback
async def test_mistral_gets_each_change_as_user_text_on_the_wire():
    from pydantic_ai.models.mistral import MistralModel
    from pydantic_ai.providers.mistral import MistralProvider

    script = [Text('Tests first.'), ToolCalls([('add_todo', {'item': 'ship'})]), Text('Added.')]
    with FakeProvider(script=script) as server:
        async with httpx2.AsyncClient() as http_client:
            provider = MistralProvider(api_key='fake-provider-key', base_url=server.url, http_client=http_client)
            await converse(build_agent(MistralModel('mistral-large-latest', provider=provider)))
    assert server.errors == []
    bodies: list[dict[str, Any]] = [json.loads(body) for body in server.requests]
    # Mistral takes a request whose last message is the user's or a tool's.
    assert [body['messages'][-1]['role'] for body in bodies] == ['user', 'user', 'user']
    assert_prefix_stable([segments('openai-chat', body) for body in server.requests])
    assert [_text(message) for message in bodies[-1]['messages'][-5:]] == snapshot(
        [
            """\
user: <system><context id="capability:todos:state">
- [ ] write tests
- [ ] write docs
</context></system>\
""",
            'assistant: ',
            'tool: added ship',
            'assistant: OK',
            """\
user: <system><context id="capability:todos:state">
- [ ] write tests
- [ ] write docs
- [ ] ship
</context></system>\
""",
        ]
    )


def _text(message: dict[str, Any]) -> str:
    content = message.get('content')
    if isinstance(content, list):
        content = ''.join(str(chunk.get('text', '')) for chunk in cast('list[dict[str, Any]]', content))
    return f'{message["role"]}: {content}'
