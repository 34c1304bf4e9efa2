"""What the model has consumed (`ConsumedHistory`): the generation boundary, after the latest reply."""

from __future__ import annotations

import pytest

from pydantic_ai_append.guard import ConsumedHistory
from pydantic_ai_append.guard._consumed import consumed_boundary

from .test_decision import reply, user


def test_the_boundary_is_after_the_latest_reply():
    assert consumed_boundary([]) == 0
    assert consumed_boundary([user('a')]) == 0
    assert consumed_boundary([user('a'), reply('b')]) == 2
    assert consumed_boundary([user('a'), reply('b'), user('c')]) == 2
    assert ConsumedHistory.of([user('a'), reply('b')], boundary=1).boundary == 1
    with pytest.raises(ValueError, match='boundary 3 is outside a history of 2 messages'):
        ConsumedHistory.of([user('a'), reply('b')], boundary=3)
