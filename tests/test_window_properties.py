"""Properties of the window logic over generated sequences of block values, tested on the pure functions.

The agent tests pin particular conversations; these check the rules for any: after each request, the records in
history fold to exactly the values the model was last given, nothing is recorded when nothing changed, the same
inputs always give the same plan, and a recorded prefix splits back into the parts it was joined from.
"""

from __future__ import annotations

from copy import deepcopy
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pydantic_ai_append import InstructionBaselinePart, InstructionBlock, InstructionDigest, InstructionRecord
from pydantic_ai_append._encoding import decode_record, encode_record
from pydantic_ai_append._history import Located
from pydantic_ai_append._rendering import SUPERSESSION_SENTENCE, InlineRenderer
from pydantic_ai_append._window import CurrentBlock, fold_window, plan_request, split_recorded_prefix

_LONG = '\n'.join(
    f'line {number} of a block long enough that a one-line edit is sent as a diff' for number in range(12)
)
values = st.none() | st.sampled_from(['a', 'b', 'a\nb', 'x\n\ny', '', _LONG, _LONG.replace('line 3', 'line three')])
literals = st.sampled_from(['Be brief.', 'Rules:\n\n- one', 'Mode: plan', 'Mode: act'])
request_blocks = st.fixed_dictionaries(
    {'literal': literals, 'state': values, 'memory': values, 'mode': st.sampled_from(['plan', 'act'])}
)


def current(request: dict[str, str | None]) -> list[CurrentBlock]:
    return [
        CurrentBlock('agent', request['literal'], 'literal'),
        CurrentBlock('capability:c:state', request['state'], 'append'),
        CurrentBlock('capability:c:memory', request['memory'], 'append'),
        CurrentBlock('capability:c:mode', f'Mode: {request["mode"]}', 'rewrite'),
    ]


@given(st.lists(request_blocks, min_size=1, max_size=8))
def test_history_folds_to_what_the_model_was_given(requests: list[dict[str, str | None]]):
    history: list[Located] = []
    for index, request in enumerate(requests):
        blocks = current(request)
        state = fold_window(history)
        plan = plan_request(state, blocks)
        assert plan == plan_request(fold_window(history), blocks)
        records: list[InstructionRecord] = list(plan.records)
        # As history stores them: a change with a diff is folded from its diff alone.
        history += [Located(index, part, decode_record(encode_record(record))) for part, record in enumerate(records)]
        after = fold_window(history)
        appended = {block.id: block.content for block in blocks if block.mode == 'append' and block.id is not None}
        assert after.received == appended
        if plan.opened is None:
            # In a window, the prefix is the baseline's, and one change is recorded per block that differs.
            assert plan.prefix == (state.baseline.blocks if state.baseline else ())
            assert len(plan.records) == sum(state.received.get(key) != value for key, value in appended.items())


@given(st.lists(request_blocks, min_size=1, max_size=8), st.data())
def test_a_fold_goes_on_from_any_point_and_leaves_the_state_it_started_from(
    requests: list[dict[str, str | None]], data: st.DataObject
):
    # What each request keeps is the fold of the history before it, and the next request folds on from that:
    # this is the pure rule under it, which the agent tests can't reach at every split.
    history: list[Located] = []
    for index, request in enumerate(requests):
        records = plan_request(fold_window(history), current(request)).records
        history += [Located(index, part, decode_record(encode_record(record))) for part, record in enumerate(records)]
    split = data.draw(st.integers(0, len(history)))
    start = fold_window(history[:split])
    before = deepcopy(start)
    assert fold_window(history[split:], start=start) == fold_window(history)
    assert start == before
    # With nothing more to fold, the state is the very one it went on from, which nothing may rebind.
    assert fold_window([], start=start) is start
    with pytest.raises(FrozenInstanceError):
        start.broken = 'edited'  # pyright: ignore[reportAttributeAccessIssue]


@given(
    st.lists(st.tuples(literals, st.booleans()), max_size=3),
    st.lists(values, min_size=1, max_size=3),
    st.lists(literals, max_size=2),
)
def test_a_recorded_prefix_splits_into_its_parts(
    literal: list[tuple[str, bool]], blocks: list[str | None], rewrite: list[str]
):
    entries: list[InstructionBlock | InstructionDigest] = [
        InstructionDigest.of(id=None, dynamic=dynamic, content=text) for text, dynamic in literal
    ]
    entries += [InstructionBlock(f'capability:c:b{index}', value) for index, value in enumerate(blocks)]
    entries += [InstructionDigest.of(id='capability:c:r', dynamic=True, content=text) for text in rewrite]
    texts = [text for text, _ in literal]
    texts += [
        InlineRenderer().block(f'capability:c:b{index}', value)
        for index, value in enumerate(blocks)
        if value is not None
    ]
    texts += [SUPERSESSION_SENTENCE, *rewrite]
    joined = '\n\n'.join(texts)
    split = split_recorded_prefix(
        InstructionBaselinePart(tuple(entries)), joined, InlineRenderer().block, SUPERSESSION_SENTENCE
    )
    assert split is not None
    assert [text for _, text in split] == texts
    assert (
        split_recorded_prefix(
            InstructionBaselinePart(tuple(entries)), joined + 'x', InlineRenderer().block, SUPERSESSION_SENTENCE
        )
        is None
    )
    if len(texts) > 1:
        # Parts are joined by a blank line; the same text joined otherwise is not this prefix.
        single = '\n'.join(texts)
        assert (
            split_recorded_prefix(
                InstructionBaselinePart(tuple(entries)), single, InlineRenderer().block, SUPERSESSION_SENTENCE
            )
            is None
        )
