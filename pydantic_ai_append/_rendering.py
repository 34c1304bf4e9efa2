"""The exact text of every element the plugin puts on the wire.

Everything here is byte-stable and pinned by snapshot tests: a prefix block, the supersession sentence,
and each kind of change (a full replacement, a `<context-diff>`, a withdrawal). Rendering is pure: it
reads a record and returns text, so a past change renders to the same bytes on every later request.

Each delivery path has its own small renderer. `InlineRenderer` is for models whose profile supports
mid-conversation system messages (the *inline* path); `WrappedRenderer` is for the rest, where Pydantic AI sends
the same text as `<system>`-wrapped user text (the *wrapped* path), so a withdrawal also says that it stays in
effect.
"""

from __future__ import annotations

import difflib
import html
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from ._cache import BoundedCache, size_of
from ._records import InstructionDeltaPart, content_hash

__all__ = (
    'SUPERSESSION_SENTENCE',
    'InlineRenderer',
    'Renderer',
    'WrappedRenderer',
    'diff_hunks',
    'escape',
    'unescape',
)

SUPERSESSION_SENTENCE = (
    "Only the system's <context> elements count; "
    'a later one with the same id replaces the earlier until replaced again.'
)
"""Said once in the prefix, after the last tagged block."""

# An opening or closing tag of one of our elements, or of the `<system>` wrapper of the wrapped path, with any
# number of backslashes after its `<`. Escaping adds one backslash and unescaping removes one, so text that
# already contains an escaped form round-trips too, and text with no such tag is left exactly as it is.
_TAGS = re.compile(r'<(\\*)(\s*/?\s*)(context-diff|context|system)(?=[\s/>]|$)', re.IGNORECASE)
_ESCAPED_TAGS = re.compile(r'<\\(\\*)(\s*/?\s*)(context-diff|context|system)(?=[\s/>]|$)', re.IGNORECASE)


def escape(text: str) -> str:
    r"""Make `text` unable to open or close one of the package's elements, or the `<system>` wrapper.

    Used for a block's own text inside its element, and for the text of user prompts and tool returns in the
    copy of history a request sends: only the system's elements count, so no one else's text may read as one.
    A backslash goes after the `<` of each such tag, which a model reads plainly and `unescape` removes.

    ```python
    from pydantic_ai_append._rendering import escape, unescape

    print(escape('a <context id="x"> b </context>'))
    #> a <\context id="x"> b <\/context>
    print(unescape(escape('a </context> b')))
    #> a </context> b
    ```
    """
    if '<' not in text:
        return text
    return _TAGS.sub(lambda match: f'<\\{match[1]}{match[2]}{match[3]}', text)


def unescape(text: str) -> str:
    """Undo `escape`."""
    if '<' not in text:
        return text
    return _ESCAPED_TAGS.sub(lambda match: f'<{match[1]}{match[2]}{match[3]}', text)


def diff_hunks(old: str, new: str) -> str:
    r"""The unified-diff hunks that turn `old` into `new`, line by line, with one line of context.

    Lines are split on `'\n'` alone. The hunks are in the form `difflib.unified_diff(..., n=1)` writes, without
    its file headers (the element the hunks go in names the block): a range is `start,length`, or `start` alone
    when its length is 1. Equal texts have no hunks (`''`).

    Only the lines between the longest shared head and the longest shared tail are matched against each other,
    with the shared line either side for context, so the cost follows the changed lines rather than the whole
    text. The hunks are exactly `difflib`'s:

    - whenever `old` and `new` hold 2,000 lines or fewer between them (the whole texts are matched when
      trimming might change the result);
    - at any size, when no removed line is a line of `new`, no added line is a line of `old`, a pure insertion
      or deletion between a shared head and tail has the head's last line or the tail's first line only once in
      the longer text, and, if `new` has 200 lines or more, none of its lines occurs more than one time in 100
      plus one (the lines `difflib` skips as frequent).

    Otherwise they can differ from `difflib`'s (which then can take seconds on a large text of repeated lines),
    and are still a correct diff.

    ```python
    from pydantic_ai_append._rendering import diff_hunks

    print(diff_hunks('a\nb\nc', 'a\nB\nc'))
    #> @@ -1,3 +1,3 @@
    #>  a
    #> -b
    #> +B
    #>  c
    ```
    """
    if old == new:
        return ''
    head, tail, a, b = _changed_lines(old, new)
    low = max(head - 1, 0)  # The line `a` and `b` start at.
    outside = low + max(tail - 1, 0)  # The lines of either text not in `a` or `b`.
    groups: Iterable[list[tuple[str, int, int, int, int]]] | None = None
    if 2 * outside + len(a) + len(b) <= _WHOLE_LINES:
        before, after = a[0] if head else None, a[-1] if tail else None
        changed = (head - low, len(a) - (1 if tail else 0), head - low, len(b) - (1 if tail else 0))
        removed, added = a[changed[0] : changed[1]], b[changed[2] : changed[3]]
        if _trim_keeps_difflib(old, new, removed, added, before, after, outside + len(b)):
            # Nothing in the changed lines matches anything (see `_trim_keeps_difflib`): one hunk, the change
            # between its lines of context, as `difflib` would find it.
            groups = [
                [('equal', 0, 1, 0, 1)] * (before is not None)
                + [('change', *changed)]
                + [('equal', len(a) - 1, len(a), len(b) - 1, len(b))] * (after is not None)
            ]
        else:
            low, a, b = 0, old.split('\n'), new.split('\n')
    if groups is None:
        groups = difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(1)
    lines: list[str] = []
    for group in groups:
        _, a_first, _, b_first, _ = group[0]
        _, _, a_last, _, b_last = group[-1]
        lines.append(f'@@ -{_range(low + a_first, low + a_last)} +{_range(low + b_first, low + b_last)} @@')
        for tag, a_start, a_stop, b_start, b_stop in group:
            if tag == 'equal':
                lines += [f' {line}' for line in a[a_start:a_stop]]
                continue
            lines += [f'-{line}' for line in a[a_start:a_stop]]
            lines += [f'+{line}' for line in b[b_start:b_stop]]
    return '\n'.join(lines)


