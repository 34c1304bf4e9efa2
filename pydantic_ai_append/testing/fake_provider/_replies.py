"""What every reply of the fake provider is made of, whichever API it speaks.

A reply is a JSON body or a list of server-sent events; streamed text and arguments are cut in halves; and sizes are
counted in rough tokens. The three API modules build on these, so their replies are framed and counted alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._script import Text, Turn

__all__ = ('CREATED', 'Reply', 'encode', 'halves', 'input_tokens', 'output_tokens', 'sse', 'tool_arguments')

CREATED = 1_767_225_600
"""A fixed creation time (2026-01-01), so recorded replies don't change between recordings."""


@dataclass
class Reply:
    """What the server sends back for one request: a status, and a JSON body or an event stream."""

    status: int
    """The HTTP status."""

    body: bytes = b''
    """The JSON body; empty for a streamed reply."""

    events: list[bytes] | None = None
    """Server-sent events, each already framed; `None` for a JSON reply."""

    media_type: str = 'text/event-stream'
    """The `Content-Type` of a streamed reply: AWS's binary event stream for Bedrock, else server-sent events."""


def encode(value: object) -> bytes:
    """`value` as compact JSON, the way the providers send it."""
    return json.dumps(value, separators=(',', ':')).encode()


def sse(event: str | None, data: Mapping[str, Any] | str) -> bytes:
    """One server-sent event: its `event:` line when it has a name, and its data as compact JSON or as given."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(',', ':'))
    head = f'event: {event}\n' if event is not None else ''
    return f'{head}data: {payload}\n\n'.encode()


def halves(text: str) -> list[str]:
    """The deltas `text` is streamed in."""
    # Two deltas per text so the SDKs' stream assembly is exercised, not just a single chunk.
    middle = len(text) // 2
    return [piece for piece in (text[:middle], text[middle:]) if piece]


def tool_arguments(arguments: Mapping[str, Any]) -> str:
    """A tool call's arguments as the JSON string the OpenAI APIs and Anthropic's deltas carry."""
    return json.dumps(dict(arguments), separators=(',', ':'))


def input_tokens(body_json: Mapping[str, Any]) -> int:
    """The tokens a request body counts as, at 4 bytes of its compact JSON a token."""
    # Rough token counts (4 bytes a token) so usage is plausible and grows with the conversation.
    return max(1, len(encode(body_json)) // 4)


def output_tokens(turn: Turn) -> int:
    """The tokens a reply turn counts as, at 4 bytes of its text or calls a token."""
    output = turn.text if isinstance(turn, Text) else encode([list(call) for call in turn.calls]).decode()
    return max(1, len(output) // 4)
