"""What only the plugin knows about a request, for its `append_instructions` span: the window it belongs to, why that
window opened, and the form and size of each change it delivers.

Pydantic AI's own spans already report a request's tokens, its cache health and its cost; none of them can tell a
window the plugin opened on purpose from a cache that collapsed, or how a change reached the model. The window's
number is counted from the baselines the request's history holds (as the engine found them, so no history is read
again), and the reason for a new window is told from the engine's own, in a short word a query can group by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pydantic_ai.messages import ModelMessage, ModelResponse, SystemPromptPart

if TYPE_CHECKING:
    from .._reopening import Reopening
    from .._window import Window, WindowPlan

WHY_OPENED: tuple[tuple[str, str], ...] = (
    ('first request with an append-mode block', 'first'),
    ('price', 'price'),
    ('expired', 'expired'),
    ('a literal or rewrite-mode block', 'prefix_moved'),
    ('a block moved between this plugin', 'owner_changed'),
    ('the window baseline is gone', 'records_lost'),
    ('history was compacted', 'compaction'),
    ('a record can not be read', 'unreadable_record'),
)
"""The start of each reason `_window.plan_request` gives for a new window, and the word the span says it with."""


def request_attributes(
    source_id: str,
    inline: bool,
    messages: Sequence[ModelMessage],
    window: Window,
    plan: WindowPlan,
    carriers: Sequence[SystemPromptPart],
    reopening: Reopening | None,
) -> dict[str, Any]:
    """The attributes of the span of a request planned as `plan` on `window` (history `messages`), recording
    `carriers`, and opening a new window for `reopening`, if it does.
    """
    changes = carriers[len(carriers) - len(plan.changes) :]
    forms = [_form(part.content, value) for part, (_, value) in zip(changes, plan.changes, strict=True)]
    attributes: dict[str, Any] = {
        'pydantic_ai_append.capability_id': source_id,
        'pydantic_ai_append.delivery_path': 'inline' if inline else 'wrapped',
        'pydantic_ai_append.changes': [block_id for block_id, _ in plan.changes],
        'pydantic_ai_append.change_forms': forms,
        'pydantic_ai_append.change_chars': [len(part.content) for part in changes],
    }
    message = f'append_instructions {source_id}'
    number = window_number(window, plan)
    if number:
        attributes['pydantic_ai_append.window'] = number
        message = f'{message}: window {number}'
    if plan.opened is not None:
        why = why_opened(plan.opened, messages)
        attributes['pydantic_ai_append.window_opened'] = plan.opened
        attributes['pydantic_ai_append.window_reason'] = why
        message = f'{message} opened ({why})'
    if reopening is not None and reopening.keeping is not None and reopening.opening is not None:
        attributes['pydantic_ai_append.window_keeping_cost'] = reopening.keeping
        attributes['pydantic_ai_append.window_opening_cost'] = reopening.opening
    if forms:
        message = f'{message}, {len(forms)} change{"s" if len(forms) > 1 else ""} ({", ".join(forms)})'
    return {'logfire.msg': message, **attributes}


def _form(text: str, value: str | None) -> str:
    """How a change went to the model: `'withdrawal'`, `'diff'` (a `<context-diff>`) or `'full'`."""
    if value is None:
        return 'withdrawal'
    return 'diff' if text.startswith('<context-diff') else 'full'


def window_number(window: Window, plan: WindowPlan) -> int:
    """Which window of the conversation the request belongs to, counting those whose baselines its history holds and
    the one it opens; 0 if it belongs to none (no append-mode block, or it ends the window).
    """
    opened = sum(_opens(window.found[at][3]) for at in window.empty)
    if plan.baseline is not None:
        return opened + 1 if plan.baseline.instructions else 0
    return opened if plan.continues else 0


def _opens(stored: object) -> bool:
    """Whether `stored` is a baseline that opened a window (not one that ended it)."""
    if not isinstance(stored, Mapping):
        return False
    record = cast('Mapping[str, object]', stored)
    return record.get('kind') == 'baseline' and bool(record.get('instructions'))


def why_opened(opened: str, messages: Sequence[ModelMessage]) -> str:
    """The word for the engine's reason `opened` for a new window in a history of `messages`: where history holds no
    record at all, `'first'` only if it holds no earlier turn either (a UI adapter, or a store that keeps role and text
    alone, loses them whole).
    """
    why = next((word for start, word in WHY_OPENED if opened.startswith(start)), 'other')
    if why == 'first' and any(isinstance(message, ModelResponse) for message in messages):
        return 'records_lost'
    return why
