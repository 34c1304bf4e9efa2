"""The provider's verdict on each request, in tokens and dollars, against the prefix the window kept.

After each response, [`observe`][pydantic_ai_append._telemetry.observe.observe] reads the cache use the provider reported
(Pydantic AI's `RequestUsage`: `cache_read_tokens`, `cache_write_tokens`, the rest of `input_tokens` uncached) and
compares the read with the tokens the plugin expected the provider to read: the whole previous request, in the
provider's own count (its `input_tokens`), when the same model served it and this request opened no window, as the
window keeps that request as a prefix of this one. A shortfall gets a `pydantic_ai_append.cache.shortfall` event, with
a reason where one can be told: `ttl_expired` (idle past the retention Pydantic AI resolves), `no_breakpoint` (a model
that caches only up to breakpoints, with none at the tail), `below_minimum` (breakpoints set and nothing cached),
`unexpected` (the prefix moved while the cache was warm), `unknown` (no retention known to tell those two apart): the
reason names of core's `pydantic_ai.cache.collapse_reason` where they mean the same.

The request is priced through `ModelResponse.cost()` (`genai-prices`), and so is the same request as rewrite mode
would have sent it: where this request delivered a change, rewrite mode would have moved the prefix at the changed
block, so it reads from cache at most the tools and the instructions before that block (estimated at 4 bytes a token,
as no tokenizer is at hand; with Pydantic AI's announcement of `<system>` blocks only where the model's profile, not the
plugin, asks for it), and writes or re-sends the rest. And it is priced as it would have been sent had no window
been opened by price or expiry: carrying every change those windows dropped (the new window's carrier says how many
tokens), and reading the whole previous request where one opened. The figures go into the response's metadata, so
[`summary`][pydantic_ai_append._telemetry.summary.summary] totals a conversation from its history alone, and what
Pydantic AI's own span of the request doesn't already say (the savings, a shortfall and its reason) on a span.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.profiles import prompt_cache_outlook
from pydantic_ai.settings import merge_model_settings

from .._compat import CORE_ANNOUNCEMENT
from .._encoding import stated_chars
from .._history import RECORD_KEY, opens_window, request_records
from .._shared.schedule import CHARS_PER_TOKEN
from .summary import costs, figures_of

DROPPED_KEY = 'pydantic_ai_append_dropped'
"""The key of a new window's carrier `metadata` that says how many tokens of changes a window opened by price or expiry
dropped: never reopening, every later request would have read them."""

_TAIL_SETTINGS = ('anthropic_cache', 'anthropic_cache_messages')
"""Settings that place a breakpoint at the tail of the request, where the next request reads the whole of it."""


def observe(ctx: RunContext[Any], request_context: ModelRequestContext, response: ModelResponse) -> ModelResponse:
    """Put the provider's verdict on `response` on a span, and its figures in `response`'s metadata."""
    usage = response.usage
    history = ctx.messages
    previous = next((message for message in reversed(history) if isinstance(message, ModelResponse)), None)
    reported = bool(usage.cache_read_tokens or usage.cache_write_tokens)
    if response.provider_url is None and not reported:
        return response  # a model that serves no provider, such as `FunctionModel`: there is nothing to report
    model = served_model(request_context.model, response)
    # A read is expected only where the cache is known to be in play, as a provider may report no cache use at all.
    judged = (
        reported
        or _needs_breakpoints(model)
        or bool(previous and (previous.usage.cache_read_tokens or previous.usage.cache_write_tokens))
    )
    request = history[-1] if history and isinstance(history[-1], ModelRequest) else None
    expected = 0
    if (
        judged
        and request is not None
        and previous is not None
        and (previous.provider_name, previous.model_name) == (response.provider_name, response.model_name)
        and not opens_window(request)
    ):
        expected = min(expected_read(response, previous.usage.input_tokens), usage.input_tokens)
    rewrite_read = min(usage.cache_read_tokens, _head_tokens(request_context, model, request)) if request else 0
    figures = {'expected_read_tokens': expected, 'rewrite_read_tokens': rewrite_read}
    if request is not None and previous is not None:
        figures.update(_never_reopened(response, history, previous))
    metadata = dict(response.metadata or {})
    metadata[RECORD_KEY] = figures
    response = replace(response, metadata=metadata)
    _report(ctx, request_context, response, model, expected)
    return response


def _report(
    ctx: RunContext[Any],
    request_context: ModelRequestContext,
    response: ModelResponse,
    model: Model | None,
    expected: int,
) -> None:
    """Put on a span what only the plugin can tell of `response`: what it saved, and any shortfall of the `expected`
    read. Pydantic AI's own span of the request holds its tokens, its cost (`operation.cost`) and the tokens it expects
    read back (`pydantic_ai.cache.established_tokens`), so they aren't repeated.
    """
    attributes: dict[str, Any] = {}
    said: list[str] = []
    priced = costs(response)
    if priced is not None:
        attributes['pydantic_ai_append.cost.rewrite_usd'] = priced[1]
        attributes['pydantic_ai_append.cost.saving_usd'] = priced[1] - priced[0]
        attributes['pydantic_ai_append.cost.never_reopened_usd'] = priced[2]
        said.append(f'saved ${priced[1] - priced[0]:.6f} against rewrite mode')
    read = response.usage.cache_read_tokens
    reason = _reason(model, request_context, response) if expected > read else None
    if reason is not None:
        attributes['pydantic_ai_append.cache.missed_tokens'] = expected - read
        attributes['pydantic_ai_append.cache.shortfall_reason'] = reason
        said.append(f'read {expected - read} tokens less than expected ({reason})')
    if not attributes:
        return  # a model `genai-prices` can't price, read as expected: nothing to add to Pydantic AI's span
    message = f'append_instructions cache: {", ".join(said)}'
    with ctx.tracer.start_as_current_span(
        'append_instructions cache', attributes={'logfire.msg': message, **attributes}
    ) as span:
        if reason is not None:
            span.add_event(
                'pydantic_ai_append.cache.shortfall',
                {'expected_tokens': expected, 'cache_read_tokens': read, 'reason': reason},
            )


def _never_reopened(
    response: ModelResponse, history: Sequence[ModelMessage], previous: ModelResponse
) -> dict[str, int]:
    """What the request would have sent and read had no window been opened by price or expiry: it would carry every
    change those windows dropped (less what their prefixes grew by), and where it opened one, read the whole previous
    request as it would have been.
    """
    before = figures_of(previous).get('kept_tokens', 0)
    request = history[-1]
    assert isinstance(request, ModelRequest), 'a response answers a request'
    carriers = [part.metadata for part in request.parts if isinstance(part, SystemPromptPart) and part.metadata]
    dropped = sum(int(metadata.get(DROPPED_KEY, 0)) for metadata in carriers)
    if dropped:
        # The new window states in its prefix what the changes it dropped said: never reopening, that is not sent.
        records = [
            record for message in history if isinstance(message, ModelRequest) for record in request_records(message)
        ]
        stated = [stated_chars(record) for record in records if record.get('kind') == 'baseline'][-2:]
        dropped = max(dropped - (stated[-1] - stated[0]) // CHARS_PER_TOKEN, 0)
    if not before and not dropped:
        return {}
    usage = response.usage
    read = usage.cache_read_tokens + before + dropped
    if dropped:
        read = max(usage.cache_read_tokens, expected_read(response, previous.usage.input_tokens + before))
    return {'kept_tokens': before + dropped, 'kept_read_tokens': min(read, usage.input_tokens + before + dropped)}


def expected_read(response: ModelResponse, previous: int) -> int:
    """What the provider reads of a previous request of `previous` tokens: all of it, or OpenAI's steps of it."""
    return openai_steps(previous) if response.provider_name == 'openai' else previous


