"""A conversation's first turn in the record store: a run with no history saves when the app named the conversation.

A hand-written endpoint runs a conversation's first turn as a prompt and no history, and every later turn with the
history it rebuilt from rows of role and text, which hold no records. Unless the first turn is saved, the second
finds nothing, and the window opens again. A one-shot run has no conversation to keep, but Pydantic AI gives it a
conversation id all the same (a UUID7, or one derived from the run id under durable execution): those are told apart
from the app's, and save nothing.
"""

from __future__ import annotations

import time
import uuid

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, InMemoryRecordStore
from pydantic_ai_append._store.reattach import app_named, derived_conversation_id


class Endpoint:
    """A chat endpoint that keeps each conversation as rows of role and text, and runs a turn as its prompt and the
    history before it (none at the first turn)."""

    def __init__(self, store: InMemoryRecordStore) -> None:
        self.rows: list[tuple[str, str]] = []
        self.memory = ['likes short answers']
        self.sent: list[str | None] = []
        context = AppendInstructions[None](id='assistant', record_store=store, tenant=lambda ctx: 'alice')
        context.instructions(name='memory')(lambda: '\n'.join(self.memory))
        self.agent = Agent(FunctionModel(self.reply), deps_type=type(None), capabilities=[context])

    def reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.sent.append(info.instructions)
        return ModelResponse(parts=[TextPart(f'Noted ({len(self.memory)} facts).')])

    def turn(self, prompt: str, conversation_id: str | None = 'chat-1') -> None:
        history: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(text)]) if role == 'user' else ModelResponse(parts=[TextPart(text)])
            for role, text in self.rows
        ]
        result = self.agent.run_sync(prompt, message_history=history or None, conversation_id=conversation_id)
        self.rows += [('user', prompt), ('assistant', result.output)]


def test_a_first_turn_without_history_is_saved_so_the_window_lasts():
    store = InMemoryRecordStore()
    endpoint = Endpoint(store)
    for turn, prompt in enumerate(['Hi', 'I live in Lisbon.', 'I cycle.', 'ok', 'I cook.', 'What do you know?']):
        endpoint.turn(prompt)
        if turn % 2 == 0:
            endpoint.memory.append(prompt)  # a change before the second turn, and every other one after
    assert len(endpoint.sent) == 6
    assert len(set(endpoint.sent)) == 1  # one prefix for the conversation: 2 when the first turn wasn't saved
    assert len(store) == 1


def test_one_shot_runs_save_nothing():
    store = InMemoryRecordStore()
    endpoint = Endpoint(store)
    for prompt in ['Hi', 'Summarize this.', 'Translate that.']:
        endpoint.rows.clear()
        endpoint.turn(prompt, conversation_id=None)
    assert len(endpoint.sent) == 3
    assert len(store) == 0


def uuid7_drawn_before() -> str:
    """A UUID7 as an app draws one for a new chat, a millisecond before the run starts."""
    milliseconds = time.time_ns() // 1_000_000 - 1
    return str(uuid.UUID(int=milliseconds << 80 | 7 << 76 | 2 << 62))


def test_a_uuid7_the_app_drew_names_a_conversation():
    store = InMemoryRecordStore()
    endpoint = Endpoint(store)
    endpoint.turn('Hi', conversation_id=uuid7_drawn_before())
    assert len(store) == 1


@pytest.mark.parametrize(
    ('conversation_id', 'run_id', 'named'),
    [
        # What Pydantic AI's durability capabilities derive for a run inside a workflow, whose history keeps records.
        # This also fails if the private function moves: `_store/reattach.py` imports it in the one place.
        (derived_conversation_id('run-1'), 'run-1', False),
        ('chat-1', 'run-1', True),
        ('chat-1', None, True),
        ('17d003b8-4680-4cbd-a3f1-884c5dea35d7', '018f4c3e-7d3a-7000-8000-000000000000', True),
        # The same millisecond: the next count is drawn after the run's; another count isn't.
        ('018f4c3e-7d3a-7000-8000-000000000001', '018f4c3e-7d3a-7000-8000-000000000000', True),
        ('018f4c3e-7d3a-7000-8000-000100000000', '018f4c3e-7d3a-7000-8000-000000000000', False),
        # A later millisecond, within a second: drawn after the run's; a minute later, a client's clock.
        ('018f4c3e-7d3b-7000-8000-000000000000', '018f4c3e-7d3a-7000-8000-000000000000', False),
        ('018f4c3f-6000-7000-8000-000000000000', '018f4c3e-7d3a-7000-8000-000000000000', True),
    ],
)
def test_a_conversation_id_pydantic_ai_made_up_is_told_from_the_apps(
    conversation_id: str, run_id: str | None, named: bool
):
    """A pure function, as the durable engines' derived ids need a workflow to be made through an agent."""
    assert app_named(conversation_id, run_id) is named
