"""Each conversation's kept scan (`_kept`): the state each kind of history puts a conversation in, and that in every
state a request's window is the one a scan of its whole history gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pytest
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, UserPromptPart

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append import _kept as kept_module
from pydantic_ai_append import _request as request_module
from pydantic_ai_append._history import scan
from pydantic_ai_append._kept import conversation_window
from pydantic_ai_append._window import Window, fold

from .conversation import ScriptedModel

KEY = b'key'


def conversation(turns: int) -> list[list[ModelMessage]]:
    """The history of each request of a conversation whose block changes every turn, as the hooks saw it: each
    going on from the very objects of the one before.
    """
    todos = AppendInstructions[list[str]](id='todos')

    @todos.instructions(name='state')
    def state(ctx: RunContext[list[str]]) -> str:
        return ', '.join(ctx.deps)

    agent = Agent(ScriptedModel(script=['ok'] * turns).model(), deps_type=list[str], capabilities=[todos])
    histories: list[list[ModelMessage]] = []

    def seen(messages: Sequence[ModelMessage], **options: Any) -> Window:
        histories.append([*messages])
        return conversation_window(messages, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(request_module, 'conversation_window', seen)
        history: list[ModelMessage] = []
        for turn in range(turns):
            deps = [f'item {n}' for n in range(turn + 1)]
            history = agent.run_sync(f'turn {turn}', deps=deps, message_history=history).all_messages()
    return histories


def whole(messages: list[ModelMessage]) -> Window:
    return fold(scan(messages), key=KEY, conversation_id='c')


def same(window: Window, expected: Window) -> bool:
    # What the kept scan counts as known linked is its own bookkeeping: a later fold's shortcut, not the window.
    return replace(window, linked=0) == replace(expected, linked=0)


def state_of(conversation_id: str) -> str:
    state = kept_module.KEPT.get((conversation_id, KEY))
    return 'unseen' if state is None else type(state).__name__.strip('_').lower()


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, int | None]]]:
    """The runs of messages each request scans, as (start, stop)."""
    runs: list[tuple[int, int | None]] = []

    def counted(messages: Any, start: int = 0, stop: int | None = None):
        runs.append((start, stop))
        return scan(messages, start, stop)

    monkeypatch.setattr(kept_module, 'scan', counted)
    yield runs


def test_history_kept_in_process_is_scanned_only_where_it_is_new(scanned: list[tuple[int, int | None]]):
    histories = conversation(4)
    states: list[str] = []
    for history in histories:
        scanned.clear()
        assert same(conversation_window(history, key=KEY, conversation_id='in process'), whole(history))
        states.append(f'{state_of("in process")} {scanned}')
    assert states == [
        'seen [(0, None)]',
        # The second request scans its history once more, in two runs: what it keeps, and the request.
        'kept [(0, 2), (2, None)]',
        'kept [(2, 4), (4, None)]',
        'kept [(4, 6), (6, None)]',
    ]


def test_history_loaded_afresh_is_scanned_whole_and_nothing_is_kept(scanned: list[tuple[int, int | None]]):
    states: list[str] = []
    for history in conversation(4):
        scanned.clear()
        loaded = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
        scanned.clear()
        assert same(conversation_window(loaded, key=KEY, conversation_id='loaded'), whole(loaded))
        states.append(f'{state_of("loaded")} {scanned}')
    assert states == ['seen [(0, None)]', 'loaded [(0, None)]', 'loaded [(0, None)]', 'loaded [(0, None)]']


def test_a_kept_history_loaded_afresh_or_edited_later_is_scanned_whole():
    histories = conversation(5)
    for history in histories[:3]:
        conversation_window(history, key=KEY, conversation_id='edited')
    assert state_of('edited') == 'kept'
    # A client edits a request's part in place: the history holds other objects where the kept scan's were.
    edited = [*histories[3]]
    edited[0] = replace(edited[0], parts=[UserPromptPart('turn 0, edited')])
    assert same(conversation_window(edited, key=KEY, conversation_id='edited'), whole(edited))
    assert state_of('edited') == 'loaded'
    assert same(conversation_window(histories[4], key=KEY, conversation_id='edited'), whole(histories[4]))
    assert state_of('edited') == 'loaded'


def test_an_earlier_point_run_again_keeps_the_scan_for_the_conversation_going_on():
    histories = conversation(4)
    for history in histories[:3]:
        conversation_window(history, key=KEY, conversation_id='rerun')
    kept = kept_module.KEPT.get(('rerun', KEY))
    assert same(conversation_window(histories[1], key=KEY, conversation_id='rerun'), whole(histories[1]))
    assert kept_module.KEPT.get(('rerun', KEY)) is kept
    assert same(conversation_window(histories[3], key=KEY, conversation_id='rerun'), whole(histories[3]))
    assert state_of('rerun') == 'kept'


def test_a_history_with_no_conversation_id_keeps_nothing(scanned: list[tuple[int, int | None]]):
    histories = conversation(3)
    scanned.clear()
    for history in histories:
        assert same(
            conversation_window(history, key=KEY, conversation_id=None),
            fold(scan(history), key=KEY, conversation_id=None),
        )
    assert scanned == [(0, None)] * 3
