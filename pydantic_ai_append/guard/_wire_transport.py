"""The httpx transport a `WireVerifier` puts in a client: each provider request checked before it goes through.

It wraps any other transport, the way httpx transports compose (`TeeTransport`). A request to one of the known APIs
(a `POST` whose path ends in one of `API_PATHS`, told apart by the SDK's `User-Agent` where they share one) is handed
to the verifier's check before the inner transport sends it; a reply the verifier wants (to an OpenAI Responses request, which later requests may name by
`previous_response_id`) is kept as the client reads it, so a stream the SDK reads event by event is never buffered
here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2

from .._wire.segments import Api, api_of
from .._wire.transport import SentRequest, TeeTransport


@dataclass
class Reply:
    """The reply to a Responses request, as the client reads it (a `ReplySink`)."""

    response_chunks: list[bytes] = field(default_factory=list[bytes])
    """The body's chunks, before `content_encoding` is undone."""

    content_encoding: str | None = None
    """The reply's `content-encoding` header, when its chunks are read off the wire rather than decoded already."""


class VerifyingTransport(TeeTransport):
    """A transport that hands each provider request to `check` before `inner` sends it."""

    def __init__(
        self, check: Callable[[Api, str, bytes], Reply | None], inner: httpx2.AsyncBaseTransport | None
    ) -> None:
        super().__init__(inner)
        self._check = check

    async def note(self, request: SentRequest) -> Reply | None:
        api = api_of(request.method, request.url.path, request.headers.get('user-agent'))
        if api is None:
            # Not read: the body of another request (an upload, say) stays a stream.
            return None
        return self._check(api, request.url.path, await request.aread())
