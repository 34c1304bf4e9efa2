"""Prompt caches as the providers document them, simulated so the fake provider reports cache usage.

Tokens are counted by one deterministic rule, since no tokenizer of these models installs offline from the package
index: a prompt is split into blocks (below), each block is its compact JSON, and each block costs one token per 4
bytes, rounded up (`_cache_store`, which also keeps the cached prefixes of every API). The counts are an
approximation of a real tokenizer's; every rule below is applied to them exactly.

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

**Bedrock** Converse, per https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html, by Anthropic's
rules above with Bedrock's markers: a prompt is cached in the order `toolConfig.tools`, `system`, `messages`, up to a
cache checkpoint, a `{"cachePoint": {"type": "default"}}` block that marks the block before it (it is not counted
itself); at most 4 in a request. A checkpoint is written only where the prefix holds the model's minimum (Claude's,
by the Claude model name after `anthropic.` in the model id, as above; 1,024 for Amazon Nova), below which the request
succeeds uncached. An entry lives 5 minutes, or an hour for a checkpoint with `"ttl": "1h"`, and each hit resets it.
A checkpoint finds a prefix cached at one of the 19 blocks before it, the lookback AWS documents for Claude's
simplified cache management. Changing `toolConfig.toolChoice` or `additionalModelRequestFields.thinking` invalidates
the messages. Only Claude and Nova models cache, Nova not its tool definitions; a `cachePoint` to any other
model, or in Nova's tools, is refused. A block is a tool
(`toolSpec`), a system block or one content block of a message, with its role; a run of `toolUse` or of
`toolResult` blocks in one message takes one position of lookback.

**Gemini** (`generateContent` and its stream) caches implicitly, by rules of its own that live in `_gemini_cache`,
with tokens counted as here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from ._cache_store import TOKEN_BYTES, CacheUse, PrefixStore, compact, tokens
from ._gemini_cache import gemini_use

__all__ = ('ANTHROPIC_MINIMUM_TOKENS', 'CacheUse', 'PromptCache', 'tokens')

OPENAI_MINIMUM_TOKENS = 1_024
OPENAI_INCREMENT_TOKENS = 128
OPENAI_RETENTION_SECONDS = 5 * 60

ANTHROPIC_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 20
"""The lookback, in positions: a block each, but a run of tool calls or tool results in one message takes one."""
_TOOL_BLOCKS = ('tool_use', 'tool_result')
ANTHROPIC_TTL_SECONDS: Mapping[str, float] = {'5m': 5 * 60, '1h': 60 * 60}

BEDROCK_CACHE_POINTS = 4
_BEDROCK_CACHING_FAMILIES = ('anthropic.', 'amazon.nova')
"""Where a model id's family starts, after any geographic prefix (`us.`, `eu.`...), for the families that cache."""
_BEDROCK_TOOL_BLOCKS = ('toolUse', 'toolResult')

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


@dataclass(frozen=True)
class _Block:
    data: bytes
    """What the block's tokens are counted on and its digest is taken of."""

    ttl: Literal['5m', '1h'] | None
    """The retention of a breakpoint on this block, `None` if it isn't one."""

    messages_start: bool = False
    """Whether the messages start here, where a change of `tool_choice` or thinking settings ends the prefix."""

    tool_run: bool = False
    """Whether it continues a run of tool calls or tool results in one message, which takes no lookback position."""


