"""A harness block that changes owner mid-conversation, between the plugin and Pydantic AI's own append mode.

From 2.59, `RepoContext`'s block is in Pydantic AI's own append mode unless the plugin routes it. Taking it out of
`append_ids` between runs (or adding it) hands it to the other mechanism, which opens a new window; the block is
never sent twice and no withdrawal is sent for a block that is still there.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import InstructionPart, ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import HARNESS_BLOCKS, AppendInstructions, BlockPreset, instruction_records

pytest.importorskip(
    'pydantic_ai_harness', reason='needs pydantic-ai-harness: run in an environment from .ci/harness-env'
)

from pydantic_ai_harness.repo_context import RepoContext

pytestmark = pytest.mark.skipif(
    'on_change' not in InstructionPart.__dataclass_fields__, reason='this release has no append mechanism of its own'
)


@pytest.mark.parametrize(
    ('before', 'after'),
    [pytest.param(HARNESS_BLOCKS, (), id='plugin-to-native'), pytest.param((), HARNESS_BLOCKS, id='native-to-plugin')],
)
def test_repo_context_changing_owner_opens_a_new_window(
    tmp_path: Path, before: BlockPreset | tuple[str, ...], after: BlockPreset | tuple[str, ...]
):
    sent: list[list[str]] = []

    async def model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        sent.append([part.content for part in info.model_request_parameters.instruction_parts or []])
        yield 'ok'

    agents_md = tmp_path / 'AGENTS.md'
    history: list[ModelMessage] = []
    for version, append_ids in [(1, before), (2, after)]:
        agents_md.write_text(f'Rules v{version}.')
        context = AppendInstructions(id='context', append_ids=append_ids)
        context.instructions(name='state')(lambda: 'state')
        agent = Agent(
            FunctionModel(stream_function=model),
            capabilities=[LocalWorkspace(str(tmp_path)), RepoContext(), context],
        )
        # `filterwarnings = error`: Pydantic AI's warning about two blocks sharing an id would fail this.
        history = agent.run_sync('hi', message_history=history).all_messages()
    assert [type(record).__name__ for record in instruction_records(history)] == ['InstructionBaselinePart'] * 2
    # The block is sent once, by its new owner, with its current value.
    assert [content for content in sent[-1] if 'Rules v' in content] == [
        content for content in sent[-1] if 'Rules v2' in content
    ]
    assert len([content for content in sent[-1] if 'Rules v' in content]) == 1
