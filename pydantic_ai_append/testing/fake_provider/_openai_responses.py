"""The fake provider's OpenAI Responses replies: a `response`, its events when streamed, and the compact endpoint's.

A compacting reply has a `compaction` item before the scripted turn's output, whose `encrypted_content` is the
summary in base64 so a test can read it; `POST /v1/responses/compact` answers with the request's user messages and
such an item. The output items of each reply are kept by the prompt cache (`responses_output`), as a later request
can continue it by `previous_response_id`.
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Mapping
from typing import Any, cast

from ._compaction import summarize
from ._replies import CREATED, Reply, encode, halves, input_tokens, output_tokens, sse, tool_arguments
from ._script import Text, Turn
from .caching import CacheUse

__all__ = ('compacted_response', 'render_responses', 'responses_output')


def render_responses(
    index: int, body_json: Mapping[str, Any], turn: Turn, stream: bool, summary: str | None, use: CacheUse
) -> tuple[str, Reply]:
    """The id and the reply of request `index`, answering with `turn`, after a compaction to `summary` if given."""
    response_id = f'resp_fake_{index:04d}'
    output = _output(index, turn)
    if summary is not None:
        # The server compacts before it samples, so the item comes ahead of the turn's.
        output.insert(0, _compaction_item(index, summary))
    usage = _usage(use.prompt, output_tokens(turn), use.read)
    completed = _response(response_id, body_json, 'completed', output, usage)
    if not stream:
        return response_id, Reply(200, encode(completed))
    started = _response(response_id, body_json, 'in_progress', [], None)
    return response_id, Reply(200, events=_events(started, completed))


def _output(index: int, turn: Turn) -> list[dict[str, Any]]:
    """The output items of `turn`: one assistant message, or one function call per tool call."""
    if isinstance(turn, Text):
        return [
            {
                'type': 'message',
                'id': f'msg_fake_{index}',
                'role': 'assistant',
                'status': 'completed',
                'content': [{'type': 'output_text', 'text': turn.text, 'annotations': [], 'logprobs': []}],
            }
        ]
    return [
        {
            'type': 'function_call',
            'id': f'fc_fake_{index}_{position}',
            'call_id': f'call_fake_{index}_{position}',
            'name': name,
            'arguments': tool_arguments(arguments),
            'status': 'completed',
        }
        for position, (name, arguments) in enumerate(turn.calls)
    ]


def _response(
    response_id: str,
    body_json: Mapping[str, Any],
    status: str,
    items: list[dict[str, Any]],
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """The `response` object with `items` as its output, echoing the settings of the request."""
    return {
        'id': response_id,
        'object': 'response',
        'created_at': CREATED,
        'status': status,
        'model': str(body_json.get('model', 'fake')),
        'output': items,
        'error': None,
        'incomplete_details': None,
        'instructions': body_json.get('instructions'),
        'metadata': {},
        'parallel_tool_calls': True,
        'previous_response_id': body_json.get('previous_response_id'),
        'store': body_json.get('store', True),
        'temperature': 1.0,
        'text': {'format': {'type': 'text'}},
        'tool_choice': 'auto',
        'tools': [],
        'top_p': 1.0,
        'truncation': 'disabled',
        'usage': usage,
    }


class _NumberedEvents:
    """Frames the events of one stream, numbering them in `sequence_number` as the Responses API does."""

    def __init__(self) -> None:
        self._numbers = itertools.count()

    def event(self, kind: str, **data: Any) -> bytes:
        """One event of `kind` carrying `data`, numbered after the one before."""
        return sse(kind, {'type': kind, 'sequence_number': next(self._numbers), **data})


def _events(started: dict[str, Any], completed: dict[str, Any]) -> list[bytes]:
    """The stream of a reply: the response started, each output item's events, then the response completed."""
    stream = _NumberedEvents()
    events = [
        stream.event('response.created', response=started),
        stream.event('response.in_progress', response=started),
    ]
    for position, item in enumerate(completed['output']):
        events += _item_events(stream, position, item)
    events.append(stream.event('response.completed', response=completed))
    return events


def _item_events(stream: _NumberedEvents, position: int, item: dict[str, Any]) -> list[bytes]:
    """How a stream sends the output item at `position`: added, its content or arguments, done."""
    if item['type'] == 'message':
        events = _message_events(stream, position, item)
    elif item['type'] == 'compaction':
        # A compaction item has no deltas: it arrives whole, in both the `added` and the `done` event.
        events = [stream.event('response.output_item.added', output_index=position, item=item)]
    else:
        events = _function_call_events(stream, position, item)
    events.append(stream.event('response.output_item.done', output_index=position, item=item))
    return events