def openai_steps(tokens: int) -> int:
    """The part of a prefix of `tokens` OpenAI reads from its cache: 1,024 tokens and up, by 128."""
    return 0 if tokens < 1024 else tokens - (tokens - 1024) % 128


def _head_tokens(request_context: ModelRequestContext, model: Model | None, request: ModelRequest) -> int:
    """The tokens before the first block `request` delivers a change to, as rewrite mode would have moved it there
    (`model` served it, where that can be told).
    """
    changed = [record['id'] for record in request_records(request) if record.get('kind') == 'delta']
    if not changed or opens_window(request):
        # No change delivered, or a new window's (which may be older than the previous request): rewrite mode is
        # taken to read what this request read.
        return 1 << 62
    params = request_context.model_request_parameters
    tools = [(tool.name, tool.description, tool.parameters_json_schema) for tool in params.tool_defs.values()]
    prefix = _announcement(model) + ''.join(part.content for part in params.instruction_parts or [])
    # A block absent from the prefix (a named route held while absent) would be added after all of it.
    starts = [at for block_id in changed if (at := prefix.find(f'<context id="{block_id}">')) >= 0]
    return (len(json.dumps(tools)) + min(starts, default=len(prefix))) // CHARS_PER_TOKEN


def _announcement(model: Model | None) -> str:
    """The announcement of `<system>` blocks Pydantic AI opens the model's system prompt with in rewrite mode too: where
    its profile announces from the first request unasked (Claude Sonnet 4.6 with no inline system messages). Where only
    the capability asks for it, rewrite mode, delivering no `<system>` block, would not have it.
    """
    profile = cast('dict[str, object]', model.profile if model is not None else {})
    if CORE_ANNOUNCEMENT is None or not announces_unasked(profile):
        return ''
    return CORE_ANNOUNCEMENT(system_role=False, sealed=bool(profile.get('needs_sealed_system_blocks')))


