"""The records a window leaves in message history: what a prefix was made of, and each change after it.

They are read back with [`instruction_records`][pydantic_ai_append.instruction_records]; how they are stored is in
`_history` and `_encoding`.

The same-named classes of Pydantic AI 2.59 and later (`pydantic_ai.messages`) are a different thing: request parts
of Pydantic AI's own append mode, in its part union. These are the plugin's own records, carried in part metadata
and read on every supported release, 2.58 included; neither is an instance of the other, and the plugin never reads
or writes Pydantic AI's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TypeAlias

__all__ = (
    'InstructionBaselinePart',
    'InstructionBlock',
    'InstructionDeltaPart',
    'InstructionDigest',
    'InstructionRecord',
    'content_hash',
)


def content_hash(text: str) -> str:
    """The digest records use to name a block's text: the first 32 hex digits of its SHA-256.

    A lone surrogate, which a Python string can hold and UTF-8 can't, is hashed as its code point's bytes, so
    every string has a digest; the digest of any other text is that of its UTF-8 bytes.
    """
    return hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:32]


@dataclass(frozen=True)
class InstructionBlock:
    """An append-mode block's value, as a baseline records it.

    ```python
    from pydantic_ai_append import InstructionBlock

    block = InstructionBlock(id='capability:todos:state', content='- [ ] write tests')
    print(block.content_hash)
    #> 46da768035b57ac0313d35fe1e954587
    ```
    """

    id: str
    """The block's id, such as `'capability:todos:state'`."""

    content: str | None
    """The block's text, or `None` while it is withdrawn."""

    @property
    def content_hash(self) -> str | None:
        """The digest of `content`, or `None` while the block is withdrawn."""
        return content_hash(self.content) if self.content is not None else None


@dataclass(frozen=True)
class InstructionDigest:
    """A rewrite-mode or literal instruction block, as a baseline records it: enough to tell whether it changed.

    ```python
    from pydantic_ai_append import InstructionDigest

    digest = InstructionDigest.of(id='agent', dynamic=False, content='Be brief.')
    print(digest.matches(id='agent', dynamic=False, content='Be brief.'))
    #> True
    ```
    """

    id: str | None
    """The block's id, or `None` if nothing addresses it."""

    dynamic: bool
    """Whether the block is computed (rewrite mode) rather than literal text."""

    content_hash: str
    """The digest of the block's text."""

    @classmethod
    def of(cls, *, id: str | None, dynamic: bool, content: str) -> InstructionDigest:
        """The digest of a block with this id, kind and text."""
        return cls(id=id, dynamic=dynamic, content_hash=content_hash(content))

    def matches(self, *, id: str | None, dynamic: bool, content: str) -> bool:
        """Whether a block with this id, kind and text is the one this digest was taken of."""
        return self.id == id and self.dynamic == dynamic and self.content_hash == content_hash(content)


@dataclass(frozen=True)
class InstructionBaselinePart:
    """The record that opens a window: the instruction list its prefix was rendered from.

    Append-mode blocks are kept in full, because their first values stay in the prefix for the whole
    window; every other block is kept as a digest. A baseline with no blocks ends the window before it.

    ```python
    from pydantic_ai_append import InstructionBaselinePart, InstructionBlock, InstructionDigest

    baseline = InstructionBaselinePart(
        instructions=(
            InstructionDigest.of(id='agent', dynamic=False, content='Be brief.'),
            InstructionBlock(id='capability:todos:state', content='- [ ] write tests'),
        )
    )
    print([block.id for block in baseline.blocks])
    #> ['capability:todos:state']
    ```
    """

    instructions: tuple[InstructionBlock | InstructionDigest, ...]
    """The prefix's blocks in the order they were sent."""

    native: tuple[str, ...] = ()
    """The ids of the blocks Pydantic AI's own append mode (2.59 and later) owned when the window opened, so a
    block that moves between the two mechanisms opens a new window. Empty in records written before it existed."""

    @property
    def blocks(self) -> tuple[InstructionBlock, ...]:
        """The append-mode blocks, in prefix order."""
        return tuple(block for block in self.instructions if isinstance(block, InstructionBlock))

    @property
    def digests(self) -> tuple[InstructionDigest, ...]:
        """The digests of every other block, in prefix order."""
        return tuple(block for block in self.instructions if isinstance(block, InstructionDigest))


@dataclass(frozen=True)
class InstructionDeltaPart:
    """The record of one append-mode block's change, delivered at the request it is stored on.

    ```python
    from pydantic_ai_append import InstructionDeltaPart

    delta = InstructionDeltaPart(id='capability:todos:state', content=None, base_hash=None)
    print(delta.withdrawn)
    #> True
    ```
    """

    id: str
    """The id of the block that changed."""

    content: str | None
    """The block's new text, or `None` if it was withdrawn. A change sent as a diff is stored without it, and rebuilt
    from the text before it when read back."""

    base_hash: str | None
    """The digest of the text the change replaces, or `None` if the block had no text before."""

    diff: str | None = None
    """The change as unified-diff hunks against the replaced text, when it was sent as a `<context-diff>`."""

    @property
    def withdrawn(self) -> bool:
        """Whether the change withdraws the block."""
        return self.content is None

    @property
    def content_hash(self) -> str | None:
        """The digest of `content`, or `None` for a withdrawal."""
        return content_hash(self.content) if self.content is not None else None


InstructionRecord: TypeAlias = InstructionBaselinePart | InstructionDeltaPart
"""A record a window leaves in history."""