def _changed_lines(old: str, new: str) -> tuple[int, int, list[str], list[str]]:
    """How many lines `old` and `new` (which differ) share at their head and then at their tail, and the lines of
    each from the head's last line to the tail's first, both included when there is one.

    Short texts are split whole and compared line by line, which takes fewer steps than finding their shared
    characters; longer ones are compared on the characters, so only the lines between are split. Both ways find
    the same.
    """
    if len(old) + len(new) <= _SHORT_CHARS and old.count('\n') + new.count('\n') < _SHORT_LINES:
        return _changed_split_lines(old.split('\n'), new.split('\n'))
    return _changed_text_lines(old, new)


def _changed_text_lines(old: str, new: str) -> tuple[int, int, list[str], list[str]]:
    """What `_changed_lines` finds, found on the characters of `old` and `new`."""
    # The head: the lines before the first differing character, and the line that character ends if it ends one
    # text and is a line break in the other. `first` is where the head's last line starts.
    shared = _shared_chars(old, new, min(len(old), len(new)), tail=False)
    head = old.count('\n', 0, shared)
    last_break = old.rfind('\n', 0, shared)
    if (shared == len(old) and new.startswith('\n', shared)) or (shared == len(new) and old.startswith('\n', shared)):
        # One text is all head, so there is no tail.
        first = last_break + 1
        return head + 1, 0, old[first:].split('\n'), new[first:].split('\n')
    first = old.rfind('\n', 0, last_break) + 1 if head else 0
    # The tail, found the same way from the end in what the head leaves; `start` is where it starts in `old`.
    rest = last_break + 1
    shared = _shared_chars(old, new, min(len(old), len(new)) - rest, tail=True)
    tail = old.count('\n', len(old) - shared)
    start = old.find('\n', len(old) - shared) + 1
    if (len(old) - shared == rest and new[len(new) - shared - 1] == '\n') or (
        len(new) - shared == rest and old[len(old) - shared - 1] == '\n'
    ):
        tail += 1
        start = len(old) - shared
    if not tail:
        return head, 0, old[first:].split('\n'), new[first:].split('\n')
    a_stop, b_stop = old.find('\n', start), new.find('\n', start + len(new) - len(old))
    a = old[first : a_stop if a_stop >= 0 else len(old)]
    b = new[first : b_stop if b_stop >= 0 else len(new)]
    return head, tail, a.split('\n'), b.split('\n')


def _changed_split_lines(old: list[str], new: list[str]) -> tuple[int, int, list[str], list[str]]:
    """What `_changed_lines` finds, found on the lines of the two texts."""
    shortest = min(len(old), len(new))
    head = 0
    while head < shortest and old[head] == new[head]:
        head += 1
    low = max(head - 1, 0)
    if head == shortest:
        # One text is all head, so there is no tail.
        return head, 0, old[low:], new[low:]
    tail = 0
    while tail < shortest - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    if not tail:
        return head, 0, old[low:], new[low:]
    return head, tail, old[low : len(old) - tail + 1], new[low : len(new) - tail + 1]


