"""Capture and verification are transport wrappers that compose the httpx way, around any transport of the user's.

A real `OpenAIChatModel` and `OpenAIResponsesModel` send through a stack of wrappers around an
`httpx2.MockTransport` standing in for the user's own transport, and a `GroqModel` through wrappers of the `httpx`
package, which Groq's SDK takes. Which requests each layer sees depends on the
order: a capture outside the verifier keeps what the client sent, refused requests included; a capture inside it
keeps only what was let through.
"""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError
from pydantic_ai.models.groq import GroqModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel, OpenAIResponsesModelSettings
from pydantic_ai.providers.groq import GroqProvider
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append.guard import WirePrefixDivergenceError, WireVerifier
from pydantic_ai_append.testing import WireCapture, assert_prefix_stable

pytestmark = pytest.mark.anyio


def chat_reply(request: httpx2.Request) -> httpx2.Response:
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    body = {'id': 'chatcmpl-1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': [choice]}
    return httpx2.Response(200, json=body)


class UserTransport(httpx2.MockTransport):
    """A transport of the user's: it answers as the provider would and notes every request that reaches it."""

    def __init__(self, handler: Callable[[httpx2.Request], httpx2.Response]) -> None:
        self.reached: list[bytes] = []

        def note(request: httpx2.Request) -> httpx2.Response:
            self.reached.append(request.content)
            return handler(request)

        super().__init__(note)


async def two_runs_with_changed_instructions(transport: httpx2.AsyncBaseTransport, *, refused: bool = True) -> None:
    """Two runs of one conversation, the second with rewritten instructions, which breaks the prefix."""
    tone = ['Be brief.']
    async with httpx2.AsyncClient(transport=transport) as http_client:
        model = OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
        agent = Agent(model)

        @agent.instructions
        def instructions() -> str:
            return tone[0]

        history = (await agent.run('Hello')).all_messages()
        tone[0] = 'Be very brief.'
        with pytest.raises(WirePrefixDivergenceError) if refused else contextlib.nullcontext():
            await agent.run('Again', message_history=history)


async def test_a_capture_around_a_verifier_keeps_the_refused_request_too():
    user = UserTransport(chat_reply)
    capture, verifier = WireCapture(), WireVerifier(mode='enforce')
    await two_runs_with_changed_instructions(capture.transport(verifier.transport(user)))
    assert (len(capture.exchanges), len(user.reached), [d.segment for d in verifier.divergences]) == (2, 1, [0])
    # The capture saw what the client sent, so its checker finds the same break the verifier refused.
    with pytest.raises(AssertionError, match='request 1 does not extend request 0'):
        assert_prefix_stable(capture.conversation('openai-chat').requests)


async def test_a_verifier_around_a_capture_lets_it_keep_only_what_is_sent():
    user = UserTransport(chat_reply)
    capture, verifier = WireCapture(), WireVerifier(mode='enforce')
    await two_runs_with_changed_instructions(verifier.transport(capture.transport(user)))
    assert [exchange.request_body for exchange in capture.exchanges] == user.reached
    assert (len(user.reached), [d.segment for d in verifier.divergences]) == (1, [0])


async def test_without_a_verifier_the_request_goes_out():
    # The negative control: the same runs, with nothing to refuse, send both requests.
    user = UserTransport(chat_reply)
    await two_runs_with_changed_instructions(WireCapture().transport(user), refused=False)
    assert len(user.reached) == 2


async def test_a_get_to_an_api_path_is_not_a_request_to_the_model():
    # OpenAI lists stored chat completions with a GET to the path requests are POSTed to: the capture keeps the
    # exchange, but its conversation reads only the POST as a request, as the verifier and the checker do.
    capture, verifier = WireCapture(), WireVerifier(mode='enforce')
    url = 'https://api.example/v1/chat/completions'
    transport = capture.transport(verifier.transport(UserTransport(chat_reply)))
    async with httpx2.AsyncClient(transport=transport) as client:
        await client.post(url, json={'model': 'gpt-5.2', 'messages': [{'role': 'user', 'content': 'Hi'}]})
        await client.get(url)
    requests = capture.conversation('openai-chat').requests
    assert (len(capture.exchanges), len(requests), verifier.divergences) == (2, 1, [])


class GzipStream(httpx2.AsyncByteStream):
    """A reply body as it comes off the wire from a real provider: gzip, and read by the client, not built read."""

    def __init__(self, body: bytes) -> None:
        self._body = gzip.compress(body)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._body


