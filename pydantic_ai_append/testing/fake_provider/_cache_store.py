"""What the fake provider's prompt caches share: the token count, the use a request reports, and the store of prefixes.

The rules of each provider live apart (`caching` for OpenAI, Anthropic and Bedrock, `_gemini_cache` for Gemini), and
all of them count tokens and keep prefixes here, so one `caching.PromptCache` serves every API the fake speaks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ('TOKEN_BYTES', 'CacheUse', 'PrefixStore', 'compact', 'tokens')

TOKEN_BYTES = 4
"""The bytes of compact JSON counted as one token."""


def tokens(data: bytes) -> int:
    """The tokens of one block: one per `TOKEN_BYTES` bytes, rounded up."""
    return -(-len(data) // TOKEN_BYTES)


def compact(value: object) -> bytes:
    """A block's compact JSON, which its tokens are counted on and its digest is taken of."""
    # Not the package's `_wire.segments.canonical`: the cache here is what the package is measured against, so it
    # shares none of the package's reading of a body.
    return json.dumps(value, separators=(',', ':'), ensure_ascii=False).encode()


@dataclass(frozen=True)
class CacheUse:
    """What one request's prompt did with the cache, in tokens."""

    prompt: int
    """Every token of the prompt."""

    read: int = 0
    """The tokens read from the cache."""

    written_5m: int = 0
    """The tokens written to the cache for 5 minutes (Anthropic, Bedrock)."""

    written_1h: int = 0
    """The tokens written to the cache for an hour (Anthropic, Bedrock)."""

    @property
    def uncached(self) -> int:
        """The tokens neither read nor written."""
        return self.prompt - self.read - self.written_5m - self.written_1h


class PrefixStore:
    """The cached prefixes of one fake provider, each by its digest, with when it expires; `clock` gives seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[bytes, tuple[float, float]] = {}
        """Each cached prefix's digest: when it expires, and for how long a use keeps it."""

    def now(self) -> float:
        """The time on the store's clock, in seconds."""
        return self._clock()

    def alive(self, digest: bytes, now: float) -> bool:
        """Whether the prefix with this digest is cached at `now`."""
        entry = self._entries.get(digest)
        return entry is not None and entry[0] > now

    def keep(self, digest: bytes, seconds: float, now: float) -> None:
        """Cache a prefix for `seconds` from `now`, or longer if it is alive and was kept longer before."""
        expires, lasting = self._entries.get(digest, (0.0, 0.0))
        lasting = max(lasting, seconds) if expires > now else seconds
        self._entries[digest] = (now + lasting, lasting)

    def refresh(self, digest: bytes, now: float) -> None:
        """Keep a cached prefix again for as long as it was last kept, as a read does."""
        self.keep(digest, self._entries[digest][1], now)
