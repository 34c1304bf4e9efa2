"""Wire bytes: the scenario on each provider path and policy, through the real SDKs, split into cache segments.

Each conversation runs the real `openai`, `anthropic`, `google-genai` or `boto3` client, through Pydantic AI's model
classes, against the test suite's fake provider on loopback, one `agent.run` per turn with the history carried
through a JSON round trip. What was sent is measured with the package's own wire tools
([`WireConversation`][pydantic_ai_append.testing.WireConversation] and
[`prefix_reuse`][pydantic_ai_append.testing.prefix_reuse]): per request, the bytes of the cache-order segments
it shares with the previous request (reused) and the rest (uncached), where the prefix moved, and the delivered
change elements. Each conversation sends the cache settings the docs recommend for its provider
(`RECOMMENDED_SETTINGS`), and keeps the usage the fake provider's simulated cache reported for each request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.bedrock import BedrockConverseModel
from pydantic_ai.providers.bedrock import BedrockProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append._request import is_inline
from pydantic_ai_append._wire.segments import common_prefix_length
from pydantic_ai_append.testing import Api, Segment, WireConversation, prefix_reuse
from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    anthropic_model,
    bedrock_model,
    google_model,
    openai_chat_model,
    openai_responses_model,
)

from .scenario import CHAT, Policy, Scenario, build_agent

__all__ = (
    'PATHS',
    'RECOMMENDED_SETTINGS',
    'PathName',
    'RequestBytes',
    'Variant',
    'WireResult',
    'change_elements',
    'conversation',
    'run_conversation',
    'summary',
)

PathName: TypeAlias = Literal[
    'openai-chat', 'openai-responses', 'anthropic-inline', 'anthropic-wrapped', 'gemini', 'bedrock-claude'
]

PATHS: dict[PathName, tuple[Api, str]] = {
    'openai-chat': ('openai-chat', 'gpt-5.2'),
    'openai-responses': ('openai-responses', 'gpt-5.2'),
    'anthropic-inline': ('anthropic', 'claude-opus-4-8'),
    'anthropic-wrapped': ('anthropic', 'claude-sonnet-4-6'),
    'gemini': ('gemini', 'gemini-2.5-flash'),
    'bedrock-claude': ('bedrock-converse', 'us.anthropic.claude-sonnet-4-6-v1:0'),
}
"""Each path's provider API and model name. `claude-sonnet-4-6` has no inline system messages, on Anthropic's API or
on Bedrock's (the model id is its US cross-region profile); nor has Gemini."""

Variant: TypeAlias = Literal['static', 'rewrite', 'append', 'append-keep', 'native', 'native-always']
"""A policy, or `append-keep`: append mode never opening a window the prefix doesn't need (`windows='keep'`), or
`native-always`: Pydantic AI's own append mode announcing the `<system>` framing from the first request
(`framing_announcement='always'`), its best configuration on models without inline system messages."""

RECOMMENDED_SETTINGS: dict[Api, ModelSettings] = {
    # A breakpoint after the instructions (and the tools), and the automatic one at the end of the conversation.
    'anthropic': cast(
        'ModelSettings',
        {'anthropic_cache': True, 'anthropic_cache_instructions': True, 'anthropic_cache_tool_definitions': True},
    ),
    # OpenAI caches every prefix of 1,024 tokens or more by itself.
    'openai-chat': ModelSettings(),
    'openai-responses': ModelSettings(),
    # Gemini caches implicitly from 2.5 on, with nothing to set: a prefix an earlier request sent, past the model's
    # minimum.
    'gemini': ModelSettings(),
    # Bedrock caches only up to a cache point: one after the tools, one after the instructions, and one on the newest
    # message, which moves with the conversation.
    'bedrock-converse': cast(
        'ModelSettings',
        {'bedrock_cache_tool_definitions': True, 'bedrock_cache_instructions': True, 'bedrock_cache_messages': True},
    ),
}
"""The cache settings each conversation sends, as `docs/performance.md` recommends them."""

_CHANGE = re.compile(r'<(pyai:)?(context-diff|context_diff|context)\b[^>]*>.*?</\1?\2>', re.DOTALL)
"""A delivered change element: this package's, or Pydantic AI's own (`pyai:` prefixed, `context_diff`)."""

_PREFIX_KINDS = ('tool', 'system', 'instructions')
_PREFIX_ROLES = ('system', 'developer')


