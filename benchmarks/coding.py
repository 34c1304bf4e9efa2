"""The benchmark's long conversation: a coding agent working through 200 turns of tool loops.

Like the 20-turn scenario (`scenario`), everything is a pure function of the turn, so every run sends the same bytes:

- the same 2 KB of static instructions, and three tools: `read_file`, `edit_file` and `run_tests`;
- `todo`: the agent's todo list, eight open tasks; every 5th turn the first is checked off, and a new task is
  added at the end (a done task stays listed for two rounds);
- `memory`: the agent's memory file, about 3 KB of notes at first; every 10th turn a note is added at the end, and
  every 7th turn one note is rewritten.

Each turn the model reads a file before it answers; every 2nd turn it edits the file too, and every 10th it runs
the tests after the edit (two to four requests a turn). Every 25th turn it reads twelve files in parallel first: that request adds 24 content blocks (the calls and their
results), past Anthropic's 20-block lookback, which is where a breakpoint earlier than the tail is needed.
"""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Iterator

from pydantic_ai_append.testing.fake_provider import Text, ToolCalls, Turn

from .scenario import WORDS, Scenario, sentence
from .wire import PathName, Variant, WireResult, run_conversation

__all__ = ('CODING', 'coding_memory', 'coding_prompt', 'coding_script', 'run_coding_conversation', 'todo')

OPEN_TASKS = 8
TODO_EVERY = 5
NOTE_ADDED_EVERY = 10
NOTE_REWRITTEN_EVERY = 7
FIRST_NOTES = 24
PARALLEL_EVERY = 25
EDIT_EVERY = 2
TESTS_EVERY = 10
PARALLEL_READS = 12


def _task(number: int) -> str:
    return f'task {number}: {sentence(random.Random(5000 + number), 6)}'


@functools.lru_cache(maxsize=512)
def todo(turn: int) -> str:
    """The todo list at `turn`: at every 5th turn the oldest open task is done and a new one is added."""
    rounds = turn // TODO_EVERY
    done = [f'- [x] {_task(number)}' for number in range(max(0, rounds - 2), rounds)]
    open_ = [f'- [ ] {_task(number)}' for number in range(rounds, rounds + OPEN_TASKS)]
    return '\n'.join([*done, *open_])


@functools.lru_cache(maxsize=512)
def coding_memory(turn: int) -> str:
    """The memory file at `turn`: a note added every 10th turn, one rewritten every 7th."""
    notes = [f'- {sentence(random.Random(6000 + line), 16)}' for line in range(FIRST_NOTES)]
    for at in range(1, turn + 1):
        if at % NOTE_ADDED_EVERY == 0:
            notes.append(f'- learned at turn {at}: {sentence(random.Random(7000 + at), 12)}')
        if at % NOTE_REWRITTEN_EVERY == 0:
            line = (at * 13) % len(notes)
            notes[line] = f'- revised at turn {at}: {sentence(random.Random(8000 + at), 16)}'
    return '# Memory\n' + '\n'.join(notes)


def coding_prompt(turn: int) -> str:
    """The user's message at `turn`."""
    return f'Turn {turn}: carry on with the next task on the list.'


def _path(turn: int, index: int = 0) -> str:
    return f'src/{WORDS[(turn + index) % len(WORDS)]}/{WORDS[(turn * 7 + index) % len(WORDS)]}.py'


def coding_script() -> Iterator[Turn]:
    """The model's replies, turn after turn: a tool loop of reads, an edit and a test run, then an answer."""
    turn = 0
    while True:
        turn += 1
        if turn % PARALLEL_EVERY == 0:
            yield ToolCalls([('read_file', {'path': _path(turn, index)}) for index in range(1, PARALLEL_READS + 1)])
        yield ToolCalls([('read_file', {'path': _path(turn)})])
        if turn % EDIT_EVERY == 0:
            yield ToolCalls([('edit_file', {'path': _path(turn), 'old': 'None', 'new': str(turn)})])
        if turn % TESTS_EVERY == 0:
            yield ToolCalls([('run_tests', {})])
        yield Text(f'Turn {turn} done.')


def read_file(path: str) -> str:
    """Read a file of the repository."""
    rng = random.Random(path)
    lines = [f'def {rng.choice(WORDS)}_{number}():\n    """{sentence(rng, 6)}"""\n' for number in range(3)]
    return f'# {path}\n' + ''.join(lines)


def edit_file(path: str, old: str, new: str) -> str:
    """Replace `old` with `new` in a file of the repository."""
    return f'Edited {path}.'


def run_tests() -> str:
    """Run the repository's tests."""
    return '412 passed in 9.81s'


CODING = Scenario(
    name='coding',
    blocks=(('todo', todo), ('memory', coding_memory)),
    tools=(read_file, edit_file, run_tests),
    prompt=coding_prompt,
    script=coding_script,
)
"""The 200-turn coding agent."""


def run_coding_conversation(job: tuple[PathName, Variant, int]) -> WireResult:
    """Run the coding agent's conversation on one path and variant for some turns, in a process of its own."""
    path, variant, turns = job
    return asyncio.run(run_conversation(path, variant, turns, scenario=CODING))
