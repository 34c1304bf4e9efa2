"""botocore's own request hooks: what the HTTP transport wrappers do, for the boto3 client Bedrock's SDK sends through.

Pydantic AI's `BedrockConverseModel` sends through a boto3 `bedrock-runtime` client, which has no HTTP client to hand
a transport to: botocore sends with urllib3 itself, in the worker thread Pydantic AI calls it in (`anyio`'s, which
runs the call in a copy of the run's context, so `current_conversation` names the run's conversation there too). What
botocore offers instead is events on `client.meta.events`, each client's own:

- `before-send.bedrock-runtime.Converse` (and `.ConverseStream`), emitted with `request=`, the `AWSPreparedRequest`
  about to be sent (its `method`, `url`, `headers` and `body`), on every attempt: botocore retries a throttled or
  failed request by sending it again, and says which attempt it is in `request.context['retries']['attempt']`. An
  error a handler raises ends the call: `botocore.endpoint` hands it to the retry handlers, which retry only
  botocore's own connection errors (`botocore.retryhandler`, `botocore.retries.standard`), so any other error
  reaches the caller as itself, after one attempt.
- `before-parse.bedrock-runtime.Converse` (and `.ConverseStream`), emitted with `response_dict=` before the reply is
  parsed: its `body` is the reply's bytes, or for ConverseStream's event stream (an error reply is bytes there too)
  the raw urllib3 response, which `botocore.eventstream.EventStream` reads with `stream()` and ends with `close()`.
  That stream is kept chunk by chunk as the client reads it, as `TeeTransport` keeps an httpx stream: reading it
  here would make the client wait for the whole reply. The chunks are AWS's binary event-stream frames, kept as they
  are.

`instrument` registers both on a client for one `note`, which gets each request and says where to keep its reply, as
a `TeeTransport`'s does. The package doesn't import botocore: the client handed over brings it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic_ai.exceptions import UserError

from .segments import Api
from .transport import ReplySink

_OPERATIONS: Mapping[str, Api] = {'Converse': 'bedrock-converse', 'ConverseStream': 'bedrock-converse'}
"""The `bedrock-runtime` operations read, and the API each one's requests are to."""

_SERVICE = 'bedrock-runtime'
"""The name botocore gives the service, and the second part of its events' names."""

BotocoreClientT = TypeVar('BotocoreClientT')
"""A boto3 client, handed back as it came: botocore ships no types of its own."""


@dataclass(frozen=True)
class BotocoreRequest:
    """A request botocore is about to send, as a `note` reads it."""

    api: Api
    """The API the request is to, told by the operation botocore sends it for."""

    method: str
    """The HTTP method."""

    path: str
    """The URL path, without the query, percent-encoded as sent (Bedrock's model ids are, in the path)."""

    headers: Mapping[str, str]
    """The headers as sent, with lower-case names, `user-agent` among them."""

    body: bytes
    """The raw request body."""

    attempt: int
    """Which attempt of the call this is, from 1: botocore sends a request again when it retries it."""


BotocoreNote = Callable[[BotocoreRequest], ReplySink | None]
"""Reads a request about to be sent (raising refuses it) and says where to keep its reply, or `None`."""


class _TeeStream:
    """ConverseStream's raw urllib3 response, keeping each chunk in `sink` as the event stream reads it.

    Anything else asked of it is the response's own (`close`, and the `connection` Pydantic AI shuts down to end a
    cancelled read).
    """

    def __init__(self, raw: Any, sink: list[bytes]) -> None:
        self._raw = raw
        self._sink = sink

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        for chunk in self._raw.stream(*args, **kwargs):
            self._sink.append(chunk)
            yield chunk

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _Hooks:
    """The two handlers `instrument` registers for one `note`, and the reply sink handed from one to the other."""

    def __init__(self, note: BotocoreNote) -> None:
        self._note = note
        # botocore sends a request and parses its reply in the same thread, one call at a time.
        self._pending = threading.local()

    def before_send(self, request: Any, event_name: str, **kwargs: Any) -> None:
        self._pending.sink = None
        # Header values are bytes once botocore prepared the request, but for the `Content-Length` it adds.
        headers = {
            name.lower(): value.decode() if isinstance(value, bytes) else str(value)
            for name, value in request.headers.items()
        }
        retries: dict[str, Any] = request.context.get('retries', {})
        url: str = request.url
        operation = event_name.rsplit('.', 1)[-1]
        sent = BotocoreRequest(
            _OPERATIONS[operation],
            request.method,
            urlsplit(url).path,
            headers,
            bytes(request.body),
            retries.get('attempt', 1),
        )
        self._pending.sink = self._note(sent)

    def before_parse(self, response_dict: dict[str, Any], **kwargs: Any) -> None:
        sink: ReplySink | None = getattr(self._pending, 'sink', None)
        self._pending.sink = None
        if sink is None:
            return
        sink.content_encoding = response_dict['headers'].get('content-encoding')
        body = response_dict['body']
        if isinstance(body, bytes):
            sink.response_chunks.append(body)
        else:
            response_dict['body'] = _TeeStream(body, sink.response_chunks)


def instrument(client: BotocoreClientT, note: BotocoreNote, owner: object) -> BotocoreClientT:
    """Hand each Converse and ConverseStream request `client` sends to `note` before it goes, and keep its reply where
    `note` says, as the client reads it.

    Args:
        client: A boto3 `bedrock-runtime` client; its events are its own, so no other client is affected.
        note: What reads each request.
        owner: Who `note` is for: instrumenting a client again for the same owner changes nothing, so no request is
            read twice. The handlers hold `note`, so `owner` lives as long as the client.

    Returns:
        `client`.

    Raises:
        UserError: If `client` is not a boto3 `bedrock-runtime` client.
    """
    meta: Any = getattr(client, 'meta', None)
    service = getattr(getattr(meta, 'service_model', None), 'service_name', None)
    if service != _SERVICE:
        raise UserError(
            f'{client!r} is not a boto3 {_SERVICE!r} client (its service is {service!r}); pass the client '
            f"`BedrockProvider(bedrock_client=...)` takes, such as `boto3.client('{_SERVICE}')`"
        )
    hooks = _Hooks(note)
    for operation in _OPERATIONS:
        for event, handler in (('before-send', hooks.before_send), ('before-parse', hooks.before_parse)):
            name = f'{event}.{_SERVICE}.{operation}'
            meta.events.register(name, handler, unique_id=f'pydantic_ai_append.{id(owner)}.{name}')
    return client
