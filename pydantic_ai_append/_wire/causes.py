"""Why a request moved its conversation's prefix, told from what was sent: the cause and the fix to suggest.

A divergence says where two requests part; the cause is often earlier in the story. When a rewrite-mode block or a
clock in a dynamic instruction changes, the plugin opens a new window whose prefix states every append-mode block's
current value, so the first differing byte sits inside an append-mode block, which did its job. The plugin's own
elements are in the wire (`<context id="...">` blocks, then the supersession sentence), and its prefix has a fixed
order: literal instructions, the window's blocks and the sentence, then dynamic instructions it doesn't own and
rewrite-mode blocks. So comparing the instructions of the two requests part by part tells the cause:

- `literal`: text before the blocks changed (a literal instruction);
- `rewrite`: text after the blocks changed (a rewrite-mode block, or a dynamic instruction such as a clock);
- `policy`: a block left the blocks or joined them (it changed between `'append'` and `'rewrite'`, or went away);
- `lost-record`: only the blocks' values changed, and the conversation is intact but for the changes the plugin had
  delivered: the new window was opened because the history lost the plugin's records (a UI adapter or a store of role
  and text dropped them, and no record store put them back; or a record failed its check). A UI adapter strips the
  delivered changes with the records, so their absence alone is no compaction; but the plugin stops sending them too
  when it opens a window by price, so where re-reading them could have cost as much as writing the request again, the
  cause says it may be either. Where the new window states the values the old one began with, only the changes are
  gone, which a history processor that dropped them would leave too;
- `compaction`: the earlier messages are not all there any more (compaction or a history processor rewrote them);
- `tools`: a tool definition changed, was added or removed;
- `instructions`: instructions changed where the plugin states no block;
- `setting`: a request field the provider documents as part of its cache changed (`cache_rules`).

Only the checks' messages use this: the verdict itself stays byte for byte.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Literal, cast

from .._rendering import SUPERSESSION_SENTENCE
from .changes import Delivered, changes_lost, price_may_have_opened
from .segments import Segment, excerpt, first_difference

CauseKind = Literal['literal', 'rewrite', 'policy', 'lost-record', 'compaction', 'tools', 'instructions', 'setting']

_ELEMENT = re.compile(r'<context id="([^"]*)">\n(.*?)\n</context>', re.DOTALL)
_NO_STORE = (
    "the history lost the plugin's records and no record store put them back (`record_store=None`, or its entry for "
    'this conversation was evicted, expired or saved under another `conversation_id`)'
)
_STORE_FIX = (
    "behind a UI adapter or a store of role and text, keep a record store (`record_store=`: the process's "
    '`InMemoryRecordStore` by default; across processes `SQLiteRecordStore` or your own, with room and time for every '
    "open conversation) and pass every run of a conversation the same `conversation_id` (the adapters pass the chat's "
    'id); elsewhere pass on the history Pydantic AI returns (docs/behind-a-ui.md)'
)
_APPEND_FIX = (
    "make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static "
    '(a clock belongs in an append-mode block or in the user turn)'
)


@dataclass(frozen=True)
class Cause:
    """Why a request moved the prefix, and what to change so it doesn't."""

    kind: CauseKind
    """What moved it, as the module docstring lists."""

    reason: str
    """The cause in a sentence, naming the block or the text that changed."""

    fix: str
    """What to change in the agent so the prefix stays."""


@dataclass(frozen=True)
class _Instructions:
    """A request's instructions, split the way the plugin orders its prefix."""

    head: str
    """The text before the first block (literal instructions)."""

    blocks: dict[str, str]
    """Each stated block's id and text, in order."""

    tail: list[str]
    """The parts after the blocks and the sentence: dynamic instructions and rewrite-mode blocks."""


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in cast('list[object]', value) for text in _texts(item)]
    if isinstance(value, dict):
        item = cast('dict[str, object]', value)
        return _texts(item['text']) if 'text' in item else _texts(item.get('content'))
    return []


def _value(segment: Segment) -> object:
    # Segments are canonical JSON when they come from a body; anything else has nothing to tell.
    try:
        return json.loads(segment.data)
    except ValueError:
        return None


def _role(segment: Segment) -> object:
    value = _value(segment)
    return cast('dict[str, object]', value).get('role') if isinstance(value, dict) else None


def _is_instruction(segment: Segment) -> bool:
    if segment.kind in ('system', 'instructions'):
        return True
    return segment.kind in ('message', 'input') and _role(segment) in ('system', 'developer')


def _instructions(segments: Sequence[Segment]) -> tuple[list[str], int]:
    """The texts of the leading instruction segments (after the tools), and the index of the first segment after."""
    index = next((i for i, segment in enumerate(segments) if segment.kind != 'tool'), len(segments))
    parts: list[str] = []
    while index < len(segments) and _is_instruction(segments[index]):
        parts.extend(_texts(_value(segments[index])))
        index += 1
    return parts, index


