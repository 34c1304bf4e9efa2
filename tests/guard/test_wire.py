"""The wire verifier compares what real provider clients send, and refuses a divergent request in enforce mode.

Each agent test runs Pydantic AI's real model classes through `WireVerifier.http_client()` against the fake
provider, recorded as a cassette and replayed with the network blocked. A transport under the verifier counts what
reaches the network, which shows that a refused request (and any retry of it) never leaves. The last tests drive
the client directly, for requests no Pydantic AI model sends.

To record the cassettes again: `uv run pytest tests/guard/test_wire.py --no-cov --record-mode=rewrite
--allowed-hosts=127.0.0.1`.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import tracemalloc
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models import Model
from pydantic_ai.models.openai import OpenAIResponsesModelSettings

from pydantic_ai_append._check.cassettes import Interaction
from pydantic_ai_append._check.verdicts import check_cassette
from pydantic_ai_append._wire.segments import API_PATHS
from pydantic_ai_append.guard import (
    WireDivergence,
    WirePrefixDivergenceError,
    WirePrefixDivergenceWarning,
    WireVerifier,
)
from pydantic_ai_append.testing import Api
from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    ToolCalls,
    anthropic_model,
    openai_chat_model,
    openai_responses_model,
)

pytestmark = pytest.mark.anyio

MODEL_FACTORIES: Mapping[Api, Callable[..., Model]] = {
    'anthropic': anthropic_model,
    'openai-chat': openai_chat_model,
    'openai-responses': openai_responses_model,
}
APIS: Sequence[Api] = list(MODEL_FACTORIES)
MODEL_NAMES: Mapping[Api, str] = {
    'anthropic': 'claude-sonnet-4-6',
    'openai-chat': 'gpt-5.2',
    'openai-responses': 'gpt-5.2',
}

SCRIPT = [Text('One.'), ToolCalls([('get_time', {})]), Text('Noon.'), Text('Three.')]
"""Run 1 is one request, run 2 calls a tool (two requests), run 3 is the request that may diverge."""


def get_time() -> str:
    """Get the current time."""
    return '12:00'


def drop_oldest_turn(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A history processor that forgets the first request and response: it moves the consumed prefix."""
    return messages[2:]


class NetworkCount(httpx2.AsyncBaseTransport):
    """The transport under the verifier: counts the requests that reach the network (or vcrpy's replay of it)."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.paths.append(request.url.path)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def three_runs(
    api: Api,
    verifier: WireVerifier,
    *,
    last_instructions: str = 'Be brief.',
    last_capabilities: Sequence[AbstractCapability[Any]] = (),
) -> NetworkCount:
    """Run the script's three runs, the last one with the instructions and capabilities given."""
    network = NetworkCount()
    with FakeProvider(script=SCRIPT) as server:
        async with verifier.http_client(transport=network) as http_client:
            model = MODEL_FACTORIES[api](server.url, http_client=http_client)
            agent = Agent(model, instructions='Be brief.', tools=[get_time])
            history = (await agent.run('First?')).all_messages()
            history = (await agent.run('Time?', message_history=history)).all_messages()
            last = Agent(model, instructions=last_instructions, tools=[get_time], capabilities=list(last_capabilities))
            result = await last.run('Third?', message_history=history)
    assert result.output == 'Three.'
    return network


WIRE = 'pydantic_ai_append.wire.'


def wire_spans(capfire: CaptureLogfire) -> list[dict[str, Any]]:
    spans = capfire.exporter.exported_spans_as_dict()
    return [span for span in spans if span['name'] == 'wire prefix {api} {model} request {request_index}']


def span_attributes(capfire: CaptureLogfire) -> list[dict[str, Any]]:
    # The plugin's attributes without their prefix, for the snapshots to read as the docs' list does.
    names = ('model', 'request_index', 'segments', 'reused_segments', 'compared', 'divergent_segment', 'divergent_kind')
    keys = {WIRE + name: name for name in names} | {'logfire.level_num': 'logfire.level_num'}
    return [
        {name: span['attributes'][key] for key, name in keys.items() if key in span['attributes']}
        for span in wire_spans(capfire)
    ]


# --- observe ---


