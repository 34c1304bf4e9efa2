"""`TeeTransport` for clients of the `httpx` package, which the Groq, Cohere and Hugging Face SDKs take.

Pydantic AI and most provider SDKs send through `httpx2`; the SDKs of Groq (`AsyncGroq(http_client=...)`), Cohere and
Hugging Face (`huggingface_hub.set_async_client_factory`) take an `httpx.AsyncClient` only, and refuse an `httpx2` one.
The two packages' transports and streams are separate classes, so the same reading of each request (a `TeeTransport`'s
`note`) goes into an `httpx` transport here. The package does not depend on `httpx`: this module is imported only when
a client or a transport of it is asked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import httpx

from .transport import ReplySink, SentRequest


class _TeeStream(httpx.AsyncByteStream):
    """A response stream that keeps each chunk in `sink` as the client reads it."""

    def __init__(self, inner: httpx.AsyncByteStream, sink: list[bytes]) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class LegacyTeeTransport(httpx.AsyncBaseTransport):
    """An `httpx` transport that hands each request to `note` before `inner` sends it, as `TeeTransport` does."""

    def __init__(
        self, note: Callable[[SentRequest], Awaitable[ReplySink | None]], inner: httpx.AsyncBaseTransport | None
    ) -> None:
        self._note = note
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sink = await self._note(request)
        response = await self._inner.handle_async_request(request)
        if sink is None:
            return response
        if response.is_stream_consumed:
            # Made from bytes, as `httpx.MockTransport` handlers make responses: the client never pulls its stream.
            sink.response_chunks.append(response.content)
            return response
        sink.content_encoding = response.headers.get('content-encoding')
        response.stream = _TeeStream(cast('httpx.AsyncByteStream', response.stream), sink.response_chunks)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
