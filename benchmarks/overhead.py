"""Framework overhead: how long one `agent.run` takes with a history of N turns, per policy, in process.

The model is a `FunctionModel` that answers at once, so the time is Pydantic AI's and the plugin's. Two
profiles are timed, because Pydantic AI does more work for system messages on models without inline support
(it wraps each one in `<system>` user text): `inline` and `wrapped`.

Histories are built the way the agent builds them, but without running the agent N times (that is quadratic
in N): the first turn is a real run, and each later turn adds the user prompt, the records the plugin would
record (made with the plugin's own `record_change` and `carrier`), and the reply. `tests/test_benchmark.py`
checks that a built history equals a history of real runs. Pydantic AI's own append mechanism keeps records
of its own, so its histories are made by real runs, and only up to `native_max_turns`.

Besides the policies, a `floor` variant sends what the append policy sends with none of the plugin's logic: a
static agent, the append history, and a capability that only swaps each record for its already-rendered text.
Its time is what Pydantic AI itself charges for the extra parts; the distance from it to `append` is the
plugin's own cost. An `injected` variant is the lower bound of any design that sends the changes' text: the
static history, with no records in it at all, and a capability that adds each change's pre-rendered text to the
request it belongs to, just before the request is sent. The timed runs reuse one history's objects, as one process running a conversation does, so
the records are read once; `append-loaded` gets the history freshly loaded from JSON before each run (outside
the clock), as a server that stores history between requests does, and reads every record again.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from pydantic_ai_append._history import carrier, is_carrier, scan
from pydantic_ai_append._rendering import InlineRenderer, WrappedRenderer, record_change
from pydantic_ai_append._window import fold_window

from .scenario import BLOCKS, STATIC_INSTRUCTIONS, Policy, build_agent, prompt

__all__ = ('Profile', 'Timing', 'build_history', 'function_model', 'real_history', 'time_runs')

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


async def build_history(policy: Policy, turns: int) -> list[ModelMessage]:
    """A history equal to `real_history(policy, turns)` in every part, built in time linear in `turns`."""
    history = await real_history(policy, 1)
    first = history[0]
    assert isinstance(first, ModelRequest)
    response = history[1]
    for turn in range(2, turns + 1):
        parts: list[ModelRequestPart] = [UserPromptPart(prompt(turn))]
        instructions = first.instructions
        if policy == 'append':
            parts += [
                carrier(record_change(f'capability:scenario:{name}', before, after))
                for name, function in BLOCKS
                if (before := function(turn - 1)) != (after := function(turn))
            ]
        elif policy == 'rewrite':
            instructions = '\n\n'.join([STATIC_INSTRUCTIONS, *(function(turn) for _, function in BLOCKS)])
        history += [replace(first, parts=parts, instructions=instructions), replace(response)]
    return history


class _Floor(AbstractCapability[Any]):
    """Swaps each record in the outgoing messages for its change's text, rendered before the clock starts."""

    def __init__(self, texts: dict[int, str]) -> None:
        self._texts = texts

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        messages: list[ModelMessage] = []
        for message in request_context.messages:
            if isinstance(message, ModelRequest) and any(is_carrier(part) for part in message.parts):
                parts = [
                    SystemPromptPart(self._texts[id(part)]) if id(part) in self._texts else part
                    for part in message.parts
                    if not is_carrier(part) or id(part) in self._texts
                ]
                message = replace(message, parts=parts)
            messages.append(message)
        request_context.messages = messages
        return request_context


class _Injected(AbstractCapability[Any]):
    """Adds the changes' texts, rendered before the clock starts, to the outgoing requests they belong to."""

    def __init__(self, texts: dict[int, list[str]]) -> None:
        self._texts = texts

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        request_context.messages = [
            replace(message, parts=[*message.parts, *(SystemPromptPart(text) for text in self._texts[index])])
            if index in self._texts and isinstance(message, ModelRequest)
            else message
            for index, message in enumerate(request_context.messages)
        ]
        return request_context


def _change_texts(history: Sequence[ModelMessage], profile: Profile) -> tuple[dict[int, str], dict[int, list[str]]]:
    """Each change's text, by the identity of its carrier and by the index of the request that carries it."""
    renderer = InlineRenderer() if profile == 'inline' else WrappedRenderer()
    by_part: dict[int, str] = {}
    by_request: dict[int, list[str]] = {}
    # Folded, not just scanned: a change stored as its diff has its text only once the window rebuilds it.
    for delivery in fold_window(scan(history)).deliveries:
        part = history[delivery.message_index].parts[delivery.part_index]
        text = renderer.change(delivery.delta, base_matches=delivery.base_matches)
        by_part[id(part)] = text
        by_request.setdefault(delivery.message_index, []).append(text)
    return by_part, by_request


@dataclass
class Timing:
    """The timed runs of one history size on one model profile."""

    profile: Profile
    turns: int
    seconds: dict[str, list[float]] = field(default_factory=dict[str, list[float]])
    """Every timed run of each variant."""

    def median_ms(self, variant: str) -> float:
        """The median run time of `variant`, in milliseconds."""
        return statistics.median(self.seconds[variant]) * 1000

    def ratio(self, variant: str) -> float:
        """The median of `variant` over the median of `static`."""
        return self.median_ms(variant) / self.median_ms('static')


async def time_runs(profile: Profile, turns: int, histories: dict[Policy, list[ModelMessage]], repeats: int) -> Timing:
    """Time one `agent.run` per variant on the given histories, `repeats` times, variants interleaved.

    Each round runs the variants in a rotated order, so drift of the machine hits every variant alike.
    """
    model = function_model(profile)
    agents: dict[str, tuple[Agent[int, str], list[ModelMessage]]] = {
        policy: (build_agent(policy, model), history) for policy, history in histories.items()
    }
    if 'append' in histories:
        append_history = histories['append']
        first = append_history[0]
        assert isinstance(first, ModelRequest)
        by_part, by_request = _change_texts(append_history, profile)
        floor = Agent(model, deps_type=int, instructions=first.instructions, capabilities=[_Floor(by_part)])
        agents['floor'] = (floor, append_history)
        if 'static' in histories:
            # The static history has the same requests at the same indexes, without records.
            injected = Agent(
                model, deps_type=int, instructions=first.instructions, capabilities=[_Injected(by_request)]
            )
            agents['injected'] = (injected, histories['static'])
        agents['append-loaded'] = agents['append']
    timing = Timing(profile, turns, {variant: [] for variant in agents})
    names = list(agents)
    for round_index in range(repeats):
        for offset in range(len(names)):
            variant = names[(round_index + offset) % len(names)]
            agent, history = agents[variant]
            if variant == 'append-loaded':
                # As a server that keeps history in a database sees it: new objects on every run, so no record
                # has been read before.
                history = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
            gc.collect()
            start = time.perf_counter()
            await agent.run(prompt(turns + 1), deps=turns + 1, message_history=history)
            timing.seconds[variant].append(time.perf_counter() - start)
    return timing
