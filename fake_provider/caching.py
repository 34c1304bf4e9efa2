"""Prompt caches as the providers document them, simulated so the fake provider reports cache usage.

Tokens are counted by one deterministic rule, since no tokenizer of these models installs offline from the package
index: a prompt is split into blocks (below), each block is its compact JSON, and each block costs one token per 4
bytes, rounded up. The counts are an approximation of a real tokenizer's; every rule below is applied to them
exactly.

**OpenAI** (Chat Completions and Responses), per https://platform.openai.com/docs/guides/prompt-caching: caching
is automatic for prompts of at least 1,024 tokens, and a hit covers the longest prefix seen before, in increments of
128 tokens (`usage.prompt_tokens_details.cached_tokens`, `usage.input_tokens_details.cached_tokens`). A cached
prefix stays active for 5 to 10 minutes of inactivity (up to an hour off-peak); the fake keeps one for 5 minutes
from its last use. The prompt is the request's tools, then its instructions and messages or input items, in order
(a Responses request naming `previous_response_id` continues the prompt of that response and its output). A byte
changed anywhere ends the prefix there.

**Anthropic** Messages, per https://platform.claude.com/docs/en/build-with-claude/prompt-caching: a prompt is
cached per model in the order tools, `system`, `messages`, and only up to a cache breakpoint: a block with
`cache_control`, or the request's top-level `cache_control` (automatic caching), which marks its last block; at
most 4 in all. A request reads the longest prefix an earlier request wrote that ends at a breakpoint or at one of
the 19 blocks before it (a lookback of 20 blocks, the breakpoint's own included; a run of tool calls or of tool
results in one message counts as one, as Pydantic AI's Anthropic model documents of the Claude API, where it adds no
breakpoint for a wide fan-out of parallel calls, unlike on Bedrock), and writes the prefix at each
breakpoint after that, if it is at least the model's minimum cacheable length. An entry lives for its `ttl` (`5m`
by default, or `1h`), refreshed at no cost each time it is read. Changing `tool_choice` or the thinking settings
invalidates the messages (not the tools or the system prompt); a tool with `defer_loading` is outside the prefix
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-use-with-prompt-caching). Usage reports
`input_tokens` after the prefix read or written, `cache_read_input_tokens`, and `cache_creation_input_tokens`,
split by retention in `cache_creation`. A block here is a tool, a system block, or one content block of a message
(a string content is one block); a message's role is part of its blocks.

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
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = ('ANTHROPIC_MINIMUM_TOKENS', 'GEMINI_MINIMUM_TOKENS', 'CacheUse', 'PromptCache', 'tokens')

TOKEN_BYTES = 4
"""The bytes of compact JSON counted as one token."""

OPENAI_MINIMUM_TOKENS = 1_024
OPENAI_INCREMENT_TOKENS = 128
OPENAI_RETENTION_SECONDS = 5 * 60

ANTHROPIC_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 20
"""The lookback, in positions: a block each, but a run of tool calls or tool results in one message takes one."""
_TOOL_BLOCKS = ('tool_use', 'tool_result')
ANTHROPIC_TTL_SECONDS: Mapping[str, float] = {'5m': 5 * 60, '1h': 60 * 60}

ANTHROPIC_MINIMUM_TOKENS: Mapping[str, int] = {
    'claude-opus-4-6': 4_096,
    'claude-opus-4-5': 4_096,
    'claude-haiku-4-5': 4_096,
    'claude-sonnet-4-6': 2_048,
    'claude-3-5-haiku': 2_048,
    'claude-3-haiku': 2_048,
    'claude-sonnet-4-5': 1_024,
    'claude-opus-4-1': 1_024,
}
"""The minimum cacheable prompt of the models the docs name, by model name prefix; 1,024 for any other (Claude
Opus 4 and Sonnet 4, 3.7)."""

GEMINI_MINIMUM_TOKENS: Mapping[str, int] = {'gemini-2.5-flash': 2_048, 'gemini-2.5-pro': 2_048}
"""The minimum input of an implicit cache hit, by model name prefix; 4,096 for any other model from Gemini 2.5 on."""
GEMINI_UNCACHED = ('gemini-1.', 'gemini-2.0')
"""The model name prefixes of the Gemini models from before implicit caching."""
GEMINI_RETENTION_SECONDS = 5 * 60


def tokens(data: bytes) -> int:
    """The tokens of one block: one per `TOKEN_BYTES` bytes, rounded up."""
    return -(-len(data) // TOKEN_BYTES)


def _compact(value: object) -> bytes:
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
    """The tokens written to the cache for 5 minutes (Anthropic)."""

    written_1h: int = 0
    """The tokens written to the cache for an hour (Anthropic)."""

    @property
    def uncached(self) -> int:
        """The tokens neither read nor written."""
        return self.prompt - self.read - self.written_5m - self.written_1h


@dataclass(frozen=True)
class _Block:
    data: bytes
    ttl: Literal['5m', '1h'] | None
    """The retention of a breakpoint on this block, `None` if it isn't one."""

    messages_start: bool = False
    """Whether the messages start here, where a change of `tool_choice` or thinking settings ends the prefix."""

    tool_run: bool = False
    """Whether it continues a run of tool calls or tool results in one message, which takes no lookback position."""


