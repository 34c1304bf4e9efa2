"""The prefix stays byte-identical on the wire, on every provider API and delivery path.

Real `openai` and `anthropic` SDK clients, through Pydantic AI's own model classes, talk to the fake provider;
the exchanges are recorded as cassettes and replayed with the network blocked. Each path runs the same
conversation: 8 requests over 5 runs, with a JSON round trip of the history between runs, covering a change on
the first request of a run, a change after a tool call, a withdrawal and its return, a one-line edit to a long
block (a diff), a request with no change, and a rewrite-mode change, which opens a new window (request 6).

The checker compares the bytes each request actually sends, split into cache-order segments. The rendered
prefix and every delivered change are pinned per path in `tests/snapshots/`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

import pytest
from inline_snapshot import external_file
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIResponsesModelSettings
from pydantic_ai.settings import ModelSettings

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import Api, Segment, WireCapture, assert_prefix_stable, prefix_reuse
from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    ToolCalls,
    anthropic_model,
    openai_chat_model,
    openai_responses_model,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.vcr,
    # The Anthropic SDK warns that this model is near its end of life; it is the non-inline path under test.
    pytest.mark.filterwarnings("ignore:The model 'claude-sonnet-4-5' is deprecated:DeprecationWarning"),
]

NEW_WINDOW = 6
"""The request at which the rewrite-mode block changes, so the prefix may move."""

SCRIPT = [
    Text('Write the tests first.'),  # run 1
    ToolCalls([('complete_todo', {'item': 'write tests'})]),  # run 2: the docs todo arrived before this request
    Text('Tests done.'),  # after the tool result, with the change it made
    ToolCalls([('add_todo', {'item': 'ship'})]),  # run 3: memory edited (a diff), todos cleared (a withdrawal)
    Text('Added.'),  # the todo list returns
    Text('Nothing else.'),  # run 4: nothing changed
    ToolCalls([('complete_todo', {'item': 'ship'})]),  # run 5: the mode changed, a new window
    Text('Shipped.'),
]

PROMPTS = ['What is first?', 'Finish the tests.', 'Plan the next steps.', 'Anything else?', 'Go.']


@dataclass
class Project:
    todos: dict[str, bool] = field(default_factory=lambda: {'write tests': False})
    memory: list[str] = field(default_factory=lambda: [f'Note {n}: the build on day {n} was green.' for n in range(40)])
    mode: str = 'plan'


def build_agent(model: Model) -> Agent[Project, str]:
    context = AppendInstructions[Project](id='project')

    @context.instructions(name='todos')
    def todos(ctx: RunContext[Project]) -> str | None:
        lines = [f'- [{"x" if done else " "}] {item}' for item, done in ctx.deps.todos.items()]
        return '\n'.join(lines) or None

    @context.instructions(name='memory')
    def memory(ctx: RunContext[Project]) -> str:
        return '\n'.join(ctx.deps.memory)

    @context.instructions(name='mode', on_change='rewrite')
    def mode(ctx: RunContext[Project]) -> str:
        return f'Mode: {ctx.deps.mode}.'

    agent = Agent(
        model, deps_type=Project, instructions='You are a careful release manager. Be brief.', capabilities=[context]
    )

    @agent.tool
    def complete_todo(ctx: RunContext[Project], item: str) -> str:
        """Mark a todo done."""
        ctx.deps.todos[item] = True
        return f'{item}: done'

    @agent.tool
    def add_todo(ctx: RunContext[Project], item: str) -> str:
        """Add a todo."""
        ctx.deps.todos[item] = False
        return f'{item}: added'

    return agent


def between_runs(run: int, project: Project) -> None:
    """What changes before each run starts."""
    if run == 1:
        project.todos['write docs'] = False
    elif run == 2:
        project.memory[20] = 'Note 20: the build on day 20 was red, fixed on day 21.'
        project.todos.clear()
    elif run == 4:
        project.mode = 'act'


async def converse(api: Api, model_name: str, settings: ModelSettings | None = None) -> list[list[Segment]]:
    capture = WireCapture()
    project = Project()
    history: list[ModelMessage] = []
    outputs: list[str] = []
    factories = {
        'anthropic': anthropic_model,
        'openai-chat': openai_chat_model,
        'openai-responses': openai_responses_model,
    }
    with FakeProvider(script=SCRIPT) as server:
        async with capture.http_client() as http_client:
            for run, prompt in enumerate(PROMPTS):
                between_runs(run, project)
                agent = build_agent(factories[api](server.url, model_name, http_client=http_client))
                result = await agent.run(prompt, deps=project, message_history=history, model_settings=settings)
                outputs.append(result.output)
                history = ModelMessagesTypeAdapter.validate_json(
                    ModelMessagesTypeAdapter.dump_json(result.all_messages())
                )
    assert outputs == ['Write the tests first.', 'Tests done.', 'Added.', 'Nothing else.', 'Shipped.']
    return capture.conversation(api).requests


def texts(segment: Segment) -> Iterator[str]:
    """The prompt text in a segment, whatever the API's shape: strings under `text`, `content`, `instructions`."""

    def walk(value: object, key: str | None) -> Iterator[str]:
        if isinstance(value, str):
            if key in (None, 'text', 'content', 'instructions'):
                yield value
        elif isinstance(value, dict):
            for name, item in cast('dict[str, object]', value).items():
                yield from walk(item, name)
        elif isinstance(value, list):
            for item in cast('list[object]', value):
                yield from walk(item, key)

    yield from walk(json.loads(segment.data), None)


