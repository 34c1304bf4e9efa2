"""Properties of the window logic over generated sequences of block values, tested on the pure functions.

The agent tests pin particular conversations; these check the rules for any: after each request, the records in
history fold to exactly the values the model was last given, nothing is recorded when nothing changed, the same
inputs always give the same plan, and a recorded prefix splits back into the parts it was joined from.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart, UserPromptPart

from pydantic_ai_append import InstructionBaselinePart, InstructionBlock, InstructionDigest
from pydantic_ai_append._history import scan
from pydantic_ai_append._rendering import SUPERSESSION_SENTENCE, change_value, context_element
from pydantic_ai_append._request import outgoing, plan_records
from pydantic_ai_append._suspended import split_recorded_prefix
from pydantic_ai_append._window import CurrentBlock, Window, fold, plan_request

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


def request(history: list[ModelMessage], blocks: list[CurrentBlock]) -> tuple[Window, list[ModelMessage]]:
    """One request as the capability makes it: the window it reads, and the history after it."""
    window = fold(scan(history), key=None, conversation_id=None)
    carriers = plan_records(window, plan_request(window, blocks), key=None, conversation_id='c')
    return window, [*history, ModelRequest(parts=[UserPromptPart('next'), *carriers])]


def told(history: list[ModelMessage]) -> dict[str, str | ValueError | None]:
    """What a model reading the requests sent would hold of each block: the prefix's values, then every change (a
    `ValueError` for a block whose diff it can't apply, until a full element)."""
    window = fold(scan(history), key=None, conversation_id=None)
    assert window.baseline is not None
    held: dict[str, str | ValueError | None] = {block.id: block.content for block in window.baseline.blocks}
    for message in outgoing(history, window, continues=True, notes=False):
        for part in message.parts if isinstance(message, ModelRequest) else ():
            if isinstance(part, SystemPromptPart) and part.content.startswith('<context'):
                block_id = part.content.split('"')[1]
                previous = held.get(block_id)
                held[block_id] = change_value(
                    block_id, part.content, None if isinstance(previous, ValueError) else previous
                )
    return held


edits = st.sampled_from(
    [_LONG, *(_LONG.replace(f'line {line} ', f'line {line}, edited, ') for line in (2, 5, 9)), None]
)
"""Values of a long block that differ by a line or two, so most changes are diffs, one against another."""

in_one_window = st.fixed_dictionaries(
    {'literal': st.just('Be brief.'), 'state': edits, 'memory': edits, 'mode': st.just('plan')}
)


@settings(max_examples=300, deadline=None)
@given(st.lists(request_blocks | in_one_window, min_size=1, max_size=10), st.data())
def test_the_model_holds_every_blocks_value_even_after_a_change_is_dropped(
    requests: list[dict[str, str | None]], data: st.DataObject
):
    history: list[ModelMessage] = []
    for blocks in map(current, requests):
        window, history = request(history, blocks)
        assert (window, history[:-1]) == (fold(scan(history[:-1]), key=None, conversation_id=None), history[:-1])
        appended = {block.id: block.content for block in blocks if block.mode == 'append' and block.id is not None}
        if fold(scan(history), key=None, conversation_id=None).baseline is not None:
            assert {
                block: str(value) if isinstance(value, ValueError) else value for block, value in told(history).items()
            } == appended
        # A processor drops a request from the middle: the next request still leaves the model every value.
        if len(history) > 2 and data.draw(st.booleans()):
            dropped = data.draw(st.integers(1, len(history) - 1))
            history = [*history[:dropped], *history[dropped + 1 :]]


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
    stated = [
        context_element(f'capability:c:b{index}', value) for index, value in enumerate(blocks) if value is not None
    ]
    texts += [*stated, SUPERSESSION_SENTENCE] if stated else []
    texts += rewrite
    joined = '\n\n'.join(texts)
    baseline = InstructionBaselinePart(tuple(entries))
    split = split_recorded_prefix(baseline, joined)
    assert split is not None
    assert [text for _, text in split] == texts
    assert split_recorded_prefix(baseline, joined + 'x') is None
    if len(texts) > 1:
        # Parts are joined by a blank line; the same text joined otherwise is not this prefix.
        assert split_recorded_prefix(baseline, '\n'.join(texts)) is None
