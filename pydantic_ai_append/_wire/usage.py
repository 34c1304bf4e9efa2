"""What a recorded reply says the provider read from its prompt cache, and whether that disagrees with the checker.

The checker judges a request by its bytes: how much of the previous request's prefix it repeats. A reply recorded
against the real API also holds the provider's own count of the prompt tokens it read from cache, which says what
the provider's cache made of the same request. The two measure different things (canonical JSON bytes against
tokens, a prefix that could be read against one that was), so most gaps between them are normal; `disagreement`
holds the rule for the few that are not. The usage-field table is here once, for this and for the wire summary of
`testing`, and the module imports only the standard library so the checker can use it without Pydantic AI.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeAlias, cast

from .conversation import reply_payloads
from .segments import Api


class Match(NamedTuple):
    """A step of a usage path into a list: its first element whose `key` is `value`."""

    key: str
    """The key every element has."""

    value: str
    """The value of it that picks the element."""


Path: TypeAlias = tuple[str | Match, ...]
"""Where a number is in a reply's `usage`: keys of nested objects, and `Match`es into lists."""

_CHAT_USAGE: Mapping[str, tuple[Path, ...]] = {
    'input_tokens': (('prompt_tokens',),),
    'cache_read_tokens': (('prompt_tokens_details', 'cached_tokens'),),
    'output_tokens': (('completion_tokens',),),
}
"""Mistral's and Groq's usage, as `genai-prices` reads it."""

PROVIDERS: Mapping[Api, str] = {
    'anthropic': 'anthropic',
    'openai-chat': 'openai',
    'openai-responses': 'openai',
    'mistral-chat': 'mistral',
    'groq-chat': 'groq',
    'huggingface-chat': 'huggingface',
    'cohere-chat': 'cohere',
    'gemini': 'google',
    'bedrock-converse': 'bedrock',
}
"""The provider name Pydantic AI gives a response from each API."""


USAGE_FIELDS: Mapping[Api, Mapping[str, tuple[Path, ...]]] = {
    'mistral-chat': _CHAT_USAGE,
    'groq-chat': _CHAT_USAGE,
    # Pydantic AI's Hugging Face model reads only these two, whatever the inference provider behind the router adds.
    'huggingface-chat': {'input_tokens': (('prompt_tokens',),), 'output_tokens': (('completion_tokens',),)},
    'cohere-chat': {
        'input_tokens': (('tokens', 'input_tokens'),),
        'cache_read_tokens': (('cached_tokens',),),
        'output_tokens': (('tokens', 'output_tokens'),),
    },
    # Gemini's `usageMetadata`, which `merged_usage` reads as its `usage`.
    'gemini': {
        'input_tokens': (('promptTokenCount',), ('toolUsePromptTokenCount',)),
        'cache_read_tokens': (('cachedContentTokenCount',),),
        'output_tokens': (('candidatesTokenCount',), ('thoughtsTokenCount',)),
    },
    'openai-chat': {
        'input_tokens': (('prompt_tokens',),),
        'cache_read_tokens': (('prompt_tokens_details', 'cached_tokens'),),
        'cache_write_tokens': (('prompt_tokens_details', 'cache_write_tokens'),),
        'input_audio_tokens': (('prompt_tokens_details', 'audio_tokens'),),
        'output_tokens': (('completion_tokens',),),
        'output_audio_tokens': (('completion_tokens_details', 'audio_tokens'),),
    },
    'openai-responses': {
        'input_tokens': (('input_tokens',),),
        'cache_read_tokens': (('input_tokens_details', 'cached_tokens'),),
        'cache_write_tokens': (('input_tokens_details', 'cache_write_tokens'),),
        'output_tokens': (('output_tokens',),),
    },
    'anthropic': {
        # Anthropic's `input_tokens` leaves out what the cache read and wrote; Pydantic AI's is the sum of the three.
        'input_tokens': (('input_tokens',), ('cache_creation_input_tokens',), ('cache_read_input_tokens',)),
        'cache_read_tokens': (('cache_read_input_tokens',),),
        'cache_write_tokens': (('cache_creation_input_tokens',),),
        'cache_write_1h_tokens': (('cache_creation', 'ephemeral_1h_input_tokens'),),
        'output_tokens': (('output_tokens',),),
    },
    # Bedrock's `TokenUsage` (https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html),
    # a Converse reply's `usage` or ConverseStream's `metadata` event's. Its `inputTokens` leaves out what the cache
    # read and wrote (`totalTokens` is the sum of all four counts), so Pydantic AI's `input_tokens` is the sum of the
    # three, as for Anthropic; `cacheDetails` splits the write by retention, `5m` or `1h`.
    'bedrock-converse': {
        'input_tokens': (('inputTokens',), ('cacheReadInputTokens',), ('cacheWriteInputTokens',)),
        'cache_read_tokens': (('cacheReadInputTokens',),),
        'cache_write_tokens': (('cacheWriteInputTokens',),),
        'cache_write_1h_tokens': (('cacheDetails', Match('ttl', '1h'), 'inputTokens'),),
        'output_tokens': (('outputTokens',),),
    },
}
"""Where each `RequestUsage` field is in a reply's `usage`, per API: the sum of the paths, as `genai-prices` reads it."""

