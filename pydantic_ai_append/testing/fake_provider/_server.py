"""The fake provider's HTTP server: it routes each request to the API its path names and logs what it answered.

The server is the one place that knows every API: it takes the script's next turn, asks the prompt cache and the
compaction rules what the request did, and leaves the rendering to the module of the API called
(`_openai_chat`, `_openai_responses`, `_anthropic_messages`, `_gemini`, `_bedrock_converse`).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, TypeAlias, cast

from pydantic_ai.messages import ModelResponse
from pydantic_ai.usage import RequestUsage

from ..._wire.segments import API_PATHS, Api
from .._wire_summary import reply_response
from ._anthropic_messages import render_anthropic
from ._bedrock_converse import BedrockRoute, bedrock_error, bedrock_route, render_bedrock
from ._compaction import anthropic_compaction_edit, compaction_summary
from ._gemini import GeminiRoute, gemini_error, gemini_route, render_gemini
from ._openai_chat import render_chat
from ._openai_responses import compacted_response, render_responses, responses_output
from ._replies import Reply, encode
from ._script import FakeRequest, Script, ServedApi, Turn
from .caching import CacheUse, PromptCache

__all__ = ('FakeProvider', 'ServerExchange')

# Groq's Chat Completions path, and the one Mistral's and Hugging Face's share with OpenAI, go to the Chat handler.
_APIS_BY_PATH: Mapping[str, Api] = {
    **{API_PATHS[api]: api for api in ('anthropic', 'openai-chat', 'openai-responses')},
    API_PATHS['groq-chat']: 'openai-chat',
}

_COMPACT_PATH = '/v1/responses/compact'
"""The OpenAI endpoint that compacts a conversation without sampling a reply (`client.responses.compact`)."""

_Route: TypeAlias = GeminiRoute | BedrockRoute
"""The route of a request to an API whose path names the model: Gemini's or Bedrock's."""


@dataclass(frozen=True)
class ServerExchange:
    """One request the fake answered, with the answer as sent, and what the request cost.

    Example:
        ```python
        from pydantic_ai import Agent

        from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, openai_chat_model

        with FakeProvider(script=[Text('Hello!')]) as server:
            Agent(openai_chat_model(server.url), instructions='Be brief.').run_sync('Hi')
        exchange = server.exchanges[0]
        print(exchange.path, exchange.usage.input_tokens, exchange.usage.output_tokens, f'${exchange.cost_usd:.6f}')
        #> /v1/chat/completions 18 1 $0.000046
        ```
    """

    api: ServedApi
    """Which provider API was called."""

    request_body: bytes
    """The raw request body."""

    response_body: bytes
    """The raw response body: JSON, or the whole event stream for a streamed reply."""

    response_id: str
    """The id the reply carries (`resp_...` for Responses, which `previous_response_id` can name)."""

    path: str
    """The URL path the request was sent to, without the query (Gemini's and Bedrock's name the model)."""

    @property
    def usage(self) -> RequestUsage:
        """The reply's usage as Pydantic AI's model class reads it into `ModelResponse.usage`: all input tokens,
        those read from and written to the prompt cache among them, and the output tokens.
        """
        return self._response().usage

    @property
    def cost_usd(self) -> float | None:
        """What the request cost in US dollars, priced by `genai-prices` as Pydantic AI's `ModelResponse.cost()`
        prices the response (cache reads and writes at their own prices); `None` for a model it has no price for.
        """
        try:
            return float(self._response().cost().total_price)
        except (LookupError, ValueError, AssertionError):
            return None

    def _response(self) -> ModelResponse:
        response = reply_response(self.api, self.path, self.request_body, self.response_body)
        # Every exchange is a reply the fake made, with its usage.
        assert response is not None
        return response


class FakeProvider:
    """A provider API server on `127.0.0.1`, answering from a script; use it as a context manager.

    The port is chosen by the OS when the server starts. A request to an unknown path, with a body that
    isn't JSON, that finds the script exhausted or makes a script function raise gets a 404 or 400 reply,
    which the SDK raises as an error (a 400 is not retried), and the reason is added to `errors`.

    Usage follows a prompt cache kept by each provider's published rules (`testing.fake_provider.caching`, which
    says how it counts tokens). Compaction follows the real APIs, with input tokens counted as 4 bytes of the request's compact
    JSON each (the estimate a compacting reply's usage reports too, not a tokenizer):

    - Anthropic Messages: a request whose `context_management.edits` holds a `compact_20260112` edit, and whose
      input counted from its latest `compaction` block on (the API ignores what comes before one) exceeds the
      edit's `trigger.value` (150,000 without one), gets a reply opening with a `compaction` block that carries a
      readable summary, then the scripted turn, with the compaction's usage in `usage.iterations`. The real API
      rejects a trigger below 50,000; the fake takes any, so tests stay small. `pause_after_compaction` is refused.
    - OpenAI Responses: a request whose `context_management` holds `{'type': 'compaction', 'compact_threshold': N}`
      and whose whole input (this API processes items before a compaction item too) exceeds `N` gets a `compaction`
      output item before the scripted turn's. Without `compact_threshold` it never compacts: OpenAI publishes no
      default to copy. A request naming `previous_response_id` is counted by what it sends, as the fake keeps no
      stored responses.
    - `POST /v1/responses/compact` answers with the request's user messages and a `compaction` item, whatever the
      input size, and no scripted turn.

    An OpenAI `encrypted_content` is the summary in base64, so a test can read it. Ids, summaries and usage are
    derived from the request and its index only, so recordings don't change between runs. A compaction uses no
    script entry; its request's index is added to `compactions`.

    Each answered request is in `exchanges`, with the usage its reply reported and what it cost. A conversation
    whose instructions pass OpenAI's 1,024-token minimum, read from the cache from its second request on:

    Example:
        ```python
        from pydantic_ai import Agent

        from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, openai_chat_model


        def get_time() -> str:
            '''Get the current time.'''
            return '12:00'


        script = [ToolCalls([('get_time', {})]), Text('Noon.'), Text('Still noon.')]
        with FakeProvider(script=script) as server:
            agent = Agent(openai_chat_model(server.url), tools=[get_time], instructions='Answer in one word. ' * 400)
            history = agent.run_sync('What time is it?').all_messages()
            agent.run_sync('And now?', message_history=history)
        for exchange in server.exchanges:
            print(exchange.usage.input_tokens, exchange.usage.cache_read_tokens, f'${exchange.cost_usd:.5f}')
        #> 2060 0 $0.00366
        #> 2110 2048 $0.00048
        #> 2129 2048 $0.00053
        ```
    """

    def __init__(self, script: Script = (), *, clock: Callable[[], float] = time.monotonic) -> None:
        """Prepare a server; it starts on `__enter__`.

        Args:
            script: The replies, in order across all APIs, or a function choosing each reply.
            clock: The time in seconds, which the prompt cache's retention is counted in.
        """
        self._script = script
        self.cache = PromptCache(clock)
        """The prompt cache its usage reports follow (`testing.fake_provider.caching`)."""
        self._next_turn = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[bytes] = []
        """Every request body received, in order, whatever its path."""
        self.exchanges: list[ServerExchange] = []
        """Every request answered with a scripted reply, in order."""
        self.errors: list[str] = []
        """Why each refused request was refused, in order."""
        self.compactions: list[int] = []
        """The index in `requests` of each request the fake compacted: one answered with a compaction block or
        item before its turn, or one to the compact endpoint. Only the endpoint's are missing from `exchanges`."""

    @property
    def url(self) -> str:
        """The server's root URL, e.g. `http://127.0.0.1:54321`; the model helpers add the API prefix."""
        if self._server is None:
            raise RuntimeError('FakeProvider is not running: use it as `with FakeProvider(...) as server:`')
        host, port = self._server.server_address[:2]
        return f'http://{host!s}:{port}'

    def __enter__(self) -> Self:
        provider = self

        class Handler(_Handler):
            fake = provider

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        # A short poll interval, as `shutdown` waits for the serving loop to notice, up to one interval.
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.01,), name='fake-provider', daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._server = None
        self._thread = None

    def answer(self, path: str, body: bytes) -> Reply:
        """Log one request and make the reply it gets: the next scripted turn, a compaction, or an error status."""
        with self._lock:
            self.requests.append(body)
            index = len(self.requests) - 1
            route = gemini_route(path) or bedrock_route(path)
            api = _api_of(path, route)
            if api is None:
                return self._refuse(None, HTTPStatus.NOT_FOUND, f'FakeProvider does not serve {path!r}')
            try:
                request_json = cast('dict[str, Any]', json.loads(body))
            except ValueError:
                return self._refuse(api, HTTPStatus.BAD_REQUEST, f'request body is not JSON: {body[:200]!r}')
            if path == _COMPACT_PATH:
                self.compactions.append(index)
                return Reply(200, encode(compacted_response(index, request_json)))
            if api == 'anthropic' and (anthropic_compaction_edit(request_json) or {}).get('pause_after_compaction'):
                return self._refuse(
                    api,
                    HTTPStatus.BAD_REQUEST,
                    'FakeProvider does not implement `pause_after_compaction`; leave it off in `AnthropicCompaction`',
                )
            turn = self._take_turn(api, index, path, body, request_json)
            if isinstance(turn, Reply):
                return turn
            made = self._reply(api, route, index, request_json, turn)
            if isinstance(made, Reply):
                return made
            reply_id, reply = made
            response_body = b''.join(reply.events) if reply.events is not None else reply.body
            self.exchanges.append(ServerExchange(api, body, response_body, reply_id, path))
            return reply

    def _reply(
        self, api: ServedApi, route: _Route | None, index: int, request_json: dict[str, Any], turn: Turn
    ) -> tuple[str, Reply] | Reply:
        """The id and the reply answering with `turn`, as the prompt cache and the compaction rules make it; or the
        refusal of a request the cache refuses.
        """
        if api == 'gemini':
            assert isinstance(route, GeminiRoute)
            return render_gemini(index, route, turn, self.cache.gemini(route.model, request_json))
        if api == 'bedrock-converse':
            assert isinstance(route, BedrockRoute)
            try:
                use = self.cache.bedrock(route.model_id, request_json)
            except ValueError as error:
                return self._refuse(api, HTTPStatus.BAD_REQUEST, str(error))
            return render_bedrock(index, turn, route.stream, use)
        return self._compacting_reply(api, index, request_json, turn)

    def _compacting_reply(
        self, api: Api, index: int, request_json: dict[str, Any], turn: Turn
    ) -> tuple[str, Reply] | Reply:
        """The reply of one of the APIs the wire tools read, which may open with a compaction."""
        summary = compaction_summary(api, index, request_json)
        if summary is not None:
            self.compactions.append(index)
        prompt = b''
        if api == 'anthropic':
            try:
                use = self.cache.anthropic(request_json)
            except ValueError as error:
                return self._refuse(api, HTTPStatus.BAD_REQUEST, str(error))
        else:
            prompt, use = self.cache.openai(request_json, responses=api == 'openai-responses')
        reply_id, reply = _render(api, index, request_json, turn, summary, use)
        if api == 'openai-responses':
            self.cache.remember(reply_id, prompt, responses_output(reply))
        return reply_id, reply

    def _take_turn(
        self, api: ServedApi, index: int, path: str, body: bytes, request_json: dict[str, Any]
    ) -> Turn | Reply:
        """The script's turn for this request, or the refusal to send when it has none."""
        if callable(self._script):
            try:
                return self._script(FakeRequest(index, api, body, request_json))
            except Exception as error:  # noqa: BLE001
                # Any error: raised in the server thread, it would only reach the test as a dropped connection.
                return self._refuse(api, HTTPStatus.BAD_REQUEST, f'FakeProvider script raised {error!r}')
        if self._next_turn < len(self._script):
            self._next_turn += 1
            return self._script[self._next_turn - 1]
        return self._refuse(
            api,
            HTTPStatus.BAD_REQUEST,
            f'FakeProvider script is exhausted: request {index} to {path} has no turn left; add one to the script',
        )

    def _refuse(self, api: ServedApi | None, status: HTTPStatus, message: str) -> Reply:
        self.errors.append(message)
        if api == 'bedrock-converse':
            return Reply(status, bedrock_error(message))
        if api == 'gemini':
            error: dict[str, Any] = gemini_error(status, message)
        elif api == 'anthropic':
            error = {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': message}}
        else:
            error = {'error': {'message': message, 'type': 'invalid_request_error', 'param': None, 'code': None}}
        return Reply(status, encode(error))


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 lets the SDK keep its connection open across the requests of a run, as with a real provider.
    protocol_version = 'HTTP/1.1'
    # An idle kept-alive connection would otherwise hold its thread until the client goes away.
    timeout = 10
    # Fixed, like the `Date` below, so recorded response headers don't vary with the machine.
    server_version = 'FakeProvider'
    sys_version = ''
    fake: FakeProvider

    def setup(self) -> None:
        super().setup()
        # Headers, body and each event go out as separate small writes; with Nagle's algorithm on, each
        # waits for the client's delayed ACK, adding about 40 ms to every request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        length = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(length)
        reply = self.fake.answer(self.path.split('?', 1)[0], body)
        self.send_response(reply.status)
        if reply.events is None:
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            return
        # Chunked, one chunk per event and flushed, the way real providers stream, so the SDK's decoder and
        # vcrpy's recorder see a body that arrives in pieces.
        self.send_header('Content-Type', reply.media_type)
        self.send_header('Cache-Control', 'no-cache')
        self.send_header('Transfer-Encoding', 'chunked')
        self.end_headers()
        for event in reply.events:
            self.wfile.write(f'{len(event):x}\r\n'.encode() + event + b'\r\n')
            self.wfile.flush()
        self.wfile.write(b'0\r\n\r\n')

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The `Date` header would otherwise change every recorded cassette on every re-recording.
        return 'Thu, 01 Jan 2026 00:00:00 GMT'

    def log_message(self, format: str, *args: Any) -> None:
        # The default writes every request to stderr, which buries test output.
        pass


def _api_of(path: str, route: _Route | None) -> ServedApi | None:
    """The API a request path is to, `None` for a path the fake doesn't serve."""
    if isinstance(route, GeminiRoute):
        return 'gemini'
    if isinstance(route, BedrockRoute):
        return 'bedrock-converse'
    return 'openai-responses' if path == _COMPACT_PATH else _APIS_BY_PATH.get(path)


def _render(
    api: Api, index: int, body_json: Mapping[str, Any], turn: Turn, summary: str | None, use: CacheUse
) -> tuple[str, Reply]:
    """The id and the reply of the API called, streamed when the request asks for it."""
    stream = bool(body_json.get('stream'))
    if api == 'openai-chat':
        return render_chat(index, body_json, turn, stream, use)
    if api == 'openai-responses':
        return render_responses(index, body_json, turn, stream, summary, use)
    return render_anthropic(index, body_json, turn, stream, summary, use)
