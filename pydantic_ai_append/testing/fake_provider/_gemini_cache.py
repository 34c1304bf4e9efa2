"""Gemini's implicit prompt cache as Google documents it, simulated so the fake's Gemini replies report cache usage.

Tokens are counted as `caching` says, and prefixes are kept in the store every API's cache shares (`_cache_store`);
`caching.PromptCache.gemini` answers a request by this module's rules.

**Gemini** (`generateContent` and its stream), per https://ai.google.dev/gemini-api/docs/caching: implicit caching
is on for every model from Gemini 2.5 on, with nothing to set. A request whose input reaches the model's minimum
(in the page's revision of 2026-10-13: 2,048 tokens for Gemini 2.5 Flash and 2.5 Pro, 4,096 for the 3.x models and
later; earlier revisions gave 1,024 for Flash and 4,096 for Pro) reads the longest prefix an earlier request to the
same model sent, taking system instruction, tools and contents in that order, when that prefix reaches the minimum
too. Usage reports it in `usageMetadata.cachedContentTokenCount`, within `promptTokenCount`; Google Cloud bills it at
a 90% discount (https://docs.cloud.google.com/gemini-enterprise-agent-platform/models/context-cache/context-cache-overview).
Google publishes no lifetime for an implicit entry, only that requests with a common prefix should come "in a short
amount of time"; the fake keeps one 5 minutes from its last use, as it does OpenAI's. Google doesn't say in what steps
a hit is counted; the fake counts it in whole blocks, a block being a part of the system instruction, a function
declaration (or a tool that declares none), or a part of a content, with its role, so a change inside a part ends the
prefix where that part starts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, cast

from ._cache_store import CacheUse, PrefixStore, compact, tokens

__all__ = ('GEMINI_MINIMUM_TOKENS', 'gemini_minimum', 'gemini_use')

GEMINI_MINIMUM_TOKENS: Mapping[str, int] = {'gemini-2.5-flash': 2_048, 'gemini-2.5-pro': 2_048}
"""The minimum input of an implicit cache hit, by model name prefix; 4,096 for any other model from Gemini 2.5 on."""
GEMINI_UNCACHED = ('gemini-1.', 'gemini-2.0')
"""The model name prefixes of the Gemini models from before implicit caching."""
GEMINI_RETENTION_SECONDS = 5 * 60


def gemini_use(store: PrefixStore, model: str, request: Mapping[str, Any]) -> CacheUse:
    """Look up and store a Gemini request's prompt; `model` is the one its path names."""
    digest = hashlib.sha256(model.encode())
    digests: list[bytes] = []
    ends: list[int] = []
    for block in _gemini_blocks(request):
        digest.update(hashlib.sha256(block).digest())
        digests.append(digest.copy().digest())
        ends.append((ends[-1] if ends else 0) + tokens(block))
    total = ends[-1] if ends else 0
    minimum = gemini_minimum(model)
    if minimum is None or total < minimum:
        return CacheUse(total)
    now = store.now()
    # Every prefix of a request is stored at once, so the longest alive one is the longest shared.
    shared = next((ends[at] for at in reversed(range(len(digests))) if store.alive(digests[at], now)), 0)
    for prefix in digests:
        store.keep(prefix, GEMINI_RETENTION_SECONDS, now)
    return CacheUse(total, shared if shared >= minimum else 0)


def gemini_minimum(model: str) -> int | None:
    """The minimum input of a Gemini model's implicit cache hits, in tokens; `None` if it doesn't cache implicitly."""
    if model.startswith(GEMINI_UNCACHED):
        return None
    return next((size for name, size in GEMINI_MINIMUM_TOKENS.items() if model.startswith(name)), 4_096)


def _gemini_blocks(request: Mapping[str, Any]) -> list[bytes]:
    """A Gemini request's blocks in cache order: the system instruction's parts, the tools, the contents' parts."""
    system = cast('Mapping[str, Any]', request.get('systemInstruction') or {})
    blocks = [b'system' + compact(part) for part in cast('list[object]', system.get('parts') or [])]
    for tool in cast('list[Mapping[str, Any]]', request.get('tools') or []):
        declarations = cast('list[object]', tool.get('functionDeclarations') or [tool])
        blocks += [b'tool' + compact(declaration) for declaration in declarations]
    for content in cast('list[Mapping[str, Any]]', request.get('contents') or []):
        role = str(content.get('role')).encode()
        blocks += [role + compact(part) for part in cast('list[object]', content.get('parts') or [])]
    return blocks
