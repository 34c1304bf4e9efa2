"""`diff_hunks` against `difflib` and `apply_hunks`: the hunks rebuild the new text, and are `difflib`'s where it says.

A unit test of a pure function: the agent tests pin the bytes of small diffs, and these check the rest, large texts
of repeated lines included, which an agent run can't cover broadly.
"""

from __future__ import annotations

import difflib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pydantic_ai_append._diff import apply_hunks, diff_hunks

# More lines than `diff_hunks` matches whole (2,000 between both texts), so padding by this much on each side takes
# a pair of texts past it.
PAST_WHOLE = 1001


def difflib_hunks(old: str, new: str) -> str:
    """What `diff_hunks` always gave: `difflib`'s unified diff with one line of context, without file headers."""
    return '\n'.join(list(difflib.unified_diff(old.split('\n'), new.split('\n'), n=1, lineterm=''))[2:])


def trimming_keeps_difflib(old: list[str], new: list[str]) -> bool:
    """The condition under which `diff_hunks` says it gives `difflib`'s hunks at any size, worked out on lists."""
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    removed, added = old[head : len(old) - tail], new[head : len(new) - tail]
    if set(removed) & set(new) or set(added) & set(old):
        return False
    if (not removed or not added) and head and tail:
        longer = old if removed else new
        if longer.count(old[head - 1]) > 1 and longer.count(old[len(old) - tail]) > 1:
            return False
    return len(new) < 200 or max(Counter(new).values()) <= len(new) // 100 + 1


lines = st.lists(st.sampled_from(['a', 'b', '', 'a b', 'c']), max_size=12)
edited = st.lists(st.sampled_from(['a', 'b', '', 'x', 'y']), max_size=12)


