"""The diff of a changed block: unified-diff hunks with one line of context, and applying them back.

The hunks are `difflib`'s without file headers; `apply_hunks` is their inverse, which rebuilds a block's text from
history when no copy of it is at hand.
"""

from __future__ import annotations

import difflib
import re

_WHOLE_LINES = 2000
"""Up to how many lines (both texts together) whole texts are matched: above, `difflib` can take seconds."""

# A hunk header as `difflib.unified_diff` writes it: a range is `start,length`, or `start` alone when its length is 1.
_HEADER = re.compile(r'@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@')


def diff_hunks(old: str, new: str) -> str:
    r"""The hunks (`difflib.unified_diff(..., n=1)`'s) that turn `old` into `new`, split on `'\n'`; `''` if equal.

    Above 2,000 lines only the lines between the longest shared head and tail are matched: still a correct diff.
    """
    if old == new:
        return ''
    a, b = old.split('\n'), new.split('\n')
    low = 0
    if len(a) + len(b) > _WHOLE_LINES:
        shortest = min(len(a), len(b))
        head = next((index for index in range(shortest) if a[index] != b[index]), shortest)
        tail = next((index for index in range(shortest - head) if a[-1 - index] != b[-1 - index]), shortest - head)
        low = max(head - 1, 0)
        a, b = a[low : len(a) - max(tail - 1, 0)], b[low : len(b) - max(tail - 1, 0)]
    lines: list[str] = []
    for group in difflib.SequenceMatcher(None, a, b).get_grouped_opcodes(1):
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


def _range(start: int, stop: int) -> str:
    return str(start + 1) if stop - start == 1 else f'{start + 1},{stop - start}'


def apply_hunks(old: str, hunks: str) -> str | None:
    """The text `hunks` make of `old`, or `None` if they don't apply to it: every context and removed line must be the
    line of `old` it names.
    """
    lines, body = old.split('\n'), hunks.split('\n')
    result: list[str] = []
    taken = index = 0  # Lines of `old` used so far; lines of `body` read so far.
    while index < len(body):
        header = _HEADER.fullmatch(body[index])
        if header is None:
            return None
        old_length, new_length = int(header[2] or 1), int(header[4] or 1)
        # A range counts from 1, except an empty one, which names the line before it.
        first = int(header[1]) - (1 if old_length else 0)
        if first < taken or first + old_length > len(lines):
            return None
        result += lines[taken:first]
        taken = first
        if len(result) != int(header[3]) - (1 if new_length else 0):
            return None
        index += 1
        removed = added = 0
        while removed < old_length or added < new_length:
            line = body[index] if index < len(body) else ''
            tag, text = line[:1], line[1:]
            keeps, adds = tag in (' ', '-'), tag in (' ', '+')
            if not (keeps or adds) or (keeps and removed == old_length) or (adds and added == new_length):
                return None
            if keeps:
                if lines[taken] != text:
                    return None
                taken, removed = taken + 1, removed + 1
            if adds:
                result.append(text)
                added += 1
            index += 1
    return '\n'.join(result + lines[taken:])
