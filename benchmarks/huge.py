"""A huge block: one-line edits to a block of about 10 MB, the plugin's time to deliver each, and the history's growth.

A conversation of one block (`block_bytes` of the scenario's notes, repeated, so most lines occur many times, as in
a large file or a dump of many) runs a first turn and then `edits` turns, each with one line of the block
rewritten, through JSON between turns as a server that stores history runs it. Lines that repeat are what makes a
line diff slow, so they are kept on purpose. Each
turn's hooks are timed inside the run (`HookTimer`), and the stored history is measured after each turn. A static
agent with the block's first value as its instructions runs the same turns: Pydantic AI stores the instructions with
every request, so what append mode's history grows by beyond the static history's growth is the records alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pydantic_ai import Agent, RunContext

from pydantic_ai_append import AppendInstructions

from .histories import Profile, fresh, function_model, stored_bytes
from .measure import HookTimer, time_hooks
from .scenario import memory, prompt

__all__ = ('HugeResult', 'block_value', 'run_huge')


def block_value(block_bytes: int, turn: int) -> str:
    """The block at `turn`: the notes' lines repeated to about `block_bytes`, one line rewritten at each turn from 2."""
    notes = [f'{line}\n' for line in memory(1).splitlines()]
    line_bytes = sum(len(line) for line in notes) / len(notes)
    lines = [notes[index % len(notes)] for index in range(max(1, int(block_bytes / line_bytes)))]
    for edit in range(2, turn + 1):
        index = (edit * 7919) % len(lines)
        lines[index] = f'- line {index} rewritten at turn {edit}.\n'
    return ''.join(lines)


@dataclass
class HugeResult:
    """One conversation with the huge block on one model profile."""

    profile: Profile
    block_bytes: int
    """The size of the block's first value, in bytes."""

    hook_seconds: list[float] = field(default_factory=list[float])
    """The CPU seconds of the plugin's hooks on each turn, the first turn first."""

    run_seconds: list[float] = field(default_factory=list[float])
    """The CPU seconds of each turn's `agent.run`."""

    append_bytes: list[int] = field(default_factory=list[int])
    """The stored size of append mode's history after each turn."""

    static_bytes: list[int] = field(default_factory=list[int])
    """The stored size of the static agent's history after each turn."""

    @property
    def edit_hook_seconds(self) -> list[float]:
        """The hooks' CPU seconds on each turn that delivered an edit (every turn but the first)."""
        return self.hook_seconds[1:]

    @property
    def extra_growth(self) -> int:
        """How many more bytes append mode's history grew by than the static history over the edits."""
        return (self.append_bytes[-1] - self.append_bytes[0]) - (self.static_bytes[-1] - self.static_bytes[0])


async def run_huge(profile: Profile, block_bytes: int, edits: int) -> HugeResult:
    """Run a first turn and `edits` one-line edits of a block of about `block_bytes`, history through JSON."""
    values = {turn: block_value(block_bytes, turn) for turn in range(1, edits + 2)}
    model = function_model(profile)
    hooks = HookTimer()
    context = AppendInstructions[int](id='huge')

    @context.instructions(name='notes')
    def notes(ctx: RunContext[int]) -> str:  # pyright: ignore[reportUnusedFunction]
        return values[ctx.deps]

    append = Agent(model, deps_type=int, capabilities=[time_hooks(context, hooks)])
    static = Agent(model, deps_type=int, instructions=values[1])
    result = HugeResult(profile, len(values[1].encode()))
    for agent, sizes in ((append, result.append_bytes), (static, result.static_bytes)):
        history = []
        for turn in range(1, edits + 2):
            hooks.reset()
            start = time.process_time()
            run = await agent.run(prompt(turn), deps=turn, message_history=fresh(history))
            if agent is append:
                result.run_seconds.append(time.process_time() - start)
                result.hook_seconds.append(hooks.seconds)
            history = run.all_messages()
            sizes.append(stored_bytes(history))
    return result