def _split(parts: list[str]) -> _Instructions:
    text = '\n\n'.join(parts)
    elements = list(_ELEMENT.finditer(text))
    if not elements:
        return _Instructions(text, {}, [])
    # An id is written HTML-escaped in its element; a report names it as the agent does.
    blocks = {html.unescape(element[1]): element[2] for element in elements}
    end = text.find(SUPERSESSION_SENTENCE)
    after = text[end + len(SUPERSESSION_SENTENCE) :] if end >= 0 else text[elements[-1].end() :]
    return _Instructions(text[: elements[0].start()], blocks, [part for part in after.split('\n\n') if part.strip()])


def _first_changed(before: Sequence[str], after: Sequence[str]) -> str:
    """The first part that differs, as a change (`'old' became 'new'`, around where they differ), removed or added."""
    old, new = next(((x, y) for x, y in zip_longest(before, after, fillvalue='') if x != y), ('', ''))
    if old and new:
        # Whitespace folded first, so the excerpt is a line of the report however the text runs.
        old, new = ' '.join(old.split()).encode(), ' '.join(new.split()).encode()
        offset = first_difference(old, new)
        return f'{excerpt(old, offset)!r} became {excerpt(new, offset)!r}'
    return f'{_short(old)!r} was removed' if old else f'{_short(new)!r} was added'


def _short(text: str) -> str:
    return excerpt(' '.join(text.split()).encode(), 0)


def _history(segments: Sequence[Segment]) -> Sequence[Segment]:
    """The messages a request sends after its instructions."""
    _, start = _instructions(segments)
    return segments[start:]


def _history_kept(earlier: Sequence[Segment], later: Sequence[Segment]) -> bool:
    """Whether every message `earlier` sent after its instructions is in `later`, in order, from the same place."""
    history = _history(earlier)
    return list(_history(later)[: len(history)]) == list(history)


def _changes_lost(earlier: Sequence[Segment], later: Sequence[Segment]) -> Delivered | None:
    """What `changes.changes_lost` finds of the messages `earlier` and `later` send after their instructions."""
    return changes_lost(_history(earlier), _history(later))


def _tool_name(segment: Segment) -> str:
    value = _value(segment)
    tool = cast('dict[str, object]', value) if isinstance(value, dict) else {}
    function = tool.get('function')
    name = cast('dict[str, object]', function).get('name') if isinstance(function, dict) else tool.get('name')
    return str(name)


def _tools(earlier: Sequence[Segment], later: Sequence[Segment], position: int) -> Cause:
    before = [_tool_name(segment) for segment in earlier if segment.kind == 'tool']
    after = [_tool_name(segment) for segment in later if segment.kind == 'tool']
    new = _tool_name(later[position]) if position < len(later) and later[position].kind == 'tool' else None
    if new is not None and (new not in before or earlier[position].kind != 'tool'):
        name, what = new, 'added'
    else:
        name = _tool_name(earlier[position])
        at = sum(segment.kind == 'tool' for segment in earlier[:position])
        what = 'removed' if name not in after else 'moved' if after.index(name) != at else 'changed'
    return Cause(
        'tools',
        f'tool `{name}` was {what}: tools come first in cache order, so every byte after them is sent again',
        'keep the tool set, its order and its definitions the same through a conversation',
    )


def _compaction(what: str) -> Cause:
    return Cause(
        'compaction',
        f'{what}: compaction or a history processor rewrote earlier messages, or this is another conversation',
        'if that is the compaction you chose, the move is expected; otherwise keep history append-only (the guard '
        'refuses rewrites of what the model already read: docs/guard.md)',
    )


def _policy(before: _Instructions, after: _Instructions) -> Cause | None:
    """A block that left the append-mode blocks or joined them, if one did."""
    gone = [block for block in before.blocks if block not in after.blocks]
    joined = [block for block in after.blocks if block not in before.blocks]
    if gone or joined:
        block, verb = (gone[0], 'is no longer among') if gone else (joined[0], 'joined')
        return Cause(
            'policy',
            f'block `{block}` {verb} the append-mode blocks: it changed policy, or its capability was added or removed',
            "keep each block's `on_change` policy, and the agent's capabilities, the same through a conversation",
        )
    return None


def _lost(seen: str, by_price: bool, same_values: bool = False) -> Cause:
    """The `lost-record` cause, after what the requests show (`seen`): where the new window states the values the old
    one did (`same_values`), a history processor that dropped the changes looks the same; where `by_price`, so does a
    window the plugin opened by price.
    """
    lost = _NO_STORE
    fix = _STORE_FIX
    if by_price:
        lost = (
            'either the plugin opened a new window by price (re-reading its changes had cost about as much as writing '
            f'the request again), or {lost}'
        )
        fix = f"if the price opened it (`windows='price'`, the default), the move is expected; otherwise {fix}"
    if same_values:
        return Cause(
            'lost-record',
            f'{seen}: {lost}, so a new window opened and states the same values; or a history processor dropped them',
            f'{fix}; if a history processor dropped them, keep history append-only (docs/guard.md)',
        )
    return Cause('lost-record', f'{seen}: {lost}, so a new window opened', fix)


