"""Under DBOS on SQLite, a workflow killed mid-turn recovers in a fresh process and sends what a plain run sends.

The crash and the recovery are two processes of `dbos_process.py`, on one SQLite database: the first ends abruptly
while the model is being sent the request after a tool result (its workflow has a finished model step behind it);
the second launches DBOS, which recovers that workflow, and runs the rest of the conversation. Both use the real
`OpenAIChatModel` over the in-process fake provider, and write down the bodies they sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip('dbos', reason='the durable engines are not installed: `uv sync --group durable`')

from inline_snapshot import snapshot
from pydantic_ai.messages import ModelMessagesTypeAdapter

from pydantic_ai_append import instruction_records

from .conversation import Wire, converse_plainly
from .dbos_process import CRASH_AT, CRASHED

pytestmark = [pytest.mark.anyio, pytest.mark.durable]

ROOT = Path(__file__).parents[2]


def run_process(mode: str, database: Path, output: Path) -> tuple[int, dict[str, Any]]:
    command = [sys.executable, '-m', 'tests.durable.dbos_process', mode, str(database), str(output)]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert output.exists(), finished.stderr
    return finished.returncode, json.loads(output.read_text())


async def test_a_workflow_killed_mid_turn_recovers_with_the_same_bytes(tmp_path: Path):
    database = tmp_path / 'dbos.sqlite'
    crash_status, crashed = run_process('crash', database, tmp_path / 'crash.json')
    recover_status, recovered = run_process('recover', database, tmp_path / 'recover.json')
    plain = Wire()
    plain_history = await converse_plainly(plain)
    plain_bodies = [body.decode() for body in plain.bodies]

    assert (crash_status, recover_status) == (CRASHED, 0)
    # The crashed process got as far as sending request `CRASH_AT`; the fresh one sent it again, and the rest.
    assert crashed['bodies'] == plain_bodies[: CRASH_AT + 1]
    assert recovered['bodies'] == plain_bodies[CRASH_AT:]
    history = ModelMessagesTypeAdapter.validate_python(recovered['history'])
    assert instruction_records(history) == instruction_records(plain_history)
    assert [
        (type(record).__name__, getattr(record, 'id', None)) for record in instruction_records(history)
    ] == snapshot(
        [
            ('InstructionBaselinePart', None),
            ('InstructionDeltaPart', 'capability:project:todos'),
            ('InstructionDeltaPart', 'capability:project:todos'),
            ('InstructionDeltaPart', 'capability:project:todos'),
            ('InstructionDeltaPart', 'capability:project:memory'),
            ('InstructionDeltaPart', 'capability:project:todos'),
            ('InstructionDeltaPart', 'capability:project:memory'),
        ]
    )
