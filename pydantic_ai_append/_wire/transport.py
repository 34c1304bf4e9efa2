"""What the HTTP transport wrappers of `testing` and `guard` share: each request read before it is sent, and its
reply kept as the client reads it.

`TeeTransport` is the wrapper; a subclass says, in `note`, what it does with a request and where to keep the reply.
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

from collections.abc import AsyncIterator, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol, cast

import httpx2

from .encoding import decoded


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
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def note(self, request: httpx2.Request) -> ReplySink | None:
        """Read a request about to be sent (raising refuses it); return where to keep its reply, or `None`."""
        raise NotImplementedError

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        sink = await self.note(request)
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
        await self._inner.aclose()


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
