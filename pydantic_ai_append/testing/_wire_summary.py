"""A conversation's cache summary from what went over the wire, totalled the way the capability totals history.

`AppendInstructions.cache_summary` reads each `ModelResponse` of a history, with the figures the capability stored in
its metadata. This module makes the same responses from recorded exchanges alone: the usage each reply body reports,
mapped to Pydantic AI's `RequestUsage` as its model classes and `genai-prices` map it, and the figures taken from
the request bodies. The responses then go through the capability's own `summary`, so there is one pricing path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import cast

from pydantic_ai.messages import ModelResponse
from pydantic_ai.profiles import ModelProfile
from pydantic_ai.profiles.anthropic import anthropic_model_profile
from pydantic_ai.profiles.google import google_model_profile
from pydantic_ai.profiles.openai import openai_model_profile
from pydantic_ai.usage import RequestUsage

from .._compat import CORE_ANNOUNCEMENT
from .._history import RECORD_KEY
from .._telemetry.observe import announces_unasked, expected_read
from .._telemetry.summary import CacheSummary, summary
from .._wire.conversation import WireConversation
from .._wire.segments import Api, Segment, canonical, common_prefix_length, model_of
from .._wire.usage import PROVIDERS, merged_usage, reply_holders, usage_counts
from ._capture import WireExchange

_CHANGE = re.compile(r'(?:^|\n|<system[^>]*>)<context(?:-diff)? id="([^"]*)"(?: withdrawn="true")?>')
"""An element delivering a change to a block (a replacement, a diff, a withdrawal), where system-voice text starts."""

_NO_CAP = 1 << 62

_ANNOUNCEMENTS = (
    frozenset(CORE_ANNOUNCEMENT(system_role=False, sealed=sealed) for sealed in (False, True))
    if CORE_ANNOUNCEMENT is not None
    else frozenset[str]()
)
"""The texts Pydantic AI opens the system prompt with to say what `<system>` blocks mean (plain, and for models whose
blocks carry the `verified` attribute); none on 2.58."""

_PROFILES: Mapping[Api, Callable[[str], ModelProfile | None]] = {
    'anthropic': anthropic_model_profile,
    'openai-chat': openai_model_profile,
    'openai-responses': openai_model_profile,
    'gemini': google_model_profile,
}
"""The profile Pydantic AI gives a model of each API whose models may take no inline system messages."""

_MARKS_OMITTED_USAGE = 'unmeasured_requests' in {field.name for field in fields(RequestUsage)}
"""Whether this release of Pydantic AI marks a response whose reply reported no usage, and then can't price it; 2.58
counts it as a response of no tokens, priced at nothing."""


def wire_summary(api: Api, exchanges: Sequence[WireExchange]) -> CacheSummary:
    """The `CacheSummary` of the exchanges of one conversation with one API, in the order they were sent.

    An exchange whose reply holds no JSON object (an empty or cut body, an HTML error page) or is an error object is
    left out, as it is from history: Pydantic AI made no response of it. A reply without usage counts as a request
    of no tokens, as Pydantic AI counts one.
    """
    conversation = WireConversation(api)
    responses: list[ModelResponse] = []
    previous: tuple[list[Segment], ModelResponse] | None = None
    for exchange in exchanges:
        request = conversation.add(exchange.request_body, exchange.response_body)
        response = reply_response(api, exchange.path, exchange.request_body, exchange.response_body)
        if response is None:
            continue
        expected, rewrite = _figures(api, request, previous, response)
        response.metadata = {RECORD_KEY: {'expected_read_tokens': expected, 'rewrite_read_tokens': rewrite}}
        responses.append(response)
        previous = (request, response)
    return summary(responses)


def reply_response(api: Api, path: str, request_body: bytes, response_body: bytes) -> ModelResponse | None:
    """The `ModelResponse` Pydantic AI makes of one exchange's reply, as far as pricing it goes: its usage, model and
    provider; `None` where it makes none (a reply that holds no JSON object, or an error).
    """
    holders = reply_holders(response_body)
    if not holders or any(_is_error(holder) for holder in holders):
        return None
    return _response(api, holders, _requested_model(path, request_body))


def _is_error(holder: dict[str, object]) -> bool:
    # Bedrock says an error in a bare `message` (a JSON reply's, or an exception event's in a stream), which no reply
    # it answers has; the other APIs, in `error`.
    return bool(holder.get('error')) or holder.get('type') == 'error' or isinstance(holder.get('message'), str)


def _requested_model(path: str, body: bytes) -> str | None:
    # A JSON object: `WireConversation.add` has parsed it already.
    return model_of(path, cast('dict[str, object]', json.loads(body))) or None


def _response(api: Api, holders: list[dict[str, object]], requested: str | None) -> ModelResponse:
    """The `ModelResponse` Pydantic AI makes of a reply, as far as pricing it goes; the model is the request's where
    the reply names none (Cohere's), as Pydantic AI's model class then names it.
    """
    names = (holder.get('model', holder.get('modelVersion')) for holder in reversed(holders))  # Gemini's `modelVersion`
    model = next((name for name in names if isinstance(name, str)), requested)
    tier = next((tier for holder in reversed(holders) if isinstance(tier := holder.get('service_tier'), str)), None)
    if reported := merged_usage(holders):
        counts = usage_counts(api, reported)
        counts['cache_write_1h_tokens'] = min(
            counts.get('cache_write_1h_tokens', 0), counts.get('cache_write_tokens', 0)
        )
        usage = replace(RequestUsage(), **counts)
    else:
        # As Pydantic AI records a reply without usage on this release.
        usage = replace(RequestUsage(), **({'unmeasured_requests': 1} if _MARKS_OMITTED_USAGE else {}))
    return ModelResponse(
        parts=[],
        usage=usage,
        model_name=model,
        provider_name=PROVIDERS[api],
        provider_details={'service_tier': tier} if tier else None,
    )


def _figures(
    api: Api, request: list[Segment], previous: tuple[list[Segment], ModelResponse] | None, response: ModelResponse
) -> tuple[int, int]:
    """The tokens `request` was expected to read, and those rewrite mode would have read, as the capability stores
    them: the previous request in the provider's count where `request` starts with all of it byte for byte, and the
    read capped before the first block whose change the added segments deliver.
    """
    usage = response.usage
    if previous is None or common_prefix_length(previous[0], request) < len(previous[0]):
        return 0, usage.cache_read_tokens  # the first request, or a moved prefix: nothing kept, nothing delivered
    earlier, before = previous
    # As the capability does: Anthropic caches only at breakpoints, so reading nothing is a verdict there; OpenAI
    # reports no cache use below its minimum, so a read is expected only once the conversation shows one.
    judged = _needs_breakpoints(api, response.model_name) or any(
        item.cache_read_tokens or item.cache_write_tokens for item in (usage, before.usage)
    )
    expected = 0
    if judged and before.model_name == response.model_name:
        expected = min(expected_read(response, before.usage.input_tokens), usage.input_tokens)
    head = _head_tokens(api, request, request[len(earlier) :], announces_unasked(_profile(api, response.model_name)))
    return expected, min(usage.cache_read_tokens, head)


def _needs_breakpoints(api: Api, model: str | None) -> bool:
    """Whether the model caches only where the request marks it, as the capability asks of the model's profile: every
    Anthropic model, and on Bedrock those whose profile in Pydantic AI says they cache (Claude's and Nova's, at their
    `cachePoint`s).
    """
    return api == 'anthropic' or (api == 'bedrock-converse' and bool(_profile(api, model).get('supports_cache')))


def _profile(api: Api, model: str | None) -> Mapping[str, object]:
    """The profile Pydantic AI gives `model` of `api`, the one the capability reads; empty where it can't be had."""
    if not model:
        return {}
    if api == 'bedrock-converse':
        try:
            # Needs boto3, which a run that called Bedrock has; without it, the cache use the conversation shows decides.
            from pydantic_ai.providers.bedrock import BedrockProvider
        except ImportError:
            return {}
        profile = BedrockProvider.model_profile(model)
    else:
        profile_of = _PROFILES.get(api)
        profile = profile_of(model) if profile_of is not None else None
    return cast('Mapping[str, object]', profile or {})


def _head_tokens(api: Api, request: list[Segment], added: list[Segment], announced: bool) -> int:
    """The tokens of `request` before the first block a change in `added` is to, at 4 bytes a token; with the
    announcement of `<system>` blocks only where rewrite mode would have it too (`announced`).
    """
    changed = {block_id for segment in added for text in _texts(segment) for block_id in _CHANGE.findall(text)}
    if not changed:
        return _NO_CAP  # no change delivered: rewrite mode reads what this request read
    # Where the capability asked for the announcement (`framing_announcement='always'`), rewrite mode, which delivers
    # no `<system>` block to explain, would not have had it.
    prefix = request[: _prefix_length(api, request)]
    head = b''.join(segment.data for segment in prefix if announced or not _announces(segment))
    # The opening as it is in a segment: canonical JSON, with its quotes escaped.
    openings = [canonical(f'<context id="{block_id}">')[1:-1] for block_id in changed]
    # A block absent from the prefix (a named route held while absent) would be added after all of it.
    return min((at for opening in openings if (at := head.find(opening)) >= 0), default=len(head)) // 4


def _announces(segment: Segment) -> bool:
    """Whether the segment is Pydantic AI's announcement of what `<system>` blocks mean, which the capability has it
    send from the first request on a model without inline system messages.
    """
    return any(text in _ANNOUNCEMENTS for text in _texts(segment))


def _prefix_length(api: Api, request: list[Segment]) -> int:
    """How many segments of `request` are its tools and instructions (on a Chat Completions API, its leading system
    messages).
    """
    return next((index for index, segment in enumerate(request) if not _in_prefix(api, segment)), len(request))


def _in_prefix(api: Api, segment: Segment) -> bool:
    if segment.kind in ('tool', 'system', 'instructions'):
        return True
    return api not in ('anthropic', 'openai-responses') and _role(segment) in ('system', 'developer')


def _role(segment: Segment) -> object:
    item: object = json.loads(segment.data)
    return cast('dict[str, object]', item).get('role') if isinstance(item, dict) else None


def _texts(segment: Segment) -> Iterator[str]:
    """Every string in a segment, at any depth."""
    pending: list[object] = [json.loads(segment.data)]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            pending.extend(cast('dict[str, object]', value).values())
        elif isinstance(value, list):
            pending.extend(cast('list[object]', value))
