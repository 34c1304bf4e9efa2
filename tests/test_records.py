"""Records as stored data: every shape round-trips, and nothing untrustworthy reads as a record.

Decoding is tested directly because forged and malformed records can't be produced through an agent
without also forging their integrity check, which is what these tests do by hand.
"""

from __future__ import annotations

import json
from dataclasses import replace
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
from pydantic_ai_append._patch import apply_hunks, rebuild
from pydantic_ai_append._records import StoredDiff, UnreadableRecord, content_hash
from pydantic_ai_append._rendering import diff_hunks, record_change

from .conversation import ScriptedModel

ids = st.sampled_from(['capability:todos:state', 'agent:memory', 'agent'])
texts = st.none() | st.text(max_size=40)
blocks = st.builds(InstructionBlock, id=ids, content=texts)
digests = st.builds(InstructionDigest, id=st.none() | ids, dynamic=st.booleans(), content_hash=st.text(max_size=8))
records = st.one_of(
    st.builds(InstructionBaselinePart, instructions=st.lists(blocks | digests, max_size=4).map(tuple)),
    # Every change but one with a diff, a text and a base, which is stored without its text (see below).
    st.builds(InstructionDeltaPart, id=ids, content=texts, base_hash=st.none() | st.text(max_size=8)),
    st.builds(InstructionDeltaPart, id=ids, content=st.none(), base_hash=st.none() | st.text(max_size=8), diff=texts),
    st.builds(InstructionDeltaPart, id=ids, content=texts, base_hash=st.none(), diff=texts),
)


@given(records, st.none() | st.binary(min_size=1, max_size=8))
def test_records_round_trip(record: InstructionBaselinePart | InstructionDeltaPart, key: bytes | None):
    assert decode_record(encode_record(record, key=key), key=key) == record


# Lines of a block's text: `\r`, other line breaks Python knows and empty lines are all kept as they are, since texts
# are split on `\n` alone.
lines = st.lists(
    st.sampled_from(['a', 'b', '', ' a', '-b', '+c', '@@ -1 +1 @@', 'x\ry', 'u\u2028v', '\\']), max_size=12
)


@given(lines, lines, st.none() | st.binary(min_size=1, max_size=8))
def test_a_change_stored_as_its_diff_is_rebuilt_from_the_text_before_it(
    old_lines: list[str], new_lines: list[str], key: bytes | None
):
    old, new = '\n'.join(old_lines), '\n'.join(new_lines)
    if old != new:
        assert apply_hunks(old, diff_hunks(old, new)) == new
    # Every change with a diff, however short: `record_change` keeps one only when it is the shorter element.
    change = InstructionDeltaPart(
        id='agent:memory', content=new, base_hash=content_hash(old), diff=diff_hunks(old, new)
    )
    stored = decode_record(encode_record(change, key=key), key=key)
    assert stored == StoredDiff(
        id='agent:memory', base_hash=content_hash(old), diff=change.diff or '', content_hash=content_hash(new)
    )
    assert isinstance(stored, StoredDiff)
    if old != new:
        assert rebuild(stored, old, content_hash(old)) == change


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


def circular() -> dict[str, object]:
    stored: dict[str, object] = {'v': 1, 'kind': 'delta', 'id': 'x', 'check': 'x'}
    stored['content'] = stored
    return stored


@pytest.mark.parametrize(
    'stored',
    [
        pytest.param('text', id='not-a-mapping'),
        pytest.param(seal({'v': 3, 'kind': 'delta'}), id='newer'),
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
        # A format 2 change is a diff with its digests: one that states its text instead is not one this writes.
        pytest.param(
            seal({'v': 2, 'kind': 'delta', 'id': 'x', 'content': 'x', 'base_hash': None, 'diff': None}),
            id='diff-without-hash',
        ),
        pytest.param(seal({'v': 1, 'kind': 'other'}), id='unknown-kind'),
        pytest.param(
            seal({'v': 1, 'kind': 'delta', 'id': '', 'content': 'x', 'base_hash': None, 'diff': None}), id='empty-id'
        ),
        pytest.param(
            seal({'v': 1, 'kind': 'baseline', 'instructions': [{'id': '', 'content': 'x'}]}), id='empty-block-id'
        ),
        # Only a history built in process can hold these (JSON gives string keys and plain values).
        pytest.param({'v': 1, 'kind': 'delta', 'id': 'x', 1: 'y', 'check': 'x'}, id='mixed-key-types'),
        pytest.param({'v': 1, 'kind': 'delta', 'id': 'x', 'content': object(), 'check': 'x'}, id='not-json'),
        pytest.param(circular(), id='circular'),
    ],
)
def test_untrustworthy_records_are_unreadable(stored: object):
    assert isinstance(decode_record(stored), UnreadableRecord)


