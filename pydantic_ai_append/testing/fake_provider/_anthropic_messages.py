"""The fake provider's Anthropic Messages replies: a `message`, or its events when streamed.

A compacting reply opens with a `compaction` block before the scripted turn's, and reports the compaction's own
tokens in `usage.iterations`, as the real API does; any other reply reports the prompt cache's use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._compaction import anthropic_live_context
from ._replies import Reply, encode, halves, input_tokens, output_tokens, sse, tool_arguments
from ._script import Text, Turn
from .caching import CacheUse

__all__ = ('render_anthropic',)

_NO_CACHE = {'cache_creation_input_tokens': 0, 'cache_read_input_tokens': 0}


def render_anthropic(
    index: int, body_json: Mapping[str, Any], turn: Turn, stream: bool, summary: str | None, use: CacheUse
) -> tuple[str, Reply]:
    """The id and the reply of request `index`, answering with `turn`, after a compaction to `summary` if given."""
    message_id = f'msg_fake_{index:04d}'
    turn_tokens = output_tokens(turn)
    if isinstance(turn, Text):
        content: list[dict[str, Any]] = [{'type': 'text', 'text': turn.text}]
        stop_reason = 'end_turn'
    else:
        content = [
            {'type': 'tool_use', 'id': f'toolu_fake_{index}_{position}', 'name': name, 'input': dict(arguments)}
            for position, (name, arguments) in enumerate(turn.calls)
        ]
        stop_reason = 'tool_use'
    if summary is not None:
        compaction = {'type': 'compaction', 'content': summary}
        content.insert(0, compaction)
        live_context = anthropic_live_context(body_json)
        tokens, iterations = _compaction_usage(body_json, live_context, compaction, turn_tokens)
        usage: dict[str, Any] = {'input_tokens': tokens, **_NO_CACHE, 'iterations': iterations}
    else:
        usage = _usage(use)
    usage['output_tokens'] = turn_tokens
    message = {
        'id': message_id,
        'type': 'message',
        'role': 'assistant',
        'model': str(body_json.get('model', 'fake')),
        'content': content,
        'stop_reason': stop_reason,
        'stop_sequence': None,
        'usage': usage,
    }
    if not stream:
        return message_id, Reply(200, encode(message))
    return message_id, Reply(200, events=_events(message))


def _usage(use: CacheUse) -> dict[str, Any]:
    """The input side of an Anthropic reply's usage: what the prompt cache read, wrote and left."""
    return {
        'input_tokens': use.uncached,
        'cache_creation_input_tokens': use.written_5m + use.written_1h,
        'cache_read_input_tokens': use.read,
        'cache_creation': {'ephemeral_5m_input_tokens': use.written_5m, 'ephemeral_1h_input_tokens': use.written_1h},
        'service_tier': 'standard',
    }


def _compaction_usage(
    body_json: Mapping[str, Any], live_context: Mapping[str, Any], compaction: Mapping[str, Any], turn_tokens: int
) -> tuple[int, list[dict[str, Any]]]:
    """The top-level input tokens of a compacting reply, and its `usage.iterations`."""
    # The turn is sampled from the summary alone, and the top-level usage is that pass's: Anthropic reports the
    # compaction's own tokens only in `iterations`.
    tokens = input_tokens({**body_json, 'messages': [{'role': 'assistant', 'content': [compaction]}]})
    summary_tokens = len(compaction['content']) // 4
    return tokens, [
        {
            'type': 'compaction',
            'input_tokens': input_tokens(live_context),
            'output_tokens': summary_tokens,
            **_NO_CACHE,
        },
        {'type': 'message', 'input_tokens': tokens, 'output_tokens': turn_tokens, **_NO_CACHE},
    ]


def _events(message: Mapping[str, Any]) -> list[bytes]:
    """The stream of `message`: its start, each content block's start, deltas and stop, then its end."""

    def event(kind: str, **data: Any) -> bytes:
        return sse(kind, {'type': kind, **data})

    usage: dict[str, Any] = message['usage']
    opening_usage = {key: value for key, value in usage.items() if key != 'iterations'} | {'output_tokens': 1}
    opening: dict[str, Any] = {**message, 'content': [], 'stop_reason': None, 'usage': opening_usage}
    events = [event('message_start', message=opening)]
    for position, block in enumerate(message['content']):
        start, deltas = _block_stream(block)
        events.append(event('content_block_start', index=position, content_block=start))
        if position == 0:
            # As real streams do, right after the first block starts.
            events.append(event('ping'))
        events += [event('content_block_delta', index=position, delta=delta) for delta in deltas]
        events.append(event('content_block_stop', index=position))
    # A real stream's last usage repeats the input and cache counts, and Pydantic AI reads them from there.
    final_usage = {key: usage[key] for key in (*_NO_CACHE, 'input_tokens', 'output_tokens')}
    if 'iterations' in usage:
        final_usage['iterations'] = usage['iterations']
    stop = {'stop_reason': message['stop_reason'], 'stop_sequence': None}
    events.append(event('message_delta', delta=stop, usage=final_usage))
    events.append(event('message_stop'))
    return events


def _block_stream(block: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """How an Anthropic stream sends one content block: the block it starts with, and its deltas."""
    if block['type'] == 'compaction':
        # The summary comes whole in one delta, after a start event that has none.
        return {**block, 'content': None}, [{'type': 'compaction_delta', 'content': block['content']}]
    if block['type'] == 'text':
        return {'type': 'text', 'text': ''}, [{'type': 'text_delta', 'text': piece} for piece in halves(block['text'])]
    pieces = halves(tool_arguments(block['input']))
    return {**block, 'input': {}}, [{'type': 'input_json_delta', 'partial_json': piece} for piece in pieces]
