"""Pydantic AI Harness's `LogfireMCP` and `HARNESS_BLOCKS`, built offline.

`LogfireMCP` has two kinds of instructions: its own (query guidance and the current UTC hour), and the ones the
hosted server sends once connected. Given `auth` as a function that returns no key, a run has no Logfire tools and
connects to nothing, while the capability's own instructions are still there; those are what these tests build.
The server's instructions need a live MCP server, so they are not built here.

Like the other harness tests, these run only in the environments `.ci/harness-env` builds.
"""

from __future__ import annotations

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.messages import InstructionPart, ModelRequest
from pydantic_ai.models.test import TestModel

from pydantic_ai_append import (
    HARNESS_BLOCKS,
    AppendInstructions,
    InstructionBaselinePart,
    InstructionBlock,
    instruction_records,
)

pytest.importorskip(
    'pydantic_ai_harness', reason='needs pydantic-ai-harness: run in an environment from .ci/harness-env'
)

from pydantic_ai_harness.logfire_mcp import LogfireMCP

NEWER_RELEASE = 'on_change' in InstructionPart.__dataclass_fields__


def run_with_logfire_mcp() -> tuple[str | None, list[tuple[str | None, str]]]:
    """One run with `LogfireMCP` and the preset; the instructions sent, and every block of the window's baseline."""
    context = AppendInstructions(id='context', append_ids=HARNESS_BLOCKS)
    # A block of the plugin's own, so a window opens whether or not the preset routes anything.
    context.instructions(name='rules', on_change='append')(lambda: 'Be brief.')
    agent = Agent(TestModel(), capabilities=[LogfireMCP(auth=lambda ctx: None), context])
    messages = agent.run_sync('Hello.').all_messages()
    (baseline,) = instruction_records(messages)
    first = messages[0]
    assert isinstance(baseline, InstructionBaselinePart) and isinstance(first, ModelRequest)
    blocks = [
        (item.id, 'routed' if isinstance(item, InstructionBlock) else 'left in place') for item in baseline.instructions
    ]
    return first.instructions, blocks


def test_the_preset_routes_logfire_mcp_blocks_where_they_can_be_told_apart():
    instructions, blocks = run_with_logfire_mcp()
    assert instructions is not None
    assert 'Query transport bounds' in instructions and 'The current UTC time is within the hour' in instructions
    # The capability's id is `logfire-mcp`, with a hyphen.
    if NEWER_RELEASE:
        # The guidance is named, and the hour has the capability's own id: both routed.
        assert blocks == snapshot(
            [
                ('capability:logfire-mcp:guidance', 'routed'),
                ('capability:logfire-mcp', 'routed'),
                ('capability:context:rules', 'routed'),
            ]
        )
    else:
        # The guidance and the hour are two blocks under the one id: a change couldn't say which it replaces, so
        # they are left in place, and (reached through the preset) without a warning: `filterwarnings = error`.
        assert blocks == snapshot(
            [
                ('capability:logfire-mcp', 'left in place'),
                ('capability:context:rules', 'routed'),
                ('capability:logfire-mcp', 'left in place'),
            ]
        )