def is_framework_text(text: str) -> bool:
    # Newer releases explain the `<system>` tag in the system prompt; it is Pydantic AI's, not the plugin's.
    return text.startswith('Mid-conversation system messages')


def is_reply(item: object) -> bool:
    return isinstance(item, dict) and cast('dict[str, object]', item).get('role') == 'assistant'


def transcript(requests: list[list[Segment]]) -> str:
    """The prefix of the first request and of the new window, then the changes each request delivered."""
    lines: list[str] = []
    for index, request in enumerate(requests):
        if index in (0, NEW_WINDOW):
            prefix = [segment for segment in request if segment.kind in ('system', 'instructions')]
            # OpenAI Chat sends the instructions as the leading system messages.
            messages = [segment for segment in request if segment.kind == 'message']
            prefix += itertools.takewhile(lambda segment: json.loads(segment.data).get('role') == 'system', messages)
            lines.append(f'=== request {index} opens a window; prefix: ===')
            lines += [text for segment in prefix for text in texts(segment) if not is_framework_text(text)]
            # What it delivers at once, after the last reply: the changes since the prefix it keeps.
            replies = [at for at, segment in enumerate(request) if is_reply(json.loads(segment.data))]
            tail = request[replies[-1] + 1 :] if replies else []
            lines.append(f'=== request {index} delivers: ===')
            lines += [text for segment in tail for text in texts(segment) if text.startswith(('<context', '<system'))]
        else:
            lines.append(f'=== request {index} delivers: ===')
            lines += [
                text for segment in request[len(requests[index - 1]) :] for text in texts(segment) if '<context' in text
            ]
    return '\n'.join(lines) + '\n'


def check(requests: list[list[Segment]], snapshot_name: str) -> None:
    assert len(requests) == 8
    assert_prefix_stable(requests, new_windows=(NEW_WINDOW,))
    # Reuse is total on every in-window request, so every byte the previous request sent is cached.
    for index, reuse in enumerate(prefix_reuse(requests)):
        if index and index != NEW_WINDOW:
            previous = sum(len(segment.data) for segment in requests[index - 1])
            assert reuse.reused_bytes == previous
    assert transcript(requests) == external_file(f'snapshots/{snapshot_name}.txt')


async def test_openai_chat():
    check(await converse('openai-chat', 'gpt-5.2'), 'wire_openai_chat')


async def test_openai_responses():
    check(await converse('openai-responses', 'gpt-5.2'), 'wire_openai_responses')


async def test_openai_responses_with_previous_response_id():
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    check(await converse('openai-responses', 'gpt-5.2', settings), 'wire_openai_responses_previous_id')


async def test_anthropic_inline():
    check(await converse('anthropic', 'claude-opus-4-8'), 'wire_anthropic_inline')


async def test_anthropic_wrapped():
    requests = await converse('anthropic', 'claude-sonnet-4-5')
    check(requests, 'wire_anthropic_wrapped')
    if 'framing_announcement' in ModelSettings.__annotations__:
        # This release explains `<system>` in the system prompt; the plugin has it there from the first request, so
        # the first change (request 1) doesn't move the prefix, as `check` showed.
        system = [text for segment in requests[0] if segment.kind == 'system' for text in texts(segment)]
        assert any(is_framework_text(text) for text in system)


@pytest.mark.parametrize('model_name', ['claude-sonnet-4-5', 'claude-opus-4-8'])
async def test_a_resumed_turn_sends_the_suspended_requests_bytes(model_name: str):
    capture = WireCapture()
    project = Project()
    with FakeProvider(script=[Text('one'), Text('two'), Text('three')]) as server:
        async with capture.http_client() as http_client:
            agent = build_agent(anthropic_model(server.url, model_name, http_client=http_client))
            history = (await agent.run('first', deps=project)).all_messages()
            project.todos['write docs'] = False
            history = (await agent.run('second', deps=project, message_history=history)).all_messages()
            # The provider paused the second turn; a later run resumes it, with blocks that changed again since.
            suspended = history[-1]
            assert isinstance(suspended, ModelResponse)
            suspended.state = 'suspended'
            project.todos['ship'] = False
            await agent.run(
                None,
                deps=project,
                message_history=ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history)),
            )
    requests = capture.conversation('anthropic').requests
    assert len(requests) == 3
    assert_prefix_stable(requests)
    assert not any('ship' in text for segment in requests[2] for text in texts(segment))


async def test_streamed_runs_keep_the_prefix():
    capture = WireCapture()
    project = Project()
    history: list[ModelMessage] = []
    with FakeProvider(script=[Text('one'), ToolCalls([('add_todo', {'item': 'ship'})]), Text('two')]) as server:
        async with capture.http_client() as http_client:
            agent = build_agent(openai_chat_model(server.url, http_client=http_client))
            for run, prompt in enumerate(['first', 'second']):
                if run:
                    project.todos['write docs'] = False
                async with agent.run_stream(prompt, deps=project, message_history=history) as stream:
                    await stream.get_output()
                history = stream.all_messages()
    requests = capture.conversation('openai-chat').requests
    assert len(requests) == 3
    assert_prefix_stable(requests)
    # The prefix states the todos once; the second run delivers the change made before it, then the tool's.
    elements = [
        sum('<context id="capability:project:todos">' in text for segment in request for text in texts(segment))
        for request in requests
    ]
    assert elements == [1, 2, 3]
