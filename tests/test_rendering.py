"""The wire text itself: escaping, diffs and each element, pinned byte for byte, the same on every path.

Pure functions, tested directly: their bytes are the contract the agent tests build on.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot

from pydantic_ai_append._diff import diff_hunks
from pydantic_ai_append._rendering import change_text, context_element, escape, unescape

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


def apply_hunks(old: str, hunks: str) -> str:
    """Apply hunks from `diff_hunks` to `old`: enough of `patch` to check that the hunks say what changed."""
    lines = old.split('\n')
    result: list[str] = []
    position = 0
    for line in hunks.split('\n'):
        if line.startswith('@@'):
            start = int(line.split(' ')[1].split(',')[0].lstrip('-'))
            # A hunk of an empty side names the line before it.
            start = start - 1 if ',0' not in line.split(' ')[1] else start
            result.extend(lines[position:start])
            position = start
        elif line.startswith('-'):
            position += 1
        elif line.startswith('+'):
            result.append(line[1:])
        else:
            result.append(lines[position])
            position += 1
    return '\n'.join(result + lines[position:])


@given(
    st.lists(st.sampled_from(['a', 'b', 'c', '', 'd e']), max_size=12),
    st.lists(st.sampled_from(['a', 'b', 'x', '']), max_size=12),
)
def test_diff_hunks_turn_the_old_text_into_the_new(old: list[str], new: list[str]):
    assert apply_hunks('\n'.join(old), diff_hunks('\n'.join(old), '\n'.join(new))) == '\n'.join(new)


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
