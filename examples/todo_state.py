"""A todo-list agent whose instructions change on every run, and what each change costs the prompt cache.

The agent's instructions carry the user's todo list, which the user and the agent's own tool keep changing.
Rewritten in place, each change would move the prompt's prefix, and the provider would drop its cache of
everything after the list. Here the list is an `AppendInstructions` block, so the prefix keeps the list as
the first request sent it, and each change is appended to the conversation instead. The example measures the
result on the wire: for each request, how many bytes repeat the previous request (the part a provider can serve
from its cache), how many are new, and which changes the request delivered.

With no argument it talks to an offline stand-in for the OpenAI API that answers from a script, so it runs
without an API key or network, yet the bytes measured are the ones the real OpenAI SDK sends. Name a model to
talk to its provider instead, with the provider's API key in the environment:

    uv run python examples/todo_state.py
    uv run python examples/todo_state.py openai:gpt-5.2
    uv run python examples/todo_state.py anthropic:claude-sonnet-4-6
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

import httpx2
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import Api, PrefixReuse, Segment, WireCapture, prefix_reuse

# --- The agent


@dataclass
class Todo:
    """One item of the list."""

    text: str
    done: bool = False


@dataclass
class TodoList:
    """The app's state that the agent sees: the user edits it between runs, the agent through its tool."""

    todos: list[Todo] = field(default_factory=list[Todo])


todo_context = AppendInstructions[TodoList](id='todos')


@todo_context.instructions(name='state')
def todo_state(ctx: RunContext[TodoList]) -> str | None:
    return '\n'.join(f'- [{"x" if todo.done else " "}] {todo.text}' for todo in ctx.deps.todos) or None


agent = Agent(
    deps_type=TodoList,
    instructions=(
        "You help the user work through their todo list. The list below is the user's current one; it is kept "
        'up to date as items are added or ticked off. When the user says an item is done, call `complete_todo` '
        'with its text. Answer in one or two sentences.'
    ),
    capabilities=[todo_context],
)


@agent.tool
def complete_todo(ctx: RunContext[TodoList], item: str) -> str:
    """Tick off an item of the todo list.

    Args:
        ctx: The run context, whose deps hold the list.
        item: The item's text, as the list shows it.
    """
    for todo in ctx.deps.todos:
        if todo.text.casefold() == item.strip().casefold():
            todo.done = True
            return f'Ticked off {todo.text!r}.'
    raise ModelRetry(f'There is no item {item!r}; the items are: {", ".join(todo.text for todo in ctx.deps.todos)}.')


def starting_list() -> TodoList:
    return TodoList([Todo('write tests'), Todo('fix the flaky CI job'), Todo('update the changelog')])


async def converse(model: Model, todo_list: TodoList) -> None:
    """Three runs: a plain answer, a tool call that changes the list, and a change the user made between runs."""
    history = await ask(model, todo_list, [], 'What should I do first?')
    history = await ask(model, todo_list, history, 'I fixed the flaky CI job, please tick it off.')
    todo_list.todos.append(Todo('release 0.1.0'))
    await ask(model, todo_list, history, 'I added the release to the list. The tests are written too; what is left?')


async def ask(model: Model, todo_list: TodoList, history: list[ModelMessage], prompt: str) -> list[ModelMessage]:
    """Run the agent once, print the exchange, and return the history as an app would store and load it."""
    result = await agent.run(prompt, model=model, deps=todo_list, message_history=history)
    print(f'> {prompt}\n{result.output}\n')
    # Stored as JSON, history keeps the capability's records, and they are all it needs to continue the window.
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(result.all_messages()))


# --- The offline stand-in for the OpenAI Chat Completions API


@dataclass(frozen=True)
class ToolCall:
    """A scripted reply that calls one tool."""

    name: str
    arguments: dict[str, str]


Reply: TypeAlias = str | ToolCall
"""A scripted reply: text, or a tool call."""

OFFLINE_SCRIPT: tuple[Reply, ...] = (
    "Fix the flaky CI job first: until it passes reliably, you can't trust the tests you write.",
    ToolCall('complete_todo', {'item': 'fix the flaky CI job'}),
    'Done, the CI job is ticked off. Next up: write tests.',
    ToolCall('complete_todo', {'item': 'write tests'}),
    'Ticked off the tests. Left: update the changelog, then release 0.1.0.',
)
"""The replies, in the order `converse` makes its requests."""