@dataclass(frozen=True)
class RequestBytes:
    """One request's segment bytes."""

    total: int
    """All its segments."""

    reused: int
    """The segments, from the start, it shares byte for byte with the previous request."""

    previous_total: int
    """All the previous request's segments (0 for the first request)."""

    moved_at: tuple[int, str] | None
    """Where it stops repeating the previous request (segment index and kind), or `None` if it repeats all of it."""

    change_bytes: int
    """Bytes of the change elements in its conversation segments."""

    moved_change_bytes: int = 0
    """Those of them at or after where it stops repeating the previous request."""

    @property
    def uncached(self) -> int:
        """The bytes a provider's prefix cache would not have: everything after the reused segments."""
        return self.total - self.reused


@dataclass
class WireResult:
    """One conversation's measurements."""

    path: PathName
    policy: Variant
    delivery: str
    """`'inline'` or `'wrapped'`: how the model takes mid-conversation system messages."""

    body_bytes: int = 0
    """Raw request bodies, as sent."""

    requests: list[RequestBytes] = field(default_factory=list[RequestBytes])
    unique_change_bytes: int = 0
    """Bytes of distinct change elements, each counted once."""

    block_bytes: dict[str, int] = field(default_factory=dict[str, int])
    """Each block's full text size at the end of the scenario, to compare its changes with."""

    largest_diff: dict[str, int] = field(default_factory=dict[str, int])
    """Each block's largest `<context-diff>` element, in bytes."""

    model: str = ''
    """The model name sent, which prices the usage."""

    usages: list[RequestUsage] = field(default_factory=list[RequestUsage])
    """What the provider reported for each request, as Pydantic AI reads it."""

    opened: list[int] = field(default_factory=list[int])
    """The requests that opened a window of append mode, by index (each the request its history records a baseline
    on): where the prefix moves by design."""

    @property
    def total(self) -> int:
        """Segment bytes over the whole conversation."""
        return sum(request.total for request in self.requests)

    @property
    def uncached(self) -> int:
        """Uncached bytes over the whole conversation."""
        return sum(request.uncached for request in self.requests)

    @property
    def carried_change_bytes(self) -> int:
        """Change element bytes summed over every request that sends them."""
        return sum(request.change_bytes for request in self.requests)

    @property
    def moves(self) -> list[tuple[int, int, str]]:
        """Each request after the first that moved the prefix, but where a window opened: its index, the first
        divergent segment and kind.
        """
        return [
            (index, *request.moved_at)
            for index, request in enumerate(self.requests)
            if request.moved_at and index and index not in self.opened
        ]

    @property
    def min_reuse(self) -> float:
        """The smallest share of the previous request's bytes that any later request reused, in percent, but where a
        window opened.
        """
        shares = [
            100 * request.reused / request.previous_total
            for index, request in enumerate(self.requests)
            if index and index not in self.opened
        ]
        return min(shares, default=100.0)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in cast('dict[str, object]', value).values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in cast('list[object]', value):
            yield from _strings(item)


def conversation(request: Sequence[Segment]) -> list[Segment]:
    """The request's conversation: its segments after the tools and the instructions.

    OpenAI Chat sends instructions as leading system (or developer) messages, so those are left out too.
    """
    segments = [segment for segment in request if segment.kind not in _PREFIX_KINDS]
    while segments and cast('dict[str, object]', json.loads(segments[0].data)).get('role') in _PREFIX_ROLES:
        segments.pop(0)
    return segments


def change_elements(segment: Segment) -> list[str]:
    """The change elements in a conversation segment."""
    return [match[0] for text in _strings(json.loads(segment.data)) for match in _CHANGE.finditer(text)]


def _model(path: PathName, url: str) -> Model:
    api, name = PATHS[path]
    if api == 'openai-chat':
        return openai_chat_model(url, name)
    if api == 'openai-responses':
        return openai_responses_model(url, name)
    if api == 'gemini':
        return google_model(url, name)
    if api == 'bedrock-converse':
        # The helper's model has cache settings of its own, which would shadow a unified `cache` the conversation
        # sends: this one has none, so what the conversation sends (the recommended settings, or those it is given)
        # is all it caches by.
        provider = cast('BedrockProvider', bedrock_model(url, name).provider)
        return BedrockConverseModel(name, provider=provider)
    return anthropic_model(url, name)