class PromptCache:
    """The prompt cache of one fake provider, for all its APIs; `clock` gives the time in seconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = PrefixStore(clock)
        self._contexts: dict[str, bytes] = {}
        """Each Responses reply's prompt and output, for a request naming it as `previous_response_id`."""

    def openai(self, request: Mapping[str, Any], *, responses: bool) -> tuple[bytes, CacheUse]:
        """Look up and store a Chat or Responses request's prompt; its bytes (for `remember`) and its use."""
        prompt = self._openai_prompt(request, responses=responses)
        now = self._store.now()
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
                if not self._store.alive(boundary, now):
                    break
                hits += 1
            read = hits * OPENAI_INCREMENT_TOKENS if hits * OPENAI_INCREMENT_TOKENS >= OPENAI_MINIMUM_TOKENS else 0
            for boundary in boundaries:
                self._store.keep(boundary, OPENAI_RETENTION_SECONDS, now)
        return prompt, CacheUse(total, read)

    def remember(self, response_id: str, prompt: bytes, output: Sequence[object]) -> None:
        """Keep a Responses reply's prompt and output, which a later request's `previous_response_id` continues."""
        self._contexts[response_id] = prompt + b''.join(compact(item) for item in output)

    def _openai_prompt(self, request: Mapping[str, Any], *, responses: bool) -> bytes:
        tools = cast('list[object]', request.get('tools') or [])
        if not responses:
            return b''.join(compact(part) for part in [*tools, *cast('list[object]', request.get('messages') or [])])
        raw = request.get('input')
        items = [{'role': 'user', 'content': raw}] if isinstance(raw, str) else cast('list[object]', raw or [])
        previous = request.get('previous_response_id')
        if isinstance(previous, str) and previous in self._contexts:
            # The stored prompt and output come first, then what this request adds.
            return self._contexts[previous] + b''.join(compact(item) for item in items)
        instructions = request.get('instructions')
        return b''.join(compact(part) for part in [*tools, *([instructions] if instructions else []), *items])

    def _anthropic_read(self, blocks: list[_Block], breakpoints: list[int], digests: list[bytes], now: float) -> int:
        """The last block of the longest prefix cached before within a breakpoint's lookback, or -1 for none."""
        positions: list[int] = []
        for block in blocks:
            positions.append((positions[-1] if positions else -1) + (not block.tool_run))
        read_at = -1
        for at in breakpoints:
            index = at
            while index >= 0 and positions[at] - positions[index] < ANTHROPIC_LOOKBACK:
                if self._store.alive(digests[index], now):
                    read_at = max(read_at, index)
                    break
                index -= 1
        return read_at

    def gemini(self, model: str, request: Mapping[str, Any]) -> CacheUse:
        """Look up and store a Gemini request's prompt (`_gemini_cache`); `model` is the one its path names."""
        return gemini_use(self._store, model, request)

    def anthropic(self, request: Mapping[str, Any]) -> CacheUse:
        """Look up and store an Anthropic Messages request's prompt; raises `ValueError` past 4 breakpoints."""
        blocks = _anthropic_blocks(request)
        count = sum(block.ttl is not None for block in blocks)
        if count > ANTHROPIC_BREAKPOINTS:
            raise ValueError(
                f'A maximum of {ANTHROPIC_BREAKPOINTS} blocks with cache_control may be provided. Found {count}.'
            )
        salt = compact([request.get('tool_choice'), request.get('thinking')])
        return self._breakpoints_use(str(request.get('model', '')), salt, blocks)

    def bedrock(self, model_id: str, request: Mapping[str, Any]) -> CacheUse:
        """Look up and store a Bedrock Converse request's prompt; raises `ValueError` for checkpoints Bedrock refuses."""
        family = next((model_id.find(name) for name in _BEDROCK_CACHING_FAMILIES if name in model_id), -1)
        blocks = _bedrock_blocks(request)
        count = sum(block.ttl is not None for block in blocks)
        if count and family < 0:
            raise ValueError(f'The model {model_id!r} does not support prompt caching: remove its cachePoint blocks.')
        tool_config = cast('Mapping[str, Any]', request.get('toolConfig') or {})
        tools = cast('list[Mapping[str, Any]]', tool_config.get('tools') or [])
        if 'amazon.nova' in model_id and any('cachePoint' in tool for tool in tools):
            raise ValueError(
                f'The model {model_id!r} caches no tool definitions: remove the cachePoint from its tools.'
            )
        if count > BEDROCK_CACHE_POINTS:
            raise ValueError(
                f'A request may hold at most {BEDROCK_CACHE_POINTS} cachePoint blocks; this one has {count}.'
            )
        fields = cast('Mapping[str, Any]', request.get('additionalModelRequestFields') or {})
        salt = compact([tool_config.get('toolChoice'), fields.get('thinking')])
        return self._breakpoints_use(model_id[max(family, 0) :].removeprefix('anthropic.'), salt, blocks)

    def _breakpoints_use(self, model: str, salt: bytes, blocks: list[_Block]) -> CacheUse:
        """The use of a prompt cached up to its breakpoints, as Anthropic's rules have it (Bedrock's too).

        Args:
            model: The model name, which keys the cache and gives its minimum (`anthropic_minimum`).
            salt: The settings whose change ends the prefix where the messages start.
            blocks: The prompt's blocks in cache order.
        """
        breakpoints = [at for at, block in enumerate(blocks) if block.ttl is not None]
        now = self._store.now()
        digests: list[bytes] = []
        ends: list[int] = []
        digest = hashlib.sha256(model.encode())
        for block in blocks:
            if block.messages_start:
                digest.update(salt)
            digest.update(hashlib.sha256(block.data).digest())
            digests.append(digest.copy().digest())
            ends.append((ends[-1] if ends else 0) + tokens(block.data))
        read_at = self._anthropic_read(blocks, breakpoints, digests, now)
        if read_at >= 0:
            self._store.refresh(digests[read_at], now)
        minimum = anthropic_minimum(model)
        written = {'5m': 0, '1h': 0}
        start = read_at
        for at in breakpoints:
            ttl = cast('Literal["5m", "1h"]', blocks[at].ttl)
            if at <= read_at or ends[at] < minimum:
                continue
            self._store.keep(digests[at], ANTHROPIC_TTL_SECONDS[ttl], now)
            written[ttl] += ends[at] - (ends[start] if start >= 0 else 0)
            start = at
        total = ends[-1] if ends else 0
        read = ends[read_at] if read_at >= 0 else 0
        return CacheUse(total, read, written['5m'], written['1h'])


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
        blocks.append(_Block(b'tool' + compact(_without_control(tool)), _ttl(tool)))
    system = request.get('system')
    for block in [system] if isinstance(system, str) else list(system or []):
        blocks.append(_Block(b'system' + compact(_without_control(block)), _ttl(block)))
    first_message = len(blocks)
    for message in cast('list[Mapping[str, Any]]', request.get('messages') or []):
        role = str(message.get('role')).encode()
        content = message.get('content')
        previous: object = None
        for block in [content] if isinstance(content, str) else list(content or []):
            kind = _block_type(block)
            run, previous = kind in _TOOL_BLOCKS and kind == previous, kind
            data = role + compact(_without_control(block))
            blocks.append(_Block(data, _ttl(block), len(blocks) == first_message, run))
    automatic = _ttl(request)
    if automatic is not None and blocks:
        last = blocks[-1]
        if last.ttl is not None and last.ttl != automatic:
            raise ValueError(f'the last block has a cache_control ttl of {last.ttl!r}, the request {automatic!r}')
        blocks[-1] = _Block(last.data, automatic, last.messages_start, last.tool_run)
    return blocks


