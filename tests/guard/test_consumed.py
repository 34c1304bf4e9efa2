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


def test_the_unchanged_messages_are_the_consumed_ones_sent_as_they_were():
    history = ConsumedHistory.of([user('a'), reply('b'), user('c'), reply('d')])
    first, second = history.consumed[:2]
    # Kept through the second message, then a cleared one; sent whole with more after it; cut at the front.
    cleared = history.unchanged([user('a'), reply('b'), user('cleared'), reply('d')])
    assert cleared == {'messages': 2, 'bytes': len(first) + len(second)}
    assert history.unchanged([*history.messages, user('e')]) == {
        'messages': 4,
        'bytes': sum(map(len, history.consumed)),
    }
    assert history.unchanged([user('c'), reply('d')]) == {'messages': 0, 'bytes': 0}