class PromptCache:
    """The prompt cache of one fake provider, for all its APIs; `clock` gives the time in seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[bytes, tuple[float, float]] = {}
        """Each cached prefix's digest: when it expires, and for how long a use keeps it."""
        self._contexts: dict[str, bytes] = {}
        """Each Responses reply's prompt and output, for a request naming it as `previous_response_id`."""

    def _alive(self, digest: bytes, now: float) -> bool:
        entry = self._entries.get(digest)
        return entry is not None and entry[0] > now

    def _keep(self, digest: bytes, seconds: float, now: float) -> None:
        expires, lasting = self._entries.get(digest, (0.0, 0.0))
        lasting = max(lasting, seconds) if expires > now else seconds
        self._entries[digest] = (now + lasting, lasting)

    def openai(self, request: Mapping[str, Any], *, responses: bool) -> tuple[bytes, CacheUse]:
        """Look up and store a Chat or Responses request's prompt; its bytes (for `remember`) and its use."""
        prompt = self._openai_prompt(request, responses=responses)
        now = self._clock()
        total = tokens(prompt)
        step = OPENAI_INCREMENT_TOKENS * TOKEN_BYTES
        digest = hashlib.sha256()
        read = 0
        boundaries: list[bytes] = []
        for end in range(step, len(prompt) + 1, step):
            digest.update(prompt[end - step : end])
            boundaries.append(digest.copy().digest())
        if total >= OPENAI_MINIMUM_TOKENS:
            hits = 0
            for boundary in boundaries:
                if not self._alive(boundary, now):
                    break
                hits += 1
            read = hits * OPENAI_INCREMENT_TOKENS if hits * OPENAI_INCREMENT_TOKENS >= OPENAI_MINIMUM_TOKENS else 0
            for boundary in boundaries:
                self._keep(boundary, OPENAI_RETENTION_SECONDS, now)
        return prompt, CacheUse(total, read)

    def remember(self, response_id: str, prompt: bytes, output: Sequence[object]) -> None:
        """Keep a Responses reply's prompt and output, which a later request's `previous_response_id` continues."""
        self._contexts[response_id] = prompt + b''.join(_compact(item) for item in output)

    def _openai_prompt(self, request: Mapping[str, Any], *, responses: bool) -> bytes:
        tools = cast('list[object]', request.get('tools') or [])
        if not responses:
            return b''.join(_compact(part) for part in [*tools, *cast('list[object]', request.get('messages') or [])])
        raw = request.get('input')
        items = [{'role': 'user', 'content': raw}] if isinstance(raw, str) else cast('list[object]', raw or [])
        previous = request.get('previous_response_id')
        if isinstance(previous, str) and previous in self._contexts:
            # The stored prompt and output come first, then what this request adds.
            return self._contexts[previous] + b''.join(_compact(item) for item in items)
        instructions = request.get('instructions')
        return b''.join(_compact(part) for part in [*tools, *([instructions] if instructions else []), *items])

    def _anthropic_read(self, blocks: list[_Block], breakpoints: list[int], digests: list[bytes], now: float) -> int:
        """The last block of the longest prefix cached before within a breakpoint's lookback, or -1 for none."""
        positions: list[int] = []
        for block in blocks:
            positions.append((positions[-1] if positions else -1) + (not block.tool_run))
        read_at = -1
        for at in breakpoints:
            index = at
            while index >= 0 and positions[at] - positions[index] < ANTHROPIC_LOOKBACK:
                if self._alive(digests[index], now):
                    read_at = max(read_at, index)
                    break
                index -= 1
        return read_at

    def gemini(self, model: str, request: Mapping[str, Any]) -> CacheUse:
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
        now = self._clock()
        # Every prefix of a request is stored at once, so the longest alive one is the longest shared.
        shared = next((ends[at] for at in reversed(range(len(digests))) if self._alive(digests[at], now)), 0)
        for prefix in digests:
            self._keep(prefix, GEMINI_RETENTION_SECONDS, now)
        return CacheUse(total, shared if shared >= minimum else 0)

    def anthropic(self, request: Mapping[str, Any]) -> CacheUse:
        """Look up and store an Anthropic Messages request's prompt; raises `ValueError` past 4 breakpoints."""
        blocks = _anthropic_blocks(request)
        breakpoints = [at for at, block in enumerate(blocks) if block.ttl is not None]
        if len(breakpoints) > ANTHROPIC_BREAKPOINTS:
            raise ValueError(
                f'A maximum of {ANTHROPIC_BREAKPOINTS} blocks with cache_control may be provided. Found '
                f'{len(breakpoints)}.'
            )
        now = self._clock()
        digests: list[bytes] = []
        ends: list[int] = []
        digest = hashlib.sha256(str(request.get('model')).encode())
        salt = _compact([request.get('tool_choice'), request.get('thinking')])
        for block in blocks:
            if block.messages_start:
                digest.update(salt)
            digest.update(hashlib.sha256(block.data).digest())
            digests.append(digest.copy().digest())
            ends.append((ends[-1] if ends else 0) + tokens(block.data))
        read_at = self._anthropic_read(blocks, breakpoints, digests, now)
        if read_at >= 0:
            self._keep(digests[read_at], self._entries[digests[read_at]][1], now)
        minimum = anthropic_minimum(str(request.get('model', '')))
        written = {'5m': 0, '1h': 0}
        start = read_at
        for at in breakpoints:
            ttl = cast('Literal["5m", "1h"]', blocks[at].ttl)
            if at <= read_at or ends[at] < minimum:
                continue
            self._keep(digests[at], ANTHROPIC_TTL_SECONDS[ttl], now)
            written[ttl] += ends[at] - (ends[start] if start >= 0 else 0)
            start = at
        total = ends[-1] if ends else 0
        read = ends[read_at] if read_at >= 0 else 0
        return CacheUse(total, read, written['5m'], written['1h'])


