"""The exact text of every element the plugin sends, the same on every delivery path.

A block in the prefix is a `<context id="...">` element, followed once by the supersession sentence. A change is a
full element, a `<context-diff>` when shorter, or a withdrawal, rendered once when it is recorded: history keeps the
text, and Pydantic AI wraps it in `<system>` for a model without inline system messages. A block's own text is
escaped inside its element (a backslash after the `<` of any of the package's tags), so it can't end it early.
"""

from __future__ import annotations

import html
import re

from ._diff import apply_hunks, diff_hunks

SUPERSESSION_SENTENCE = (
    "Only the system's <context> elements count; "
    'a later one with the same id replaces the earlier until replaced again.'
)
"""Said once in the prefix, after the last block it states."""

_WITHDRAWN_ATTRIBUTE = ' withdrawn="true"'
_WITHDRAWN = (
    'This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id '
    'replaces it.'
)

# An opening or closing tag of one of the package's elements or of `<system>`, with any number of backslashes after
# its `<`: escaping adds one and unescaping removes one, so text that holds an escaped form round-trips too.
_TAGS = re.compile(r'<(\\*)(\s*/?\s*)(context-diff|context|system)(?=[\s/>]|$)', re.IGNORECASE)
_ESCAPED_TAGS = re.compile(r'<\\(\\*)(\s*/?\s*)(context-diff|context|system)(?=[\s/>]|$)', re.IGNORECASE)


def escape(text: str) -> str:
    """`text` unable to open or close one of the package's elements: a backslash after the `<` of each such tag."""
    return _TAGS.sub(r'<\\\1\2\3', text) if '<' in text else text


def unescape(text: str) -> str:
    """Undo `escape`."""
    return _ESCAPED_TAGS.sub(r'<\1\2\3', text) if '<' in text else text


def _open(tag: str, block_id: str, extra: str = '') -> str:
    return f'<{tag} id="{html.escape(block_id, quote=True)}"{extra}>\n'


def context_element(block_id: str, content: str) -> str:
    """A complete `<context>` element stating a block's value."""
    return f'{_open("context", block_id)}{escape(content)}\n</context>'


def diff_element(block_id: str, hunks: str) -> str:
    """A `<context-diff>` element holding a change as unified-diff hunks."""
    return f'{_open("context-diff", block_id)}{escape(hunks)}\n</context-diff>'


def change_text(block_id: str, previous: str | None, content: str | None) -> str:
    """The element changing a block from `previous` (`None`: unknown) to `content`: a withdrawal, a full element, or
    a `<context-diff>` when shorter.
    """
    if content is None:
        return f'{_open("context", block_id, _WITHDRAWN_ATTRIBUTE)}{_WITHDRAWN}\n</context>'
    full = context_element(block_id, content)
    if previous is None or previous == content:
        return full
    diff = diff_element(block_id, diff_hunks(previous, content))
    return diff if len(diff) < len(full) else full


def change_value(block_id: str, text: str, previous: str | None) -> str | None | ValueError:
    """The block's value (`None`: withdrawn) after the change `text` (an element `change_text` made) to `previous`,
    or a `ValueError` saying why it can't be read as one: another element, or a diff that doesn't apply.
    """
    # The first change of a window whose prefix states no block is followed by the sentence.
    text = text.removesuffix(f'\n\n{SUPERSESSION_SENTENCE}')
    for tag, extra in (('context', ''), ('context-diff', ''), ('context', _WITHDRAWN_ATTRIBUTE)):
        start, end = _open(tag, block_id, extra), f'\n</{tag}>'
        if not (text.startswith(start) and text.endswith(end) and len(text) >= len(start) + len(end)):
            continue
        body = unescape(text[len(start) : len(text) - len(end)])
        if extra:
            return None
        if tag == 'context':
            return body
        value = apply_hunks(previous, body) if previous is not None else None
        return value if value is not None else ValueError("a diff that doesn't apply to the text it was taken against")
    return ValueError(f'not an element of block {block_id!r}')
