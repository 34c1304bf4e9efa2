"""`HARNESS_BLOCKS` with a real `RepoContext`: built without an id on a release where that leaves its block with
none, and with its `AGENTS.md` absent when the conversation starts."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import InstructionPart, ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import HARNESS_BLOCKS, AppendInstructions, UnmatchedRouteWarning, instruction_records

pytest.importorskip(
    'pydantic_ai_harness', reason='needs pydantic-ai-harness: run in an environment from .ci/harness-env'
)

from pydantic_ai_harness.repo_context import RepoContext

NEWER_RELEASE = 'on_change' in InstructionPart.__dataclass_fields__


class Recorder:
    """A streaming function model that keeps the instructions and the last message of each request."""

    def __init__(self) -> None:
        self.instructions: list[str | None] = []
        self.last_messages: list[ModelMessage] = []

    async def reply(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        self.instructions.append(info.instructions)
        self.last_messages.append(messages[-1])
        yield 'ok'

    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self.reply)


def test_repo_context_without_an_id_is_named_in_the_warning_where_its_block_has_none(tmp_path: Path):
    (tmp_path / 'AGENTS.md').write_text('Run the tests with `make test`.')
    recorder = Recorder()
    context = AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)
    agent = Agent(
        recorder.model(),
        instructions='Be brief.',
        capabilities=[LocalWorkspace(str(tmp_path)), RepoContext(), context],
    )
    history: list[ModelMessage] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for prompt in ['one', 'two']:
            history = agent.run_sync(prompt, message_history=history).all_messages()
    messages = [str(warning.message) for warning in caught if warning.category is UnmatchedRouteWarning]
    if not NEWER_RELEASE:
        # Harness 0.58: the block has no id, so the preset can't route it; the warning says how to give it one.
        assert messages == [
            (
                "`append_ids` entry 'capability:repo_context' matches no instruction block of this request: the agent's "
                '`RepoContext` has no id, so neither has the block it contributes, and that block is rewritten in the '
                "prefix instead. Build it as `RepoContext(id='repo_context')` to route it."
            )
        ]
        assert instruction_records(history) == []
    else:
        # Newer releases give its block the id without one on the capability: routed, nothing to warn about.
        assert messages == []
        assert [type(record).__name__ for record in instruction_records(history)] == ['InstructionBaselinePart']
    assert 'make test' in (recorder.instructions[-1] or '')


def test_agents_md_written_after_the_first_request_is_delivered_as_a_change(tmp_path: Path):
    # Only the preset routes it, and no other block opens a window: `RepoContext` being on the agent holds its
    # entry in the window while the file is missing.
    agents_md = tmp_path / 'AGENTS.md'
    recorder = Recorder()
    history: list[ModelMessage] = []
    for rules in [None, 'Run the tests with `make test`.']:
        if rules is not None:
            agents_md.write_text(rules)
        agent = Agent(
            recorder.model(),
            instructions='Be brief.',
            capabilities=[
                LocalWorkspace(str(tmp_path)),
                RepoContext(id='repo_context'),
                AppendInstructions(id='context', append_ids=HARNESS_BLOCKS),
            ],
        )
        history = agent.run_sync('hi', message_history=history).all_messages()
    assert recorder.instructions[1] == recorder.instructions[0]
    assert 'make test' not in (recorder.instructions[0] or '')
    assert [type(record).__name__ for record in instruction_records(history)] == [
        'InstructionBaselinePart',
        'InstructionDeltaPart',
    ]
    assert 'make test' in str(recorder.last_messages[1])
