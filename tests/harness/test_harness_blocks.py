"""Pydantic AI Harness's own blocks routed with `HARNESS_BLOCKS`, on the wire, with real harness objects.

A `LocalWorkspace` in a temporary directory holds an `AGENTS.md` that `RepoContext` reads and a folder of agent
definitions that `SubAgents` lists. Between runs the file is added, edited and deleted, and the folder gains an
agent; real `openai` and `anthropic` SDK clients talk to the fake provider, and the prefix checker judges the bytes.

Harness pins `pydantic-ai-slim` exactly, so these tests run only in the environments `.ci/harness-env` builds
(harness 0.58 with slim 2.58.0, and the newest harness with the slim it pins); elsewhere they are skipped.
Cassettes are matched on method and path, so the one recording replays on both releases.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import LocalWorkspace
from pydantic_ai.messages import InstructionPart, ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models import Model

from pydantic_ai_append import HARNESS_BLOCKS, AppendInstructions, UnmatchedRouteWarning, instruction_records
from pydantic_ai_append._wire.segments import API_PATHS, segments
from pydantic_ai_append.testing import Api, Segment, WireCapture, WireConversation, WireExchange, assert_prefix_stable
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, anthropic_model, openai_chat_model

pytest.importorskip(
    'pydantic_ai_harness', reason='needs pydantic-ai-harness: run in an environment from .ci/harness-env'
)

from pydantic_ai_harness.repo_context import RepoContext
from pydantic_ai_harness.subagents import SubAgents

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.vcr,
    pytest.mark.filterwarnings("ignore:The model 'claude-sonnet-4-5' is deprecated:DeprecationWarning"),
]

FIXTURES = Path(__file__).parent / 'fixtures'

HISTORY_FIXTURE = FIXTURES / 'history_slim_2.58.json'
"""The history the 2.58 run of `openai-chat` ends with, continued by the newer release."""

LAST_REQUEST_FIXTURE = FIXTURES / 'last_request_slim_2.58_openai-chat.json'
"""The body of the last request the 2.58 run of `openai-chat` sent, exactly as sent: the prefix the newer release
must reuse when it continues `HISTORY_FIXTURE`."""

NEWER_RELEASE = 'on_change' in InstructionPart.__dataclass_fields__

MODELS = {'openai-chat': (openai_chat_model, 'gpt-5.2'), 'anthropic': (anthropic_model, 'claude-sonnet-4-5')}


def agent_definition(name: str, description: str) -> str:
    return f'---\nname: {name}\ndescription: {description}\n---\nYou are the {name}.'


class Workspace:
    """The workspace directory, and the edits made to it between runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.agents = root / 'subagents'
        self.agents.mkdir()
        (self.agents / 'researcher.md').write_text(agent_definition('researcher', 'Researches topics'))

    def before_run(self, run: int) -> None:
        agents_md = self.root / 'AGENTS.md'
        if run == 1:
            agents_md.write_text('Run the tests with `make test`.')  # added
        elif run == 2:
            agents_md.write_text('Run the tests with `make check`.')  # edited
        elif run == 3:
            (self.agents / 'writer.md').write_text(agent_definition('writer', 'Writes prose'))  # a new agent
        elif run == 4:
            agents_md.unlink()  # deleted
        elif run == 5:
            agents_md.write_text('Run the tests with `make all`.')  # back
        elif run == 6:
            agents_md.write_text('Run the tests with `make ci`.')  # edited on the newer release


def build_agent(model: Model, workspace: Workspace) -> Agent[None, str]:
    return Agent(
        model,
        instructions='Be brief.',
        capabilities=[
            LocalWorkspace(str(workspace.root)),
            # On 2.58 `RepoContext` gives its block an id only when built with one.
            RepoContext(id='repo_context'),
            SubAgents(agent_folders=['subagents']),
            # Named as well as in the preset, so it is warned about if it never matches. (`SubAgents` opens the window
            # on the first request, so `AGENTS.md` appearing later is a change either way.)
            AppendInstructions(id='context', append_ids=[HARNESS_BLOCKS, 'capability:repo_context']),
        ],
    )