@st.composite
def padded(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """Two line lists sharing a head and a tail of repeated lines, short or long enough to pass the whole limit."""
    filler = draw(st.sampled_from([['a', 'b'], ['', 'a', '', 'b'], ['p'], [f'line {n}' for n in range(PAST_WHOLE)]]))
    size = draw(st.sampled_from([0, 3, PAST_WHOLE]))
    head = [filler[index % len(filler)] for index in range(draw(st.integers(0, size)))]
    tail = [filler[-1 - index % len(filler)] for index in range(draw(st.integers(0, size)))]
    return head + draw(lines) + tail, head + draw(edited) + tail


@settings(max_examples=300, deadline=None)
@given(padded())
def test_the_hunks_rebuild_the_new_text(texts: tuple[list[str], list[str]]):
    old, new = ('\n'.join(text) for text in texts)
    hunks = diff_hunks(old, new)
    assert hunks == '' if old == new else apply_hunks(old, hunks) == new


@settings(max_examples=300, deadline=None)
@given(padded())
def test_the_hunks_are_difflibs_where_promised(texts: tuple[list[str], list[str]]):
    old, new = texts
    if len(old) + len(new) <= 2000 or trimming_keeps_difflib(old, new):
        assert diff_hunks('\n'.join(old), '\n'.join(new)) == difflib_hunks('\n'.join(old), '\n'.join(new))


@given(lines, edited)
def test_small_texts_diff_as_difflib_does(old: list[str], new: list[str]):
    assert diff_hunks('\n'.join(old), '\n'.join(new)) == difflib_hunks('\n'.join(old), '\n'.join(new))


def test_a_large_text_can_get_other_hunks_than_difflibs():
    # The negative control of the promise: a line inserted into a long run of two alternating lines. `difflib`
    # matches the longest run first, which here is the one shifted past the insertion, so it re-adds lines at the
    # head and removes them at the tail; `diff_hunks` inserts the one line. Outside the promise, so both may stand.
    old = ['a', 'b'] * 1200
    new = [*old[:2], 'x', *old[2:]]
    assert not trimming_keeps_difflib(old, new)
    hunks = diff_hunks('\n'.join(old), '\n'.join(new))
    assert hunks == '@@ -2,2 +2,3 @@\n b\n+x\n a'
    assert hunks != difflib_hunks('\n'.join(old), '\n'.join(new))
    # The same texts, short enough, are matched whole and get `difflib`'s hunks.
    short_old, short_new = old[:200], [*old[:2], 'x', *old[2:200]]
    assert not trimming_keeps_difflib(short_old, short_new)
    assert diff_hunks('\n'.join(short_old), '\n'.join(short_new)) == difflib_hunks(
        '\n'.join(short_old), '\n'.join(short_new)
    )


numbered = [f'line {n}' for n in range(3000)]


EDGES = [
    pytest.param('a\nb\nc', 'x\nb\nc', id='first line'),
    pytest.param('a\nb\nc', 'a\nb\nx', id='last line'),
    pytest.param('a\nb\nc', 'x\ny\nz', id='every line'),
    pytest.param('a\nb', 'a\nb\nc', id='line added at the end'),
    pytest.param('a\nb\n', 'a\nb\nc\n', id='line added before a trailing newline'),
    pytest.param('a\nb', 'a\nb\n', id='trailing newline added'),
    pytest.param('a\nb\n', 'a\nb', id='trailing newline removed'),
    pytest.param('b\nc', 'a\nb\nc', id='line added at the start'),
    pytest.param('a\nb\nc', 'b\nc', id='first line removed'),
    pytest.param('a\nb\nc', 'a\nc', id='middle line removed'),
    pytest.param('a\nb\nc', 'a', id='lines removed at the end'),
    pytest.param('a\nc', 'a\nb\nc', id='middle line added'),
    pytest.param('', 'a', id='from empty'),
    pytest.param('a', '', id='to empty'),
    pytest.param('', '\n', id='empty to one line break'),
    pytest.param('ab\nc', 'a\nb\nc', id='line split'),
    pytest.param('a\nb\nc\nd\ne', 'a\nB\nc\nD\ne', id='two hunks merged'),
    pytest.param('a\nb\nc\nd\ne\nf', 'A\nb\nc\nd\ne\nF', id='two hunks apart'),
]
"""Edits at the edges of short texts, and across all of them."""


@pytest.mark.parametrize(
    'old,new',
    [
        *EDGES,
        pytest.param('\n'.join(numbered), '\n'.join(['edited', *numbered[1:]]), id='long: first line'),
        pytest.param('\n'.join(numbered), '\n'.join([*numbered[:-1], 'edited']), id='long: last line'),
        pytest.param('\n'.join(numbered), '\n'.join([*numbered[:1500], 'new', *numbered[1500:]]), id='long: insertion'),
        pytest.param('\n'.join(numbered), '\n'.join([*numbered[:1500], *numbered[1501:]]), id='long: deletion'),
        pytest.param('\n'.join(numbered), '\n'.join(numbered[:-1]), id='long: last line removed'),
        pytest.param('\n'.join(numbered), '\n'.join(numbered) + '\n', id='long: trailing newline'),
        pytest.param('\n'.join(numbered), '\n'.join(f'{line}!' for line in numbered), id='long: every line'),
    ],
)
def test_edits_at_the_edges_and_everywhere(old: str, new: str):
    hunks = diff_hunks(old, new)
    assert apply_hunks(old, hunks) == new
    assert hunks == difflib_hunks(old, new)


def test_equal_texts_have_no_hunks():
    assert diff_hunks('a\nb', 'a\nb') == ''
    assert diff_hunks('', '') == ''


# Longer than the texts `diff_hunks` compares line by line (8,192 characters between both), so a text whose every
# line ends with it is compared on the characters.
LONG_ENDING = 'z' * 9000


def lengthened(text: str) -> str:
    """`text` with `LONG_ENDING` after each of its lines: lines equal in it exactly where they are equal in `text`."""
    return '\n'.join(f'{line}{LONG_ENDING}' for line in text.split('\n'))


def lengthened_hunks(hunks: str) -> str:
    """The hunks of two texts, as they read for the two texts `lengthened`."""
    return '\n'.join(line if line.startswith('@@') else f'{line}{LONG_ENDING}' for line in hunks.split('\n') if line)


@settings(max_examples=300, deadline=None)
@given(lines, edited)
def test_short_and_long_lines_diff_alike(old: list[str], new: list[str]):
    # Short texts are compared line by line and long ones on the characters; the hunks must not depend on which.
    short_old, short_new = '\n'.join(old), '\n'.join(new)
    assert diff_hunks(lengthened(short_old), lengthened(short_new)) == lengthened_hunks(
        diff_hunks(short_old, short_new)
    )


@pytest.mark.parametrize('old,new', EDGES)
def test_edges_diff_alike_with_short_and_long_lines(old: str, new: str):
    # `test_edits_at_the_edges_and_everywhere` checks the same edits against `difflib`.
    assert diff_hunks(lengthened(old), lengthened(new)) == lengthened_hunks(diff_hunks(old, new))


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


def patched(old: str, hunks: str) -> str:
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
    assert patched('\n'.join(old), diff_hunks('\n'.join(old), '\n'.join(new))) == '\n'.join(new)
