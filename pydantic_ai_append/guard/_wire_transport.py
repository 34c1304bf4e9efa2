"""The httpx transport a `WireVerifier` puts in a client: each provider request checked before it goes through.

It wraps any other transport, the way httpx transports compose. A request to one of the known APIs (a `POST` whose path
ends in one of `API_PATHS`) is handed to the verifier's check before the inner transport sends it; a reply the verifier
wants (to an OpenAI Responses request, which later requests may name by `previous_response_id`) is kept as the client
reads it, so a stream the SDK reads event by event is never buffered here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import httpx2

from .._wire.segments import Api, api_of
from .._wire.transport import TeeStream


@dataclass
class Reply:
    """The reply to a Responses request, as the client reads it."""

    chunks: list[bytes] = field(default_factory=list[bytes])
    """The body's chunks, before `content_encoding` is undone."""
    content_encoding: str | None = None
    """The reply's `content-encoding` header, when its chunks are read off the wire rather than decoded already."""


# Wrapping (not subclassing) `AsyncHTTPTransport` keeps vcrpy's class-level patch of it in the path, as in
# `testing.WireCapture`, so cassettes record and replay what the verifier let through.
class VerifyingTransport(httpx2.AsyncBaseTransport):
    """A transport that hands each provider request to `check` before `inner` sends it."""

    def __init__(self, check: Callable[[Api, bytes], Reply | None], inner: httpx2.AsyncBaseTransport) -> None:
        self._check = check
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        api = api_of(request.method, request.url.path)
        if api is None:
            return await self._inner.handle_async_request(request)
        reply = self._check(api, await request.aread())
        response = await self._inner.handle_async_request(request)
        if reply is None:
            return response
        if response.is_stream_consumed:
            # A response built from bytes (as `httpx2.MockTransport` handlers build them) was read already.
            reply.chunks.append(response.content)
        else:
            # Kept as the client reads it: reading it here would buffer a stream the SDK reads event by event.
            reply.content_encoding = response.headers.get('content-encoding')
            response.stream = TeeStream(cast('httpx2.AsyncByteStream', response.stream), reply.chunks)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