async def run_quietly(
    agent: Agent[None, str], prompt: str, history: list[ModelMessage], **run_options: Any
) -> list[ModelMessage]:
    with warnings.catch_warnings():
        # `AGENTS.md` is absent on the first run, which is what the warning is about; that is intended here.
        warnings.simplefilter('ignore', UnmatchedRouteWarning)
        result = await agent.run(prompt, message_history=history, **run_options)
    # A JSON round trip between runs, as a store would do.
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(result.all_messages()))


def body_text(request: list[Segment]) -> str:
    return '\n'.join(segment.data.decode() for segment in request)


async def converse(
    api: Api, files: Workspace, runs: range, history: list[ModelMessage], **run_options: Any
) -> tuple[list[WireExchange], list[ModelMessage]]:
    """Run the agent once per run, returning the exchanges sent to `api` and the history the runs end with."""
    factory, model_name = MODELS[api]
    capture = WireCapture()
    with FakeProvider(script=[Text(f'ok {run}') for run in runs]) as server:
        async with capture.http_client() as http_client:
            for run in runs:
                files.before_run(run)
                agent = build_agent(factory(server.url, model_name, http_client=http_client), files)
                history = await run_quietly(agent, f'run {run}', history, **run_options)
    return [exchange for exchange in capture.exchanges if exchange.path.endswith(API_PATHS[api])], history


def request_segments(api: Api, exchanges: list[WireExchange]) -> list[list[Segment]]:
    """Each request's cache-order segments, as the provider sees them."""
    return WireConversation.from_exchanges(api, exchanges).requests


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


@pytest.mark.parametrize('api', ['openai-chat', 'anthropic'])
async def test_every_change_is_delivered_with_the_prefix_kept(api: Api, workspace: Workspace):
    exchanges, history = await converse(api, workspace, range(6), [])
    requests = request_segments(api, exchanges)
    assert len(requests) == 6
    assert_prefix_stable(requests)
    # One window: the baseline of the first request, then one change per edit.
    kinds = [type(record).__name__ for record in instruction_records(history)]
    assert kinds == ['InstructionBaselinePart'] + ['InstructionDeltaPart'] * 5
    first, last = body_text(requests[0]), body_text(requests[-1])
    assert 'make test' not in first and 'writer' not in first
    for change in ['make test', 'make check', 'writer: Writes prose', 'withdrawn', 'make all']:
        assert change in last, change
    recorded = HISTORY_FIXTURE.exists() and LAST_REQUEST_FIXTURE.exists()
    if api == 'openai-chat' and not NEWER_RELEASE and not recorded:
        # Recorded once, like a cassette, for the newer release to continue; both from the same run.
        HISTORY_FIXTURE.write_bytes(ModelMessagesTypeAdapter.dump_json(history, indent=2) + b'\n')
        LAST_REQUEST_FIXTURE.write_bytes(exchanges[-1].request_body)


@pytest.mark.skipif(not NEWER_RELEASE, reason='continues the history the 2.58 run recorded, on the newer release')
async def test_a_history_from_the_older_release_continues_on_the_newer(workspace: Workspace):
    history = ModelMessagesTypeAdapter.validate_json(HISTORY_FIXTURE.read_bytes())
    # The workspace as the older run left it, then edited once more.
    for run in range(6):
        workspace.before_run(run)
    # Newer releases record the workspace a history ran in; this one is another directory with the same files.
    exchanges, history = await converse('openai-chat', workspace, range(6, 8), history, workspace='new')
    requests = request_segments('openai-chat', exchanges)
    assert len(requests) == 2
    # Everything the older release last sent is where the newer one starts, every segment byte for byte: the
    # `delegate_task` tool as harness 0.58 described it, then every message (the instructions and the changes among
    # them) as Pydantic AI 2.58 serialized it.
    older_last = segments('openai-chat', LAST_REQUEST_FIXTURE.read_bytes())
    assert_prefix_stable([older_last, *requests])
    # Not vacuous: the older request holds the tool and the whole older conversation, up to the last change it sent.
    assert older_last[0].kind == 'tool' and 'make all' in older_last[-1].data.decode()
    assert len(requests[0]) > len(older_last)
    kinds = [type(record).__name__ for record in instruction_records(history)]
    # The window the older release opened goes on: no new baseline.
    assert kinds == ['InstructionBaselinePart'] + ['InstructionDeltaPart'] * 6
    prefix = body_text(requests[0])
    assert 'researcher: Researches topics' in prefix and 'make test' in prefix