@pytest.mark.vcr
@pytest.mark.parametrize('api', APIS)
async def test_observe_warns_and_sends_changed_instructions(api: Api):
    verifier = WireVerifier()
    with pytest.warns(WirePrefixDivergenceWarning) as warned:
        network = await three_runs(api, verifier, last_instructions='Be very brief.')
    assert network.paths == [API_PATHS[api]] * 4
    [divergence] = verifier.divergences
    assert str(warned[0].message) == (
        f'{divergence.message}\nIf it opens a new window (compaction, new instructions), call `open_window()` on the '
        'verifier first.'
    )
    # The segment index counts the tool and (on Anthropic) the system blocks, which differ between releases.
    excerpts = {
        'anthropic': (
            'system',
            '{"type":"text","text":"Be brief."}',
            '{"type":"text","text":"Be very brief."}',
        ),
        'openai-chat': (
            'message',
            '{"role":"system","content":"Be brief."}',
            '{"role":"system","content":"Be very brief."}',
        ),
        'openai-responses': ('instructions', '"Be brief."', '"Be very brief."'),
    }
    assert (divergence.api, divergence.model, divergence.request) == (api, MODEL_NAMES[api], 3)
    assert (divergence.kind, divergence.previous, divergence.current) == excerpts[api]


@pytest.mark.vcr
async def test_spans_and_chains_per_model(capfire: CaptureLogfire):
    verifier = WireVerifier()
    with FakeProvider(script=[Text(f'Reply {n}.') for n in range(5)]) as server:
        async with verifier.http_client() as http_client:
            models = [
                openai_chat_model(server.url, name, http_client=http_client) for name in ('gpt-5.2', 'gpt-5-mini')
            ]
            history: list[ModelMessage] = []
            # One conversation, two models taking turns: each model's requests are a chain of their own.
            for model, prompt in zip(models * 2, ['First?', 'Second?', 'Third?'], strict=False):
                history = (
                    await Agent(model, instructions='Be brief.').run(prompt, message_history=history)
                ).all_messages()
            # New instructions for the next window: opened for one model only, so the other one's request diverges.
            verifier.open_window('gpt-5.2')
            with pytest.warns(WirePrefixDivergenceWarning, match="request 1 to model 'gpt-5-mini'"):
                await Agent(models[1], instructions='Be terse.').run('Fourth?', message_history=history)
            await Agent(models[0], instructions='Be terse.').run('Fourth?', message_history=history)
    assert span_attributes(capfire) == snapshot(
        [
            {'model': 'gpt-5.2', 'request_index': 0, 'segments': 2, 'reused_segments': 0, 'compared': False},
            {'model': 'gpt-5-mini', 'request_index': 0, 'segments': 4, 'reused_segments': 0, 'compared': False},
            {'model': 'gpt-5.2', 'request_index': 1, 'segments': 6, 'reused_segments': 2, 'compared': True},
            {
                'model': 'gpt-5-mini',
                'request_index': 1,
                'segments': 8,
                'reused_segments': 0,
                'compared': True,
                'divergent_segment': 0,
                'divergent_kind': 'message',
                'logfire.level_num': 13,
            },
            {'model': 'gpt-5.2', 'request_index': 2, 'segments': 8, 'reused_segments': 0, 'compared': False},
        ]
    )
    assert [span['attributes']['logfire.msg'] for span in wire_spans(capfire)] == snapshot(
        [
            'wire prefix openai-chat gpt-5.2 request 0',
            'wire prefix openai-chat gpt-5-mini request 0',
            'wire prefix openai-chat gpt-5.2 request 1',
            'wire prefix openai-chat gpt-5-mini request 1',
            'wire prefix openai-chat gpt-5.2 request 2',
        ]
    )


@pytest.mark.vcr
async def test_regenerating_a_reply_is_a_shorter_request():
    verifier = WireVerifier()
    with FakeProvider(script=[Text('One.'), ToolCalls([('get_time', {})]), Text('Noon.'), Text('Again.')]) as server:
        async with verifier.http_client() as http_client:
            agent = Agent(openai_chat_model(server.url, http_client=http_client), tools=[get_time])
            first = (await agent.run('First?')).all_messages()
            await agent.run('Time?', message_history=first)
            # The user asks for the second answer again: the request is a prefix of the one before.
            with pytest.warns(WirePrefixDivergenceWarning):
                await agent.run('Time?', message_history=first)
    assert [divergence.message for divergence in verifier.divergences] == snapshot(
        [
            """\
openai-chat request 3 to model 'gpt-5.2' does not extend request 2 byte for byte: it ends after 4 segments, where request 2 goes on with segment 4 (message)
  request 2: {"role":"assistant","content":null,"tool_calls":[{"id":"call_fake_1_0","type":"function","function":{"name":"get_time","…\
"""
        ]
    )