def announces_unasked(profile: Mapping[str, object]) -> bool:
    """Whether Pydantic AI announces `<system>` blocks to a model of `profile` from the first request unasked (its
    `default_framing_announcement`, as for Claude Sonnet 4.6 with no inline system messages), so in rewrite mode too.
    """
    return profile.get('default_framing_announcement') == 'always' and not profile.get('supports_inline_system_prompts')


def fallback_of(model: Model) -> FallbackModel | None:
    """The `FallbackModel` that `model` is or wraps (`ConcurrencyLimitedModel`, any `WrapperModel`), if any: such a
    wrapper forwards `profile` to it, which has none, so its members are asked instead.
    """
    while isinstance(model, WrapperModel):
        model = model.wrapped
    return model if isinstance(model, FallbackModel) else None


def served_model(model: Model, response: ModelResponse) -> Model | None:
    """The model that served `response`: `model`, or the member of a `FallbackModel` that did, if it can be told."""
    fallback = fallback_of(model)
    if fallback is None:
        return model
    members = [served_model(member, response) for member in fallback.models]
    return next((member for member in members if member and member.model_name == response.model_name), None)


def _needs_breakpoints(model: Model | None) -> bool:
    """Whether the model caches only where the request asks it to (Anthropic), so saying nothing is a verdict too."""
    return model is not None and bool(model.profile.get('supports_cache', False))


def _reason(model: Model | None, request_context: ModelRequestContext, response: ModelResponse) -> str:
    if model is None:
        return 'unknown'
    settings = merge_model_settings(model.settings, request_context.model_settings) or {}
    outlook = prompt_cache_outlook(
        request_context.messages,
        profile=model.profile,
        retention=model.resolve_cache_retention(settings),
        now=response.timestamp,
    )
    if outlook == 'cold':
        return 'ttl_expired'
    if _needs_breakpoints(model):
        raw = cast('dict[str, object]', settings)
        cache = raw.get('cache')
        tail = any(raw.get(key) for key in _TAIL_SETTINGS) or (
            bool(cache) and not (isinstance(cache, dict) and cast('dict[str, object]', cache).get('messages') is False)
        )
        if not tail:
            return 'no_breakpoint'
        if not response.usage.cache_read_tokens and not response.usage.cache_write_tokens:
            return 'below_minimum'
    return 'unexpected' if outlook == 'warm' else 'unknown'