def _lost_record(
    before: _Instructions, after: _Instructions, changes_gone: bool = False, by_price: bool = False
) -> Cause | None:
    """The cause where only the blocks' values changed, and maybe (`changes_gone`) the changes the plugin had delivered
    are gone: the window's records were lost, or (`by_price`) the plugin may have opened a new window by price.
    """
    changed = next((block for block, text in before.blocks.items() if after.blocks[block] != text), None)
    if changed is None:
        return None
    gone = ', the changes the plugin had delivered are gone from the history,' if changes_gone else ''
    return _lost(
        f'the blocks were stated again with their current values (block `{changed}` first){gone} and nothing else '
        'changed',
        by_price,
    )


def _messages_gone(
    index: int, earlier: Sequence[Segment], later: Sequence[Segment], position: int, end: int, reads_discounted: bool
) -> Cause:
    """The cause where the instructions are the same and message `position - end` of the conversation is not."""
    if (lost := _changes_lost(earlier, later)) is not None:
        seen = f'the changes the plugin had delivered are gone from the history in request {index}, and nothing else'
        by_price = not reads_discounted or price_may_have_opened(earlier, end, lost)
        return _lost(f'{seen} changed', by_price, same_values=True)
    return _compaction(f'message {position - end} of the conversation changed or is gone in request {index}')


def explain(
    index: int, earlier: Sequence[Segment], later: Sequence[Segment], position: int, *, reads_discounted: bool = True
) -> Cause | None:
    """Say why request `index` (`later`) moved the prefix of the request before it (`earlier`) at segment `position`.

    Args:
        index: The later request's position in its conversation.
        earlier: The previous request's segments.
        later: The request's segments.
        position: The first segment of `earlier` that `later` does not repeat.
        reads_discounted: Whether the model's cache reads cost less than uncached input. Where they don't (Groq's and
            Mistral's models, by `genai-prices`), carried changes save nothing, so the plugin's price rule opens a
            new window at any change, and a window that states the same blocks again may be its.

    Returns:
        The cause, or `None` where nothing can be told beyond the divergence itself.
    """
    if earlier[position].kind == 'tool' or (position < len(later) and later[position].kind == 'tool'):
        return _tools(earlier, later, position)
    before_parts, end = _instructions(earlier)
    after_parts, _ = _instructions(later)
    if before_parts == after_parts:
        return _messages_gone(index, earlier, later, position, end, reads_discounted) if position >= end else None
    before, after = _split(before_parts), _split(after_parts)
    if (policy := _policy(before, after)) is not None:
        return policy
    if not before.blocks and not after.blocks:
        return Cause(
            'instructions',
            f'the instructions changed and state no block of this plugin: {_first_changed(before_parts, after_parts)}',
            f'register the part that changes as a block of `AppendInstructions` and {_APPEND_FIX}',
        )
    if before.head != after.head:
        return Cause(
            'literal',
            f'a literal instruction, before the blocks, changed: {_first_changed([before.head], [after.head])}',
            f'keep literal instructions the same through a conversation; if one must change, {_APPEND_FIX}',
        )
    if before.tail != after.tail:
        return Cause(
            'rewrite',
            'an instruction after the blocks changed (a rewrite-mode block, or a dynamic instruction this plugin '
            f'does not own), which opened a new window: {_first_changed(before.tail, after.tail)}',
            _APPEND_FIX,
        )
    if _history_kept(earlier, later):
        return _lost_record(before, after, by_price=not reads_discounted)
    if (lost := _changes_lost(earlier, later)) is None:
        return _compaction(
            f'the blocks were stated again with their current values in request {index}, and messages changed'
        )
    by_price = not reads_discounted or price_may_have_opened(earlier, end, lost)
    return _lost_record(before, after, changes_gone=True, by_price=by_price)


def why_and_fix(index: int, cause: Cause | None, allow_new_window: str) -> str:
    """The lines after a divergence: why the prefix moved and the fix, where told, then how to allow a new window.

    Args:
        index: The request's position in its conversation.
        cause: Why it moved the prefix, from `explain`.
        allow_new_window: How to let request `index` move the prefix, e.g. `pass new_windows=(1,)`.
    """
    told = f'why: {cause.reason}\nfix: {cause.fix}\n' if cause is not None else ''
    return f'{told}(only if request {index} is meant to open a new window, {allow_new_window})'