# --- enforce ---


@pytest.mark.vcr
@pytest.mark.parametrize('api', APIS)
async def test_enforce_refuses_before_sending(api: Api, capfire: CaptureLogfire):
    verifier = WireVerifier(mode='enforce')
    with pytest.raises(WirePrefixDivergenceError) as raised:
        await three_runs(api, verifier, last_capabilities=[ProcessHistory(drop_oldest_turn)])
    # The request was refused in the transport: the provider never saw it, and no retry of it reached the network
    # or the verifier again (one check each, one divergence).
    [divergence] = verifier.divergences
    spans = span_attributes(capfire)
    assert len(spans) == 4
    assert spans[-1]['logfire.level_num'] == 17  # error: the span records the refusal
    assert str(raised.value) == (
        f'{divergence.message}\nNot sent. If it opens a new window (compaction, new instructions), call '
        '`open_window()` on the verifier first.'
    )
    assert (divergence.request, divergence.kind) == (3, 'input' if api == 'openai-responses' else 'message')
    assert '"First?"' in divergence.previous and '"Time?"' in (divergence.current or '')
    # As itself, not wrapped by the SDK or by Pydantic AI.
    assert raised.value.__cause__ is None


@pytest.mark.vcr
@pytest.mark.parametrize('api', APIS)
async def test_enforce_sends_a_request_after_an_opened_window(api: Api):
    verifier = WireVerifier(mode='enforce')
    network = NetworkCount()
    with FakeProvider(script=[Text('One.'), Text('Two.')]) as server:
        async with verifier.http_client(transport=network) as http_client:
            model = MODEL_FACTORIES[api](server.url, http_client=http_client)
            history = (await Agent(model, instructions='Be brief.').run('First?')).all_messages()
            verifier.open_window()
            history = (
                await Agent(model, instructions='Be terse.').run('Second?', message_history=history)
            ).all_messages()
    assert (len(network.paths), verifier.divergences) == (2, [])


# --- OpenAI Responses with previous_response_id ---


@pytest.mark.vcr
async def test_responses_previous_response_id_is_compared_after_resolving():
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    verifier = WireVerifier()
    with FakeProvider(script=[Text(f'Reply {n}.') for n in range(4)]) as server:
        async with verifier.http_client() as http_client:
            agent = Agent(openai_responses_model(server.url, http_client=http_client), instructions='Be brief.')
            history = (await agent.run('First?', model_settings=settings)).all_messages()
            # Each request sends only its new input; compared as sent, every one would diverge.
            async with agent.run_stream('Second?', message_history=history, model_settings=settings) as stream:
                await stream.get_output()
            history = stream.all_messages()
            history = (await agent.run('Third?', message_history=history, model_settings=settings)).all_messages()
            assert verifier.divergences == []
            with pytest.warns(WirePrefixDivergenceWarning):
                await Agent(agent.model, instructions='Be terse.').run(
                    'Fourth?', message_history=history, model_settings=settings
                )
    assert verifier.divergences == [
        WireDivergence('openai-responses', 'gpt-5.2', 3, 0, 'instructions', '"Be brief."', '"Be terse."')
    ]


@pytest.mark.vcr
async def test_a_verifier_joining_mid_conversation_checks_from_its_first_request(capfire: CaptureLogfire):
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    with FakeProvider(script=[Text('One.'), ToolCalls([('get_time', {})]), Text('Noon.')]) as server:
        async with WireVerifier().http_client() as first_client, WireVerifier().http_client() as second_client:
            first = Agent(openai_responses_model(server.url, http_client=first_client), tools=[get_time])
            history = (await first.run('First?', model_settings=settings)).all_messages()
            # A new verifier for the rest of the conversation never saw the response the next request names.
            second = Agent(openai_responses_model(server.url, http_client=second_client), tools=[get_time])
            await second.run('Time?', message_history=history, model_settings=settings)
    assert [
        (span['request_index'], span['compared'], span['reused_segments']) for span in span_attributes(capfire)
    ] == [
        (0, False, 0),
        (0, False, 0),
        (1, True, 2),
    ]


