"""The conversation every durable test runs: an agent, its deps, the model's script and what changes between runs.

One module so that a durable run and a plain run of the same conversation are built from the same parts, and
their request bodies can be compared byte for byte. The model is Pydantic AI's real `OpenAIChatModel`, which
builds the provider body itself; its HTTP client answers from the fake provider's script in process
(`httpx2.MockTransport`), so no socket is opened and the bodies are kept by a `WireCapture`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import httpx2
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import self_edit_toolset
from pydantic_ai_append.testing import WireCapture
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, Turn

__all__ = [
    'BLOCK_CALLS',
    'OUTPUTS',
    'PROMPTS',
    'REPLAY_DRIFTS',
    'SCRIPT',
    'Project',
    'Wire',
    'between_runs',
    'build_agent',
    'converse_plainly',
]

SCRIPT: list[Turn] = [
    Text('Write the tests first.'),  # run 1
    ToolCalls([('complete_todo', {'item': 'write tests'})]),  # run 2: the docs todo arrived before this request
    Text('Tests done.'),  # after the tool result, with the change the tool made
    Text('Noted.'),  # run 3: the todo list is withdrawn, the memory edited
    ToolCalls([('add_todo', {'item': 'ship'})]),  # run 4: the tool brings the todo list back
    ToolCalls([('edit_context', {'block_id': 'capability:project:memory', 'content': 'Ship on Friday.'})]),
    Text('Added.'),  # after the model's own edit of its memory
]

PROMPTS = ['What is first?', 'Finish the tests.', 'Forget the todos.', 'Plan shipping.']

OUTPUTS = ['Write the tests first.', 'Tests done.', 'Noted.', 'Added.']

BLOCK_CALLS: Counter[str] = Counter()
"""How often each block function was called in this process, to show that a replay calls them again."""

REPLAY_DRIFTS = False
"""Whether the memory block function adds a line of its own: set only by the test that replays a history with a
block function that returns other text than it did when the workflow ran."""


@dataclass
class Project:
    """The agent's deps: plain data, so a durable engine can serialize it into its activities."""

    todos: dict[str, bool] = field(default_factory=lambda: {'write tests': False})
    """Each todo and whether it is done."""
    memory: list[str] = field(default_factory=lambda: [f'Note {n}: the build on day {n} was green.' for n in range(8)])
    """Notes the agent keeps."""


def between_runs(run: int, project: Project) -> None:
    """What the application changes before each run starts."""
    if run == 1:
        project.todos['write docs'] = False
    elif run == 2:
        project.todos.clear()
        project.memory[3] = 'Note 3: the build on day 3 was red, fixed on day 4.'


class Wire:
    """The model's HTTP side: the fake provider's script answered in process, each body kept."""

    def __init__(self, first_turn: int = 0) -> None:
        self.capture = WireCapture()
        """The request bodies sent, in order."""
        self.provider = FakeProvider(script=SCRIPT[first_turn:])
        """Answers each request with the next scripted turn (never started: no socket is opened)."""
        # The fake numbers its replies' ids (tool call ids among them) by the requests it has received, so a process
        # that takes the conversation up at `first_turn` counts the requests an earlier process answered.
        self.provider.requests.extend(b'' for _ in range(first_turn))

    def reset(self) -> None:
        """Forget what was sent and start the script again, for the next test; models already built keep working."""
        self.capture.exchanges.clear()
        self.provider = FakeProvider(script=SCRIPT)

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        reply = self.provider.answer(request.url.path, request.content)
        return httpx2.Response(reply.status, content=reply.body, headers={'content-type': 'application/json'})

    def model(self) -> OpenAIChatModel:
        client = self.capture.http_client(transport=httpx2.MockTransport(self.answer))
        provider = OpenAIProvider(base_url='http://fake-provider.invalid/v1', api_key='fake', http_client=client)
        return OpenAIChatModel('gpt-5.2', provider=provider)

    @property
    def bodies(self) -> list[bytes]:
        return [exchange.request_body for exchange in self.capture.exchanges]


def build_agent(
    model: OpenAIChatModel, *, durability: AbstractCapability[Project] | None = None, workflow_tools: bool = True
) -> Agent[Project, str]:
    """The agent under test: two append-mode blocks read from deps, two tools that change the todos, and the
    guard's self-edit tool, whose writer stores the model's new memory in deps.

    Args:
        model: The model to send through.
        durability: A durable engine's capability, if any.
        workflow_tools: Under Temporal, whether the tools run in workflow code (`metadata={'temporal': False}`),
            where their change to deps is seen by the block functions; otherwise each runs in an activity, on a
            copy of the deps.
    """
    context = AppendInstructions[Project](id='project')

    @context.instructions(name='todos')
    def todos(ctx: RunContext[Project]) -> str | None:
        BLOCK_CALLS['todos'] += 1
        lines = [f'- [{"x" if done else " "}] {item}' for item, done in ctx.deps.todos.items()]
        return '\n'.join(lines) or None

    @context.instructions(name='memory')
    def memory(ctx: RunContext[Project]) -> str:
        BLOCK_CALLS['memory'] += 1
        text = '\n'.join(ctx.deps.memory)
        return f'{text}\nRead on replay.' if REPLAY_DRIFTS else text

    def remember(ctx: RunContext[Project], content: str | None) -> None:
        ctx.deps.memory = content.splitlines() if content is not None else []

    self_edit = self_edit_toolset(context, {'memory': remember})
    capabilities: list[AbstractCapability[Project]] = [context]
    if durability is not None:
        capabilities.append(durability)
    agent = Agent(
        model,
        name='project',
        deps_type=Project,
        instructions='You are a careful release manager. Be brief.',
        capabilities=capabilities,
        toolsets=[self_edit.with_metadata(temporal=False) if workflow_tools else self_edit],
    )
    metadata = {'temporal': False} if workflow_tools else None

    @agent.tool(metadata=metadata)
    async def complete_todo(ctx: RunContext[Project], item: str) -> str:
        """Mark a todo done."""
        ctx.deps.todos[item] = True
        return f'{item}: done'

    @agent.tool(metadata=metadata)
    async def add_todo(ctx: RunContext[Project], item: str) -> str:
        """Add a todo."""
        ctx.deps.todos[item] = False
        return f'{item}: added'

    return agent


async def converse_plainly(wire: Wire) -> list[ModelMessage]:
    """The whole conversation without a durable engine: what a durable run must send, byte for byte."""
    project = Project()
    history: list[ModelMessage] = []
    agent = build_agent(wire.model())
    for run, prompt in enumerate(PROMPTS):
        between_runs(run, project)
        result = await agent.run(prompt, deps=project, message_history=history)
        history = result.all_messages()
    return history
