"""The benchmark's conversation: fixed instructions, three changing blocks, and the policies compared.

Everything is a pure function of the turn number, so every run of the benchmark sends the same bytes:

- about 2 KB of static instructions;
- `state`: a 10-line todo list, one item toggled every turn from turn 2;
- `memory`: about 15 KB of notes, one line edited every 4th turn;
- `clock`: the date, which changes once, at turn 10.

Every 3rd turn the model calls one tool before it answers. The policies differ only in how the three blocks
reach the model:

- `static`: the blocks frozen at their turn-1 values, as plain instructions (the floor: nothing changes);
- `rewrite`: Pydantic AI's dynamic instructions, rewritten in the prefix whenever they change;
- `append`: this package's `AppendInstructions`;
- `native`: Pydantic AI's own `on_change='append'`, on releases that have it.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from pydantic_ai_append import AppendInstructions, CachePrices, RecordStore, SyncRecordStore
from pydantic_ai_append._store.memory import PROCESS_STORE
from pydantic_ai_append.testing.fake_provider import Text, ToolCalls, Turn

from .measure import HookTimer, time_hooks

__all__ = (
    'BLOCKS',
    'CHAT',
    'CHAT_CLOCK_REWRITTEN',
    'POLICIES',
    'WORDS',
    'Policy',
    'Scenario',
    'build_agent',
    'clock',
    'memory',
    'native_available',
    'prompt',
    'sentence',
    'state',
    'tool_turn',
)

Policy: TypeAlias = Literal['static', 'rewrite', 'append', 'native']

POLICIES: tuple[Policy, ...] = ('static', 'rewrite', 'append', 'native')
"""Every policy, in the order tables show them."""

TODO_ITEMS = 10
MEMORY_LINES = 140
MEMORY_EDIT_EVERY = 4
CLOCK_CHANGE_TURN = 10
TOOL_EVERY = 3

WORDS = (
    'build',
    'cache',
    'token',
    'prompt',
    'window',
    'record',
    'agent',
    'model',
    'tool',
    'result',
    'change',
    'block',
    'prefix',
    'value',
    'history',
    'request',
    'reply',
    'schema',
    'diff',
    'review',
    'branch',
    'commit',
    'release',
    'fixture',
    'cassette',
    'provider',
    'retry',
    'budget',
)


def sentence(rng: random.Random, words: int) -> str:
    """A sentence of `words` words drawn by `rng`."""
    return ' '.join(rng.choice(WORDS) for _ in range(words)).capitalize() + '.'


def _static_instructions() -> str:
    rng = random.Random(7)
    rules = [f'{number}. {sentence(rng, 14)}' for number in range(1, 21)]
    return 'You are a coding assistant for a long-running project. Follow these rules:\n' + '\n'.join(rules)


STATIC_INSTRUCTIONS = _static_instructions()
"""About 2 KB of fixed instructions."""

_MEMORY = tuple(f'- note {line:03d}: {sentence(random.Random(line), 14)}' for line in range(MEMORY_LINES))


@functools.lru_cache(maxsize=4096)
def state(turn: int) -> str:
    """The todo list at `turn` (from 1): item `(t - 2) % 10` is toggled at each turn `t` from 2."""
    done = [False] * TODO_ITEMS
    for toggled in range(2, turn + 1):
        done[(toggled - 2) % TODO_ITEMS] ^= True
    return '\n'.join(f'- [{"x" if done[item] else " "}] task {item + 1}' for item in range(TODO_ITEMS))


@functools.lru_cache(maxsize=4096)
def memory(turn: int) -> str:
    """The notes at `turn`: at every 4th turn one line is rewritten."""
    lines = list(_MEMORY)
    for edit in range(MEMORY_EDIT_EVERY, turn + 1, MEMORY_EDIT_EVERY):
        line = (edit * 37) % MEMORY_LINES
        lines[line] = f'- note {line:03d}: revised at turn {edit}: {sentence(random.Random(1000 + edit), 10)}'
    return '\n'.join(lines)


def clock(turn: int) -> str:
    """The date, which moves on at turn 10."""
    return 'Today is 2026-11-30.' if turn < CLOCK_CHANGE_TURN else 'Today is 2026-12-01.'


BLOCKS: Sequence[tuple[str, Callable[[int], str]]] = (('state', state), ('memory', memory), ('clock', clock))
"""The changing blocks, by name, in prefix order; each is a function of the turn."""


def prompt(turn: int) -> str:
    """The user's message at `turn`."""
    return f'Turn {turn}: what should I do next?'


