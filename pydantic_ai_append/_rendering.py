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

    File headers are left out: the element the hunks go in names the block.

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
    lines = difflib.unified_diff(old.split('\n'), new.split('\n'), n=1, lineterm='')
    return '\n'.join(list(lines)[2:])


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
        return context_element(block_id, content)

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


def record_change(block_id: str, previous: str | None, content: str | None) -> InstructionDeltaPart:
    """Record one block's change from `previous` to `content`, with a diff when that is the shorter element.

    This is the only place a diff is computed: later requests render the stored hunks.
    """
    if previous is None or content is None:
        return InstructionDeltaPart(id=block_id, content=content, base_hash=None)
    hunks = diff_hunks(previous, content)
    shorter = len(diff_element(block_id, hunks)) < len(context_element(block_id, content))
    return InstructionDeltaPart(
        id=block_id, content=content, base_hash=content_hash(previous), diff=hunks if shorter else None
    )
