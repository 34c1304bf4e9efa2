"""Rebuilding a change stored as a diff: its hunks applied to the text they were taken against, then checked.

A change to a long block is stored (record format 2) as the unified-diff hunks the model was sent, with the
digests of the text before and after, rather than as a second full copy of the block. The new text is rebuilt
here, and only given out when the text it was rebuilt from has the stored base digest and the result has the
stored digest: a diff that doesn't apply, or applies to the wrong text, never yields a value.

Every request of a window reads all of its changes, and a server that stores history reads them from a fresh
JSON load each time, so each rebuilt change is kept by what it was rebuilt from (see `_REBUILT`), and a window's
changes are applied once per process rather than once per request.
"""

from __future__ import annotations

import re

from ._cache import BoundedCache, size_of
from ._records import InstructionDeltaPart, StoredDiff, content_hash, rebuilt_change

__all__ = ('apply_hunks', 'rebuild')

# The header of a hunk as `difflib.unified_diff` writes it: a range is `start,length`, or `start` alone when the
# length is 1; an empty range's start is the line before it.
_HEADER = re.compile(r'@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@')


def apply_hunks(old: str, hunks: str) -> str | None:
    r"""The text `hunks` make of `old`, or `None` if they don't apply to it: the inverse of `diff_hunks`.

    Lines are split on `'\n'` alone, as `diff_hunks` splits them, and every context and removed line must be the
    line of `old` it names.

    ```python
    from pydantic_ai_append._patch import apply_hunks
    from pydantic_ai_append._rendering import diff_hunks

    print(repr(apply_hunks('a\nb\nc', diff_hunks('a\nb\nc', 'a\nB\nc'))))
    #> 'a\nB\nc'
    print(apply_hunks('a\nx\nc', diff_hunks('a\nb\nc', 'a\nB\nc')))
    #> None
    ```
    """
    lines = old.split('\n')
    body = hunks.split('\n')
    result: list[str] = []
    taken = 0  # How many lines of `old` are in `result` or were removed.
    index = 0
    while index < len(body):
        header = _HEADER.fullmatch(body[index])
        if header is None:
            return None
        old_length, new_length = int(header[2] or 1), int(header[4] or 1)
        # A range's start counts from 1, except an empty range's, which names the line before it.
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
                taken += 1
                removed += 1
            if adds:
                result.append(text)
                added += 1
            index += 1
    result += lines[taken:]
    return '\n'.join(result)


_REBUILT = BoundedCache[tuple[str, str, str, str], InstructionDeltaPart](
    max_entries=16_384, max_bytes=64 * 1024 * 1024, name='rebuilt changes'
)
"""Each change already rebuilt, by its block id, base digest, diff and digest.

The key names no text, only digests, and is looked up only once the window's own text for the block has been
found to have the base digest: what it gives is what applying the diff to that text gives, so a hit never tells a
conversation anything its own history doesn't. Keyed by content, not by the identity of a stored dict, so a
history freshly loaded from JSON hits too, and the same change object comes back each time, which the wording
caches after it key on.
"""


def rebuild(stored: StoredDiff, base: str | None, base_hash: str | None) -> InstructionDeltaPart | str:
    """The change `stored` records, rebuilt from `base`, the text the window holds for the block; or why it can't be.

    Args:
        stored: The change as history stores it.
        base: The text the window holds for the block, or `None` if it holds none.
        base_hash: The digest of `base`, which the caller has (the window keeps each block's).

    Returns:
        The change with its text, or the reason it can't be rebuilt, for logs.
    """
    if base is None or base_hash != stored.base_hash:
        return "the change's diff was taken against text the window doesn't hold for the block"
    key = (stored.id, stored.base_hash, stored.diff, stored.content_hash)
    if (known := _REBUILT.get(key)) is not None:
        return known
    content = apply_hunks(base, stored.diff)
    if content is None:
        return "the change's diff doesn't apply to the text the window holds for the block"
    if content_hash(content) != stored.content_hash:
        return "the change's diff doesn't rebuild the text it records"
    change = rebuilt_change(
        id=stored.id, content=content, content_hash=stored.content_hash, base_hash=stored.base_hash, diff=stored.diff
    )
    _REBUILT.put(key, change, size=size_of([content, stored.diff]) + 256)
    return change