def tool_turn(turn: int) -> bool:
    """Whether the model calls the tool at `turn` before answering."""
    return turn % TOOL_EVERY == 0


def lookup(topic: str) -> str:
    """Look up a topic in the project's notes."""
    return f'Notes on {topic}: nothing unusual.'


def native_available() -> bool:
    """Whether the installed Pydantic AI has its own `on_change='append'`."""
    return 'on_change' in inspect.signature(Agent.instructions).parameters


@dataclass(frozen=True)
class Scenario:
    """A conversation the wire benchmark runs: its changing blocks, tools, user messages and scripted replies."""

    name: str
    blocks: Sequence[tuple[str, Callable[[int], str]]]
    """The changing blocks, by name, in prefix order; each is a function of the turn."""

    tools: Sequence[Callable[..., Any]]
    prompt: Callable[[int], str]
    """The user's message at each turn."""

    script: Callable[[], Iterator[Turn]]
    """A new iterator over the model's replies, one per request."""

    rewritten: frozenset[str] = frozenset()
    """The blocks append mode keeps in rewrite mode (`on_change='rewrite'`)."""


def _chat_script() -> Iterator[Turn]:
    turn = 0
    while True:
        turn += 1
        if tool_turn(turn):
            yield ToolCalls([('lookup', {'topic': f'task {turn}'})])
        yield Text(f'Answer to turn {turn}.')


CHAT = Scenario(name='chat', blocks=BLOCKS, tools=(lookup,), prompt=prompt, script=_chat_script)
"""This module's 20-turn conversation."""
CHAT_CLOCK_REWRITTEN = dataclasses.replace(CHAT, name='chat, clock rewritten', rewritten=frozenset({'clock'}))
"""The same, with the clock in rewrite mode in append mode: a block after the window's, rewritten at turn 10."""


def _one_user(ctx: RunContext[int]) -> str:
    """The tenant of every run, as a server names the user it authenticated: the scenario has one."""
    return 'user-1'


def build_agent(
    policy: Policy,
    model: Model,
    hooks: HookTimer | None = None,
    settings: ModelSettings | None = None,
    scenario: Scenario = CHAT,
    record_store: RecordStore | SyncRecordStore | None = PROCESS_STORE,
    windows: Literal['price', 'keep'] | CachePrices = 'price',
    capabilities: Sequence[AbstractCapability[int]] = (),
) -> Agent[int, str]:
    """An agent for `policy` whose deps are the turn number, sending `settings`, with `scenario`'s blocks and tools
    and `capabilities` (listed before the package's); with `hooks`, append mode's hooks are timed into it; append mode
    keeps records in `record_store` and opens windows by `windows`.

    Raises:
        RuntimeError: For `'native'` on a release without `on_change='append'`.
    """
    blocks, tools = scenario.blocks, scenario.tools
    if policy == 'static':
        frozen = '\n\n'.join(function(1) for _, function in blocks)
        return Agent(
            model,
            deps_type=int,
            instructions=f'{STATIC_INSTRUCTIONS}\n\n{frozen}',
            tools=tools,
            capabilities=list(capabilities),
            model_settings=settings,
        )
    if policy == 'append':
        context = AppendInstructions[int](id='scenario', record_store=record_store, windows=windows, tenant=_one_user)
        for name, function in blocks:
            context.instructions(
                _at_turn(function), name=name, on_change='rewrite' if name in scenario.rewritten else 'append'
            )
        if hooks is not None:
            time_hooks(context, hooks)
        return Agent(
            model,
            deps_type=int,
            instructions=STATIC_INSTRUCTIONS,
            tools=tools,
            capabilities=[*capabilities, context],
            model_settings=settings,
        )
    agent = Agent(
        model,
        deps_type=int,
        instructions=STATIC_INSTRUCTIONS,
        tools=tools,
        capabilities=list(capabilities),
        model_settings=settings,
    )
    if policy == 'native' and not native_available():
        raise RuntimeError("this Pydantic AI release has no `on_change='append'`")
    for name, function in blocks:
        if policy == 'native':
            agent.instructions(name=name, on_change='append')(_at_turn(function))  # pyright: ignore[reportCallIssue]
        else:
            agent.instructions(_at_turn(function))
    return agent


def _at_turn(function: Callable[[int], str]) -> Callable[[RunContext[int]], str]:
    def block(ctx: RunContext[int]) -> str:
        return function(ctx.deps)

    block.__name__ = function.__name__
    return block
