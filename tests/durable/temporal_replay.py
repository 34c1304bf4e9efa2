"""Replaying a Temporal workflow history and checking that the replay schedules the recorded activities, inputs and all.

Temporal's `Replayer` fails a replay whose commands disagree with the history: an activity of another type, one too
many, one too few. It doesn't compare an activity's input with the recorded one, so workflow code that builds other
arguments on replay replays without an error: a block function that returns other text changes the messages and
request parameters the model-request activity is given, and the replay still succeeds. `replay_recording_activities`
keeps what a replay schedules; `assert_same_activity_inputs` compares it with the history, payload for payload.

Two kinds of value in a model request's input are not replay-safe in Pydantic AI itself, for any agent: message and
part timestamps (taken from the wall clock by `pydantic_ai`, which the sandbox passes through) and the run context's
`active_capability_ids`, which holds the ids Pydantic AI makes up from a random number for capabilities without an
`id` (`TemporalDurability` among them), in a set's order. Neither is sent to the model. They are the only values left
out of the comparison.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.worker import (
    Interceptor,
    Replayer,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
    WorkflowReplayResult,
)
from temporalio.worker import Plugin as WorkerPlugin
from temporalio.workflow import ActivityHandle

__all__ = ['ScheduledActivity', 'assert_same_activity_inputs', 'recorded_activities', 'replay_recording_activities']


_NOT_REPLAY_SAFE = re.compile(rb'"timestamp":"[^"]*"|"active_capability_ids":\[(?:"(?:[^"\\]|\\.)*",?)*\]')
"""The values that differ between a run and its replay (see the module docstring), as the JSON spells them. A quote
inside a JSON string is escaped, so each alternative matches a key and its value, never text inside a string."""


@dataclass(frozen=True)
class ScheduledActivity:
    """An activity a workflow scheduled, as the history records it or as a replay schedules it."""

    activity_type: str
    """The activity's registered name."""
    input: list[Payload]
    """Its arguments, converted to payloads when it was scheduled."""


class _RecordActivities(Interceptor):
    """A worker interceptor that keeps every activity the workflow code schedules."""

    def __init__(self, data_converter: DataConverter) -> None:
        self.scheduled: list[ScheduledActivity] = []
        self._data_converter = data_converter

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        recorder = self

        class RecordingInbound(WorkflowInboundInterceptor):
            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                super().init(_RecordingOutbound(outbound, recorder))

        return RecordingInbound

    def record(self, input: StartActivityInput) -> None:
        # Converted now, as the workflow instance converts them when it builds the schedule command: the arguments
        # are live objects (the message list among them) that workflow code goes on changing after this call. The
        # client's payload converter is of the class the worker's is (Pydantic AI's plugin sets both), and these tests
        # configure no payload codec or external storage, so its payloads are the bytes a worker sends.
        payloads = self._data_converter.payload_converter.to_payloads(input.args) if input.args else []
        self.scheduled.append(ScheduledActivity(input.activity, payloads))


class _RecordingOutbound(WorkflowOutboundInterceptor):
    def __init__(self, next: WorkflowOutboundInterceptor, recorder: _RecordActivities) -> None:
        super().__init__(next)
        self._recorder = recorder

    def start_activity(self, input: StartActivityInput) -> ActivityHandle[Any]:
        self._recorder.record(input)
        return super().start_activity(input)


async def replay_recording_activities(
    history: WorkflowHistory,
    *,
    workflows: Sequence[type],
    plugins: Sequence[WorkerPlugin],
    data_converter: DataConverter,
) -> tuple[WorkflowReplayResult, list[ScheduledActivity]]:
    """Replay `history` and return the replay's result with the activities it scheduled, in order.

    A replay failure is returned, not raised, so that a caller can show that the replayer found none.

    Args:
        history: The workflow history to replay.
        workflows: The workflow classes, as the worker registered them.
        plugins: The worker's plugins (they set its data converter and sandbox).
        data_converter: The data converter the client and worker use, to convert the scheduled arguments with.
    """
    recorder = _RecordActivities(data_converter)
    replayer = Replayer(workflows=workflows, plugins=plugins, interceptors=[recorder])
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return result, recorder.scheduled


def recorded_activities(history: WorkflowHistory) -> list[ScheduledActivity]:
    """The activities `history` records as scheduled, in order, with the input payloads the worker sent."""
    return [
        ScheduledActivity(attributes.activity_type.name, list(attributes.input.payloads))
        for event in history.events
        if event.HasField('activity_task_scheduled_event_attributes')
        for attributes in [event.activity_task_scheduled_event_attributes]
    ]


def assert_same_activity_inputs(history: WorkflowHistory, replayed: Sequence[ScheduledActivity]) -> None:
    """Assert that a replay of `history` scheduled the activities the history records, with the same input bytes but
    for the values that are not replay-safe (see the module docstring).

    Args:
        history: The workflow history that was replayed.
        replayed: What the replay scheduled, from `replay_recording_activities`.

    Raises:
        AssertionError: Naming the workflow, the activity's index and type, and where the inputs first differ.
    """
    # Payloads are compared, not the values decoded from them: values that decode equal can still have been sent as
    # different bytes (a field's order, a float's spelling, a set's order), and bytes are what the activity was given.
    # The values that are not replay-safe are masked in the bytes, so everything around them is still compared as is.
    recorded = recorded_activities(history)
    recorded_types = [activity.activity_type for activity in recorded]
    replayed_types = [activity.activity_type for activity in replayed]
    if replayed_types != recorded_types:
        raise AssertionError(
            f'workflow {history.workflow_id!r}: the replay scheduled the activities {replayed_types}, '
            f'the history records {recorded_types}'
        )
    for index, (old, new) in enumerate(zip(recorded, replayed, strict=True)):
        old_input, new_input = _replay_safe(old.input), _replay_safe(new.input)
        if new_input != old_input:
            raise AssertionError(
                f'workflow {history.workflow_id!r}: activity {index} ({new.activity_type}) was scheduled on replay '
                f'with other input than the history records: {_first_difference(old_input, new_input)}'
            )


def _replay_safe(payloads: list[Payload]) -> list[Payload]:
    return [
        Payload(
            metadata=payload.metadata,
            data=_NOT_REPLAY_SAFE.sub(lambda match: match[0].split(b':', 1)[0] + b':"(not replay-safe)"', payload.data),
        )
        for payload in payloads
    ]


def _first_difference(recorded: list[Payload], replayed: list[Payload]) -> str:
    if len(recorded) != len(replayed):
        return f'{len(replayed)} payloads, the history has {len(recorded)}'
    index, old, new = next(
        (index, old, new) for index, (old, new) in enumerate(zip(recorded, replayed, strict=True)) if old != new
    )
    if old.metadata != new.metadata:
        return f'payload {index} has the metadata {dict(new.metadata)}, the history {dict(old.metadata)}'
    offset = next(
        (at for at, (a, b) in enumerate(zip(old.data, new.data, strict=False)) if a != b),
        min(len(old.data), len(new.data)),
    )
    start = max(offset - 40, 0)
    return (
        f'payload {index} differs from byte {offset}: recorded {old.data[start : offset + 80]!r}, '
        f'replayed {new.data[start : offset + 80]!r}'
    )
