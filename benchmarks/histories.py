"""The histories the timed parts run on, and the model that answers them at once.

The model is a `FunctionModel` that answers at once, so the time of a run is Pydantic AI's and the plugin's. Two
profiles are timed, because Pydantic AI does more work for system messages on models without inline support
(it wraps each one in `<system>` user text): `inline` and `wrapped`.

Histories are built the way the agent builds them, but without running the agent N times (that is quadratic
in N): the first turn is a real run, and each later turn adds the user prompt, the carriers the plugin would
record (made with the plugin's own `record_changes`), and the reply. `tests/test_benchmark.py` checks that a built
history equals a history of real runs. Pydantic AI's own append mechanism keeps records of its own, so its
histories are made by real runs (`real_history`), and only up to `NATIVE_MAX_TURNS` (`__main__`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal, TypeAlias, cast

from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from pydantic_ai_append._history import RECORD_KEY, scan
from pydantic_ai_append._request import record_changes
from pydantic_ai_append._window import fold

from .scenario import BLOCKS, STATIC_INSTRUCTIONS, Policy, build_agent, prompt

__all__ = (
    'REPLY',
    'Profile',
    'build_history',
    'count_changes',
    'fresh',
    'function_model',
    'real_history',
    'stored_bytes',
)

Profile: TypeAlias = Literal['inline', 'wrapped']

REPLY = 'Noted.'


def _reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(REPLY)])


def function_model(profile: Profile) -> FunctionModel:
    """A model that answers at once, with or without inline system message support."""
    return FunctionModel(_reply, profile=ModelProfile(supports_inline_system_prompts=profile == 'inline'))


async def real_history(policy: Policy, turns: int, profile: Profile = 'inline') -> list[ModelMessage]:
    """The history of `turns` real runs of the scenario's agent (no tool calls)."""
    agent = build_agent(policy, function_model(profile))
    history: list[ModelMessage] = []
    for turn in range(1, turns + 1):
        history = (await agent.run(prompt(turn), deps=turn, message_history=history)).all_messages()
    return history


async def build_history(policy: Policy, turns: int, *, changes_until: int | None = None) -> list[ModelMessage]:
    """A history equal to `real_history(policy, turns)` in every part, built in time linear in `turns`.

    With `changes_until`, the blocks keep the values they have at that turn for the turns after it, so the history
    has as many turns but fewer changes (none recorded after that turn).
    """
    last_change = turns if changes_until is None else changes_until
    history = await real_history(policy, 1)
    first = history[0]
    assert isinstance(first, ModelRequest)
    response = history[1]
    window = fold(scan(history), key=None, conversation_id=None)
    for turn in range(2, turns + 1):
        parts: list[ModelRequestPart] = [UserPromptPart(prompt(turn))]
        instructions = first.instructions
        at, previous = min(turn, last_change), min(turn - 1, last_change)
        if policy == 'append':
            changes = [
                (f'capability:scenario:{name}', after)
                for name, function in BLOCKS
                if function(previous) != (after := function(at))
            ]
            carriers = record_changes(window, changes, key=None, conversation_id=None)
            parts += carriers
            if carriers:
                record = cast('dict[str, Any]', carriers[-1].metadata)[RECORD_KEY]
                window = replace(window, state=record['state'], last_check=record['check'])
        elif policy == 'rewrite':
            instructions = '\n\n'.join([STATIC_INSTRUCTIONS, *(function(at) for _, function in BLOCKS)])
        history += [replace(first, parts=parts, instructions=instructions), replace(response)]
    return history


def fresh(history: Sequence[ModelMessage]) -> list[ModelMessage]:
    """`history` through JSON and back: new objects, as a server that stores history between requests reads it."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(list(history)))


def stored_bytes(history: Sequence[ModelMessage]) -> int:
    """The size of `history` serialized as JSON, as it is stored between requests."""
    return len(ModelMessagesTypeAdapter.dump_json(list(history)))


def count_changes(history: Sequence[ModelMessage]) -> int:
    """The number of change records in `history`."""
    return sum(part is not None and bool(part.content) for _, _, part, _ in scan(history).found)
