"""One process of the DBOS test: run the conversation under DBOS on SQLite, or crash in it, or recover from the crash.

`python -m tests.durable.dbos_process MODE DATABASE OUTPUT`, with `MODE` one of:

- `crash`: run the conversation, and end the process abruptly (`os._exit`, no clean-up, as a killed worker would)
  when the model is sent request `CRASH_AT`, the one after the tool result of run 2: that turn's workflow has a
  finished model step and a tool call behind it, and an unfinished model step.
- `recover`: a fresh process on the same database. DBOS recovers the unfinished workflow when it launches; this
  waits for its result and runs the rest of the conversation from it.

Each writes the request bodies it sent, and at the end the whole history, as JSON to `OUTPUT`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TypeAlias

import httpx2
from dbos import DBOS, DBOSConfig, SetWorkflowID, WorkflowHandleAsync
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

from .conversation import PROMPTS, Project, Wire, between_runs, build_agent

CRASH_AT = 2
"""The request the crashing process ends at, before it is sent."""

CRASHED_RUN = 1
"""The run (from 0) whose workflow the crash interrupts."""

CRASHED = 17
"""The exit status of the crashing process."""


TurnResult: TypeAlias = tuple[str, Project, bytes]
"""What a turn's workflow returns: the output, the deps as the run left them, the whole history as JSON."""


class CrashingWire(Wire):
    """A wire whose process ends, as a killed worker's would, when it is about to answer request `CRASH_AT`."""

    def __init__(self, first_turn: int, output: Path, *, crash: bool) -> None:
        super().__init__(first_turn)
        self.output = output
        self.crash = crash
        self.history: list[ModelMessage] = []
        """The history as of the last finished turn, written out with the bodies."""

    def answer(self, request: httpx2.Request) -> httpx2.Response:
        if self.crash and len(self.provider.requests) == CRASH_AT:
            self.write()
            os._exit(CRASHED)  # no clean-up: DBOS finds the workflow unfinished
        return super().answer(request)

    def write(self) -> None:
        bodies = [body.decode() for body in self.bodies]
        history = json.loads(ModelMessagesTypeAdapter.dump_json(self.history))
        self.output.write_text(json.dumps({'bodies': bodies, 'history': history}))


AGENTS: dict[str, Agent[Project, str]] = {}
"""The agent of this process, built in `main` before DBOS launches, since its wire depends on the mode."""


@DBOS.workflow()
async def turn(prompt: str, project: Project, history: bytes) -> TurnResult:
    messages = ModelMessagesTypeAdapter.validate_json(history)
    result = await AGENTS['agent'].run(prompt, deps=project, message_history=messages)
    return result.output, project, ModelMessagesTypeAdapter.dump_json(result.all_messages())


async def main(mode: str, database: str, output: Path) -> None:
    wire = CrashingWire(CRASH_AT if mode == 'recover' else 0, output, crash=mode == 'crash')
    AGENTS['agent'] = build_agent(wire.model(), durability=DBOSDurability())
    config: DBOSConfig = {'name': 'append-instructions', 'system_database_url': f'sqlite:///{database}'}
    DBOS(config=config)
    DBOS.launch()
    try:
        project = Project()
        first = 0
        if mode == 'recover':
            handle: WorkflowHandleAsync[TurnResult] = await DBOS.retrieve_workflow_async(f'turn-{CRASHED_RUN}')
            _, project, history = await handle.get_result()
            wire.history = ModelMessagesTypeAdapter.validate_json(history)
            first = CRASHED_RUN + 1
        for run in range(first, len(PROMPTS)):
            between_runs(run, project)
            with SetWorkflowID(f'turn-{run}'):
                _, project, history = await turn(
                    PROMPTS[run], project, ModelMessagesTypeAdapter.dump_json(wire.history)
                )
            wire.history = ModelMessagesTypeAdapter.validate_json(history)
        wire.write()
    finally:
        DBOS.destroy()


if __name__ == '__main__':
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
