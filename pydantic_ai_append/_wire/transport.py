"""What the HTTP transport wrappers of `testing` and `guard` share: each request read before it is sent, and its
reply kept as the client reads it.

`TeeTransport` is the wrapper; a subclass says, in `note`, what it does with a request and where to keep the reply.
It is an `httpx2` transport; `wrap` and `client` put the same `note` in a client of the `httpx` package, which the
Groq, Cohere and Hugging Face SDKs take (`legacy_httpx`).
A provider SDK streams its replies event by event; reading a reply inside a transport would buffer it and change
when the client sees each event. So a wrapper that needs the reply's bytes (to resolve a later
`previous_response_id`, or to show it in a test) tees the stream instead. A teed stream is the body as it came
over the wire, before the client undoes its `content-encoding` (real providers gzip their JSON replies), so
`reply_body` undoes it again (`encoding.decoded`).

A transport is shared by every conversation a client sends for, and sees only bytes; the capabilities on the agent
know which conversation a request is for. They name it in `conversation_scope` around each run, and the transport,
called inside the run's context, reads it with `current_conversation`.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, TypeVar, cast

import httpx2
from pydantic_ai.exceptions import UserError

from .encoding import decoded


class _URL(Protocol):
    @property
    def path(self) -> str: ...


class SentRequest(Protocol):
    """A request as a client of `httpx2` or of `httpx` sends it: what a wrapper reads of it."""

    @property
    def method(self) -> str: ...

    @property
    def url(self) -> _URL: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    async def aread(self) -> bytes: ...


class ReplySink(Protocol):
    """Where a wrapper keeps the reply to a request, such as a `WireExchange`."""

    response_chunks: list[bytes]
    """The body's chunks as the client consumed them, before `content_encoding` is undone."""

    content_encoding: str | None
    """The `content-encoding` the chunks are in; `None` if they are not encoded."""


def reply_body(sink: ReplySink) -> bytes:
    """The reply kept in `sink` so far, with its `content-encoding` undone where it can be."""
    return decoded(b''.join(sink.response_chunks), sink.content_encoding)


class _TeeStream(httpx2.AsyncByteStream):
    """A response stream that keeps each chunk in `sink` as the client reads it."""

    def __init__(self, inner: httpx2.AsyncByteStream, sink: list[bytes]) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


# Wrapping (not subclassing) `AsyncHTTPTransport` keeps vcrpy's class-level patch of it in the path: what a capture
# keeps is what the client sent in this run, whether vcrpy replays, records or is off, and a cassette records and
# replays what a verifier let through.
class TeeTransport(httpx2.AsyncBaseTransport):
    """A transport that hands each request to `note` before `inner` sends it, and keeps the reply where `note` says.

    It wraps any other transport, the way httpx transports compose.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        # The default is made at the first request: a wrapper whose `note` serves an `httpx` client never sends.
        self._inner = inner

    async def note(self, request: SentRequest) -> ReplySink | None:
        """Read a request about to be sent (raising refuses it); return where to keep its reply, or `None`."""
        raise NotImplementedError

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sink = await self.note(request)
        if self._inner is None:
            self._inner = httpx2.AsyncHTTPTransport()
        response = await self._inner.handle_async_request(request)
        if sink is None:
            return response
        if response.is_stream_consumed:
            # A response made from bytes (as `httpx2.MockTransport` handlers make them) was read when it was built,
            # so the client takes its content and never pulls the stream through a tee.
            sink.response_chunks.append(response.content)
            return response
        # Kept as the client reads it: reading it here would buffer a stream the SDK reads event by event.
        sink.content_encoding = response.headers.get('content-encoding')
        response.stream = _TeeStream(cast('httpx2.AsyncByteStream', response.stream), sink.response_chunks)
        return response

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


def _is_legacy(value: object, name: str) -> bool:
    # `httpx` is not a dependency: a transport or client class of it exists only if something imported it.
    legacy = sys.modules.get('httpx')
    return legacy is not None and isinstance(value, getattr(legacy, name))


def _is_legacy_class(client_class: object) -> bool:
    legacy = sys.modules.get('httpx')
    return legacy is not None and isinstance(client_class, type) and issubclass(client_class, legacy.AsyncClient)


def unpooled_transport(client_class: object) -> Any:
    """A new transport of the package of `client_class` (`httpx2` unless it is an `httpx` one) that keeps no idle
    connections.
    """
    package: Any = sys.modules['httpx'] if _is_legacy_class(client_class) else httpx2
    return package.AsyncHTTPTransport(limits=package.Limits(max_keepalive_connections=0))


ClientT = TypeVar('ClientT', bound=httpx2.AsyncClient)
"""A client class of `httpx2`, for the signatures of the methods that make one."""

if TYPE_CHECKING:
    import httpx

    LegacyClientT = TypeVar('LegacyClientT', bound=httpx.AsyncClient)
    """A client class of `httpx`, the same way."""

MakeTee: TypeAlias = Callable[[httpx2.AsyncBaseTransport | None], TeeTransport]
"""A `TeeTransport` subclass with its own arguments bound: it takes the transport to wrap."""


def wrap(make: MakeTee, inner: Any) -> Any:
    """`make(inner)`, or for an `inner` transport of the `httpx` package, an `httpx` transport doing the same."""
    if not _is_legacy(inner, 'AsyncBaseTransport'):
        return make(inner)
    from .legacy_httpx import LegacyTeeTransport

    return LegacyTeeTransport(make(None).note, inner)


def client(make: MakeTee, client_class: object, transport: Any, client_kwargs: dict[str, Any]) -> Any:
    """A client of `client_class` (`httpx2.AsyncClient`, `httpx.AsyncClient` or a subclass) sending through `make`'s.

    Raises:
        UserError: If `client_class` is neither, or `transport` is of the other package.
    """
    if _is_legacy_class(client_class):
        if transport is not None and not _is_legacy(transport, 'AsyncBaseTransport'):
            raise UserError(f'transport {transport!r} is not an `httpx` transport, which an `httpx.AsyncClient` needs')
        from .legacy_httpx import LegacyTeeTransport

        return cast('type[Any]', client_class)(
            transport=LegacyTeeTransport(make(None).note, transport), **client_kwargs
        )
    if not (isinstance(client_class, type) and issubclass(client_class, httpx2.AsyncClient)):
        raise UserError(
            f'client_class must be `httpx2.AsyncClient` or `httpx.AsyncClient` (or a subclass), not {client_class!r}'
        )
    if _is_legacy(transport, 'AsyncBaseTransport'):
        raise UserError(
            f'transport {transport!r} is an `httpx` transport: pass `client_class=httpx.AsyncClient` with it'
        )
    return client_class(transport=make(transport), **client_kwargs)


_CONVERSATION = ContextVar[str | None]('pydantic_ai_append.conversation', default=None)


@contextmanager
def conversation_scope(conversation_id: str | None) -> Generator[None]:
    """Name the conversation that requests sent within this block are for."""
    token = _CONVERSATION.set(conversation_id)
    try:
        yield
    finally:
        _CONVERSATION.reset(token)


def current_conversation() -> str | None:
    """The conversation a request sent now is for, as a capability on the agent named it, or `None`."""
    return _CONVERSATION.get()
