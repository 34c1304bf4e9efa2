"""The lower bounds the plugin's own cost is told from: capabilities that do part of its work and nothing more.

`Floor` sends what the append policy sends with none of the plugin's logic: on a static agent and the append
history, it only leaves out the baseline's empty carrier. Its time is what Pydantic AI itself charges for the extra
parts; the distance from it to `append` is the plugin's own cost. `Injected` is the lower bound of any design that
sends the changes' text: on the static history, with no records in it at all, it adds each change's text to the
request it belongs to, just before the request is sent. `Reader` is the floor of any hook that reads the plugin's
records exactly: it reads only what such a reader must, and does nothing else. `overhead` times them beside the
policies.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart, UserPromptPart
from pydantic_ai.models import ModelRequestContext

from pydantic_ai_append._history import RECORD_KEY, scan

__all__ = ('Floor', 'Injected', 'Reader', 'change_texts')


class Floor(AbstractCapability[Any]):
    """Leaves the baselines' empty carriers out of the outgoing messages, and nothing else."""

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Drop the empty carriers from every outgoing request."""
        request_context.messages = [
            replace(message, parts=[part for part in message.parts if not _is_empty_carrier(part)])
            if isinstance(message, ModelRequest) and any(_is_empty_carrier(part) for part in message.parts)
            else message
            for message in request_context.messages
        ]
        return request_context


def _is_empty_carrier(part: ModelRequestPart) -> bool:
    return isinstance(part, SystemPromptPart) and not part.content and bool(part.metadata)


class Reader(AbstractCapability[Any]):
    """Reads what any exact reader of the plugin's records must, as fast as Python can, and changes nothing.

    That is each part's type, each system prompt's metadata and the record in it with the two fields that link it
    to the one before, and each user prompt's text (the lookalike check).
    """

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Read the part types, records, record links and user prompt texts of every outgoing request."""
        requests = [message for message in request_context.messages if type(message) is ModelRequest]
        parts = list(itertools.chain.from_iterable(map(_PARTS, requests)))
        metadata = [part.metadata for part in parts if type(part) is SystemPromptPart]
        records = [cast('dict[str, Any]', held[RECORD_KEY]) for held in metadata if held and RECORD_KEY in held]
        texts = [part.content for part in parts if type(part) is UserPromptPart]
        collections.deque(map(_CHECK, records), maxlen=0)
        collections.deque(map(_PREV, records), maxlen=0)
        collections.deque(map(str.isascii, cast('list[str]', texts)), maxlen=0)
        return request_context


_CHECK = operator.itemgetter('check')
_PREV = operator.methodcaller('get', 'prev')
_PARTS = operator.attrgetter('parts')


class Injected(AbstractCapability[Any]):
    """Adds the changes' texts to the outgoing requests they belong to."""

    def __init__(self, texts: dict[int, list[str]]) -> None:
        self._texts = texts

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Add each change's text to the outgoing request that carries it in the append history."""
        request_context.messages = [
            replace(message, parts=[*message.parts, *(SystemPromptPart(text) for text in self._texts[index])])
            if index in self._texts and isinstance(message, ModelRequest)
            else message
            for index, message in enumerate(request_context.messages)
        ]
        return request_context


def change_texts(history: Sequence[ModelMessage]) -> dict[int, list[str]]:
    """Each change's text, by the index of the request that carries it."""
    by_request: dict[int, list[str]] = {}
    for message_index, _, part, _ in scan(history).found:
        if part is not None and part.content:
            by_request.setdefault(message_index, []).append(part.content)
    return by_request
