"""Windows whose changes a history processor trims: what each request then tells the model.

Every request is read as a model reads it, from its instructions and messages alone: the block's value, rebuilt from
the prefix and each element after it (a diff must apply to the text the model holds), and how many times the
supersession sentence is said, which must be once wherever an element is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append._rendering import SUPERSESSION_SENTENCE

from .conversation import ScriptedModel, Seen
from .test_request_generated_conversations import apply_hunks

ELEMENT = re.compile(
    r'<(context|context-diff) id="capability:todos:state"( withdrawn="true")?>\n(.*?)\n</\1>', re.DOTALL
)

LINES = [f'- [ ] task {number}: a step of the project, long enough for one-line diffs' for number in range(12)]


def todos(done: int) -> str:
    """The to-do list with its first `done` tasks ticked: consecutive lists differ by one line."""
    return '\n'.join(line.replace('[ ]', '[x]') if number < done else line for number, line in enumerate(LINES))


def told(seen: Seen) -> tuple[str | None, list[str], int]:
    """What a model reading one request holds of the block, the kind of each element it read in order (`full`,
    `diff`, `withdrawn`), and how many times the request says the supersession sentence."""
    text = '\n\n'.join([seen.instructions or '', *seen.messages])
    value: str | None = None
    kinds: list[str] = []
    for tag, withdrawn, content in ELEMENT.findall(text):
        if tag == 'context-diff':
            assert value is not None, f'a diff to a block the model has no text for: {content!r}'
            value = apply_hunks(value, content)
        else:
            value = None if withdrawn else content
        kinds.append('diff' if tag == 'context-diff' else 'withdrawn' if withdrawn else 'full')
    return value, kinds, text.count(SUPERSESSION_SENTENCE)


def todo_agent(
    chat: ScriptedModel, value: list[str | None], process: Callable[[list[ModelMessage]], list[ModelMessage]]
) -> Agent[object, str]:
    """An agent whose one append-mode block says `value[0]`, with a history processor running `process`."""
    context = AppendInstructions(id='todos')
    context.instructions(name='state')(lambda: value[0])
    return Agent(chat.model(), capabilities=[context, ProcessHistory[object](process)])


def converse(chat: ScriptedModel, agent: Agent[object, str], value: list[str | None], values: list[str | None]) -> None:
    """One run per value, each given the history of the one before, checking what every request tells the model."""
    history: list[ModelMessage] = []
    for turn, current in enumerate(values):
        value[0] = current
        history = agent.run_sync(f'turn {turn}', message_history=history).all_messages()
        held, kinds, sentences = told(chat.last)
        assert (held, sentences) == (current, min(len(kinds), 1)), f'request {turn}'


def without_turn(turn: int) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """A processor that drops the request prompted `turn {turn}`, and its response, once the turn after it is history
    too."""

    def drop(messages: list[ModelMessage]) -> list[ModelMessage]:
        prompted = [
            at
            for at, message in enumerate(messages[:-4])
            if isinstance(message, ModelRequest)
            and any(isinstance(part, UserPromptPart) and part.content == f'turn {turn}' for part in message.parts)
        ]
        return [message for at, message in enumerate(messages) if not any(at in (p, p + 1) for p in prompted)]

    return drop


def test_a_change_dropped_from_the_middle_of_a_window_is_followed_by_the_value_in_full():
    chat = ScriptedModel()
    value: list[str | None] = [None]
    agent = todo_agent(chat, value, without_turn(2))
    # Turn 3 changes the list against turn 2's; at turn 4 the processor has dropped turn 2, whose change that diff
    # applies to, and the block's value goes in full, once.
    converse(chat, agent, value, [todos(done) for done in (0, 1, 2, 3, 3, 4)])
    assert [told(seen)[1] for seen in chat.seen[3:]] == snapshot(
        [
            ['full', 'diff', 'diff', 'diff'],
            ['full', 'diff', 'full'],
            ['full', 'diff', 'full', 'diff'],
        ]
    )


def test_after_a_trim_keeping_the_first_messages_a_diff_without_its_base_is_followed_by_the_value_in_full():
    chat = ScriptedModel()
    value: list[str | None] = [None]

    def keep_first_and_last(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [*messages[:4], *messages[-3:]] if len(messages) > 7 else messages

    agent = todo_agent(chat, value, keep_first_and_last)
    converse(chat, agent, value, [todos(done) for done in range(8)])
    # From turn 4 the processor keeps the first change and the last turn: every other request keeps a diff that no
    # longer follows the change before it, which isn't sent, and tells the value in full; the request after diffs
    # from that.
    assert [told(seen)[1] for seen in chat.seen[3:]] == snapshot(
        [
            ['full', 'diff', 'diff', 'diff'],
            ['full', 'diff', 'full'],
            ['full', 'diff', 'full', 'diff'],
            ['full', 'diff', 'full'],
            ['full', 'diff', 'full', 'diff'],
        ]
    )


def test_a_block_whose_first_value_is_empty_is_followed_by_the_sentence_once():
    chat = ScriptedModel()
    value: list[str | None] = [None]
    agent = todo_agent(chat, value, lambda messages: messages)
    converse(chat, agent, value, ['', 'a', 'b'])
    assert chat.last.instructions == snapshot("""\
<context id="capability:todos:state">

</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""")


def test_a_trimmed_change_that_said_the_sentence_is_followed_by_a_change_that_says_it():
    chat = ScriptedModel()
    value: list[str | None] = [None]
    # The window opens with the block withdrawn: its prefix states no block, and the first change says the sentence.
    agent = todo_agent(chat, value, without_turn(1))
    converse(chat, agent, value, [None, 'first', 'second', 'second', 'third'])
    assert [told(seen)[1] for seen in chat.seen[1:]] == snapshot(
        [['full'], ['full', 'full'], ['full'], ['full', 'full']]
    )


def without_first_change(messages: list[ModelMessage]) -> list[ModelMessage]:
    return [*messages[:2], *messages[4:]]


def without_baseline_and_first_change(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages[4:]


@pytest.mark.parametrize('kept', [without_first_change, without_baseline_and_first_change])
def test_a_resumed_turn_whose_processor_trims_the_change_that_said_the_sentence_says_it(
    kept: Callable[[list[ModelMessage]], list[ModelMessage]],
):
    chat = ScriptedModel()
    value: list[str | None] = [None]
    trimming = [False]
    agent = todo_agent(chat, value, lambda messages: kept(messages) if trimming[0] else messages)
    history: list[ModelMessage] = []
    for turn, current in enumerate([None, 'first', 'second']):
        value[0] = current
        history = agent.run_sync(f'turn {turn}', message_history=history).all_messages()
    last = history[-1]
    assert isinstance(last, ModelResponse)
    last.state = 'suspended'
    # The run resumes the turn with the processor now dropping the change to 'first', which said the sentence.
    trimming[0] = True
    value[0] = 'changed since'
    agent.run_sync(None, message_history=history)
    assert told(chat.last) == snapshot(('second', ['full'], 1))
