"""The fake provider's OpenAI Chat Completions replies: a `chat.completion`, or its chunks when streamed.

Chat Completions has no compaction, so a reply is the scripted turn alone, with the prompt cache's use in
`usage.prompt_tokens_details.cached_tokens`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ._replies import CREATED, Reply, encode, halves, output_tokens, sse, tool_arguments
from ._script import Text, ToolCalls, Turn
from .caching import CacheUse

__all__ = ('render_chat',)


def render_chat(index: int, body_json: Mapping[str, Any], turn: Turn, stream: bool, use: CacheUse) -> tuple[str, Reply]:
    """The id and the reply of request `index`, answering with `turn`."""
    completion_id = f'chatcmpl-fake-{index}'
    model = str(body_json.get('model', 'fake'))
    usage = _usage(use, output_tokens(turn))
    calls = [
        (f'call_fake_{index}_{position}', name, tool_arguments(arguments))
        for position, (name, arguments) in enumerate(turn.calls if isinstance(turn, ToolCalls) else ())
    ]
    tool_calls = [
        {'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': arguments}}
        for call_id, name, arguments in calls
    ]
    finish_reason = 'tool_calls' if tool_calls else 'stop'
    base = {'id': completion_id, 'created': CREATED, 'model': model}
    if not stream:
        message: dict[str, Any] = {
            'role': 'assistant',
            'content': turn.text if isinstance(turn, Text) else None,
            'refusal': None,
        }
        if tool_calls:
            message['tool_calls'] = tool_calls
        choice = {'index': 0, 'message': message, 'finish_reason': finish_reason, 'logprobs': None}
        return completion_id, Reply(
            200, encode({**base, 'object': 'chat.completion', 'choices': [choice], 'usage': usage})
        )

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        choice = {'index': 0, 'delta': delta, 'finish_reason': finish, 'logprobs': None}
        return sse(None, {**base, 'object': 'chat.completion.chunk', 'choices': [choice]})

    events = [chunk({'role': 'assistant', 'content': ''})]
    if isinstance(turn, Text):
        events += [chunk({'content': piece}) for piece in halves(turn.text)]
    for position, (call_id, name, arguments) in enumerate(calls):
        opening = {'index': position, 'id': call_id, 'type': 'function', 'function': {'name': name, 'arguments': ''}}
        events.append(chunk({'tool_calls': [opening]}))
        events += [
            chunk({'tool_calls': [{'index': position, 'function': {'arguments': piece}}]})
            for piece in halves(arguments)
        ]
    events.append(chunk({}, finish_reason))
    if cast('Mapping[str, Any]', body_json.get('stream_options') or {}).get('include_usage'):
        events.append(sse(None, {**base, 'object': 'chat.completion.chunk', 'choices': [], 'usage': usage}))
    events.append(sse(None, '[DONE]'))
    return completion_id, Reply(200, events=events)


def _usage(use: CacheUse, completion_tokens: int) -> dict[str, Any]:
    """A reply's `usage`: the prompt as the prompt cache counted it, and the turn's tokens."""
    return {
        'prompt_tokens': use.prompt,
        'completion_tokens': completion_tokens,
        'total_tokens': use.prompt + completion_tokens,
        'prompt_tokens_details': {'cached_tokens': use.read, 'audio_tokens': 0},
        'completion_tokens_details': {
            'reasoning_tokens': 0,
            'audio_tokens': 0,
            'accepted_prediction_tokens': 0,
            'rejected_prediction_tokens': 0,
        },
    }