def test_the_stored_shape_of_a_change_with_a_diff():
    before = '\n'.join(f'line {number}' for number in range(10))
    change = record_change('capability:notes:memory', before, before.replace('line 5', 'line five'))
    assert change.diff is not None
    assert encode_record(change) == snapshot(
        {
            'v': 2,
            'kind': 'delta',
            'id': 'capability:notes:memory',
            'base_hash': '6e587b4b5de3b63e17e7430363359a7a',
            'diff': """\
@@ -5,3 +5,3 @@
 line 4
-line 5
+line five
 line 6\
""",
            'hash': '63e1e99d98a4453f9c3f6503f5ec0612',
            'check': '0b396dc1acb980ac1881a80d1b703145',
        }
    )


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


FIVE = 'a\nb\nc\nd\ne'


@pytest.mark.parametrize(
    ('hunks', 'expected'),
    [
        pytest.param('@@ -2,3 +2,3 @@\n b\n-c\n+C\n d', 'a\nb\nC\nd\ne', id='applies'),
        # An empty range names the line before it, as `difflib` writes one (never, with one line of context).
        pytest.param('@@ -1,0 +2 @@\n+X', 'a\nX\nb\nc\nd\ne', id='empty-range'),
        pytest.param('-c\n+C', None, id='no-header'),
        pytest.param('@@ -2,3 +2,3 @@\n b\n-x\n+C\n d', None, id='other-text'),
        pytest.param('@@ -4,3 +4,3 @@\n d\n-e\n+E\n f', None, id='past-the-end'),
        pytest.param('@@ -3 +3 @@\n-c\n+C\n@@ -2 +2 @@\n-b\n+B', None, id='out-of-order'),
        pytest.param('@@ -2,3 +5,3 @@\n b\n-c\n+C\n d', None, id='wrong-new-start'),
        pytest.param('@@ -2,3 +2,3 @@\n b\n*c\n+C\n d', None, id='unknown-line'),
        pytest.param('@@ -2,3 +2,3 @@\n b\n-c', None, id='cut-short'),
        pytest.param('@@ -2 +2,2 @@\n b\n-c\n+C', None, id='removes-too-many'),
        pytest.param('@@ -2,2 +2 @@\n b\n+C\n-c', None, id='adds-too-many'),
    ],
)
def test_hunks_apply_only_to_the_text_they_name(hunks: str, expected: str | None):
    assert apply_hunks(FIVE, hunks) == expected


def test_why_a_change_is_not_rebuilt():
    base = '\n'.join(f'line {number}' for number in range(10))
    change = record_change('agent:memory', base, base.replace('line 5', 'line five'))
    stored = decode_record(encode_record(change))
    assert isinstance(stored, StoredDiff)
    other = base.replace('line 5', 'line 6')
    assert [
        rebuild(stored, None, None),
        rebuild(stored, other, content_hash(other)),
        # A diff said to be taken against the text the window holds, whose lines it doesn't match.
        rebuild(
            StoredDiff(stored.id, content_hash(other), stored.diff, stored.content_hash), other, content_hash(other)
        ),
        rebuild(replace(stored, content_hash=content_hash('other')), base, content_hash(base)),
    ] == snapshot(
        [
            "the change's diff was taken against text the window doesn't hold for the block",
            "the change's diff was taken against text the window doesn't hold for the block",
            "the change's diff doesn't apply to the text the window holds for the block",
            "the change's diff doesn't rebuild the text it records",
        ]
    )
    rebuilt = rebuild(stored, base, content_hash(base))
    assert rebuilt == change
    # Rebuilt once: an equal record read again (after a JSON load) gives the same change, whether decoding gives
    # back the record read before or an equal one of its own.
    again = decode_record(json.loads(json.dumps(encode_record(change))))
    assert isinstance(again, StoredDiff)
    assert rebuild(again, base, content_hash(base)) is rebuilt
    equal = replace(stored)
    assert equal is not stored
    assert rebuild(equal, base, content_hash(base)) is rebuilt