def gemini_minimum(model: str) -> int | None:
    """The minimum input of a Gemini model's implicit cache hits, in tokens; `None` if it doesn't cache implicitly."""
    if model.startswith(GEMINI_UNCACHED):
        return None
    return next((size for name, size in GEMINI_MINIMUM_TOKENS.items() if model.startswith(name)), 4_096)


def anthropic_minimum(model: str) -> int:
    """The minimum cacheable prompt, in tokens, of an Anthropic model."""
    return next((size for name, size in ANTHROPIC_MINIMUM_TOKENS.items() if model.startswith(name)), 1_024)


def _block_type(block: object) -> object:
    return cast('Mapping[str, Any]', block).get('type') if isinstance(block, dict) else None


def _ttl(block: object) -> Literal['5m', '1h'] | None:
    control = cast('Mapping[str, Any]', block).get('cache_control') if isinstance(block, dict) else None
    if not isinstance(control, dict):
        return None
    return '1h' if cast('Mapping[str, Any]', control).get('ttl') == '1h' else '5m'


def _without_control(block: object) -> object:
    if isinstance(block, dict):
        return {key: value for key, value in cast('dict[str, Any]', block).items() if key != 'cache_control'}
    return block


def _anthropic_blocks(request: Mapping[str, Any]) -> list[_Block]:
    """The request's blocks in cache order, each with the retention of a breakpoint on it; `ValueError` for what
    the API refuses.
    """
    blocks: list[_Block] = []
    for tool in cast('list[Mapping[str, Any]]', request.get('tools') or []):
        if tool.get('defer_loading'):
            if 'cache_control' in tool:
                raise ValueError(
                    f"Tool '{tool.get('name')}' cannot have both defer_loading=true and cache_control set."
                )
            continue
        blocks.append(_Block(b'tool' + _compact(_without_control(tool)), _ttl(tool)))
    system = request.get('system')
    for block in [system] if isinstance(system, str) else list(system or []):
        blocks.append(_Block(b'system' + _compact(_without_control(block)), _ttl(block)))
    first_message = len(blocks)
    for message in cast('list[Mapping[str, Any]]', request.get('messages') or []):
        role = str(message.get('role')).encode()
        content = message.get('content')
        previous: object = None
        for block in [content] if isinstance(content, str) else list(content or []):
            kind = _block_type(block)
            run, previous = kind in _TOOL_BLOCKS and kind == previous, kind
            data = role + _compact(_without_control(block))
            blocks.append(_Block(data, _ttl(block), len(blocks) == first_message, run))
    automatic = _ttl(request)
    if automatic is not None and blocks:
        last = blocks[-1]
        if last.ttl is not None and last.ttl != automatic:
            raise ValueError(f'the last block has a cache_control ttl of {last.ttl!r}, the request {automatic!r}')
        blocks[-1] = _Block(last.data, automatic, last.messages_start, last.tool_run)
    return blocks


def _gemini_blocks(request: Mapping[str, Any]) -> list[bytes]:
    """A Gemini request's blocks in cache order: the system instruction's parts, the tools, the contents' parts."""
    system = cast('Mapping[str, Any]', request.get('systemInstruction') or {})
    blocks = [b'system' + _compact(part) for part in cast('list[object]', system.get('parts') or [])]
    for tool in cast('list[Mapping[str, Any]]', request.get('tools') or []):
        declarations = cast('list[object]', tool.get('functionDeclarations') or [tool])
        blocks += [b'tool' + _compact(declaration) for declaration in declarations]
    for content in cast('list[Mapping[str, Any]]', request.get('contents') or []):
        role = str(content.get('role')).encode()
        blocks += [role + _compact(part) for part in cast('list[object]', content.get('parts') or [])]
    return blocks