READ_MORE_MARGIN = 0.25
"""How far the provider's cached share of the input may exceed the checker's reused share of the bytes unflagged.

Bytes of canonical JSON and tokens are not proportional: keys, quotes and braces cost bytes and few tokens, and
the provider wraps each message in tokens of its own. Measured on the 154 requests of `tests/cassettes` after a
conversation's first (of 50 tokens or more), counting tokens with OpenAI's `cl100k_base` (a segment's strings plus
3, a tool's whole JSON), a request took 3.5 to 5.7 bytes a token (4.6 the median) once of 300 tokens or more, and
the token share of its reused prefix was within -0.12 and +0.20 of the byte share; within -0.02 and +0.11 from 300
tokens, and the providers read nothing from cache below 1,024. Anthropic also counts its tool-use system prompt,
some hundreds of tokens at the very start of the prefix, in `input_tokens`. Twice the widest spread at the sizes a
provider caches covers both.
"""

MINIMUM_CACHED_TOKENS = 1_024
"""The shortest prompt OpenAI caches, and Anthropic on most models (2,048 or 4,096 on some)."""

BREAKPOINT_APIS: frozenset[Api] = frozenset({'anthropic', 'bedrock-converse'})
"""The APIs whose cache is read only up to a breakpoint the request marks: Anthropic's `cache_control`, Bedrock's
`cachePoint` blocks (on Claude and Nova, by Anthropic's rules; its other models cache nothing)."""


@dataclass(frozen=True)
class ProviderUsage:
    """What one reply says of its request's input, in the provider's tokens.

    ```python
    from pydantic_ai_append._wire.usage import reply_usage

    body = b'{"usage": {"prompt_tokens": 2048, "prompt_tokens_details": {"cached_tokens": 1920}}}'
    print(reply_usage('openai-chat', body))
    #> ProviderUsage(input_tokens=2048, cache_read_tokens=1920, cache_write_tokens=0, cache_reported=True)
    ```
    """

    input_tokens: int
    """All prompt tokens, cached ones included, as Pydantic AI counts them (on Anthropic, the sum of `input_tokens`,
    `cache_creation_input_tokens` and `cache_read_input_tokens`; on Bedrock, of `inputTokens`, `cacheReadInputTokens`
    and `cacheWriteInputTokens`)."""

    cache_read_tokens: int
    """Prompt tokens read from the cache."""

    cache_write_tokens: int
    """Prompt tokens written to the cache (Anthropic, Bedrock; OpenAI reports none)."""

    cache_reported: bool
    """Whether the reply has a cache-read field at all: an OpenAI-compatible server at the same path may report prompt
    tokens only, and then its `cache_read_tokens` of 0 says nothing."""


@dataclass(frozen=True)
class Disagreement:
    """A request on which the provider's cache use and the checker's verdict don't agree.

    ```python
    from pydantic_ai_append._wire.usage import ProviderUsage, disagreement

    usage = ProviderUsage(input_tokens=5000, cache_read_tokens=4608, cache_write_tokens=0, cache_reported=True)
    found = disagreement('openai-chat', usage, reused_bytes=0, total_bytes=20000, first=False)
    print(found and found.kind)
    #> read_more
    ```
    """

    kind: Literal['read_more', 'missed']
    """`read_more`: the provider read markedly more from cache than the checker judged reusable, so the checker's
    verdict is likely wrong. `missed`: the provider read nothing of a large prefix the checker judged reusable, a
    cache miss the prefix doesn't explain, not an error of the checker."""

    message: str
    """One sentence for the report, with both figures."""


