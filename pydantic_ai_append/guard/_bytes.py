"""The bytes a message is judged by: a canonical encoding of what reaches a model, with key order kept.

Structured equality hides what serialization shows, so the guard compares messages by these bytes, and keeps
the data each consumed message was encoded from, to rebuild one that is changed in place later.
"""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic_ai.messages import ModelMessage

from .._history import RECORD_KEY, holds_record

MESSAGE_ADAPTER = pydantic.TypeAdapter[ModelMessage](ModelMessage)

_UNSENT_PART_KEYS = frozenset({'timestamp', 'metadata'})
"""Part fields that never reach a model."""


def message_bytes(message: ModelMessage) -> bytes:
    """The bytes of `message`'s parts, in a canonical encoding that keeps the order of every mapping.

    Structured equality hides what serialization shows: `{'a': 1, 'b': 2}` equals `{'b': 2, 'a': 1}`, and `1`
    equals `1.0`, but neither pair is sent as the same bytes. A request or response reaches a model as its
    parts, so message-level fields (timestamps, usage, the model name) are left out, and so are the part fields
    that never leave the process (timestamps, part metadata), except the records this package keeps in part
    metadata, which stand for the text they are delivered as. Every other part field is kept, including
    provider details that some providers are sent back and others aren't: a change to one counts.

    ```python
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    from pydantic_ai_append.guard._bytes import message_bytes

    one = ModelResponse(parts=[ToolCallPart('f', {'a': 1, 'b': 2}, tool_call_id='c1')])
    other = ModelResponse(parts=[ToolCallPart('f', {'b': 2, 'a': 1}, tool_call_id='c1')])
    print(one.parts == other.parts, message_bytes(one) == message_bytes(other))
    #> True False
    ```
    """
    return encode_message(message)[0]


def encode_message(message: ModelMessage) -> tuple[bytes, dict[str, Any]]:
    """The bytes `message_bytes` compares, and the whole message as data to rebuild it from.

    The data is Python-mode (dates, decimals and bytes stay what they are, containers are copied), so a message
    rebuilt from it encodes to the same bytes.
    """
    dumped: dict[str, Any] = MESSAGE_ADAPTER.dump_python(message)
    parts: list[dict[str, Any]] = []
    for part, data in zip(message.parts, dumped['parts'], strict=True):
        kept = {key: value for key, value in data.items() if key not in _UNSENT_PART_KEYS}
        if holds_record(part):
            kept[RECORD_KEY] = data['metadata'][RECORD_KEY]
        parts.append(kept)
    return _MESSAGE_BYTES.dump_json({'kind': dumped['kind'], 'parts': parts}), dumped


_MESSAGE_BYTES = pydantic.TypeAdapter[dict[str, Any]](dict[str, Any])
