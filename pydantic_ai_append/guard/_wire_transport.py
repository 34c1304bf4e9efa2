"""The httpx transport a `WireVerifier` puts in a client, and its botocore hook: each provider request checked before
it goes through.

It wraps any other transport, the way httpx transports compose (`TeeTransport`). A request to one of the known APIs
(a `POST` whose path ends in one of `API_PATHS`, told apart by the SDK's `User-Agent` where they share one) is handed
to the verifier's check before the inner transport sends it; a reply the verifier wants (to an OpenAI Responses request, which later requests may name by
`previous_response_id`) is kept as the client reads it, so a stream the SDK reads event by event is never buffered
here. A boto3 client's Bedrock requests are read by botocore's own hooks (`botocore_hooks`), checked the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import httpx2

from .._wire.botocore_hooks import BotocoreRequest
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


def verify_botocore(check: Callable[[Api, str, bytes], Reply | None], request: BotocoreRequest) -> Reply | None:
    """Hand a request botocore is about to send to `check`, unless botocore is sending it again.

    A retry (of a throttled request, say) sends the bytes the first attempt sent, which were checked then; checked
    again, it would count as a request of its own.
    """
    if request.attempt > 1:
        return None
    return check(request.api, request.path, request.body)