_CREATED = 1_767_225_600  # a fixed time (2026-01-01), so that nothing in a reply varies between runs


def offline_openai(script: Sequence[Reply]) -> httpx2.MockTransport:
    """A transport that answers `POST /v1/chat/completions` with the script's replies, one per request."""
    replies = iter(enumerate(script, start=1))

    def answer(request: httpx2.Request) -> httpx2.Response:
        if (request.method, request.url.path) != ('POST', '/v1/chat/completions'):
            return api_error(
                404, f'The offline stand-in serves POST /v1/chat/completions, not {request.method} {request.url.path}.'
            )
        number, reply = next(replies, (0, None))
        if reply is None:
            return api_error(400, f'All {len(script)} replies of the offline script have been sent.')
        body = cast('dict[str, Any]', json.loads(request.content))
        return httpx2.Response(200, json=chat_completion(number, str(body['model']), reply, len(request.content)))

    return httpx2.MockTransport(answer)


def chat_completion(number: int, model_name: str, reply: Reply, request_size: int) -> dict[str, Any]:
    """A Chat Completions response carrying one reply; ids are numbered, so the history is the same every run."""
    message: dict[str, Any] = {'role': 'assistant', 'content': reply if isinstance(reply, str) else None}
    if isinstance(reply, ToolCall):
        function = {'name': reply.name, 'arguments': json.dumps(reply.arguments)}
        message['tool_calls'] = [{'id': f'call_offline_{number}', 'type': 'function', 'function': function}]
    # Usage isn't shown; the SDK expects some, so it is estimated at about four bytes a token.
    prompt_tokens, completion_tokens = request_size // 4, len(json.dumps(message)) // 4
    return {
        'id': f'chatcmpl-offline-{number}',
        'object': 'chat.completion',
        'created': _CREATED,
        'model': model_name,
        'choices': [
            {'index': 0, 'message': message, 'finish_reason': 'stop' if isinstance(reply, str) else 'tool_calls'}
        ],
        'usage': {
            'prompt_tokens': prompt_tokens,
            'completion_tokens': completion_tokens,
            'total_tokens': prompt_tokens + completion_tokens,
        },
    }


def api_error(status: int, message: str) -> httpx2.Response:
    return httpx2.Response(status, json={'error': {'message': message, 'type': 'invalid_request_error'}})


# --- Where the requests go

Provider: TypeAlias = Literal['openai', 'anthropic']

PROVIDER_APIS: dict[Provider, Api] = {'openai': 'openai-chat', 'anthropic': 'anthropic'}
"""The API each provider's model class speaks, whose request bodies the measurement splits."""

API_KEY_VARIABLES: dict[Provider, str] = {'openai': 'OPENAI_API_KEY', 'anthropic': 'ANTHROPIC_API_KEY'}


@dataclass(frozen=True)
class Target:
    """The model the runs talk to: at a provider, or the offline stand-in's OpenAI model."""

    provider: Provider
    model_name: str
    offline: bool

    @classmethod
    def from_argument(cls, model: str | None) -> Target:
        """The target a command-line model name asks for.

        Args:
            model: `openai:<model>` or `anthropic:<model>`, or `None` for the offline stand-in.

        Raises:
            SystemExit: If the provider is not one the example knows, or its API key is not set.
        """
        if model is None:
            return cls('openai', 'gpt-5.2', offline=True)
        provider, _, model_name = model.partition(':')
        if provider not in PROVIDER_APIS or not model_name:
            raise SystemExit(
                f'Unknown model {model!r}: name one as openai:<model> or anthropic:<model> (such as openai:gpt-5.2), '
                'or give no model to run offline.'
            )
        if not os.environ.get(API_KEY_VARIABLES[provider]):
            raise SystemExit(f'Set {API_KEY_VARIABLES[provider]} to talk to {model}, or give no model to run offline.')
        return cls(provider, model_name, offline=False)

    def model(self, http_client: httpx2.AsyncClient) -> Model:
        """The Pydantic AI model for this target, sending its requests through `http_client`."""
        if self.provider == 'anthropic':
            return AnthropicModel(self.model_name, provider=AnthropicProvider(http_client=http_client))
        api_key = 'offline' if self.offline else None
        return OpenAIChatModel(self.model_name, provider=OpenAIProvider(api_key=api_key, http_client=http_client))