_SHORT_CHARS = 8192
"""Up to how many characters (both texts together) `_changed_lines` may compare lines rather than characters."""

_SHORT_LINES = 128
"""Below how many line breaks (both texts together) `_changed_lines` may compare lines: each line is a step."""

_WHOLE_LINES = 2000
"""Up to how many lines (both texts together) the whole texts are matched when trimming could change the hunks:
few enough that matching them whole costs milliseconds rather than seconds, even when their lines repeat, so every
small text diffs as it always did."""


def _shared_chars(a: str, b: str, most: int, *, tail: bool) -> int:
    """How many characters `a` and `b` share at their head (or their tail), up to `most`.

    Found by comparing runs that double, then halve, in length, so a long shared run costs a few string
    comparisons rather than a Python step per character.
    """
    a_size, b_size = len(a), len(b)
    shared, step, bounded = 0, 1, False
    # The step doubles while the runs match; once one doesn't (or would pass `most`), the shared run is known to
    # end before `shared + 2 * step`, and the step halves down to one character.
    while step:
        if step <= most - shared and (
            a.endswith(b[b_size - shared - step : b_size - shared], 0, a_size - shared)
            if tail
            else a.startswith(b[shared : shared + step], shared)
        ):
            shared += step
            if not bounded:
                step *= 2
                continue
        bounded = True
        step //= 2
    return shared


def _trim_keeps_difflib(
    old: str, new: str, removed: list[str], added: list[str], before: str | None, after: str | None, lines: int
) -> bool:
    """Whether matching only the changed lines gives the hunks `difflib` gives for the whole texts.

    Args:
        old: The text before.
        new: The text after.
        removed: The lines of `old` between the shared head and the shared tail.
        added: The lines of `new` between them.
        before: The head's last line, if there is a head.
        after: The tail's first line, if there is a tail.
        lines: How many lines `new` has.

    `difflib` takes the longest matching run first, earliest in `old` and then in `new`, and matches each side of
    it the same way. When no removed line is in `new` and no added line is in `old`, no match holds a changed
    line, so each match lies in the head or the tail on each side: the longest is the head or the tail itself,
    in place, and what is left between them has no match at all, as when only the changed lines are matched.
    A pure insertion leaves the head and tail of `old` adjacent, and a run across that join could match
    elsewhere in `new`; it can't when `before` or `after` is found once in `new` (the same, sides swapped, for a
    deletion). `difflib` also skips, in a `new` of 200 lines or more, the lines found there more than
    `lines // 100 + 1` times, which changes which runs it finds, so there must be none.
    """
    if _holds_any(new, removed) or _holds_any(old, added):
        return False
    if (not removed or not added) and before is not None and after is not None:
        longer = old if removed else new
        if _repeats(longer, before) and _repeats(longer, after):
            return False
    return lines < 200 or max(Counter(new.split('\n')).values()) <= lines // 100 + 1


def _holds_any(text: str, lines: list[str]) -> bool:
    """Whether any of `lines` is a line of `text`."""
    if len(lines) > 8:
        return not set(text.split('\n')).isdisjoint(lines)
    framed = f'\n{text}\n'
    return any(f'\n{line}\n' in framed for line in lines)


def _repeats(text: str, line: str) -> bool:
    """Whether `line`, a line of `text`, is more than one of its lines."""
    framed, needle = f'\n{text}\n', f'\n{line}\n'
    return framed.find(needle, framed.find(needle) + 1) >= 0


def _range(start: int, stop: int) -> str:
    """A hunk's range of lines `start` to `stop` (from 0, `stop` not included), as unified diffs write it.

    Never empty here: each text has a line at least, so a hunk that removes no line has a line of context, and so
    does one that adds none.
    """
    return str(start + 1) if stop - start == 1 else f'{start + 1},{stop - start}'


def _attribute(value: str) -> str:
    return html.escape(value, quote=True)


def context_element(block_id: str, content: str) -> str:
    """A complete `<context>` element stating a block's value."""
    return f'<context id="{_attribute(block_id)}">\n{escape(content)}\n</context>'


def diff_element(block_id: str, hunks: str) -> str:
    """A `<context-diff>` element holding a change as unified-diff hunks."""
    return f'<context-diff id="{_attribute(block_id)}">\n{escape(hunks)}\n</context-diff>'