def _message_events(stream: _NumberedEvents, position: int, item: dict[str, Any]) -> list[bytes]:
    """An assistant message's events before its `done`: added empty, then its text part in deltas."""
    item_id = item['id']
    text = item['content'][0]['text']
    empty_part: dict[str, Any] = {'type': 'output_text', 'text': '', 'annotations': [], 'logprobs': []}
    events = [
        stream.event('response.output_item.added', output_index=position, item={**item, 'content': []}),
        stream.event(
            'response.content_part.added',
            item_id=item_id,
            output_index=position,
            content_index=0,
            part=empty_part,
        ),
    ]
    events += [
        stream.event(
            'response.output_text.delta',
            item_id=item_id,
            output_index=position,
            content_index=0,
            delta=piece,
            logprobs=[],
        )
        for piece in halves(text)
    ]
    events.append(
        stream.event(
            'response.output_text.done',
            item_id=item_id,
            output_index=position,
            content_index=0,
            text=text,
            logprobs=[],
        )
    )
    events.append(
        stream.event(
            'response.content_part.done',
            item_id=item_id,
            output_index=position,
            content_index=0,
            part=item['content'][0],
        )
    )
    return events


def _function_call_events(stream: _NumberedEvents, position: int, item: dict[str, Any]) -> list[bytes]:
    """A function call's events before its `done`: added with no arguments, then its arguments in deltas."""
    item_id = item['id']
    opening = {**item, 'arguments': '', 'status': 'in_progress'}
    events = [stream.event('response.output_item.added', output_index=position, item=opening)]
    events += [
        stream.event('response.function_call_arguments.delta', item_id=item_id, output_index=position, delta=piece)
        for piece in halves(item['arguments'])
    ]
    events.append(
        stream.event(
            'response.function_call_arguments.done',
            item_id=item_id,
            output_index=position,
            name=item['name'],
            arguments=item['arguments'],
        )
    )
    return events


def _usage(input_count: int, output_count: int, cached: int = 0) -> dict[str, Any]:
    """A reply's `usage`, from its input and output tokens and the input tokens the prompt cache read."""
    return {
        'input_tokens': input_count,
        'input_tokens_details': {'cached_tokens': cached},
        'output_tokens': output_count,
        'output_tokens_details': {'reasoning_tokens': 0},
        'total_tokens': input_count + output_count,
    }


def _compaction_item(index: int, summary: str) -> dict[str, Any]:
    """A `compaction` output item carrying `summary` in base64, where the real API encrypts it."""
    return {
        'type': 'compaction',
        'id': f'cmp_fake_{index:04d}',
        'encrypted_content': base64.b64encode(summary.encode()).decode(),
    }


def compacted_response(index: int, body_json: Mapping[str, Any]) -> dict[str, Any]:
    """The reply of `POST /v1/responses/compact`: the input's user messages, then one compaction item."""
    raw_input = body_json.get('input')
    items = [{'role': 'user', 'content': raw_input}] if isinstance(raw_input, str) else raw_input or []
    kept = [
        {
            'type': 'message',
            'id': f'msg_fake_{index}_{position}',
            'role': 'user',
            'status': 'completed',
            'content': [{'type': 'input_text', 'text': content}] if isinstance(content, str) else content,
        }
        for position, item in enumerate(cast('list[Mapping[str, Any]]', items))
        if item.get('role') == 'user' and item.get('type', 'message') == 'message'
        for content in [item.get('content')]
    ]
    tokens = input_tokens(body_json)
    summary = summarize(index, items, tokens)
    return {
        'id': f'resp_fake_{index:04d}',
        'object': 'response.compaction',
        'created_at': CREATED,
        'output': [*kept, _compaction_item(index, summary)],
        'usage': _usage(tokens, max(1, len(summary) // 4)),
    }


def responses_output(reply: Reply) -> list[object]:
    """The output items of a Responses reply, streamed or not."""
    if reply.events is None:
        return cast('list[object]', json.loads(reply.body)['output'])
    last = reply.events[-1].decode().split('data: ', 1)[1]
    return cast('list[object]', json.loads(last)['response']['output'])
