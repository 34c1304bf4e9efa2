"""What the HTTP transport wrappers of `testing` and `guard` share: a reply body kept as the client reads it.

A provider SDK streams its replies event by event; reading a reply inside a transport would buffer it and change
when the client sees each event. So a wrapper that needs the reply's bytes (to resolve a later
`previous_response_id`, or to show it in a test) tees the stream instead. A teed stream is the body as it came
over the wire, before the client undoes its `content-encoding` (real providers gzip their JSON replies), so the
wrappers undo it again (`encoding.decoded`).

A transport is shared by every conversation a client sends for, and sees only bytes; the capabilities on the agent
know which conversation a request is for. They name it in `conversation_scope` around each run, and the transport,
called inside the run's context, reads it with `current_conversation`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from contextlib import contextmanager
from contextvars import ContextVar

import httpx2


class TeeStream(httpx2.AsyncByteStream):
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
