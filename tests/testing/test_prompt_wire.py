"""The `prompt_wire` fixture, as a user's suite meets it: registered by installing the package, readable when a
prefix breaks, and what it records under pytest-recording.

`pytester` runs a user's test file in a pytest session of its own (in this process, so coverage sees the fixture
run), with no `conftest.py` and no `pytest_plugins`: the fixture is there only through the `pytest11` entry point.
"""

from __future__ import annotations

import asyncio
import re
import runpy
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel, OpenAIResponsesModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

import pytest_pydantic_ai_append
from pydantic_ai_append.testing import PromptWire

from ..fake_models import get_time

pytest_plugins = ['pytester']

USER_TEST = """
import httpx2
import pytest
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

TONES = {TONES!r}


def openai(request: httpx2.Request) -> httpx2.Response:
    choice = {{'index': 0, 'message': {{'role': 'assistant', 'content': 'OK.'}}, 'finish_reason': 'stop'}}
    return httpx2.Response(200, json={{'id': 'c', 'object': 'chat.completion', 'created': 0, 'model': 'm', 'choices': [choice]}})


@pytest.mark.anyio
async def test_my_agent_keeps_its_prefix(prompt_wire):
    http_client = prompt_wire.http_client(transport=httpx2.MockTransport(openai))
    model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
    tone = [TONES[0]]
    agent = Agent(model, instructions=lambda: tone[0])
    history = (await agent.run('Hello')).all_messages()
    tone[0] = TONES[1]
    await agent.run('Again', message_history=history)
    prompt_wire.assert_prefix_stable()
"""


def test_the_fixture_is_registered_by_the_entry_point():
    names = {entry.name: entry.value for entry in entry_points(group='pytest11')}
    assert names['pydantic-ai-append'] == 'pytest_pydantic_ai_append'


def test_a_users_test_gets_the_fixture_and_passes(pytester: pytest.Pytester):
    pytester.makepyfile(test_user=USER_TEST.format(TONES=('Be brief.', 'Be brief.')))
    result = pytester.runpytest_inprocess('-p', 'no:cacheprovider')
    result.assert_outcomes(passed=1)


def test_a_broken_prefix_fails_the_users_test_readably(pytester: pytest.Pytester):
    pytester.makepyfile(test_user=USER_TEST.format(TONES=('Be brief.', 'Be very brief.')))
    result = pytester.runpytest_inprocess('-p', 'no:cacheprovider')
    result.assert_outcomes(failed=1)
    # The failure points at the user's line; the package's own frames are hidden.
    assert [line for line in result.outlines if 'prompt_wire = ' in line or 'assert_prefix_stable' in line] == [
        'prompt_wire = PromptWire(2 exchanges)',
        '>       prompt_wire.assert_prefix_stable()',
    ]
    assert [line for line in result.outlines if 'pydantic_ai_append' in line] == []
    failure = [line.removeprefix('E   ').strip() for line in result.outlines if line.startswith('E   ')]
    assert failure == snapshot(
        [
            'AssertionError: request 1 does not extend request 0 byte for byte: first divergent segment is 0 (message in request 0, message in request 1), at byte 31 of it',
            'request 0: {"role":"system","content":"Be brief."}',
            'request 1: {"role":"system","content":"Be very brief."}',
            "why: the instructions changed and state no block of this plugin: 'Be brief.' became 'Be very brief.'",
            "fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)",
            '(only if request 1 is meant to open a new window, pass new_windows=(1,))',
        ]
    )


def test_pytest_imports_the_plugin_without_the_package():
    # pytest imports the plugin in every suite the package is installed in, before coverage starts; importing
    # nothing of the package keeps those suites fast and this package's coverage honest.
    code = 'import sys, pytest_pydantic_ai_append; print(sorted(m for m in sys.modules if m.startswith("pydantic_ai")))'
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert result.stdout == '[]\n'


def test_the_plugin_module_defines_only_the_fixture():
    # Run again here, under coverage, which had not started when pytest imported it.
    namespace = runpy.run_path(pytest_pydantic_ai_append.__file__)
    assert namespace['__all__'] == ('prompt_wire',)
    assert type(namespace['prompt_wire']) is type(pytest_pydantic_ai_append.prompt_wire)


