"""The span a `WireVerifier` records each request it checks in: its name, its message and its attributes.

They are the verifier's telemetry, named as `docs/wire-verification.md` lists them, through `logfire-api` (a no-op
unless Logfire is configured). The verifier sets the attributes that depend on the check (`segments`,
`reused_segments`, `compared`, `divergent_segment`, `divergent_kind`) as it goes.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import logfire_api

from .._wire.conversation import conversation_id
from .._wire.segments import Api

WIRE = 'pydantic_ai_append.wire.'
"""The prefix of the names of the attributes of each request's span."""

_SPAN_MESSAGE = (
    'wire prefix {pydantic_ai_append.wire.api} {pydantic_ai_append.wire.model} '
    'request {pydantic_ai_append.wire.request_index}'
)
"""The template of each request's span message, e.g. `wire prefix openai-chat gpt-5.2 request 1`: Logfire fills a
placeholder with dots in it from the attribute of that whole name."""

_SPAN_NAME = 'wire prefix {api} {model} request {request_index}'
"""The name of each request's span: the same for every request, as a template's is, in the words the docs use."""


def request_span(api: Api, model: str, index: int) -> AbstractContextManager[logfire_api.LogfireSpan]:
    """The span of request `index` of a chain to `api` and `model`, to check it in."""
    # `Any`: pyright checks the values unpacked into `span` against its own keywords (`_tags`, `_links`) too.
    attributes: dict[str, Any] = {WIRE + 'api': api, WIRE + 'model': model, WIRE + 'request_index': index}
    return logfire_api.span(_SPAN_MESSAGE, _span_name=_SPAN_NAME, **attributes)


def note_unknown_context(span: logfire_api.LogfireSpan, request: dict[str, Any]) -> None:
    """Name the reply (or conversation) a request builds on that was never seen or was forgotten on its span."""
    previous_id = request.get('previous_response_id')
    if previous_id is not None:
        span.set_attribute(WIRE + 'unknown_previous_response_id', str(previous_id))
    else:
        span.set_attribute(WIRE + 'unknown_conversation', str(conversation_id(request.get('conversation'))))
