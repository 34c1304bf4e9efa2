"""The fake provider's Google Gemini replies: a `GenerateContentResponse`, or its chunks when streamed.

Gemini names the model and the method in the request path, not the body:
`POST /v1beta/models/{model}:generateContent` answers with one JSON response, and
`POST /v1beta/models/{model}:streamGenerateContent?alt=sse` with server-sent events, each a whole response that
carries the next piece of the reply (https://ai.google.dev/api/generate-content). This is what `google-genai` sends
for Pydantic AI's `GoogleModel`. Gemini has no compaction, so a reply is the scripted turn alone, with the prompt
cache's use in `usageMetadata` (`cachedContentTokenCount` when its implicit cache hits).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from ._replies import Reply, encode, halves, output_tokens
from ._script import ToolCalls, Turn
from .caching import CacheUse

__all__ = ('GeminiRoute', 'gemini_error', 'gemini_route', 'render_gemini')

_PATH = re.compile(r'/v1(?:alpha|beta)?/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)')
"""A Gemini API request path; the SDK sends `v1beta` unless told another API version."""


@dataclass(frozen=True)
class GeminiRoute:
    """What a Gemini request's path says about it."""

    model: str
    """The model named in the path, e.g. `gemini-2.5-flash`."""

    stream: bool
    """Whether the reply is streamed (`streamGenerateContent`)."""


def gemini_route(path: str) -> GeminiRoute | None:
    """The route of a Gemini request path (its query already cut off), or `None` for any other path."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    return GeminiRoute(match['model'], match['method'] == 'streamGenerateContent')


def gemini_error(status: int, message: str) -> dict[str, Any]:
    """An error body the way the Gemini API sends one, which `google-genai` raises as a `ClientError`."""
    return {
        'error': {
            'code': status,
            'message': message,
            'status': 'INVALID_ARGUMENT' if status == 400 else HTTPStatus(status).name,
        }
    }


def render_gemini(index: int, route: GeminiRoute, turn: Turn, use: CacheUse) -> tuple[str, Reply]:
    """The id and the reply of request `index`, answering with `turn`."""
    response_id = f'fake-gemini-{index:04d}'
    turn_tokens = output_tokens(turn)
    if isinstance(turn, ToolCalls):
        # A call's `id` is optional in Gemini's `FunctionCall`, and Pydantic AI makes up a random one when it is
        # missing; the fake gives one, which comes back with the result, so request bodies don't vary between runs.
        pieces = [
            {'functionCall': {'id': f'call_fake_{index}_{position}', 'name': name, 'args': dict(arguments)}}
            for position, (name, arguments) in enumerate(turn.calls)
        ]
    else:
        # Streamed text comes in pieces, each in a chunk of its own; a JSON reply has it in one part.
        pieces = [{'text': piece} for piece in (halves(turn.text) if route.stream else [turn.text])]
    finish = {'finishReason': 'STOP', 'index': 0}
    base = {'modelVersion': route.model, 'responseId': response_id}
    if not route.stream:
        candidate = {'content': {'parts': pieces, 'role': 'model'}, **finish}
        return response_id, Reply(
            200, encode({'candidates': [candidate], 'usageMetadata': _usage(use, turn_tokens), **base})
        )
    if isinstance(turn, ToolCalls):
        # Function calls are never split: they come whole, together in one chunk.
        chunks: list[list[dict[str, Any]]] = [pieces]
    else:
        chunks = [[piece] for piece in pieces] or [[{'text': ''}]]
    events: list[bytes] = []
    for position, parts in enumerate(chunks):
        last = position == len(chunks) - 1
        candidate = {'content': {'parts': parts, 'role': 'model'}, **(finish if last else {'index': 0})}
        # Every chunk reports the prompt; only the last counts the reply's tokens.
        usage = _usage(use, turn_tokens if last else None)
        events.append(_event({'candidates': [candidate], 'usageMetadata': usage, **base}))
    return response_id, Reply(200, events=events)


def _usage(use: CacheUse, candidates_tokens: int | None) -> dict[str, Any]:
    """A response's `usageMetadata`: the prompt as the prompt cache counted it, and the reply's tokens if known."""
    usage: dict[str, Any] = {'promptTokenCount': use.prompt}
    if candidates_tokens is not None:
        usage['candidatesTokenCount'] = candidates_tokens
    usage['totalTokenCount'] = use.prompt + (candidates_tokens or 0)
    if use.read:
        # Gemini leaves the field out when nothing was read from the cache.
        usage['cachedContentTokenCount'] = use.read
        usage['cacheTokensDetails'] = [{'modality': 'TEXT', 'tokenCount': use.read}]
    usage['promptTokensDetails'] = [{'modality': 'TEXT', 'tokenCount': use.prompt}]
    return usage


def _event(response: Mapping[str, Any]) -> bytes:
    """One server-sent event of a Gemini stream: a `data:` line and a blank line, each ended by CRLF as Gemini sends."""
    return b'data: ' + json.dumps(response, separators=(',', ':')).encode() + b'\r\n\r\n'