def chat_reply(request: httpx2.Request) -> httpx2.Response:
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    return httpx2.Response(
        200, json={'id': 'c', 'object': 'chat.completion', 'created': 0, 'model': 'm', 'choices': [choice]}
    )


def test_the_fixture_closes_the_clients_the_test_left_open(prompt_wire: PromptWire):
    async def run() -> tuple[httpx2.AsyncClient, httpx2.AsyncClient]:
        left_open = prompt_wire.http_client(transport=httpx2.MockTransport(chat_reply))
        async with prompt_wire.http_client(transport=httpx2.MockTransport(chat_reply)) as closed:
            await closed.post('https://api.example/v1/chat/completions', json={'messages': []})
        with pytest.raises(UserError) as inside_a_loop:
            prompt_wire.close()
        assert str(inside_a_loop.value) == (
            'PromptWire.close() runs an event loop of its own; inside one, use `await prompt_wire.aclose()`'
        )
        return left_open, closed

    left_open, closed = asyncio.run(run())
    assert (left_open.is_closed, closed.is_closed) == (False, True)
    prompt_wire.close()
    assert left_open.is_closed


@pytest.mark.anyio
async def test_the_api_is_inferred_only_when_one_was_called(prompt_wire: PromptWire):
    with pytest.raises(UserError) as nothing_sent:
        prompt_wire.transcript()
    async with httpx2.AsyncClient(transport=prompt_wire.transport(httpx2.MockTransport(chat_reply))) as client:
        await client.get('https://api.example/v1/models')
        with pytest.raises(UserError) as none_to_an_api:
            prompt_wire.requests()
        model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=client))
        await Agent(model).run('Hello')
        assert [row.total_bytes > 0 for row in prompt_wire.prefix_reuse()] == [True]
        await client.post('https://api.example/v1/messages', json={'messages': []})
    with pytest.raises(UserError) as several:
        prompt_wire.conversation()
    with pytest.raises(UserError) as unknown:
        prompt_wire.conversation('xai-grpc')  # pyright: ignore[reportArgumentType]
    assert [str(error.value) for error in (nothing_sent, none_to_an_api, several, unknown)] == snapshot(
        [
            'no request to a provider API was recorded (paths seen: []); give the provider a client from `http_client()` or a transport from `transport()`, or name the API',
            "no request to a provider API was recorded (paths seen: ['/v1/models']); give the provider a client from `http_client()` or a transport from `transport()`, or name the API",
            "requests went to several APIs, ['anthropic', 'openai-chat']; name the one to check, e.g. api='anthropic'",
            "unknown API 'xai-grpc': name one of ['anthropic', 'bedrock-converse', 'cohere-chat', 'gemini', 'groq-chat', 'huggingface-chat', 'mistral-chat', 'openai-chat', 'openai-responses']",
        ]
    )
    assert [len(prompt_wire.requests(api)) for api in ('anthropic', 'openai-chat', 'openai-responses')] == [1, 1, 0]


# --- Cassettes recorded against the real providers
#
# Written by hand in the shape real recordings have: `https://api.openai.com` and `https://api.anthropic.com` URIs,
# the providers' headers, OpenAI's JSON replies gzip-encoded (a `!!binary` body: read one with
# `gzip.decompress(base64.b64decode(...))`), Anthropic's as an event stream. They were "recorded" by a run whose
# instructions were `Reply in one word.`; the test's agent has been edited since, as a user's agent is.


class RecordedRequests(Protocol):
    """The part of a vcrpy `Cassette` these tests read."""

    @property
    def requests(self) -> list[Any]: ...


def recorded_bodies(vcr: RecordedRequests) -> list[bytes]:
    return [request.body for request in vcr.requests]


