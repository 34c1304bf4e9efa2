"""The records a window leaves in message history: what a prefix was made of, and each change after it.

Read back with [`instruction_records`][pydantic_ai_append.instruction_records]; stored as `_history` and `_encoding`
say. The same-named request parts of Pydantic AI 2.59 and later belong to its own append mode: these are the
plugin's, carried in part metadata on every release, and neither is an instance of the other.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TypeAlias


def content_hash(text: str) -> str:
    """The digest records name a text by: 32 hex digits of the SHA-256 of its UTF-8 (lone surrogates passed)."""
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
    print(digest.content_hash)
    #> 213c22ed7234eb11116e1e88f314c73c
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


@dataclass(frozen=True)
class InstructionBaselinePart:
    """The record that opens a window: the instruction list its prefix was rendered from.

    Append-mode blocks are kept in full (their first values stay in the prefix for the whole window), every other
    block as a digest. A baseline with no blocks ends the window before it.

    ```python
    from pydantic_ai_append import InstructionBaselinePart, InstructionBlock

    baseline = InstructionBaselinePart(instructions=(InstructionBlock(id='capability:todos:state', content='- [ ] x'),))
    print([block.id for block in baseline.blocks])
    #> ['capability:todos:state']
    ```
    """

    instructions: tuple[InstructionBlock | InstructionDigest, ...]
    """The prefix's blocks in the order they were sent."""

    native: tuple[str, ...] = ()
    """The ids of the blocks Pydantic AI's own append mode owned when the window opened: a block that moves between
    the two opens a new window."""

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
    """The block's new text, or `None` if it was withdrawn (a diff's is rebuilt from the text before it)."""

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
