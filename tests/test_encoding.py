"""Records as stored data: every shape round-trips, and nothing untrustworthy reads as a record.

Decoding is tested directly because forged and malformed records can't be produced through an agent
without also forging their integrity check, which is what these tests do by hand.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot
from pydantic_ai import Agent

from pydantic_ai_append import (
    AppendInstructions,
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDigest,
    instruction_records,
)
from pydantic_ai_append._encoding import Change, Unreadable, decode_record, encode_baseline, encode_change, seal
from pydantic_ai_append._records import content_hash

from .conversation import ScriptedModel

ids = st.sampled_from(['capability:todos:state', 'agent:memory', 'agent'])
texts = st.none() | st.text(max_size=40)
blocks = st.builds(InstructionBlock, id=ids, content=texts)
digests = st.builds(InstructionDigest, id=st.none() | ids, dynamic=st.booleans(), content_hash=st.text(max_size=8))
baselines = st.builds(InstructionBaselinePart, instructions=st.lists(blocks | digests, max_size=4).map(tuple))


@given(baselines, st.none() | st.binary(min_size=1, max_size=8))
def test_baselines_round_trip(baseline: InstructionBaselinePart, key: bytes | None):
    assert decode_record(encode_baseline(baseline, key=key), key=key) == baseline


def change(text: str = 'x', key: bytes | None = None, **fields: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {'base': None, 'state': {'agent:memory': content_hash('x')}, 'prev': 'p'}
    return encode_change('agent:memory', **{**arguments, **fields}, text=text, key=key)


@given(texts, st.none() | st.binary(min_size=1, max_size=8))
def test_changes_round_trip_over_their_text(text: str | None, key: bytes | None):
    stored = change(text or '', key)
    assert decode_record(stored, text or '', key=key) == Change(
        'agent:memory', None, {'agent:memory': content_hash('x')}, 'p', stored['check']
    )
    assert isinstance(decode_record(stored, f'{text} edited', key=key), Unreadable)


def test_the_stored_shape():
    baseline = InstructionBaselinePart(
        instructions=(
            InstructionDigest.of(id='agent', dynamic=False, content='Be brief.'),
            InstructionBlock('capability:todos:state', 'a'),
        )
    )
    assert encode_baseline(baseline) == snapshot(
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
    assert change('<context id="agent:memory">\nx\n</context>') == snapshot(
        {
            'v': 3,
            'kind': 'delta',
            'id': 'agent:memory',
            'base': None,
            'state': {'agent:memory': '2d711642b726b04401627ca9fbac32f5'},
            'prev': 'p',
            'check': '8e78ba9501391928b3f7c6463997135a',
        }
    )


def circular() -> dict[str, object]:
    stored: dict[str, object] = {'v': 3, 'kind': 'delta', 'id': 'x', 'check': 'x'}
    stored['state'] = stored
    return stored


def delta(**fields: object) -> dict[str, object]:
    """A change's stored dict, sealed over an empty text, with `fields` in place of a well-formed one's."""
    return seal({'v': 3, 'kind': 'delta', 'id': 'x', 'base': None, 'state': {}, 'prev': 'p', **fields}, text='')


@pytest.mark.parametrize(
    'stored',
    [
        pytest.param('text', id='not-a-mapping'),
        pytest.param(seal({'v': 4, 'kind': 'delta'}), id='newer'),
        pytest.param({'kind': 'delta'}, id='no-version'),
        pytest.param({**delta(), 'check': 'forged'}, id='bad-check'),
        pytest.param(delta(id=3), id='wrong-type'),
        pytest.param(seal({'v': 3, 'kind': 'delta', 'id': 'x'}, text=''), id='missing-field'),
        pytest.param(seal({'v': 3, 'kind': 'delta', 'id': 'x', 'base': None, 'prev': 'p'}, text=''), id='no-state'),
        pytest.param(delta(state={'x': 1}), id='state-not-digests'),
        pytest.param(seal({'v': 1, 'kind': 'other'}), id='unknown-kind'),
        pytest.param(seal({'v': 1, 'kind': ['delta']}), id='kind-not-a-string'),
        pytest.param(delta(id=''), id='empty-id'),
        pytest.param(
            seal({'v': 1, 'kind': 'baseline', 'instructions': [{'id': '', 'content': 'x'}]}), id='empty-block-id'
        ),
        # Only a history built in process can hold these (JSON gives string keys and plain values).
        pytest.param({'v': 3, 'kind': 'delta', 'id': 'x', 1: 'y', 'check': 'x'}, id='mixed-key-types'),
        pytest.param({'v': 3, 'kind': 'delta', 'id': 'x', 'base': object(), 'check': 'x'}, id='not-json'),
        pytest.param(circular(), id='circular'),
    ],
)
def test_untrustworthy_records_are_unreadable(stored: object):
    assert isinstance(decode_record(stored), Unreadable)


def test_a_signed_record_is_bound_to_its_key_and_conversation():
    signed = change('x', b'k', conversation_id='a')
    assert isinstance(decode_record(signed, 'x', key=b'k', conversation_id='a'), Change)
    assert isinstance(decode_record(signed, 'x', key=b'k', conversation_id='b'), Unreadable)
    assert isinstance(decode_record(signed, 'x'), Unreadable)


@pytest.mark.parametrize(
    'edit',
    [
        pytest.param({'v': True}, id='version-as-bool'),
        pytest.param({'v': 1.0}, id='version-as-float'),
        pytest.param({'extra': ['x']}, id='added-list'),
    ],
)
def test_an_edit_to_an_equal_comparing_value_fails_the_check(edit: dict[str, object]):
    stored = encode_baseline(InstructionBaselinePart(instructions=(InstructionBlock('agent:memory', 'x'),)))
    assert isinstance(decode_record(stored), InstructionBaselinePart)
    stored.update(edit)
    assert isinstance(decode_record(stored), Unreadable)


@pytest.mark.parametrize('key', [None, b'k'])
def test_a_lone_surrogate_is_kept_and_checked(key: bytes | None):
    # A Python string can hold a lone surrogate, which UTF-8 can't encode; the record keeps it as it is.
    baseline = InstructionBaselinePart(instructions=(InstructionBlock('capability:todos:state', 'a\ud800b'),))
    stored = encode_baseline(baseline, key=key)
    assert decode_record(stored, key=key) == baseline
    assert isinstance(decode_record(change('a\ud800b', key), 'a\ud801b', key=key), Unreadable)


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
