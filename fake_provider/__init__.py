"""A scripted LLM provider on loopback, so wire tests drive the real `openai` and `anthropic` SDKs.

Wire claims only hold for the bytes that Pydantic AI's real model classes and the provider SDKs put on
the wire, so tests can't swap in `FunctionModel` for them. This module serves the three provider APIs those
classes speak (OpenAI Chat Completions, OpenAI Responses and Anthropic Messages, each as JSON and as
server-sent events) from a real HTTP server on `127.0.0.1`, answering with turns the test scripts, and keeps
every request body it receives. The helpers at the bottom build Pydantic AI models pointed at it.

It also compacts the way the two native compaction APIs do, so Pydantic AI's `AnthropicCompaction` and
`OpenAICompaction` can be run against it: a request over its compaction trigger gets a reply that opens with a
compaction block or item before the scripted turn, and `POST /v1/responses/compact` answers with a compaction item.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self, TypeAlias, cast

import httpx2
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from pydantic_ai_append._wire.segments import API_PATHS
from pydantic_ai_append.testing import Api

from .caching import CacheUse, PromptCache

__all__ = [
    'FakeProvider',
    'FakeRequest',
    'Script',
    'ServerExchange',
    'Text',
    'ToolCalls',
    'Turn',
    'anthropic_model',
    'openai_chat_model',
    'openai_responses_model',
]

_APIS_BY_PATH: Mapping[str, Api] = {path: api for api, path in API_PATHS.items()}

_CREATED = 1_767_225_600
"""A fixed creation time (2026-01-01), so recorded replies don't change between recordings."""

_DUMMY_API_KEY = 'fake-provider-key'

_COMPACT_PATH = '/v1/responses/compact'
"""The OpenAI endpoint that compacts a conversation without sampling a reply (`client.responses.compact`)."""

_ANTHROPIC_COMPACT_EDIT = 'compact_20260112'
"""The `context_management` edit type that turns on Anthropic's threshold compaction."""

_ANTHROPIC_DEFAULT_TRIGGER = 150_000
"""The input tokens Anthropic compacts above when the edit names no trigger, per `BetaCompact20260112EditParam`."""


@dataclass(frozen=True)
class Text:
    """A reply turn with plain assistant text.

    Example:
        ```python
        FakeProvider(script=[Text('Hello!')])
        ```
    """

    text: str
    """What the assistant says."""


@dataclass(frozen=True)
class ToolCalls:
    """A reply turn calling one or more tools in parallel.

    Example:
        ```python
        FakeProvider(script=[ToolCalls([('get_time', {}), ('get_weather', {'city': 'Paris'})]), Text('done')])
        ```
    """

    calls: Sequence[tuple[str, Mapping[str, Any]]]
    """Each call's tool name and JSON arguments, in the order the model makes them."""


Turn: TypeAlias = Text | ToolCalls
"""One scripted reply."""


@dataclass(frozen=True)
class FakeRequest:
    """A request the fake received, as a callable script sees it."""

    index: int
    """Position of this request among all the server received, from 0."""
    api: Api
    """Which provider API was called."""
    body: bytes
    """The raw request body."""
    json: Mapping[str, Any]
    """The parsed request body."""


Script: TypeAlias = Sequence[Turn] | Callable[[FakeRequest], Turn]
"""Replies in order, one per request whatever the API, or a function choosing each reply from its request."""


@dataclass(frozen=True)
class ServerExchange:
    """One request the fake answered, with the answer as sent."""

    api: Api
    """Which provider API was called."""
    request_body: bytes
    """The raw request body."""
    response_body: bytes
    """The raw response body: JSON, or the whole event stream for a streamed reply."""
    response_id: str
    """The id the reply carries (`resp_...` for Responses, which `previous_response_id` can name)."""


@dataclass
class _Reply:
    status: int
    body: bytes = b''
    events: list[bytes] | None = None
    """Server-sent events, each already framed; `None` for a JSON reply."""


