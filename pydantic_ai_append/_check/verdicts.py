"""The checker's verdicts: a cassette's provider requests grouped into conversations, each judged on its prefix.

`check_cassette` picks the requests to the provider APIs `_wire.segments` reads (Anthropic Messages, OpenAI Chat
Completions and Responses, the Chat Completions of Mistral, Groq and Hugging Face, Cohere's v2 Chat, Gemini's
`generateContent`, Bedrock's Converse) by their path, splits each into cache-order segments (`_wire.segments`),
resolves OpenAI Responses `previous_response_id` chains and `conversation`s from the recorded replies and
`POST /v1/conversations` calls (`_wire.conversation`), and groups the requests into conversations: per cassette, API
and model, in cassette order. Each request is judged on its segments and on the settings its provider documents as
part of the cache (`_wire.cache_rules`), and the verdicts are given as `reports`. The command line around it is
`cli`.

One model may hold several conversations in one cassette (parametrized runs, sub-agents, a test that starts over).
A request joins the most recent conversation of its API and model whose last request it extends byte for byte.
If it extends none, a request with no history (no assistant turn, tool call or tool result, no
`previous_response_id`) starts a new conversation; any other request is the next request of the conversation it
shares the longest prefix with (the most recent on a tie), and breaks that conversation's prefix. A request whose
`previous_response_id` names a reply the cassette doesn't hold, or whose `conversation` names one the cassette holds
nothing of, starts a new conversation too: there is nothing to compare it with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from .._wire.cache_rules import setting_change
from .._wire.causes import Cause, explain
from .._wire.conversation import WireConversation, continued, reply_payloads, starts_conversation
from .._wire.segments import (
    CACHE_MARKER_KEYS,
    Api,
    Segment,
    api_of,
    common_prefix_length,
    divergence_message,
    model_of,
    parse_body,
    segments,
)
from .._wire.usage import PROVIDERS, ProviderUsage, disagreement, reply_usage
from .cassettes import CassetteError, Interaction
from .reports import CassetteReport, ConversationReport, Divergence, NewWindow, RequestVerdict


@dataclass
class _Conversation:
    """One conversation being judged, request by request; `report` gives its `ConversationReport`."""

    api: Api
    """The provider API."""

    model: str
    """The `model` of its request bodies (empty if they name none)."""

    number: int
    """Its position among the cassette's conversations, from 0, by first request."""

    last: list[Segment] = field(default_factory=list[Segment])
    """The segments of its last request, which the next one must start with."""

    last_request: dict[str, Any] = field(default_factory=dict[str, Any])
    """Its last request body, parsed: the settings the next one is compared with."""

    last_update: int = -1
    """The interaction of its last request: of two conversations a request extends as far, the later one takes it."""

    interactions: list[int] = field(default_factory=list[int])
    """The cassette interactions of its requests, in order."""

    reused_bytes: int = 0
    """Segment bytes its requests repeat, from the start, of the request before them."""

    total_bytes: int = 0
    """Segment bytes of all its requests."""

    new_windows: list[int] = field(default_factory=list[int])
    """Requests that moved the prefix where an `--allow-new-window` option allowed it."""

    divergences: list[Divergence] = field(default_factory=list[Divergence])
    """Requests that broke the prefix, in order."""

    requests: list[RequestVerdict] = field(default_factory=list[RequestVerdict])
    """Each request's verdict."""

    marked: bool = False
    """Whether its last request marks a cache breakpoint (Anthropic's `cache_control`, Bedrock's `cachePoint`), which
    a cache read on those APIs needs."""

    def add(
        self,
        interaction: int,
        body: tuple[list[Segment], dict[str, Any], bool],
        usage: ProviderUsage | None,
        new_windows: Collection[int],
    ) -> None:
        """Judge the next request: its segments, its parsed body and whether it marks a cache breakpoint."""
        current, request, marked = body
        index = len(self.interactions)
        shared = common_prefix_length(self.last, current)
        moved = setting_change(self.api, self.last_request, request, self.last) if index else None
        # A setting's point is where the provider stops reusing the cache; a byte change before it comes first.
        if moved is not None and moved.segment < shared:
            shared = moved.segment
        else:
            moved = None
        if shared < len(self.last):
            if index in new_windows:
                self.new_windows.append(index)
            elif moved is not None:
                message, field = moved.message(index, self.last), moved.setting.field
                cause = Cause(
                    'setting',
                    f'`{field}` changed: {moved.setting.rule} when it changes',
                    f'keep `{field}` the same through a conversation: set it on the agent, not per run or request',
                )
                self.divergences.append(Divergence(index, interaction, shared, 'setting', message, field, cause))
            else:
                self.diverged(index, interaction, current, shared)
        reused = sum(len(segment.data) for segment in current[:shared])
        total = sum(len(segment.data) for segment in current)
        kept = shared == len(self.last)
        # On Anthropic and Bedrock a cache read needs a breakpoint: the previous request's, over a prefix this one
        # repeats whole.
        covered = self.marked and kept
        found = (
            disagreement(
                self.api,
                usage,
                reused_bytes=reused,
                total_bytes=total,
                first=not index,
                kept=kept,
                cache_control=covered,
            )
            if usage is not None
            else None
        )
        self.requests.append(RequestVerdict(index, interaction, reused, total, usage, found))
        self.reused_bytes += reused
        self.total_bytes += total
        self.interactions.append(interaction)
        self.last, self.last_request, self.last_update, self.marked = current, request, interaction, marked

    def diverged(self, index: int, interaction: int, current: list[Segment], shared: int) -> None:
        """Note that request `index` breaks the prefix at segment `shared`, with why where the requests tell it."""
        message = divergence_message(index, self.last, current, shared)
        # Imported here: it prices through Pydantic AI, which a cassette that keeps its prefix never needs.
        from .._shared.prices import reads_discounted

        discounted = reads_discounted(PROVIDERS[self.api], self.model or None)
        cause = explain(index, self.last, current, shared, reads_discounted=discounted)
        self.divergences.append(Divergence(index, interaction, shared, self.last[shared].kind, message, cause=cause))

    def report(self, file: Path) -> ConversationReport:
        return ConversationReport(
            file,
            self.number,
            self.api,
            self.model,
            tuple(self.interactions),
            self.reused_bytes,
            self.total_bytes,
            tuple(self.new_windows),
            tuple(self.divergences),
            tuple(self.requests),
        )