def _bedrock_blocks(request: Mapping[str, Any]) -> list[_Block]:
    """A Converse request's blocks in cache order, each checkpoint's retention on the block before it."""
    blocks: list[_Block] = []
    sections: list[tuple[bytes, object]] = [
        (b'tool', cast('Mapping[str, Any]', request.get('toolConfig') or {}).get('tools')),
        (b'system', request.get('system')),
    ]
    sections += [
        (str(message.get('role')).encode(), message.get('content'))
        for message in cast('list[Mapping[str, Any]]', request.get('messages') or [])
    ]
    messages_started = False
    for at, (prefix, items) in enumerate(sections):
        previous: object = None
        for item in cast('list[Mapping[str, Any]]', items or []):
            point = item.get('cachePoint')
            if point is None:
                kind = next(iter(item), None)
                run, previous = kind in _BEDROCK_TOOL_BLOCKS and kind == previous, kind
                # Sections from the third on are the messages.
                messages_start = at >= 2 and not messages_started
                messages_started = messages_started or messages_start
                blocks.append(_Block(prefix + compact(item), None, messages_start, run))
                continue
            if not blocks:
                raise ValueError('A cachePoint must follow content, and this one comes first in the request.')
            ttl: Literal['5m', '1h'] = '1h' if cast('Mapping[str, Any]', point).get('ttl') == '1h' else '5m'
            blocks[-1] = _Block(blocks[-1].data, ttl, blocks[-1].messages_start, blocks[-1].tool_run)
    return blocks