class FakeProvider:
    """A provider API server on `127.0.0.1`, answering from a script; use it as a context manager.

    The port is chosen by the OS when the server starts. A request to an unknown path, with a body that
    isn't JSON, that finds the script exhausted or makes a script function raise gets a 404 or 400 reply,
    which the SDK raises as an error (a 400 is not retried), and the reason is added to `errors`.

    Usage follows a prompt cache kept by each provider's published rules (`fake_provider.caching`, which says how it
    counts tokens). Compaction follows the real APIs, with input tokens counted as 4 bytes of the request's compact
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

    Example:
        ```python
        with FakeProvider(script=[ToolCalls([('get_time', {})]), Text('It is noon.')]) as server:
            agent = Agent(anthropic_model(server.url), tools=[get_time])
            result = await agent.run('What time is it?')
        assert (result.output, len(server.requests)) == ('It is noon.', 2)
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
        """The prompt cache its usage reports follow (`fake_provider.caching`)."""
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

    def answer(self, path: str, body: bytes) -> _Reply:
        """Log one request and make the reply it gets: the next scripted turn, a compaction, or an error status."""
        with self._lock:
            self.requests.append(body)
            index = len(self.requests) - 1
            api = 'openai-responses' if path == _COMPACT_PATH else _APIS_BY_PATH.get(path)
            if api is None:
                return self._refuse(None, HTTPStatus.NOT_FOUND, f'FakeProvider does not serve {path!r}')
            try:
                request_json = cast('dict[str, Any]', json.loads(body))
            except ValueError:
                return self._refuse(api, HTTPStatus.BAD_REQUEST, f'request body is not JSON: {body[:200]!r}')
            if path == _COMPACT_PATH:
                self.compactions.append(index)
                return _Reply(200, _encode(_compacted_response(index, request_json)))
            if api == 'anthropic' and (_anthropic_compaction_edit(request_json) or {}).get('pause_after_compaction'):
                return self._refuse(
                    api,
                    HTTPStatus.BAD_REQUEST,
                    'FakeProvider does not implement `pause_after_compaction`; leave it off in `AnthropicCompaction`',
                )
            turn = self._take_turn(api, index, path, body, request_json)
            if isinstance(turn, _Reply):
                return turn
            summary = _compaction_summary(api, index, request_json)
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
                self.cache.remember(reply_id, prompt, _responses_output(reply))
            response_body = b''.join(reply.events) if reply.events is not None else reply.body
            self.exchanges.append(ServerExchange(api, body, response_body, reply_id))
            return reply

    def _take_turn(self, api: Api, index: int, path: str, body: bytes, request_json: dict[str, Any]) -> Turn | _Reply:
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

    def _refuse(self, api: Api | None, status: HTTPStatus, message: str) -> _Reply:
        self.errors.append(message)
        if api == 'anthropic':
            error: dict[str, Any] = {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': message}}
        else:
            error = {'error': {'message': message, 'type': 'invalid_request_error', 'param': None, 'code': None}}
        return _Reply(status, _encode(error))


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
        self.send_header('Content-Type', 'text/event-stream')
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


def _encode(value: object) -> bytes:
    return json.dumps(value, separators=(',', ':')).encode()


def _sse(event: str | None, data: Mapping[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(',', ':'))
    head = f'event: {event}\n' if event is not None else ''
    return f'{head}data: {payload}\n\n'.encode()


def _halves(text: str) -> list[str]:
    # Two deltas per text so the SDKs' stream assembly is exercised, not just a single chunk.
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def _input_tokens(body_json: Mapping[str, Any]) -> int:
    # Rough token counts (4 bytes a token) so usage is plausible and grows with the conversation.
    return max(1, len(_encode(body_json)) // 4)


def _output_tokens(turn: Turn) -> int:
    output = turn.text if isinstance(turn, Text) else _encode([list(call) for call in turn.calls]).decode()
    return max(1, len(output) // 4)


def _anthropic_compaction_edit(body_json: Mapping[str, Any]) -> Mapping[str, Any] | None:
    context_management = cast('Mapping[str, Any]', body_json.get('context_management') or {})
    edits = cast('list[Mapping[str, Any]]', context_management.get('edits') or [])
    return next((edit for edit in edits if edit.get('type') == _ANTHROPIC_COMPACT_EDIT), None)


def _anthropic_live_context(body_json: Mapping[str, Any]) -> Mapping[str, Any]:
    # The Messages API ignores, and doesn't bill, every block before the latest compaction block it is sent.
    messages = cast('list[Mapping[str, Any]]', body_json.get('messages') or [])
    for position in range(len(messages) - 1, -1, -1):
        content = messages[position].get('content')
        blocks = cast('list[Mapping[str, Any]]', content) if isinstance(content, list) else []
        starts = [start for start, block in enumerate(blocks) if block.get('type') == 'compaction']
        if starts:
            live = [{**messages[position], 'content': blocks[starts[-1] :]}, *messages[position + 1 :]]
            return {**body_json, 'messages': live}
    return body_json


def _compaction_summary(api: Api, index: int, body_json: Mapping[str, Any]) -> str | None:
    """The summary a compaction of this request carries, or `None` if the request isn't over its trigger."""
    if api == 'anthropic':
        edit = _anthropic_compaction_edit(body_json)
        trigger = cast('Mapping[str, Any]', (edit or {}).get('trigger') or {})
        threshold = trigger.get('value', _ANTHROPIC_DEFAULT_TRIGGER) if edit is not None else None
        counted = _anthropic_live_context(body_json)
        items = counted.get('messages')
    else:
        entries = cast('list[Mapping[str, Any]]', body_json.get('context_management') or [])
        threshold = next((e.get('compact_threshold') for e in entries if e.get('type') == 'compaction'), None)
        counted = body_json
        items = body_json.get('input')
    tokens = _input_tokens(counted)
    if not isinstance(threshold, int) or tokens <= threshold:
        return None
    return _summary(index, items, tokens)


