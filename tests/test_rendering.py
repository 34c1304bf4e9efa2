"""The wire text itself: escaping, diffs and each element, pinned byte for byte, the same on every path.

Pure functions, tested directly: their bytes are the contract the agent tests build on.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot

from pydantic_ai_append._rendering import change_text, change_value, context_element, escape, unescape

# Text built from the pieces that matter to escaping, so the interesting cases come up often.
tag_text = st.lists(
    st.sampled_from(
        ['</context>', '</context-diff>', '</system>', '</CONTEXT >', '<\\/context>', '<', '\\', '/', 'a', '\n']
    )
).map(''.join)
any_text = st.one_of(st.text(), tag_text)


@given(any_text)
def test_escaping_round_trips(text: str):
    assert unescape(escape(text)) == text


@given(any_text)
def test_escaped_text_cannot_close_an_element(text: str):
    lowered = escape(text).lower()
    assert '</context>' not in lowered and '</context-diff>' not in lowered and '</system>' not in lowered


@given(st.text().filter(lambda text: '<' not in text or not any(tag in text.lower() for tag in ('context', 'system'))))
def test_text_without_tags_is_unchanged(text: str):
    assert escape(text) == text
    assert unescape(text) == text


def test_each_element():
    block = 'capability:todos:state'
    long = '\n'.join(f'- [ ] task {number}' for number in range(6))
    rendered = [
        context_element(block, '- [ ] a </context>'),
        change_text(block, long, long.replace('[ ] task 3', '[x] task 3')),
        change_text(block, '- [ ] a', '- [x] a'),
        change_text(block, '- [ ] a', None),
    ]
    assert rendered == snapshot(
        [
            """\
<context id="capability:todos:state">
- [ ] a <\\/context>
</context>\
""",
            """\
<context id="capability:todos:state">
- [ ] task 0
- [ ] task 1
- [ ] task 2
- [x] task 3
- [ ] task 4
- [ ] task 5
</context>\
""",
            """\
<context id="capability:todos:state">
- [x] a
</context>\
""",
            """\
<context id="capability:todos:state" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context>\
""",
        ]
    )


# Lines of a block's text: `\r`, other line breaks Python knows and empty lines are all kept as they are, since texts
# are split on `\n` alone.
lines = st.lists(
    st.sampled_from(['a', 'b', '', ' a', '-b', '+c', '@@ -1 +1 @@', 'x\ry', 'u\u2028v', '\\', '</context>']),
    max_size=12,
)


@given(st.none() | lines, st.none() | lines)
def test_a_change_reads_back_as_the_value_it_sends(old_lines: list[str] | None, new_lines: list[str] | None):
    old, new = (None if text is None else '\n'.join(text) for text in (old_lines, new_lines))
    assert change_value('agent:memory', change_text('agent:memory', old, new), old) == new


@pytest.mark.parametrize(
    ('text', 'previous'),
    [
        pytest.param('plain text', 'a', id='not-an-element'),
        pytest.param('<context id="agent:other">\nx\n</context>', 'a', id='another-block'),
        pytest.param(
            '<context-diff id="agent:memory">\n@@ -1 +1 @@\n-a\n+b\n</context-diff>', None, id='diff-of-nothing'
        ),
        pytest.param('<context-diff id="agent:memory">\n@@ -1 +1 @@\n-x\n+b\n</context-diff>', 'a', id='diff-of-other'),
    ],
)
def test_a_text_that_isnt_a_change_of_the_block_reads_as_none(text: str, previous: str | None):
    assert isinstance(change_value('agent:memory', text, previous), ValueError)