async def run_conversation(
    path: PathName,
    variant: Variant,
    turns: int,
    cache_settings: ModelSettings | None = None,
    scenario: Scenario = CHAT,
    capabilities: Sequence[AbstractCapability[int]] = (),
) -> WireResult:
    """Run `scenario` for `turns` turns on one path and variant, and measure what was sent; `cache_settings`
    replaces the recommended ones, and `capabilities` go on the agent before the package's.
    """
    api, model_name = PATHS[path]
    policy: Policy = 'native' if variant == 'native-always' else 'append' if variant == 'append-keep' else variant
    settings = RECOMMENDED_SETTINGS[api] if cache_settings is None else cache_settings
    if variant == 'native-always':
        settings = cast('ModelSettings', {**settings, 'framing_announcement': 'always'})
    script = scenario.script()
    with FakeProvider(script=lambda _: next(script)) as server:
        model = _model(path, server.url)
        windows = 'keep' if variant == 'append-keep' else 'price'
        sent = _Sent()
        agent = build_agent(
            policy, model, settings=settings, scenario=scenario, windows=windows, capabilities=[sent, *capabilities]
        )
        history: list[ModelMessage] = []
        for turn in range(1, turns + 1):
            result = await agent.run(scenario.prompt(turn), deps=turn, message_history=history)
            history = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(result.all_messages()))
        if server.errors:
            raise RuntimeError(f'the fake provider refused requests: {server.errors}')
        exchanges = list(server.exchanges)
    conversation = WireConversation.from_exchanges(api, exchanges)
    result = WireResult(path, variant, 'inline' if is_inline(model) else 'wrapped', model=model_name)
    result.usages, result.opened = sent.usages, sent.opened
    result.body_bytes = sum(len(exchange.request_body) for exchange in exchanges)
    result.block_bytes = {name: len(function(turns).encode()) for name, function in scenario.blocks}
    _measure(result, conversation.requests)
    return result


class _Sent(AbstractCapability[int]):
    """Each response's usage, and the index of each request after the first that opened a window of append mode (its
    request message records a baseline), as the run saw them: history that a compaction trims no longer holds them.
    """

    def __init__(self) -> None:
        self.usages: list[RequestUsage] = []
        self.opened: list[int] = []

    async def after_model_request(
        self, ctx: RunContext[int], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        request = next((message for message in reversed(ctx.messages) if isinstance(message, ModelRequest)), None)
        if self.usages and request is not None and AppendInstructions.opens_window(request):
            self.opened.append(len(self.usages))
        self.usages.append(response.usage)
        return response


def _measure(result: WireResult, requests: Sequence[Sequence[Segment]]) -> None:
    seen: set[tuple[int, int, str]] = set()
    previous: Sequence[Segment] = ()
    for request, reuse in zip(requests, prefix_reuse(requests), strict=True):
        shared = common_prefix_length(previous, request)
        moved = (shared, previous[shared].kind) if shared < len(previous) else None
        change_bytes = moved_bytes = 0
        talk = conversation(request)
        for conversation_index, segment in enumerate(talk):
            elements = change_elements(segment)
            after = moved is not None and len(request) - len(talk) + conversation_index >= shared
            for ordinal, element in enumerate(elements):
                size = len(element.encode())
                change_bytes += size
                moved_bytes += size if after else 0
                key = (conversation_index, ordinal, element)
                if key not in seen:
                    seen.add(key)
                    result.unique_change_bytes += size
                    _note_diff(result, element, size)
        result.requests.append(
            RequestBytes(
                reuse.total_bytes,
                reuse.reused_bytes,
                sum(len(segment.data) for segment in previous),
                moved,
                change_bytes,
                moved_bytes,
            )
        )
        previous = request


_ID = re.compile(r'id="[^"]*:([^":]+)"')


def _note_diff(result: WireResult, element: str, size: int) -> None:
    if not element.startswith(('<context-diff', '<pyai:context_diff')) or (match := _ID.search(element)) is None:
        return
    name = match[1]
    result.largest_diff[name] = max(result.largest_diff.get(name, 0), size)


def summary(result: WireResult, *, per_request: bool = True) -> dict[str, Any]:
    """The conversation's figures as JSON-able data, with each request's bytes unless `per_request` is false."""
    figures = {
        'path': result.path,
        'policy': result.policy,
        'delivery': result.delivery,
        'requests': len(result.requests),
        'body_bytes': result.body_bytes,
        'segment_bytes': result.total,
        'reused_bytes': result.total - result.uncached,
        'uncached_bytes': result.uncached,
        'min_reuse_percent': round(result.min_reuse, 3),
        'prefix_moves': [{'request': r, 'segment': s, 'kind': k} for r, s, k in result.moves],
        'change_bytes_unique': result.unique_change_bytes,
        'change_bytes_carried': result.carried_change_bytes,
        'largest_diff_bytes': result.largest_diff,
    }
    if per_request:
        figures['per_request'] = [
            {'total': r.total, 'reused': r.reused, 'uncached': r.uncached} for r in result.requests
        ]
    return figures