def _summary(index: int, items: object, tokens: int) -> str:
    # Readable, and derived from the request alone, so a recording of it doesn't change between runs.
    count = len(cast('list[Any]', items)) if isinstance(items, list) else 1
    messages = 'message' if count == 1 else 'messages'
    return f'Fake compaction of request {index}: {count} {messages}, about {tokens} tokens, summarized.'


def _compaction_item(index: int, summary: str) -> dict[str, Any]:
    return {
        'type': 'compaction',
        'id': f'cmp_fake_{index:04d}',
        'encrypted_content': base64.b64encode(summary.encode()).decode(),
    }


def _responses_usage(input_tokens: int, output_tokens: int, cached: int = 0) -> dict[str, Any]:
    return {
        'input_tokens': input_tokens,
        'input_tokens_details': {'cached_tokens': cached},
        'output_tokens': output_tokens,
        'output_tokens_details': {'reasoning_tokens': 0},
        'total_tokens': input_tokens + output_tokens,
    }


def _compacted_response(index: int, body_json: Mapping[str, Any]) -> dict[str, Any]:
    """The reply of `POST /v1/responses/compact`: the input's user messages, then one compaction item."""
    raw_input = body_json.get('input')
    items = [{'role': 'user', 'content': raw_input}] if isinstance(raw_input, str) else raw_input or []
    kept = [
        {
            'type': 'message',
            'id': f'msg_fake_{index}_{position}',
            'role': 'user',
            'status': 'completed',
            'content': [{'type': 'input_text', 'text': content}] if isinstance(content, str) else content,
        }
        for position, item in enumerate(cast('list[Mapping[str, Any]]', items))
        if item.get('role') == 'user' and item.get('type', 'message') == 'message'
        for content in [item.get('content')]
    ]
    input_tokens = _input_tokens(body_json)
    summary = _summary(index, items, input_tokens)
    return {
        'id': f'resp_fake_{index:04d}',
        'object': 'response.compaction',
        'created_at': _CREATED,
        'output': [*kept, _compaction_item(index, summary)],
        'usage': _responses_usage(input_tokens, max(1, len(summary) // 4)),
    }


def _render(
    api: Api, index: int, body_json: Mapping[str, Any], turn: Turn, summary: str | None, use: CacheUse
) -> tuple[str, _Reply]:
    stream = bool(body_json.get('stream'))
    if api == 'openai-chat':
        return _render_chat(index, body_json, turn, stream, use)
    if api == 'openai-responses':
        return _render_responses(index, body_json, turn, stream, summary, use)
    return _render_anthropic(index, body_json, turn, stream, summary, use)


def _responses_output(reply: _Reply) -> list[object]:
    """The output items of a Responses reply, streamed or not."""
    if reply.events is None:
        return cast('list[object]', json.loads(reply.body)['output'])
    last = reply.events[-1].decode().split('data: ', 1)[1]
    return cast('list[object]', json.loads(last)['response']['output'])


def _tool_arguments(arguments: Mapping[str, Any]) -> str:
    return json.dumps(dict(arguments), separators=(',', ':'))


def _render_chat(
    index: int, body_json: Mapping[str, Any], turn: Turn, stream: bool, use: CacheUse
) -> tuple[str, _Reply]:
    completion_id = f'chatcmpl-fake-{index}'
    model = str(body_json.get('model', 'fake'))
    prompt_tokens, completion_tokens = use.prompt, _output_tokens(turn)
    usage = {
        'prompt_tokens': prompt_tokens,
        'completion_tokens': completion_tokens,
        'total_tokens': prompt_tokens + completion_tokens,
        'prompt_tokens_details': {'cached_tokens': use.read, 'audio_tokens': 0},
        'completion_tokens_details': {
            'reasoning_tokens': 0,
            'audio_tokens': 0,
            'accepted_prediction_tokens': 0,
            'rejected_prediction_tokens': 0,
        },
    }
    calls = [
        (f'call_fake_{index}_{position}', name, _tool_arguments(arguments))
        for position, (name, arguments) in enumerate(turn.calls if isinstance(turn, ToolCalls) else ())
    ]
    tool_calls = [
        {'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': arguments}}
        for call_id, name, arguments in calls
    ]
    finish_reason = 'tool_calls' if tool_calls else 'stop'
    base = {'id': completion_id, 'created': _CREATED, 'model': model}
    if not stream:
        message: dict[str, Any] = {
            'role': 'assistant',
            'content': turn.text if isinstance(turn, Text) else None,
            'refusal': None,
        }
        if tool_calls:
            message['tool_calls'] = tool_calls
        choice = {'index': 0, 'message': message, 'finish_reason': finish_reason, 'logprobs': None}
        return completion_id, _Reply(
            200, _encode({**base, 'object': 'chat.completion', 'choices': [choice], 'usage': usage})
        )

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        choice = {'index': 0, 'delta': delta, 'finish_reason': finish, 'logprobs': None}
        return _sse(None, {**base, 'object': 'chat.completion.chunk', 'choices': [choice]})

    events = [chunk({'role': 'assistant', 'content': ''})]
    if isinstance(turn, Text):
        events += [chunk({'content': piece}) for piece in _halves(turn.text)]
    for position, (call_id, name, arguments) in enumerate(calls):
        opening = {'index': position, 'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': ''}}
        events.append(chunk({'tool_calls': [opening]}))
        events += [
            chunk({'tool_calls': [{'index': position, 'function': {'arguments': piece}}]})
            for piece in _halves(arguments)
        ]
    events.append(chunk({}, finish_reason))
    if cast('Mapping[str, Any]', body_json.get('stream_options') or {}).get('include_usage'):
        events.append(_sse(None, {**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage}))
    events.append(_sse(None, '[DONE]'))
    return completion_id, _Reply(200, events=events)


