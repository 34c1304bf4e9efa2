"""Records as stored data: every shape round-trips, and nothing untrustworthy reads as a record.

Decoding is tested directly because forged and malformed records can't be produced through an agent
without also forging their integrity check, which is what these tests do by hand.
"""

from __future__ import annotations

import json
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot
from pydantic_ai import Agent

from pydantic_ai_append import (
    AppendInstructions,
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDeltaPart,
    InstructionDigest,
    instruction_records,
)
from pydantic_ai_append._encoding import decode_record, encode_record, seal
from pydantic_ai_append._records import UnreadableRecord, content_hash

from .conversation import ScriptedModel

ids = st.sampled_from(['capability:todos:state', 'agent:memory', 'agent'])
texts = st.none() | st.text(max_size=40)
blocks = st.builds(InstructionBlock, id=ids, content=texts)
digests = st.builds(InstructionDigest, id=st.none() | ids, dynamic=st.booleans(), content_hash=st.text(max_size=8))
records = st.one_of(
    st.builds(InstructionBaselinePart, instructions=st.lists(blocks | digests, max_size=4).map(tuple)),
    st.builds(InstructionDeltaPart, id=ids, content=texts, base_hash=st.none() | st.text(max_size=8), diff=texts),
)


@given(records, st.none() | st.binary(min_size=1, max_size=8))
def test_records_round_trip(record: InstructionBaselinePart | InstructionDeltaPart, key: bytes | None):
    assert decode_record(encode_record(record, key=key), key=key) == record


def test_the_stored_shape():
    baseline = InstructionBaselinePart(
        instructions=(
            InstructionDigest.of(id='agent', dynamic=False, content='Be brief.'),
            InstructionBlock('capability:todos:state', 'a'),
        )
    )
    assert encode_record(baseline) == snapshot(
        {
            'v': 1,
            'kind': 'baseline',
            'instructions': [
                {'id': 'agent', 'dynamic': False, 'hash': '213c22ed7234eb11116e1e88f314c73c'},
                {'id': 'capability:todos:state', 'content': 'a'},
            ],
            'check': '7a375559f7b800e6afdb118a7d9094ed',
        }
    )
    assert encode_record(InstructionDeltaPart(id='capability:todos:state', content=None, base_hash=None)) == snapshot(
        {
            'v': 1,
            'kind': 'delta',
            'id': 'capability:todos:state',
            'content': None,
            'base_hash': None,
            'diff': None,
            'check': '2e876afeb03e5c2a6175a76cef73ac69',
        }
    )


@pytest.mark.parametrize(
    'stored',
    [
        pytest.param('text', id='not-a-mapping'),
        pytest.param({'v': 2, 'kind': 'delta'}, id='newer'),
        pytest.param({'kind': 'delta'}, id='no-version'),
        pytest.param(
            {'v': 1, 'kind': 'delta', 'id': 'x', 'content': None, 'base_hash': None, 'diff': None, 'check': 'forged'},
            id='bad-check',
        ),
        pytest.param(
            seal({'v': 1, 'kind': 'delta', 'id': 3, 'content': None, 'base_hash': None, 'diff': None}),
            id='wrong-type',
        ),
        pytest.param(seal({'v': 1, 'kind': 'delta', 'id': 'x'}), id='missing-field'),
        pytest.param(seal({'v': 1, 'kind': 'other'}), id='unknown-kind'),
        pytest.param(
            seal({'v': 1, 'kind': 'delta', 'id': '', 'content': 'x', 'base_hash': None, 'diff': None}), id='empty-id'
        ),
        pytest.param(
            seal({'v': 1, 'kind': 'baseline', 'instructions': [{'id': '', 'content': 'x'}]}), id='empty-block-id'
        ),
    ],
)
def test_untrustworthy_records_are_unreadable(stored: object):
    assert isinstance(decode_record(stored), UnreadableRecord)


