"""The bytes a message is judged by (`_bytes`): what structured equality hides, and what is never sent."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic_ai.messages import ModelRequest, ModelResponse, SystemPromptPart, ToolCallPart, UserPromptPart

from pydantic_ai_append.guard._bytes import message_bytes

from ..conversation import change_carrier
from .test_decision import T0, user

# --- Bytes and the boundary


def test_bytes_see_what_structured_equality_hides():
    one = ToolCallPart('f', {'a': 1, 'b': 2}, tool_call_id='c1')
    reordered = ToolCallPart('f', {'b': 2, 'a': 1}, tool_call_id='c1')
    as_float = ToolCallPart('f', {'a': 1.0, 'b': 2}, tool_call_id='c1')
    assert one == reordered == as_float
    sent = {message_bytes(ModelResponse(parts=[part], timestamp=T0)) for part in (one, reordered, as_float)}
    assert len(sent) == 3


def test_bytes_leave_out_what_is_never_sent_but_keep_records():
    later = datetime(2027, 1, 1, tzinfo=UTC)
    assert message_bytes(user('hi')) == message_bytes(
        ModelRequest(parts=[UserPromptPart('hi', timestamp=later)], run_id='other', timestamp=later)
    )
    first = ModelRequest(parts=[change_carrier('capability:c:state', 'a', 'b')])
    second = ModelRequest(parts=[change_carrier('capability:c:state', 'a', 'c')])
    assert message_bytes(first) != message_bytes(second)
    plain = ModelRequest(parts=[SystemPromptPart('x', metadata={'note': 1})])
    assert message_bytes(plain) == message_bytes(ModelRequest(parts=[SystemPromptPart('x')]))