# --- requests no Pydantic AI model sends ---
# These drive the client by hand: a model class never sends them, or never gets a reply that was already read.


def reply(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json={'id': f'resp_{len(request.content)}', 'output': [{'type': 'message'}]})


async def test_other_requests_pass_through_unchecked(capfire: CaptureLogfire):
    verifier = WireVerifier(mode='enforce')
    seen: list[tuple[str, str, bytes]] = []

    def provider(request: httpx2.Request) -> httpx2.Response:
        seen.append((request.method, request.url.path, request.content))
        return httpx2.Response(200, json={})

    async with verifier.http_client(transport=httpx2.MockTransport(provider)) as client:
        await client.get('https://api.example/v1/models')
        await client.post('https://api.example/v1/embeddings', json={'model': 'e', 'input': 'x'})
        await client.post('https://api.example/v1/chat/completions', content=b'not json')
        await client.post('https://api.example/v1/chat/completions', json=['not', 'an', 'object'])
        # No model in the body: a chain of its own, keyed by the empty name.
        await client.post('https://api.example/v1/chat/completions', json={'messages': [{'role': 'user'}]})
        with pytest.raises(WirePrefixDivergenceError, match="to model '' does not extend"):
            await client.post('https://api.example/v1/chat/completions', json={'messages': [{'role': 'assistant'}]})
    assert [(method, path) for method, path, _ in seen] == [
        ('GET', '/v1/models'),
        ('POST', '/v1/embeddings'),
        ('POST', '/v1/chat/completions'),
        ('POST', '/v1/chat/completions'),
        ('POST', '/v1/chat/completions'),
    ]
    assert len(span_attributes(capfire)) == 2


async def test_a_conversation_the_verifier_never_saw_is_not_compared(capfire: CaptureLogfire):
    # A Responses request continuing a conversation created before the verifier joined: the server's items are
    # unknown here, so the request starts the chain, and its span names the conversation.
    verifier = WireVerifier(mode='enforce')
    body = {'model': 'm', 'conversation': {'id': 'conv_68f1'}, 'input': [{'role': 'user', 'content': 'And then?'}]}
    async with verifier.http_client(transport=httpx2.MockTransport(reply)) as client:
        await client.post('https://api.example/v1/responses', json=body)
    assert [
        (span['attributes'][WIRE + 'compared'], span['attributes'][WIRE + 'unknown_conversation'])
        for span in wire_spans(capfire)
    ] == [(False, 'conv_68f1')]


async def test_a_stored_conversation_with_no_response_yet_starts_a_chain(capfire: CaptureLogfire):
    # A reply with no output items names the conversation: the conversation holds only the input it was given, as
    # one just created does, so a request naming it with input of its own starts a chain (as the cassette checker
    # judges it), rather than being held to the prefix of whichever chain it shares most with.
    verifier = WireVerifier(mode='enforce')

    def empty_reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={'id': 'resp_1', 'output': [], 'conversation': {'id': 'conv_1'}})

    url = 'https://api.example/v1/responses'
    async with verifier.http_client(transport=httpx2.MockTransport(empty_reply)) as client:
        await client.post(url, json={'model': 'm', 'instructions': 'Be brief.', 'input': ['a']})
        await client.post(url, json={'model': 'm', 'instructions': 'Terse.', 'conversation': 'conv_1', 'input': ['b']})
    assert [span['attributes'][WIRE + 'compared'] for span in wire_spans(capfire)] == [False, False]
    assert verifier.divergences == []


async def test_a_responses_reply_read_before_the_client_sees_it_is_kept():
    verifier = WireVerifier(mode='enforce')
    url = 'https://api.example/v1/responses'
    async with verifier.http_client(transport=httpx2.MockTransport(reply)) as client:
        first = await client.post(url, json={'model': 'm', 'instructions': 'Be brief.', 'input': ['a']})
        previous = first.json()['id']
        await client.post(url, json={'model': 'm', 'instructions': 'Be brief.', 'previous_response_id': previous})
        with pytest.raises(WirePrefixDivergenceError, match=r'segment 0 \(instructions\)'):
            await client.post(url, json={'model': 'm', 'instructions': 'Terse.', 'previous_response_id': previous})


