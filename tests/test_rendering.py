"""The wire text itself: escaping, diffs and each renderer's elements, pinned byte for byte.

Pure functions, tested directly: their bytes are the contract the agent tests build on.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from inline_snapshot import snapshot

from pydantic_ai_append import InstructionDeltaPart
from pydantic_ai_append._rendering import InlineRenderer, WrappedRenderer, diff_hunks, escape, unescape

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


def test_each_element_per_path():
    change = InstructionDeltaPart(
        id='capability:todos:state', content='- [x] a', base_hash='h', diff='@@ -1 +1 @@\n-- [ ] a\n+- [x] a'
    )
    withdrawal = InstructionDeltaPart(id='capability:todos:state', content=None, base_hash=None)
    rendered = {
        renderer.path: [
            renderer.block('capability:todos:state', '- [ ] a </context>'),
            renderer.change(change, base_matches=True),
            renderer.change(change, base_matches=False),
            renderer.change(withdrawal, base_matches=False),
        ]
        for renderer in (InlineRenderer(), WrappedRenderer())
    }
    assert rendered == snapshot(
        {
            'inline': [
                """\
<context id="capability:todos:state">
- [ ] a <\\/context>
</context>\
""",
                """\
<context-diff id="capability:todos:state">
@@ -1 +1 @@
-- [ ] a
+- [x] a
</context-diff>\
""",
                """\
<context id="capability:todos:state">
- [x] a
</context>\
""",
                """\
<context id="capability:todos:state" withdrawn="true">
This context no longer applies.
</context>\
""",
            ],
            'wrapped': [
                """\
<context id="capability:todos:state">
- [ ] a <\\/context>
</context>\
""",
                """\
<context-diff id="capability:todos:state">
@@ -1 +1 @@
-- [ ] a
+- [x] a
</context-diff>\
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
            ],
        }
    )


def test_the_wording_of_a_change_is_kept_by_record_content():
    # Internal: what an agent can't show, the wording object being reused rather than rendered again, also for an
    # equal record decoded again (as from history freshly loaded from JSON).
    from pydantic_ai_append._delivery import wording_of

    delta = InstructionDeltaPart(id='agent', content='2', base_hash=None)
    wording = wording_of(delta, False)
    assert wording == snapshot(
        {
            'inline': """\
<context id="agent">
2
</context>\
""",
            'wrapped': """\
<context id="agent">
2
</context>\
""",
        }
    )
    assert wording_of(delta, False) is wording
    equal = InstructionDeltaPart(id='agent', content='2', base_hash=None)
    assert wording_of(equal, False) is wording
    # Another content, or another base, is rendered on its own.
    assert (
        wording_of(InstructionDeltaPart(id='agent', content='3', base_hash=None), False)['inline'] != wording['inline']
    )
    assert wording_of(delta, True) is not wording