def reply_holders(body: bytes) -> list[dict[str, object]]:
    """The objects of a reply body that may carry its model and usage, in order: each payload (the body, or each
    event of a stream), followed by the response or message it wraps (Responses' `response.completed`, Anthropic's
    `message_start`).
    """
    return [holder for payload in reply_payloads(body) for holder in _holders(payload)]


def _holders(payload: dict[str, object]) -> Iterator[dict[str, object]]:
    yield payload
    for key in ('response', 'message'):
        if isinstance(inner := payload.get(key), dict):
            yield cast('dict[str, object]', inner)


def merged_usage(holders: Iterable[dict[str, object]]) -> dict[str, object]:
    """The `usage` the holders report, a later one's fields over an earlier one's; empty if none reports any.

    A stream's later usage repeats or updates the earlier (Anthropic's `message_delta` after `message_start`), and a
    `null` (Responses' `response.created`, Chat's chunks before the last) reports nothing. Gemini's `usageMetadata`
    is its `usage`, and so is the `x_groq.usage` of Groq's last streamed chunk: Groq streams its usage there (the
    `groq` SDK's `ChatCompletionChunk.x_groq`, "only sent in the final chunk"), and Pydantic AI's `GroqModel` reads a
    chunk's usage from there alone.
    """
    reported: dict[str, object] = {}
    for holder in holders:
        if isinstance(usage := _usage_of(holder), dict):
            reported |= {key: value for key, value in cast('dict[str, object]', usage).items() if value is not None}
    return reported


def _usage_of(holder: dict[str, object]) -> object:
    groq = holder.get('x_groq')
    usage = cast('dict[str, object]', groq).get('usage') if isinstance(groq, dict) else None
    return usage if usage is not None else holder.get('usage', holder.get('usageMetadata'))


def usage_counts(api: Api, usage: Mapping[str, object]) -> dict[str, int]:
    """Each `RequestUsage` field `USAGE_FIELDS` names for `api`, read from a reply's `usage`; 0 where it's absent."""
    return {name: sum(_sum(usage, path) for path in paths) for name, paths in USAGE_FIELDS[api].items()}


def _number(usage: object, path: Path) -> int | None:
    for step in path:
        usage = _step(usage, step)
    return usage if isinstance(usage, int) else None


def _step(value: object, step: str | Match) -> object:
    if isinstance(step, Match):
        items = cast('list[object]', value) if isinstance(value, list) else []
        return next((item for item in items if _step(item, step.key) == step.value), None)
    return cast('dict[str, object]', value).get(step) if isinstance(value, dict) else None


def _sum(usage: Mapping[str, object], path: Path) -> int:
    return _number(usage, path) or 0


def reply_usage(api: Api, body: bytes) -> ProviderUsage | None:
    """What a reply body, JSON or a whole event stream, says of its request's input.

    Args:
        api: The API the request went to.
        body: The raw reply body.

    Returns:
        The input usage, or `None` if the reply reports none: an error body, or a stream cut before its usage (an
        Anthropic stream cut after `message_start` has already said what the input read, and counts).
    """
    usage = merged_usage(reply_holders(body))
    if not usage:
        return None
    counts = usage_counts(api, usage)
    # Pydantic AI's Hugging Face model reads no cache use at all, so there is no field to say one was reported.
    cache_paths = USAGE_FIELDS[api].get('cache_read_tokens', ())
    return ProviderUsage(
        counts['input_tokens'],
        counts.get('cache_read_tokens', 0),
        counts.get('cache_write_tokens', 0),  # Gemini, Mistral and Groq report no cache writes
        cache_reported=any(_number(usage, path) is not None for path in cache_paths),
    )