def test_properties():
    delta = InstructionDeltaPart(id='capability:todos:state', content='a', base_hash=None)
    assert (delta.withdrawn, delta.content_hash) == snapshot((False, 'ca978112ca1bbdcafac231b39a23dc4d'))
    assert (InstructionBlock('x', None).content_hash, InstructionBlock('x', 'a').content_hash) == snapshot(
        (None, 'ca978112ca1bbdcafac231b39a23dc4d')
    )


def test_a_decoded_record_is_kept_by_content_and_an_edited_dict_is_checked_again():
    stored = [
        encode_record(InstructionDeltaPart(id='agent', content=str(number), base_hash=None)) for number in range(3)
    ]
    decoded = [decode_record(data) for data in stored]
    assert [record.content for record in decoded if isinstance(record, InstructionDeltaPart)] == ['0', '1', '2']
    assert decode_record(stored[2]) is decoded[2]
    # An equal dict that is a different object (as after a JSON round trip) finds the record decoded before.
    assert decode_record(json.loads(json.dumps(stored[2]))) is decoded[2]
    # The same dict edited in place is checked again, and fails; put back, it is the genuine record again.
    stored[2]['content'] = 'forged'
    assert isinstance(decode_record(stored[2]), UnreadableRecord)
    stored[2]['content'] = '2'
    assert decode_record(stored[2]) is decoded[2]
    # A lookup with another key, or another conversation, checks again.
    assert isinstance(decode_record(stored[2], key=b'k'), UnreadableRecord)
    signed = encode_record(InstructionDeltaPart(id='agent', content='s', base_hash=None), key=b'k', conversation_id='a')
    assert isinstance(decode_record(signed, key=b'k', conversation_id='a'), InstructionDeltaPart)
    assert isinstance(decode_record(signed, key=b'k', conversation_id='b'), UnreadableRecord)


@pytest.mark.parametrize(
    'edit',
    [
        pytest.param({'v': True}, id='version-as-bool'),
        pytest.param({'v': 1.0}, id='version-as-float'),
        pytest.param({'extra': ['x']}, id='added-list'),
        pytest.param({'extra': ('x',)}, id='added-tuple'),
    ],
)
def test_an_edit_to_an_equal_comparing_value_is_checked_again(edit: dict[str, object]):
    # `1`, `1.0` and `True` compare equal, so a key made of the values alone would find the genuine record.
    stored = encode_record(InstructionDeltaPart(id='agent', content='x', base_hash=None))
    assert isinstance(decode_record(stored), InstructionDeltaPart)
    stored.update(edit)
    assert isinstance(decode_record(stored), UnreadableRecord)


@pytest.mark.parametrize('key', [None, b'k'])
def test_a_lone_surrogate_is_kept_and_checked(key: bytes | None):
    # A Python string can hold a lone surrogate, which UTF-8 can't encode; the record keeps it as it is.
    record = InstructionDeltaPart(id='capability:todos:state', content='a\ud800b', base_hash=content_hash('\udfff'))
    assert decode_record(encode_record(record, key=key), key=key) == record
    assert isinstance(decode_record({**encode_record(record, key=key), 'content': 'a\ud801b'}), UnreadableRecord)


@pytest.mark.parametrize('policy', ['append', 'rewrite'])
def test_a_block_with_a_lone_surrogate_is_delivered_on_either_policy(policy: Literal['append', 'rewrite']):
    chat = ScriptedModel()
    value = ['a\ud800b']
    context = AppendInstructions(id='todos')
    context.instructions(name='state', on_change=policy)(lambda: value[0])
    agent = Agent(chat.model(), capabilities=[context])
    history = agent.run_sync('one').all_messages()
    value[0] = 'c\udfffd'
    history = agent.run_sync('two', message_history=history).all_messages()
    told = [chat.seen[0].instructions or '', chat.last.instructions or '', *chat.last.messages]
    assert any('a\ud800b' in text for text in told)
    assert any('c\udfffd' in text for text in told)
    assert len(instruction_records(history)) == (2 if policy == 'append' else 0)
