"""The to-do agent the capability tests share: two append-mode blocks and a rewrite-mode one, on a scripted model."""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import Model

from pydantic_ai_append import AppendInstructions

from .conversation import ScriptedModel


@dataclass
class Deps:
    todos: list[str] = field(default_factory=list[str])
    memory: str | None = None
    mode: str = 'plan'


def make_agent(chat: ScriptedModel | Model, **options: object) -> Agent[Deps, str]:
    # Every run is one user's, who is the tenant of the record store's entries.
    context = AppendInstructions[Deps](id='todos', tenant=lambda ctx: 'alice', **options)  # pyright: ignore[reportArgumentType]

    @context.instructions(name='state')
    def state(ctx: RunContext[Deps]) -> str | None:
        return '\n'.join(f'- [ ] {todo}' for todo in ctx.deps.todos) or None

    @context.instructions(name='memory')
    async def memory(ctx: RunContext[Deps]) -> str | None:
        return ctx.deps.memory

    @context.instructions(name='mode', on_change='rewrite')
    def mode(ctx: RunContext[Deps]) -> str:
        return f'Mode: {ctx.deps.mode}'

    model = chat.model() if isinstance(chat, ScriptedModel) else chat
    agent = Agent(model, deps_type=Deps, instructions='Be brief.', capabilities=[context])

    @agent.tool_plain
    def add_todo(item: str) -> str:
        return f'added {item}'

    return agent


def round_trip(messages: list[ModelMessage]) -> list[ModelMessage]:
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
