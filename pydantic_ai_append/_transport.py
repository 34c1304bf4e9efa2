"""What the HTTP transport wrappers of `testing` and `guard` share: a reply body kept as the client reads it.

A provider SDK streams its replies event by event; reading a reply inside a transport would buffer it and change
when the client sees each event. So a wrapper that needs the reply's bytes (to resolve a later
`previous_response_id`, or to show it in a test) tees the stream instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

__all__ = ('TeeStream',)


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