# --- The measurement

_ELEMENT = re.compile(r'<(context|context-diff) id="[^"]*"[^>]*>.*?</\1>', re.DOTALL)


def texts(value: object) -> Iterator[str]:
    """Every string in a parsed request segment, wherever the API puts message text."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in cast('dict[str, object]', value).values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in cast('list[object]', value):
            yield from texts(item)


def context_elements(request: Sequence[Segment]) -> list[str]:
    """The `<context>` and `<context-diff>` elements of a request, in the order it sends them."""
    return [
        match.group(0)
        for segment in request
        for text in texts(json.loads(segment.data))
        for match in _ELEMENT.finditer(text)
    ]


def first_appearances(previous: Sequence[Segment], current: Sequence[Segment]) -> list[str]:
    """The elements `current` sends beyond those `previous` did: the changes it delivers."""
    # Counted, not just compared: a list that returns to an earlier value sends the same element a second time.
    already_sent = Counter(context_elements(previous))
    delivered: list[str] = []
    for element in context_elements(current):
        if already_sent[element]:
            already_sent[element] -= 1
        else:
            delivered.append(element)
    return delivered


def reused_cell(reuse: Sequence[PrefixReuse], index: int) -> str:
    """The bytes a request reused, and their share of the previous request's."""
    if index == 0:
        return '-'
    reused, previous_total = reuse[index].reused_bytes, reuse[index - 1].total_bytes
    # Rounded down, so that a request that lost a few bytes of the prefix never shows as 100%.
    return f'{reused} ({math.floor(reused * 1000 / previous_total) / 10:g}%)'


def print_report(requests: Sequence[Sequence[Segment]]) -> None:
    """One row per request: bytes reused from the previous request, new bytes, total, and the changes delivered."""
    reuse = prefix_reuse(requests)
    print('Bytes of each request in cache order (tools, then instructions and messages):\n')
    print(f'{"request":>7}  {"reused":>13}  {"new":>5}  {"total":>5}  changes delivered')
    previous: Sequence[Segment] = ()
    for row, request in zip(reuse, requests, strict=True):
        reused = reused_cell(reuse, row.index)
        changes = [element.splitlines()[0] for element in first_appearances(previous, request)] or ['-']
        if row.index == 0:
            # The first request states the blocks in its prefix; later ones deliver changes.
            changes = [f'prefix: {change}' for change in changes]
        print(f'{row.index + 1:>7}  {reused:>13}  {row.new_bytes:>5}  {row.total_bytes:>5}  {changes[0]}')
        for change in changes[1:]:
            print(f'{"":>38}{change}')
        previous = request
    print(f'\n{verdict(reuse)}')


def verdict(reuse: Sequence[PrefixReuse]) -> str:
    short = [row for row in reuse[1:] if row.reused_bytes < reuse[row.index - 1].total_bytes]
    if not short:
        return "Every request after the first reused 100% of the previous request's bytes."
    numbers = ', '.join(str(row.index + 1) for row in short)
    return f"Not every request reused 100% of the previous request's bytes; these did not: {numbers}."


# --- Putting it together


async def demo(target: Target) -> None:
    capture = WireCapture()
    transport = offline_openai(OFFLINE_SCRIPT) if target.offline else None
    async with capture.http_client(transport=transport) as http_client:
        await converse(target.model(http_client), starting_list())
    print_report(capture.conversation(PROVIDER_APIS[target.provider]).requests)


def main(argv: list[str] | None = None) -> None:
    """Run the three turns against the chosen model and print what each request reused.

    Args:
        argv: The command-line arguments after the program name; `sys.argv[1:]` when `None`.
    """
    parser = argparse.ArgumentParser(description='A todo-list agent whose instructions keep the prompt cache.')
    parser.add_argument(
        'model', nargs='?', help='openai:<model> or anthropic:<model>; without it, an offline stand-in for OpenAI'
    )
    arguments = parser.parse_args(argv)
    asyncio.run(demo(Target.from_argument(cast('str | None', arguments.model))))


if __name__ == '__main__':
    main()
