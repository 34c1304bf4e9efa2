"""What a test scripts the fake provider with: the turns it replies with, and the request a script function reads.

The turns are provider-neutral, so one script serves any of the APIs and a test can run the same conversation
on each; the API modules (`_openai_chat`, `_openai_responses`, `_anthropic_messages`, `_gemini`, `_bedrock_converse`)
render a turn in their format.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..._wire.segments import Api

__all__ = ('FakeRequest', 'Script', 'ServedApi', 'Text', 'ToolCalls', 'Turn')

ServedApi: TypeAlias = Api | Literal['bedrock-converse']
"""A provider API the fake serves: one the wire tools read (`Api`, Google Gemini's `generateContent` among them), or
AWS Bedrock's Converse."""


@dataclass(frozen=True)
class Text:
    """A reply turn with plain assistant text.

    Example:
        ```python
        from pydantic_ai_append.testing.fake_provider import FakeProvider, Text

        server = FakeProvider(script=[Text('Hello!')])
        ```
    """

    text: str
    """What the assistant says."""


@dataclass(frozen=True)
class ToolCalls:
    """A reply turn calling one or more tools in parallel.

    Example:
        ```python
        from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls

        server = FakeProvider(script=[ToolCalls([('get_time', {}), ('get_weather', {'city': 'Paris'})]), Text('done')])
        ```
    """

    calls: Sequence[tuple[str, Mapping[str, Any]]]
    """Each call's tool name and JSON arguments, in the order the model makes them."""


Turn: TypeAlias = Text | ToolCalls
"""One scripted reply."""


@dataclass(frozen=True)
class FakeRequest:
    """A request the fake received, as a callable script sees it."""

    index: int
    """Position of this request among all the server received, from 0."""

    api: ServedApi
    """Which provider API was called."""

    body: bytes
    """The raw request body."""

    json: Mapping[str, Any]
    """The parsed request body."""


Script: TypeAlias = Sequence[Turn] | Callable[[FakeRequest], Turn]
"""Replies in order, one per request whatever the API, or a function choosing each reply from its request."""
