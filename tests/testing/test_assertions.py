"""The prefix checker (`assert_prefix_stable`) and its report (`prefix_reuse`): the messages a divergence fails
with, the bytes reused per request, and that the two agree on any conversation.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot

from pydantic_ai_append._wire.segments import segments
from pydantic_ai_append.testing import PrefixReuse, Segment, assert_prefix_stable, prefix_reuse

from ..bodies import body


def conversation_of(*message_lists: list[dict[str, Any]]) -> list[list[Segment]]:
    return [segments('openai-chat', body({'messages': messages})) for messages in message_lists]


USER = {'role': 'user', 'content': 'What is the time in Paris, please? I need it for a meeting.'}


def test_prefix_divergence_names_request_segment_and_bytes():
    requests = conversation_of(
        [USER],
        [USER, {'role': 'assistant', 'content': 'Noon.'}],
        [{**USER, 'content': 'What is the time in Berlin, please? I need it for a meeting.'}],
    )
    with pytest.raises(AssertionError) as error:
        assert_prefix_stable(requests)
    assert str(error.value) == snapshot("""\
request 2 does not extend request 1 byte for byte: first divergent segment is 0 (message in request 1, message in request 2), at byte 46 of it
  request 1: {"role":"user","content":"What is the time in Paris, please? I need it for a meeting."}
  request 2: {"role":"user","content":"What is the time in Berlin, please? I need it for a meeting."}
why: message 0 of the conversation changed or is gone in request 2: compaction or a history processor rewrote earlier messages, or this is another conversation
fix: if that is the compaction you chose, the move is expected; otherwise keep history append-only (the guard refuses rewrites of what the model already read: docs/guard.md)
(only if request 2 is meant to open a new window, pass new_windows=(2,))\
""")
    assert_prefix_stable(requests, new_windows=(2,))


def test_prefix_divergence_when_a_request_drops_segments():
    requests = conversation_of([USER, {'role': 'assistant', 'content': 'Noon.'}], [USER])
    with pytest.raises(AssertionError) as error:
        assert_prefix_stable(requests)
    assert str(error.value) == snapshot("""\
request 1 does not extend request 0 byte for byte: it ends after 1 segment, where request 0 goes on with segment 1 (message)
  request 0: {"role":"assistant","content":"Noon."}
why: message 1 of the conversation changed or is gone in request 1: compaction or a history processor rewrote earlier messages, or this is another conversation
fix: if that is the compaction you chose, the move is expected; otherwise keep history append-only (the guard refuses rewrites of what the model already read: docs/guard.md)
(only if request 1 is meant to open a new window, pass new_windows=(1,))\
""")


def test_prefix_reuse_report():
    requests = conversation_of(
        [USER],
        [USER, {'role': 'assistant', 'content': 'Noon.'}],
        [{'role': 'user', 'content': 'Hi'}],
    )
    assert prefix_reuse(requests) == snapshot(
        [
            PrefixReuse(index=0, reused_bytes=0, new_bytes=87, total_bytes=87),
            PrefixReuse(index=1, reused_bytes=87, new_bytes=38, total_bytes=125),
            PrefixReuse(index=2, reused_bytes=0, new_bytes=30, total_bytes=30),
        ]
    )


segment_lists = st.lists(
    st.lists(st.builds(Segment, st.sampled_from(['tool', 'message']), st.binary(min_size=1, max_size=3)), max_size=4),
    max_size=4,
)


@given(segment_lists)
def test_checker_and_report_agree(requests: list[list[Segment]]):
    # With no empty segments, a request reuses all of its predecessor's bytes exactly when it extends it.
    report = prefix_reuse(requests)
    extends = [report[index].reused_bytes == report[index - 1].total_bytes for index in range(1, len(requests))]
    try:
        assert_prefix_stable(requests)
    except AssertionError as error:
        first_break = extends.index(False) + 1
        assert str(error).startswith(f'request {first_break} does not extend request {first_break - 1}')
    else:
        assert all(extends)