@pytest.mark.vcr
@pytest.mark.anyio
async def test_a_cassette_recorded_against_openai_replays_through_the_fixture(
    prompt_wire: PromptWire, vcr: RecordedRequests
):
    provider = OpenAIProvider(api_key='sk-test', http_client=prompt_wire.http_client())
    agent = Agent(
        OpenAIResponsesModel('gpt-5.2', provider=provider), tools=[get_time], instructions='Answer in one word.'
    )
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    result = await agent.run('What time is it?', model_settings=settings)
    await agent.run('Thanks!', message_history=result.all_messages(), model_settings=settings)
    assert result.output == 'Noon.'
    # What is checked is what this run sent, with the replies' ids from the cassette resolved.
    sent = [exchange.request_body for exchange in prompt_wire.exchanges]
    assert [(b'Answer in one word.' in body, b'Reply in one word.' in body) for body in sent] == [(True, False)] * 3
    assert [b'Reply in one word.' in body for body in recorded_bodies(vcr)] == [True] * 3
    prompt_wire.assert_prefix_stable()
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 231 bytes
+ tool get_time: Get the current time.
+     parameters: {"additionalProperties":false,"properties":{},"type":"object"}
+     strict: false
+ instructions: Answer in one word.
+ user: What time is it?

request 1: reuses 231 of 488 bytes
  tool get_time: Get the current time.
      parameters: {"additionalProperties":false,"properties":{},"type":"object"}
      strict: false
  instructions: Answer in one word.
  user: What time is it?
+ function_call (output): get_time({}) [call#1]
+     id: id#1
+     status: completed
+ function_call_output [call#1]: 12:00

request 2: reuses 488 of 708 bytes
  tool get_time: Get the current time.
      parameters: {"additionalProperties":false,"properties":{},"type":"object"}
      strict: false
  instructions: Answer in one word.
  user: What time is it?
  function_call (output): get_time({}) [call#1]
      id: id#1
      status: completed
  function_call_output [call#1]: 12:00
+ assistant (output): Noon.
+         annotations: []
+         logprobs: []
+     id: id#2
+     status: completed
+ user: Thanks!
""")


@pytest.mark.vcr
@pytest.mark.anyio
async def test_a_cassette_recorded_against_anthropic_replays_through_the_fixture(
    prompt_wire: PromptWire, vcr: RecordedRequests
):
    provider = AnthropicProvider(api_key='sk-ant-test', http_client=prompt_wire.http_client())
    agent = Agent(AnthropicModel('claude-sonnet-4-6', provider=provider), instructions='Answer in one word.')
    # No framing text (2.68 adds it to the system prompt; 2.58 has none), so one transcript holds on both releases.
    settings = ModelSettings(framing_announcement='never')
    result = await agent.run('Hello!', model_settings=settings)
    await agent.run('Bye!', message_history=result.all_messages(), model_settings=settings)
    assert result.output == 'Hi.'
    assert [b'Answer in one word.' in body for body in recorded_bodies(vcr)] == [False, False]
    prompt_wire.assert_prefix_stable()
    assert [(row.reused_bytes > 0, row.new_bytes > 0) for row in prompt_wire.prefix_reuse()] == [
        (False, True),
        (True, True),
    ]
    assert prompt_wire.transcript() == snapshot("""\
request 0: reuses 0 of 103 bytes
+ system: Answer in one word.
+ user: Hello!

request 1: reuses 103 of 221 bytes
  system: Answer in one word.
  user: Hello!
+ assistant: Hi.
+ user: Bye!
""")


# The page's test runs an agent against the fake provider on loopback, in this process, where the suite blocks the
# network but for what a test allows.
@pytest.mark.block_network(allowed_hosts=[r'127\.0\.0\.1'])
def test_the_docs_test_passes_in_a_users_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    # The docs page's first example is a test file; run as one, with its empty snapshot filled in, as a user would.
    # inline-snapshot writes no snapshot in an xdist worker, and this session may run in one; the inner session is no
    # worker (inline-snapshot keeps a state per session, so this one's is left as it was).
    monkeypatch.delenv('PYTEST_XDIST_WORKER', raising=False)
    page = (Path(__file__).parents[2] / 'docs' / 'testing-prompts.md').read_text()
    pytester.makepyfile(test_docs_page=re.findall(r'```python\n(.*?)```', page, re.DOTALL)[0])
    pytester.runpytest_inprocess('-p', 'no:cacheprovider', '--inline-snapshot=create')
    created = (pytester.path / 'test_docs_page.py').read_text()
    assert '+ system: <context id="capability:todos:list">' in created
    # Run again, the snapshot is what the agent sends.
    pytester.runpytest_inprocess('-p', 'no:cacheprovider').assert_outcomes(passed=1)