@dataclass(frozen=True)
class Renderer:
    """Turns blocks and changes into their exact text for one delivery path.

    One subclass per path; each instance is a small stateless object, so instances compare equal and a
    rendered change can be cached by renderer.

    ```python
    from pydantic_ai_append._rendering import InlineRenderer, WrappedRenderer

    print(InlineRenderer().withdrawal('agent:memory'))
    #> <context id="agent:memory" withdrawn="true">
    #> This context no longer applies.
    #> </context>
    print(WrappedRenderer().path)
    #> wrapped
    ```
    """

    inline: ClassVar[bool] = True
    """Whether changes reach the model as mid-conversation system messages (rather than `<system>` user text)."""

    @property
    def path(self) -> str:
        """The delivery path's name, as telemetry and snapshots call it."""
        return 'inline' if self.inline else 'wrapped'

    def block(self, block_id: str, content: str) -> str:
        """A block as the prefix states it."""
        if type(block_id) is not str or type(content) is not str:
            # A subclass may compare or hash unlike its text, which would make the cache give another block's text.
            return context_element(block_id, content)
        key = (block_id, content)
        if (text := _BLOCK_TEXTS.get(key)) is None:
            text = context_element(block_id, content)
            _BLOCK_TEXTS.put(key, text, size=size_of([text, content]))
        return text

    def withdrawal(self, block_id: str) -> str:
        """The element saying a block no longer applies."""
        text = 'This context no longer applies.'
        if not self.inline:
            text += ' The withdrawal stays in effect until a later <context> element with the same id replaces it.'
        return f'<context id="{_attribute(block_id)}" withdrawn="true">\n{text}\n</context>'

    def change(self, delta: InstructionDeltaPart, *, base_matches: bool) -> str:
        """The element delivering `delta`.

        Args:
            delta: The recorded change.
            base_matches: Whether the text the model last received for the block is the one the change's
                `diff` was taken against. Without it, the diff would patch the wrong text, so the full
                replacement is sent.
        """
        return _change_text(self, delta, base_matches)


@dataclass(frozen=True)
class InlineRenderer(Renderer):
    """The renderer for models that take mid-conversation system messages."""

    inline: ClassVar[bool] = True


@dataclass(frozen=True)
class WrappedRenderer(Renderer):
    """The renderer for models that get changes as `<system>`-wrapped user text: a withdrawal says it stays."""

    inline: ClassVar[bool] = False


_BLOCK_TEXTS = BoundedCache[tuple[str, str], str](max_entries=4096, max_bytes=64 * 1024 * 1024, name='block texts')
"""Each prefix block's text, by the block's id and value: every request of a window states its baseline's blocks
again, the same on both paths."""

_CHANGE_TEXTS = BoundedCache[tuple[bool, InstructionDeltaPart, bool], str](
    max_entries=8192, max_bytes=64 * 1024 * 1024, name='change texts'
)
"""Each change's text per path, by the change's value: every request of a window delivers all of the window's
changes again, and rendering each once keeps a request's cost from growing with the text of the changes before it."""


def _change_text(renderer: Renderer, delta: InstructionDeltaPart, base_matches: bool) -> str:
    key = (renderer.inline, delta, base_matches)
    if (text := _CHANGE_TEXTS.get(key)) is not None:
        return text
    if delta.content is None:
        text = renderer.withdrawal(delta.id)
    elif delta.diff is not None and base_matches:
        text = diff_element(delta.id, delta.diff)
    else:
        text = context_element(delta.id, delta.content)
    # The key holds the change, whose texts are kept as long as the entry.
    _CHANGE_TEXTS.put(key, text, size=size_of([text, delta.content, delta.diff]))
    return text


def record_change(
    block_id: str, previous: str | None, content: str | None, *, previous_hash: str | None = None
) -> InstructionDeltaPart:
    """Record one block's change from `previous` to `content`, with a diff when that is the shorter element.

    This is the only place a diff is computed: later requests render the stored hunks.

    Args:
        block_id: The block's id.
        previous: The text the model last received for the block, `None` if it had none.
        content: The block's text now, `None` if it is withdrawn.
        previous_hash: The digest of `previous`, when the caller holds it already (a window keeps the digest of
            each text it holds); it is computed when not given.
    """
    if previous is None or content is None:
        return InstructionDeltaPart(id=block_id, content=content, base_hash=None)
    hunks = diff_hunks(previous, content)
    length = len(diff_element(block_id, hunks))
    # Escaping only adds characters, so the full element is at least its unescaped length: a long block's text is
    # escaped just to be measured only when the diff isn't shorter than that.
    shorter = length < len(context_element(block_id, '')) + len(content) or length < len(
        context_element(block_id, content)
    )
    return InstructionDeltaPart(
        id=block_id,
        content=content,
        base_hash=previous_hash if previous_hash is not None else content_hash(previous),
        diff=hunks if shorter else None,
    )