_CONVERSATIONS = re.compile(r'/v1/conversations(?:/(?P<id>[^/]+)/items)?$')
"""The paths of the calls that create an OpenAI conversation, or add items to one."""

_RESPONSES: Api = 'openai-responses'


def _add_conversation_items(interaction: Interaction, resolver: WireConversation) -> None:
    """Note the items a `POST /v1/conversations` or `.../items` call added, if `interaction` is one that succeeded."""
    match = _CONVERSATIONS.search(interaction.path)
    reply = interaction.response_body() if interaction.method == 'POST' and match is not None else None
    payloads = reply_payloads(reply) if reply is not None else []
    # A call that succeeded replies with the conversation, or with the list of the items it added; an error added none.
    succeeded = bool(payloads) and payloads[0].get('object') in ('conversation', 'list')
    conversation = (match['id'] or payloads[0].get('id')) if match is not None and succeeded else None
    if not isinstance(conversation, str):
        return
    try:
        request: object = json.loads(interaction.request_body())
    except (CassetteError, ValueError):
        request = None  # The SDK may send no body for a conversation created empty.
    resolver.add_conversation_items(
        conversation, cast('dict[str, object]', request).get('items') if isinstance(request, dict) else None
    )


def _reply(interaction: Interaction, api: Api) -> bytes | None:
    """The recorded reply, if it can be read: a Responses reply the conversation needs must be; others only say usage."""
    try:
        return interaction.response_body()
    except CassetteError:
        if api == _RESPONSES:
            raise
        return None


def _conversation_for(
    conversations: list[_Conversation], api: Api, model: str, current: list[Segment], starts: bool
) -> _Conversation | None:
    """The conversation a request belongs to, or `None` if it starts a new one."""
    candidates = sorted(
        (c for c in conversations if c.api == api and c.model == model), key=lambda c: c.last_update, reverse=True
    )
    index = continued([c.last for c in candidates], current, starts=starts)
    return candidates[index] if index is not None else None


def check_cassette(
    file: Path, interactions: Iterable[Interaction], new_windows: Sequence[NewWindow] = ()
) -> CassetteReport:
    """Group a cassette's provider requests into conversations and check that each keeps its prefix.

    Args:
        file: The cassette, for the report.
        interactions: Its interactions, in order.
        new_windows: Requests allowed to move the prefix.

    Returns:
        The report.

    Raises:
        CassetteError: If a request body to one of the APIs is not a JSON object, or a body can't be decoded.
    """
    conversations: list[_Conversation] = []
    resolvers: dict[Api, WireConversation] = {}
    other = 0
    for interaction in interactions:
        api = api_of(interaction.method, interaction.path, interaction.user_agent)
        if api is None:
            if _RESPONSES not in resolvers:
                resolvers[_RESPONSES] = WireConversation(_RESPONSES)
            _add_conversation_items(interaction, resolvers[_RESPONSES])
            other += 1
            continue
        body = interaction.request_body()
        try:
            request = parse_body(api, body)
        except (ValueError, TypeError):
            raise CassetteError(
                f'interaction {interaction.index} ({interaction.method} {interaction.uri}): the request body is not a '
                f'JSON object: {body[:80]!r}',
                file,
            ) from None
        resolver = resolvers.setdefault(api, WireConversation(api))
        resolved = resolver.resolve(body)
        current = resolved if resolved is not None else segments(api, body)
        model = model_of(interaction.path, request)
        conversation = _conversation_for(conversations, api, model, current, starts_conversation(request, resolved))
        if conversation is None:
            conversation = _Conversation(api, model, len(conversations))
            conversations.append(conversation)
        allowed = {w.request for w in new_windows if w.applies(file, conversation.number, w.request)}
        reply = _reply(interaction, api)
        usage = reply_usage(api, reply) if reply is not None else None
        marked = any(f'"{key}"'.encode() in body for key in CACHE_MARKER_KEYS[api])
        conversation.add(interaction.index, (current, request, marked), usage, allowed)
        if api == 'openai-responses' and reply is not None:
            resolver.add_response(current, reply)
    return CassetteReport(file, tuple(c.report(file) for c in conversations), other)
