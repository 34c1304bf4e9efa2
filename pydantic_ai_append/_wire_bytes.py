"""What `testing` and `guard.wire` share about raw wire bytes: where two segments differ, and a tee of a reply.

Both the test-time checker and the runtime verifier report a divergence the same way (an excerpt of each side
around the first byte that differs) and both need a streamed reply's body without changing how the client reads
it, so these pieces live here once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2

__all__ = ('TeeStream', 'excerpt', 'first_difference')

_EXCERPT_BEFORE = 40
_EXCERPT_AFTER = 80


def first_difference(before: bytes, after: bytes) -> int:
    """Where `after` first differs from `before`: a byte offset, or the shorter length if one extends the other."""
    pairs = enumerate(zip(before, after, strict=False))
    return next((offset for offset, (x, y) in pairs if x != y), min(len(before), len(after)))


def excerpt(data: bytes, offset: int) -> str:
    """A short excerpt of `data` around `offset`, with `…` where it was cut."""
    start = max(0, offset - _EXCERPT_BEFORE)
    text = data[start : offset + _EXCERPT_AFTER].decode(errors='replace')
    return ('…' if start else '') + text + ('…' if offset + _EXCERPT_AFTER < len(data) else '')


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