def _render_responses(
    index: int, body_json: Mapping[str, Any], turn: Turn, stream: bool, summary: str | None, use: CacheUse
) -> tuple[str, _Reply]:
    response_id = f'resp_fake_{index:04d}'
    input_tokens, output_tokens = use.prompt, _output_tokens(turn)
    if isinstance(turn, Text):
        output: list[dict[str, Any]] = [
            {
                'type': 'message',
                'id': f'msg_fake_{index}',
                'role': 'assistant',
                'status': 'completed',
                'content': [{'type': 'output_text', 'text': turn.text, 'annotations': [], 'logprobs': []}],
            }
        ]
    else:
        output = [
            {
                'type': 'function_call',
                'id': f'fc_fake_{index}_{position}',
                'call_id': f'call_fake_{index}_{position}',
                'name': name,
                'arguments': _tool_arguments(arguments),
                'status': 'completed',
            }
            for position, (name, arguments) in enumerate(turn.calls)
        ]
    if summary is not None:
        # The server compacts before it samples, so the item comes ahead of the turn's.
        output.insert(0, _compaction_item(index, summary))

    def response(status: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            'id': response_id,
            'object': 'response',
            'created_at': _CREATED,
            'status': status,
            'model': str(body_json.get('model', 'fake')),
            'output': items,
            'error': None,
            'incomplete_details': None,
            'instructions': body_json.get('instructions'),
            'metadata': {},
            'parallel_tool_calls': True,
            'previous_response_id': body_json.get('previous_response_id'),
            'store': body_json.get('store', True),
            'temperature': 1.0,
            'text': {'format': {'type': 'text'}},
            'tool_choice': 'auto',
            'tools': [],
            'top_p': 1.0,
            'truncation': 'disabled',
            'usage': _responses_usage(input_tokens, output_tokens, use.read) if status == 'completed' else None,
        }

    if not stream:
        return response_id, _Reply(200, _encode(response('completed', output)))

    sequence = iter(range(1_000_000))

    def event(kind: str, **data: Any) -> bytes:
        return _sse(kind, {'type': kind, 'sequence_number': next(sequence), **data})

    events = [
        event('response.created', response=response('in_progress', [])),
        event('response.in_progress', response=response('in_progress', [])),
    ]
    for position, item in enumerate(output):
        item_id = item['id']
        if item['type'] == 'message':
            text = item['content'][0]['text']
            empty_part: dict[str, Any] = {'type': 'output_text', 'text': '', 'annotations': [], 'logprobs': []}
            events.append(event('response.output_item.added', output_index=position, item={**item, 'content': []}))
            events.append(
                event(
                    'response.content_part.added',
                    item_id=item_id,
                    output_index=position,
                    content_index=0,
                    part=empty_part,
                )
            )
            events += [
                event(
                    'response.output_text.delta',
                    item_id=item_id,
                    output_index=position,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
                for piece in _halves(text)
            ]
            events.append(
                event(
                    'response.output_text.done',
                    item_id=item_id,
                    output_index=position,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
            )
            events.append(
                event(
                    'response.content_part.done',
                    item_id=item_id,
                    output_index=position,
                    content_index=0,
                    part=item['content'][0],
                )
            )
        elif item['type'] == 'compaction':
            # A compaction item has no deltas: it arrives whole, in both the `added` and the `done` event.
            events.append(event('response.output_item.added', output_index=position, item=item))
        else:
            opening = {**item, 'arguments': '', 'status': 'in_progress'}
            events.append(event('response.output_item.added', output_index=position, item=opening))
            events += [
                event('response.function_call_arguments.delta', item_id=item_id, output_index=position, delta=piece)
                for piece in _halves(item['arguments'])
            ]
            events.append(
                event(
                    'response.function_call_arguments.done',
                    item_id=item_id,
                    output_index=position,
                    name=item['name'],
                    arguments=item['arguments'],
                )
            )
        events.append(event('response.output_item.done', output_index=position, item=item))
    events.append(event('response.completed', response=response('completed', output)))
    return response_id, _Reply(200, events=events)


_NO_CACHE = {'cache_creation_input_tokens': 0, 'cache_read_input_tokens': 0}


def _anthropic_usage(use: CacheUse) -> dict[str, Any]:
    """The input side of an Anthropic reply's usage: what the prompt cache read, wrote and left."""
    return {
        'input_tokens': use.uncached,
        'cache_creation_input_tokens': use.written_5m + use.written_1h,
        'cache_read_input_tokens': use.read,
        'cache_creation': {'ephemeral_5m_input_tokens': use.written_5m, 'ephemeral_1h_input_tokens': use.written_1h},
        'service_tier': 'standard',
    }


def _anthropic_compaction_usage(
    body_json: Mapping[str, Any], live_context: Mapping[str, Any], compaction: Mapping[str, Any], output_tokens: int
) -> tuple[int, list[dict[str, Any]]]:
    """The top-level input tokens of a compacting reply, and its `usage.iterations`."""
    # The turn is sampled from the summary alone, and the top-level usage is that pass's: Anthropic reports the
    # compaction's own tokens only in `iterations`.
    input_tokens = _input_tokens({**body_json, 'messages': [{'role': 'assistant', 'content': [compaction]}]})
    summary_tokens = len(compaction['content']) // 4
    return input_tokens, [
        {
            'type': 'compaction',
            'input_tokens': _input_tokens(live_context),
            'output_tokens': summary_tokens,
            **_NO_CACHE,
        },
        {'type': 'message', 'input_tokens': input_tokens, 'output_tokens': output_tokens, **_NO_CACHE},
    ]


def _render_anthropic(
    index: int, body_json: Mapping[str, Any], turn: Turn, stream: bool, summary: str | None, use: CacheUse
) -> tuple[str, _Reply]:
    message_id = f'msg_fake_{index:04d}'
    output_tokens = _output_tokens(turn)
    if isinstance(turn, Text):
        content: list[dict[str, Any]] = [{'type': 'text', 'text': turn.text}]
        stop_reason = 'end_turn'
    else:
        content = [
            {'type': 'tool_use', 'id': f'toolu_fake_{index}_{position}', 'name': name, 'input': dict(arguments)}
            for position, (name, arguments) in enumerate(turn.calls)
        ]
        stop_reason = 'tool_use'
    iterations: list[dict[str, Any]] = []
    if summary is not None:
        compaction = {'type': 'compaction', 'content': summary}
        content.insert(0, compaction)
        live_context = _anthropic_live_context(body_json)
        input_tokens, iterations = _anthropic_compaction_usage(body_json, live_context, compaction, output_tokens)
        usage: dict[str, Any] = {'input_tokens': input_tokens, **_NO_CACHE, 'iterations': iterations}
    else:
        usage = _anthropic_usage(use)
    usage['output_tokens'] = output_tokens
    message = {
        'id': message_id,
        'type': 'message',
        'role': 'assistant',
        'model': str(body_json.get('model', 'fake')),
        'content': content,
        'stop_reason': stop_reason,
        'stop_sequence': None,
        'usage': usage,
    }
    if not stream:
        return message_id, _Reply(200, _encode(message))

    def event(kind: str, **data: Any) -> bytes:
        return _sse(kind, {'type': kind, **data})

    opening_usage = {key: value for key, value in usage.items() if key != 'iterations'} | {'output_tokens': 1}
    opening = {**message, 'content': [], 'stop_reason': None, 'usage': opening_usage}
    events = [event('message_start', message=opening)]
    for position, block in enumerate(content):
        start, deltas = _block_stream(block)
        events.append(event('content_block_start', index=position, content_block=start))
        if position == 0:
            # As real streams do, right after the first block starts.
            events.append(event('ping'))
        events += [event('content_block_delta', index=position, delta=delta) for delta in deltas]
        events.append(event('content_block_stop', index=position))
    # A real stream's last usage repeats the input and cache counts, and Pydantic AI reads them from there.
    final_usage = {key: usage[key] for key in (*_NO_CACHE, 'input_tokens', 'output_tokens')}
    if iterations:
        final_usage['iterations'] = iterations
    events.append(event('message_delta', delta={'stop_reason': stop_reason, 'stop_sequence': None}, usage=final_usage))
    events.append(event('message_stop'))
    return message_id, _Reply(200, events=events)


def _block_stream(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """How an Anthropic stream sends one content block: the block it starts with, and its deltas."""
    if block['type'] == 'compaction':
        # The summary comes whole in one delta, after a start event that has none.
        return {**block, 'content': None}, [{'type': 'compaction_delta', 'content': block['content']}]
    if block['type'] == 'text':
        return {'type': 'text', 'text': ''}, [{'type': 'text_delta', 'text': piece} for piece in _halves(block['text'])]
    pieces = _halves(_tool_arguments(block['input']))
    return {**block, 'input': {}}, [{'type': 'input_json_delta', 'partial_json': piece} for piece in pieces]


def _api_base(base_url: str) -> str:
    return base_url.rstrip('/') + '/v1'


def openai_chat_model(
    base_url: str, model_name: str = 'gpt-5.2', *, http_client: httpx2.AsyncClient | None = None
) -> OpenAIChatModel:
    """Build an `OpenAIChatModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send.
        http_client: The client to send through, e.g. one from `tests.wire.WireCapture`; the caller closes it.
            A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1/chat/completions`.
    """
    provider = OpenAIProvider(
        base_url=_api_base(base_url), api_key=_DUMMY_API_KEY, http_client=http_client or _unpooled_client()
    )
    return OpenAIChatModel(model_name, provider=provider)


def openai_responses_model(
    base_url: str, model_name: str = 'gpt-5.2', *, http_client: httpx2.AsyncClient | None = None
) -> OpenAIResponsesModel:
    """Build an `OpenAIResponsesModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send.
        http_client: The client to send through, e.g. one from `tests.wire.WireCapture`; the caller closes it.
            A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1/responses`.
    """
    provider = OpenAIProvider(
        base_url=_api_base(base_url), api_key=_DUMMY_API_KEY, http_client=http_client or _unpooled_client()
    )
    return OpenAIResponsesModel(model_name, provider=provider)


def anthropic_model(
    base_url: str, model_name: str = 'claude-sonnet-4-6', *, http_client: httpx2.AsyncClient | None = None
) -> AnthropicModel:
    """Build an `AnthropicModel` that talks to a `FakeProvider`.

    Args:
        base_url: The server's root URL, `FakeProvider.url`.
        model_name: The model name to send.
        http_client: The client to send through, e.g. one from `tests.wire.WireCapture`; the caller closes it.
            A new `httpx2.AsyncClient` when omitted.

    Returns:
        A model whose requests go to `POST {base_url}/v1/messages`.
    """
    # The Anthropic SDK adds `/v1` itself, unlike the OpenAI one.
    provider = AnthropicProvider(
        base_url=base_url.rstrip('/'), api_key=_DUMMY_API_KEY, http_client=http_client or _unpooled_client()
    )
    return AnthropicModel(model_name, provider=provider)


def _unpooled_client() -> httpx2.AsyncClient:
    # Nobody closes a client the helpers make, so it keeps no idle connections: one left open in the pool
    # would raise `ResourceWarning` when collected, which the test suite turns into an error.
    return httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0))