def disagreement(
    api: Api,
    usage: ProviderUsage,
    *,
    reused_bytes: int,
    total_bytes: int,
    first: bool,
    kept: bool = False,
    cache_control: bool = False,
    minimum_tokens: int = MINIMUM_CACHED_TOKENS,
) -> Disagreement | None:
    """Whether the provider's cache use on one request disagrees with the checker's verdict on it, and how.

    Reading less than the checker judged reusable is normal on every provider, so it is never flagged on its own:
    Anthropic and Bedrock read only up to a breakpoint, and only a prefix of at least the model's minimum;
    OpenAI caches automatically but in steps (the first 1,024 tokens, then every 128), only prompts of 1,024 tokens
    or more, and not always (routing, eviction). Two things are flagged:

    - `read_more`: after the conversation's first request, on a request the checker judged to break the prefix (not
      `kept`: else a larger share of tokens says only that tokens and bytes differ), the provider read from cache a
      share of the input more than `READ_MORE_MARGIN` above the share of bytes the checker judged reusable. A provider reads only a prefix it
      has seen, so the checker's verdict on this request is then likely wrong (a prefix it thinks broken, at the tools
      or at state the server keeps), unless the request went back to a prefix an earlier request wrote. The first
      request isn't judged: a cache written before the conversation (an earlier run, another conversation with the
      same instructions) is the provider's to read.
    - `missed`: after the first request, the checker judged reusable a prefix of `minimum_tokens` or more (estimated
      as the reply's input tokens times the reused share of bytes, since the provider's count beats any bytes-a-token
      guess), and the provider, which reports cache reads, read nothing where it should have cached: always on
      OpenAI, on the `BREAKPOINT_APIS` only where `cache_control` says a breakpoint covers the prefix. The cache entry
      expired, the request was routed elsewhere, or a breakpoint lies past what was written: worth knowing, not an
      error of the checker.

    Args:
        api: The API the request went to.
        usage: What the request's reply reported, from `reply_usage`.
        reused_bytes: The bytes of the request's segments the checker judged reused from the previous request.
        total_bytes: The bytes of all the request's segments.
        first: Whether this is its conversation's first request.
        kept: Whether the request repeats all of the previous request (the checker found no break).
        cache_control: `BREAKPOINT_APIS` only: whether a breakpoint should have let this request read its reused
            prefix, i.e. the previous request carried one (Anthropic's `cache_control`, a Bedrock `cachePoint`) and
            this one repeats all of it (as Pydantic AI's `anthropic_cache` and `bedrock_cache_messages` settings
            give). OpenAI caches without breakpoints, so it is ignored there.
        minimum_tokens: The model's minimum cacheable prompt: 1,024 tokens on OpenAI and most Claude models, 2,048 or
            4,096 on some.

    Returns:
        The disagreement, or `None` if the two agree as far as this rule can tell.
    """
    if first:
        return None
    reused_share = reused_bytes / total_bytes if total_bytes else 0.0
    cached_share = usage.cache_read_tokens / usage.input_tokens if usage.input_tokens else 0.0
    if not kept and cached_share > reused_share + READ_MORE_MARGIN:
        return _read_more(usage, reused_bytes, total_bytes)
    estimated = round(usage.input_tokens * reused_share)
    caches = api not in BREAKPOINT_APIS or cache_control
    if caches and usage.cache_reported and usage.cache_read_tokens == 0 and estimated >= minimum_tokens:
        return _missed(reused_bytes, total_bytes, estimated)
    return None


def _read_more(usage: ProviderUsage, reused_bytes: int, total_bytes: int) -> Disagreement:
    return Disagreement(
        'read_more',
        f'the provider read {usage.cache_read_tokens:,} of {usage.input_tokens:,} input tokens from cache '
        f'({usage.cache_read_tokens / usage.input_tokens:.0%}), but the checker judged only {reused_bytes:,} of '
        f'{total_bytes:,} bytes ({reused_bytes / total_bytes if total_bytes else 0:.0%}) reusable, so the verdict on '
        f'this request is likely wrong: compare it with the request before it by hand; if the provider is right, the '
        f'checker does not know one of its cache rules',
    )


def _missed(reused_bytes: int, total_bytes: int, estimated: int) -> Disagreement:
    return Disagreement(
        'missed',
        f'the checker judged {reused_bytes:,} of {total_bytes:,} bytes (about {estimated:,} tokens) reusable, but the '
        f'provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another '
        f'machine, or no breakpoint over the prefix), not an error of the checker',
    )
