"""`deliver` walks the deliveries alongside the messages: one that sits where no carrier is doesn't shift the others.

A unit test: the scan that finds the deliveries only finds them at carriers, so an agent never gives `deliver`
one elsewhere; `deliver` passes such a delivery as a lookup by position would.
"""

from __future__ import annotations

from typing import cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart, TextPart, UserPromptPart

from pydantic_ai_append import InstructionDeltaPart
from pydantic_ai_append._delivery import deliver, wording_of
from pydantic_ai_append._rendering import InlineRenderer
from pydantic_ai_append._window import Delivery


def _change(name: str) -> InstructionDeltaPart:
    return InstructionDeltaPart(id=f'capability:walk:{name}', content=name, base_hash=None)


def test_deliveries_where_no_carrier_is_are_passed_and_each_carrier_gets_its_own():
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('a'), SystemPromptPart('the user prompt')]),
        ModelResponse(parts=[TextPart('ok')]),
        ModelRequest(parts=[UserPromptPart('b'), SystemPromptPart(''), SystemPromptPart('')]),
    ]
    # At a user's system prompt, at a response, at a user prompt, and then at the two empty system prompts.
    deliveries = [
        Delivery(0, 1, _change('at the user system prompt'), False),
        Delivery(1, 0, _change('at a response'), False),
        Delivery(2, 0, _change('at a user prompt'), False),
        Delivery(2, 2, _change('second'), False),
    ]
    sent = deliver(messages, deliveries, InlineRenderer())
    assert sent[:2] == messages[:2]
    assert sent[0] is messages[0]
    # The first empty system prompt has no delivery: it is what is left of a carrier, and is left out.
    contents = [cast('UserPromptPart | SystemPromptPart', part).content for part in sent[2].parts]
    assert contents == ['b', wording_of(_change('second'), False)['inline']]
