"""The fake provider's AWS Bedrock Converse API: `POST /model/{modelId}/converse`, and `/converse-stream` answered in
AWS's binary event stream, as botocore sends them for Pydantic AI's `BedrockConverseModel`.

Its prompt cache follows Bedrock's documented rules (`testing.fake_provider.caching`), and its usage is reported as
Bedrock reports it: `inputTokens` (neither read from nor written to the cache), `cacheReadInputTokens`,
`cacheWriteInputTokens`, `outputTokens`, and `totalTokens`, the sum of all four
(https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_TokenUsage.html). A refusal is a
`ValidationException`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ._event_stream import event_message
from ._replies import Reply, encode, halves, output_tokens, tool_arguments
from ._script import Text, Turn
from .caching import CacheUse

__all__ = ('BedrockRoute', 'bedrock_error', 'bedrock_route', 'render_bedrock')

_PATH = re.compile(r'/model/(?P<model>[^/]+)/(?P<operation>converse|converse-stream)')


@dataclass(frozen=True)
class BedrockRoute:
    """What a Converse request's path says about it."""

    model_id: str
    """The model id named in the path, URL-decoded, e.g. `us.anthropic.claude-sonnet-4-5-20250929-v1:0`."""

    stream: bool
    """Whether the reply is streamed (`converse-stream`)."""


def bedrock_route(path: str) -> BedrockRoute | None:
    """The route of a Converse or ConverseStream request path, or `None` for any other path."""
    match = _PATH.fullmatch(path)
    if match is None:
        return None
    return BedrockRoute(unquote(match['model']), match['operation'] == 'converse-stream')


def bedrock_error(message: str) -> bytes:
    """The body of a refusal, which botocore raises as a `ValidationException` carrying `message`."""
    return encode({'__type': 'ValidationException', 'message': message})


def render_bedrock(index: int, turn: Turn, stream: bool, use: CacheUse) -> tuple[str, Reply]:
    """The id and the reply of request `index`, answering with `turn`: a Converse response, or its event stream."""
    reply_id = f'bedrock-fake-{index}'
    if isinstance(turn, Text):
        content: list[dict[str, Any]] = [{'text': turn.text}]
        stop_reason = 'end_turn'
    else:
        content = [
            {'toolUse': {'toolUseId': f'tooluse_fake_{index}_{position}', 'name': name, 'input': dict(arguments)}}
            for position, (name, arguments) in enumerate(turn.calls)
        ]
        stop_reason = 'tool_use'
    turn_tokens = output_tokens(turn)
    usage = {
        'inputTokens': use.uncached,
        'outputTokens': turn_tokens,
        'totalTokens': use.prompt + turn_tokens,
        'cacheReadInputTokens': use.read,
        'cacheWriteInputTokens': use.written_5m + use.written_1h,
    }
    # A fixed latency, so recorded replies don't change between runs.
    metrics = {'latencyMs': 100}
    if not stream:
        message = {'role': 'assistant', 'content': content}
        body = {'output': {'message': message}, 'stopReason': stop_reason, 'usage': usage, 'metrics': metrics}
        return reply_id, Reply(200, encode(body))
    events = [_event('messageStart', {'role': 'assistant'})]
    for position, block in enumerate(content):
        events += _block_events(position, block)
    events.append(_event('messageStop', {'stopReason': stop_reason}))
    events.append(_event('metadata', {'usage': usage, 'metrics': metrics}))
    return reply_id, Reply(200, events=events, media_type='application/vnd.amazon.eventstream')


def _block_events(position: int, block: Mapping[str, Any]) -> list[bytes]:
    """How ConverseStream sends one content block: a start for a tool call (none for text), deltas, and a stop."""
    events: list[bytes] = []
    if 'text' in block:
        deltas = [{'text': piece} for piece in halves(block['text'])]
    else:
        call = block['toolUse']
        start = {'toolUse': {'toolUseId': call['toolUseId'], 'name': call['name']}}
        events.append(_event('contentBlockStart', {'contentBlockIndex': position, 'start': start}))
        deltas = [{'toolUse': {'input': piece}} for piece in halves(tool_arguments(call['input']))]
    events += [_event('contentBlockDelta', {'contentBlockIndex': position, 'delta': delta}) for delta in deltas]
    events.append(_event('contentBlockStop', {'contentBlockIndex': position}))
    return events


def _event(kind: str, payload: Mapping[str, Any]) -> bytes:
    """One ConverseStream event: its type in the headers, its JSON as the payload."""
    headers = {':event-type': kind, ':content-type': 'application/json', ':message-type': 'event'}
    return event_message(headers, encode(payload))