REPLY_TEXT_BYTES = 20_000


def long_reply(request: httpx2.Request) -> httpx2.Response:
    """A Responses reply with an id of its own and a long output, as a long answer would be."""
    number = json.loads(request.content)['n']
    text = f'{number:x}'.rjust(REPLY_TEXT_BYTES, '.')
    output = [{'type': 'message', 'role': 'assistant', 'content': [{'type': 'output_text', 'text': text}]}]
    return httpx2.Response(200, json={'id': f'resp_{number}', 'output': output})


@pytest.mark.parametrize('bound', ['entries', 'bytes'])
def test_the_responses_replies_kept_are_bounded(monkeypatch: pytest.MonkeyPatch, bound: str):
    # The bounds shrunk so that a few dozen conversations pass them; on a verifier that keeps every reply's
    # context, what the later conversations leave behind grows by a reply for each. A chain's last request holds
    # its reply too (resolved into it), so the chains kept are shrunk alike.
    kept = 4
    monkeypatch.setattr('pydantic_ai_append.guard._wire._CHAINS_KEPT', kept)
    if bound == 'entries':
        monkeypatch.setattr('pydantic_ai_append.guard._wire._RESPONSES_KEPT', kept, raising=False)
    else:
        monkeypatch.setattr(
            'pydantic_ai_append.guard._wire._RESPONSE_BYTES_KEPT', kept * REPLY_TEXT_BYTES * 2, raising=False
        )
    verifier = WireVerifier(mode='enforce')
    url = 'https://api.example/v1/responses'
    conversations = 60

    async def converse(client: httpx2.AsyncClient, number: int) -> None:
        # Each conversation's first request, then one naming its reply: the reply was read, so it is kept.
        first = await client.post(url, json={'model': 'm', 'n': number, 'input': [f'a{number}']})
        previous = first.json()['id']
        await client.post(url, json={'model': 'm', 'n': number, 'previous_response_id': previous, 'input': ['b']})

    async def main() -> int:
        async with verifier.http_client(transport=httpx2.MockTransport(long_reply)) as client:
            for number in range(kept * 2):
                await converse(client, number)
            gc.collect()
            tracemalloc.start()
            try:
                for number in range(kept * 2, conversations):
                    await converse(client, number)
                gc.collect()
                return tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()

    held = asyncio.run(main())
    # Bounded: the `kept` chains and replies that replaced older ones, a few replies' worth each, and a few KB a
    # request of whatever else the session keeps (the spans of a test exporter). Unbounded: each later
    # conversation's two contexts on top, the first reply's output in both.
    traced = conversations - kept * 2
    print(f'{traced} conversations still hold {held} bytes')
    assert held < traced * REPLY_TEXT_BYTES
    assert verifier.divergences == []


