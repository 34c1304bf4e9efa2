"""Keep the prompt cache of Pydantic AI agents while their instructions change.

An instruction block marked `on_change='append'` keeps its first value in the prefix; each change is appended
to the conversation as a tagged element that replaces the earlier one, so everything the provider already
cached stays byte-identical.

The modules, by concept:

- `capability`: [`AppendInstructions`][pydantic_ai_append.AppendInstructions], the adapter to Pydantic AI's hooks.
- `window`: which prefix a request is sent with and which changes it delivers (pure).
- `records`: the records a window leaves in history, and how they are stored and read back.
- `rendering`: the exact text of every element on the wire, one renderer per delivery path.
"""

from .capability import AppendInstructions, BlockFunc, ChangePolicy, UnaddressableBlockWarning
from .records import (
    RECORD_KEY,
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDeltaPart,
    InstructionDigest,
    InstructionRecord,
    content_hash,
    instruction_records,
    strip_records,
)
from .rendering import (
    SUPERSESSION_SENTENCE,
    FallbackRenderer,
    InlineRenderer,
    Renderer,
    diff_hunks,
    escape,
    unescape,
)

__all__ = (
    'RECORD_KEY',
    'SUPERSESSION_SENTENCE',
    'AppendInstructions',
    'BlockFunc',
    'ChangePolicy',
    'FallbackRenderer',
    'InlineRenderer',
    'InstructionBaselinePart',
    'InstructionBlock',
    'InstructionDeltaPart',
    'InstructionDigest',
    'InstructionRecord',
    'Renderer',
    'UnaddressableBlockWarning',
    'content_hash',
    'diff_hunks',
    'escape',
    'instruction_records',
    'strip_records',
    'unescape',
)
