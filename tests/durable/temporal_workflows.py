"""The Temporal side of the durable tests: the agents and the workflow that runs one turn of the conversation.

Temporal imports a workflow's module again inside its sandbox, so the workflow lives in a module of its own that
imports only what workflow code needs. The model requests and the activity-side tools run on the worker, in this
test process, against `WIRE`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
from pydantic_ai.messages import ModelMessage
from temporalio import workflow

# Imported the sandbox's way, not passed through: the plugin must load in workflow code as any user's module does.
import pydantic_ai_append  # noqa: F401  # pyright: ignore[reportUnusedImport]

with workflow.unsafe.imports_passed_through():
    # The test machinery (the fake provider serves HTTP) is the host's, shared by the worker and the test.
    from .conversation import Project, Wire, build_agent

__all__ = ['ACTIVITY_TOOLS', 'WIRE', 'WORKFLOW_TOOLS', 'Conversation', 'Turn', 'TurnResult']

WIRE = Wire()
"""The wire both agents send through; a test resets it before it runs."""

WORKFLOW_TOOLS = build_agent(WIRE.model(), durability=TemporalDurability(), workflow_tools=True)
"""Tools run in workflow code, so their change to deps is seen by the block functions."""

ACTIVITY_TOOLS = build_agent(WIRE.model(), durability=TemporalDurability(name='activity_tools'), workflow_tools=False)
"""Tools run in activities, on a copy of the deps."""


@dataclass
class Turn:
    """One run of the conversation, as the client starts it."""

    prompt: str
    """The user prompt."""
    project: Project
    """The deps, as the application holds them before the run."""
    history: list[ModelMessage] = field(default_factory=list[ModelMessage])
    """The messages of the earlier runs."""
    activity_tools: bool = False
    """Run `ACTIVITY_TOOLS` instead of `WORKFLOW_TOOLS`."""


@dataclass
class TurnResult:
    """What a run gives back to the client."""

    output: str
    """The agent's output."""
    project: Project
    """The deps as the run left them in workflow code."""
    messages: list[ModelMessage]
    """The whole history, for the next run."""


@workflow.defn
class Conversation(PydanticAIWorkflow):
    """Runs one turn of the conversation with the agent the turn asks for."""

    __pydantic_ai_agents__ = (WORKFLOW_TOOLS, ACTIVITY_TOOLS)

    @workflow.run
    async def run(self, turn: Turn) -> TurnResult:
        agent = ACTIVITY_TOOLS if turn.activity_tools else WORKFLOW_TOOLS
        result = await agent.run(turn.prompt, deps=turn.project, message_history=turn.history)
        return TurnResult(result.output, turn.project, result.all_messages())