async def test_live_chains_resolve_and_a_forgotten_reply_is_not_compared(
    monkeypatch: pytest.MonkeyPatch, capfire: CaptureLogfire
):
    kept = 4
    monkeypatch.setattr('pydantic_ai_append.guard._wire._RESPONSES_KEPT', kept, raising=False)
    verifier = WireVerifier(mode='enforce')
    url = 'https://api.example/v1/responses'
    replies = iter(range(1000))

    def numbered_reply(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={'id': f'resp_{next(replies)}', 'output': [{'type': 'message'}]})

    last: dict[str, str] = {}

    async def send(client: httpx2.AsyncClient, name: str, instructions: str) -> None:
        body: dict[str, Any] = {'model': 'm', 'instructions': instructions, 'input': [f'{name} {len(last)}']}
        if name in last:
            body['previous_response_id'] = last[name]
        last[name] = (await client.post(url, json=body)).json()['id']

    async with verifier.http_client(transport=httpx2.MockTransport(numbered_reply)) as client:
        # As many conversations as replies kept, taking turns: each one's next request names a reply still kept.
        names = [f'conv-{number}' for number in range(kept)]
        for _ in range(3):
            for name in names:
                await send(client, name, f'Be brief, {name}.')
        with pytest.raises(WirePrefixDivergenceError, match=r'segment 0 \(instructions\)'):
            await send(client, 'conv-0', 'Terse.')
        # One more conversation's reply, and conv-0's last reply is forgotten: its next request can't be compared,
        # so it isn't refused; the one after it is compared with it.
        await send(client, 'conv-new', 'Be brief.')
        await send(client, 'conv-0', 'Terse.')
        await send(client, 'conv-0', 'Terse.')
        with pytest.raises(WirePrefixDivergenceError, match=r'segment 0 \(instructions\)'):
            await send(client, 'conv-0', 'Brief.')
    spans = [
        (span['attributes'][WIRE + 'compared'], span['attributes'].get(WIRE + 'unknown_previous_response_id'))
        for span in wire_spans(capfire)
    ]
    assert spans == snapshot(
        [
            (False, None),
            (False, None),
            (False, None),
            (False, None),
            (True, None),
            (True, None),
            (True, None),
            (True, None),
            (True, None),
            (True, None),
            (True, None),
            (True, None),
            (True, None),
            (False, None),
            (False, 'resp_8'),
            (True, None),
            (True, None),
        ]
    )
    assert [(divergence.request, divergence.kind) for divergence in verifier.divergences] == snapshot(
        [(3, 'instructions'), (2, 'instructions')]
    )


async def test_without_the_anthropic_sdk_the_refusal_is_the_plain_error(monkeypatch: pytest.MonkeyPatch):
    # A request to the Anthropic API from another client, on an install without the `anthropic` package.
    monkeypatch.setitem(sys.modules, 'anthropic', None)
    verifier = WireVerifier(mode='enforce')
    url = 'https://api.example/v1/messages'
    async with verifier.http_client(transport=httpx2.MockTransport(reply)) as client:
        await client.post(url, json={'model': 'm', 'system': 'Be brief.', 'messages': []})
        with pytest.raises(WirePrefixDivergenceError) as raised:
            # It carries history, so it continues the conversation rather than starting one.
            await client.post(url, json={'model': 'm', 'system': 'Terse.', 'messages': [{'role': 'assistant'}]})
    assert type(raised.value) is WirePrefixDivergenceError


def test_an_unknown_mode_is_refused():
    with pytest.raises(UserError, match="mode must be 'observe' or 'enforce', not 'strict'"):
        WireVerifier(mode=cast('Any', 'strict'))


@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from(['user', 'assistant']), st.sampled_from(['a', 'b', 'ab'])), max_size=4),
        min_size=1,
        max_size=6,
    )
)
def test_the_verifier_flags_what_the_test_checker_rejects(conversation: list[list[tuple[str, str]]]):
    # Hand-written bodies: the property needs far more conversations than recorded agent runs can give. Without a
    # capability naming the conversation, the verifier tells conversations apart by the cassette checker's rule.
    url = 'https://api.example/v1/chat/completions'
    bodies = [
        json.dumps({'model': 'm', 'messages': [{'role': role, 'content': text} for role, text in messages]})
        for messages in conversation
    ]
    verifier = WireVerifier()

    async def send() -> None:
        async with verifier.http_client(transport=httpx2.MockTransport(reply)) as client:
            for body in bodies:
                await client.post(url, content=body)

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', WirePrefixDivergenceWarning)
        asyncio.run(send())
    interactions = [
        Interaction(Path('c.yaml'), index, 'POST', url, {'body': body}, {}) for index, body in enumerate(bodies)
    ]
    report = check_cassette(Path('c.yaml'), interactions)
    rejected = sorted(
        ((d.interaction, d.request, d.segment) for c in report.conversations for d in c.divergences),
    )
    assert [(divergence.request, divergence.segment) for divergence in verifier.divergences] == [
        (request, segment) for _, request, segment in rejected
    ]


@pytest.mark.parametrize('mode', ['strict', 1, None])
def test_the_verifier_refuses_a_mode_it_doesnt_have(mode: Any):
    from pydantic_ai_append.guard import WireVerifier

    with pytest.raises(UserError) as error:
        WireVerifier(mode=mode)
    assert repr(mode) in str(error.value)