def responses_reply(request: httpx2.Request) -> httpx2.Response:
    turn = len(json.loads(request.content).get('previous_response_id') or '')
    message: dict[str, Any] = {
        'type': 'message',
        'id': f'msg_{turn}',
        'role': 'assistant',
        'status': 'completed',
        'content': [{'type': 'output_text', 'text': 'OK.', 'annotations': []}],
    }
    body: dict[str, Any] = {
        'id': f'resp_{turn}',
        'object': 'response',
        'created_at': 0,
        'model': 'gpt-5.2',
        'status': 'completed',
        'output': [message],
        'parallel_tool_calls': True,
        'tool_choice': 'auto',
        'tools': [],
    }
    headers = {'content-type': 'application/json', 'content-encoding': 'gzip'}
    return httpx2.Response(200, headers=headers, stream=GzipStream(json.dumps(body).encode()))


async def test_gzip_replies_resolve_previous_response_id_in_both_wrappers():
    capture, verifier = WireCapture(), WireVerifier(mode='enforce')
    transport = capture.transport(verifier.transport(httpx2.MockTransport(responses_reply)))
    settings = OpenAIResponsesModelSettings(openai_previous_response_id='auto')
    async with httpx2.AsyncClient(transport=transport) as http_client:
        model = OpenAIResponsesModel('gpt-5.2', provider=OpenAIProvider(api_key='offline', http_client=http_client))
        agent = Agent(model, instructions='Be brief.')
        history = (await agent.run('Hello', model_settings=settings)).all_messages()
        await agent.run('Again', model_settings=settings, message_history=history)
    sent = [json.loads(exchange.request_body).get('previous_response_id') for exchange in capture.exchanges]
    requests = capture.conversation('openai-responses').requests
    assert (sent, [[segment.kind for segment in request] for request in requests]) == snapshot(
        ([None, 'resp_0'], [['instructions', 'input'], ['instructions', 'input', 'output', 'input']])
    )
    assert capture.exchanges[0].content_encoding == 'gzip'
    assert verifier.divergences == []


def groq_reply(request: httpx.Request) -> httpx.Response:
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    body = {'id': 'chatcmpl-1', 'object': 'chat.completion', 'created': 0, 'model': 'llama-3.3-70b-versatile'}
    return httpx.Response(200, json=body | {'choices': [choice]})


async def test_both_wrappers_compose_around_an_httpx_transport():
    # Groq's SDK takes only a client of the `httpx` package; a transport of it gets wrappers of that package.
    capture, verifier = WireCapture(), WireVerifier(mode='enforce')
    transport = capture.transport(verifier.transport(httpx.MockTransport(groq_reply)))
    async with httpx.AsyncClient(transport=transport) as client:
        model = GroqModel('llama-3.3-70b-versatile', provider=GroqProvider(api_key='offline', http_client=client))
        agent = Agent(model, instructions='Be brief.')
        await agent.run('Again', message_history=(await agent.run('Hello')).all_messages())
        # Not a request to a model: the verifier lets it through unread, the capture keeps it.
        await client.get('https://api.groq.com/openai/v1/models')
    requests = capture.conversation('groq-chat').requests
    assert ([exchange.path for exchange in capture.exchanges], len(requests), verifier.divergences) == snapshot(
        (['/openai/v1/chat/completions', '/openai/v1/chat/completions', '/openai/v1/models'], 2, [])
    )
    assert b'"OK."' in capture.exchanges[0].response_body


async def test_a_client_of_either_package_only_with_a_transport_of_its_own():
    verifier = WireVerifier()
    # A client that never sends makes no transport to close.
    async with verifier.http_client() as unused, WireCapture().http_client(client_class=httpx.AsyncClient) as legacy:
        assert (type(unused), type(legacy)) == (httpx2.AsyncClient, httpx.AsyncClient)
    with pytest.raises(UserError) as not_a_client:
        verifier.http_client(client_class=dict)  # pyright: ignore[reportArgumentType, reportCallIssue]
    with pytest.raises(UserError, match='is not an `httpx` transport, which an `httpx.AsyncClient` needs'):
        wrong_package = httpx2.MockTransport(chat_reply)
        verifier.http_client(transport=wrong_package, client_class=httpx.AsyncClient)  # pyright: ignore[reportArgumentType, reportCallIssue]
    with pytest.raises(UserError, match=r'is an `httpx` transport: pass `client_class=httpx.AsyncClient` with it'):
        verifier.http_client(transport=httpx.MockTransport(groq_reply))  # pyright: ignore[reportArgumentType, reportCallIssue]
    assert str(not_a_client.value) == (
        "client_class must be `httpx2.AsyncClient` or `httpx.AsyncClient` (or a subclass), not <class 'dict'>"
    )
