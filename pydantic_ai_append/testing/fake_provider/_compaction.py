"""When the fake provider compacts a request, and the summary it compacts it to, as the two native compaction APIs do.

Anthropic Messages compacts a request whose `context_management.edits` holds a `compact_20260112` edit and whose
input, counted from its latest `compaction` block on, is over the edit's trigger; OpenAI Responses one whose
`context_management` names a `compact_threshold` its whole input is over. Both APIs' modules render the summary in
their own format (`_anthropic_messages`, `_openai_responses`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ..._wire.segments import Api
from ._replies import input_tokens

__all__ = ('anthropic_compaction_edit', 'anthropic_live_context', 'compaction_summary', 'summarize')

_ANTHROPIC_COMPACT_EDIT = 'compact_20260112'
"""The `context_management` edit type that turns on Anthropic's threshold compaction."""

_ANTHROPIC_DEFAULT_TRIGGER = 150_000
"""The input tokens Anthropic compacts above when the edit names no trigger, per `BetaCompact20260112EditParam`."""


def anthropic_compaction_edit(body_json: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The request's Anthropic compaction edit, or `None` when it asks for no compaction."""
    context_management = cast('Mapping[str, Any]', body_json.get('context_management') or {})
    edits = cast('list[Mapping[str, Any]]', context_management.get('edits') or [])
    return next((edit for edit in edits if edit.get('type') == _ANTHROPIC_COMPACT_EDIT), None)


def anthropic_live_context(body_json: Mapping[str, Any]) -> Mapping[str, Any]:
    """The request as Anthropic reads it: its messages from the latest compaction block on."""
    # The Messages API ignores, and doesn't bill, every block before the latest compaction block it is sent.
    messages = cast('list[Mapping[str, Any]]', body_json.get('messages') or [])
    for position in range(len(messages) - 1, -1, -1):
        content = messages[position].get('content')
        blocks = cast('list[Mapping[str, Any]]', content) if isinstance(content, list) else []
        starts = [start for start, block in enumerate(blocks) if block.get('type') == 'compaction']
        if starts:
            live = [{**messages[position], 'content': blocks[starts[-1] :]}, *messages[position + 1 :]]
            return {**body_json, 'messages': live}
    return body_json


def compaction_summary(api: Api, index: int, body_json: Mapping[str, Any]) -> str | None:
    """The summary a compaction of this request carries, or `None` if the request isn't over its trigger."""
    if api == 'anthropic':
        edit = anthropic_compaction_edit(body_json)
        trigger = cast('Mapping[str, Any]', (edit or {}).get('trigger') or {})
        threshold = trigger.get('value', _ANTHROPIC_DEFAULT_TRIGGER) if edit is not None else None
        counted = anthropic_live_context(body_json)
        items = counted.get('messages')
    else:
        entries = cast('list[Mapping[str, Any]]', body_json.get('context_management') or [])
        threshold = next((e.get('compact_threshold') for e in entries if e.get('type') == 'compaction'), None)
        counted = body_json
        items = body_json.get('input')
    tokens = input_tokens(counted)
    if not isinstance(threshold, int) or tokens <= threshold:
        return None
    return summarize(index, items, tokens)


def summarize(index: int, items: object, tokens: int) -> str:
    """The summary of a compacted request: its index, how many messages it had, and about how many tokens."""
    # Readable, and derived from the request alone, so a recording of it doesn't change between runs.
    count = len(cast('list[Any]', items)) if isinstance(items, list) else 1
    messages = 'message' if count == 1 else 'messages'
    return f'Fake compaction of request {index}: {count} {messages}, about {tokens} tokens, summarized.'
