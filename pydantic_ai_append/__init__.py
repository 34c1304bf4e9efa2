"""Keep the prompt cache of Pydantic AI agents while their instructions change.

An instruction block marked `on_change='append'` keeps its first value in the prefix; each change is appended
to the conversation as a tagged element that replaces the earlier one, so everything the provider already
cached stays byte-identical.

The public surface is this page's `__all__`, plus `pydantic_ai_append.guard` (the prefix invariant) and
`pydantic_ai_append.testing` (checking what an agent sends). The modules behind it, by concept (all private):

- `_capability`: [`AppendInstructions`][pydantic_ai_append.AppendInstructions]: options, blocks, hooks.
- `_blocks`: the instruction blocks of one request, the capability's own and the ones it routes by id.
- `_request`: one model request: window read, changes recorded, prefix and history sent.
- `_suspended`: a turn the provider suspended, resumed as it was started.
- `_window`: what the model holds of each block, and which prefix and changes a request gets (pure).
- `_records`: the record types a window leaves in history.
- `_encoding`: how a record is stored: versioned, checked, optionally signed.
- `_history`: where records travel in history (carriers), how they are found, read back and stripped.
- `_rendering`: the exact text of every element on the wire, the same on every delivery path.
- `_diff`: the unified-diff hunks of a changed block, and applying them.
- `_lookalikes`: notes beside user or tool text that imitates the package's elements.
- `_presets`: the presets of `append_ids`, such as `HARNESS_BLOCKS`.
- `_cache`: the process-wide caches' storage, bounded by memory and safe between threads.
- `_spec`: what a spec entry (YAML, JSON) may say, for `AppendInstructions` and `PrefixGuard`.
- `_compat`: the differences between the supported Pydantic AI releases.
- `_segments`, `_conversation`, `_transport`: request bodies as cache-order segments, shared by `guard` and
  `testing`.
- `_cassettes`, `_verdicts`, `_check`, `__main__`: the cassette checker, `pydantic-ai-append check`
  (`python -m pydantic_ai_append`): reading cassettes, their requests grouped into conversations and judged, the
  command line.
"""

from ._blocks import BlockFunc, ChangePolicy, UnaddressableBlockWarning, UnmatchedRouteWarning
from ._capability import AppendInstructions
from ._history import instruction_records, strip_records
from ._presets import HARNESS_BLOCKS, BlockPreset
from ._records import (
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDeltaPart,
    InstructionDigest,
    InstructionRecord,
)
from ._request import WindowObserver

__all__ = (
    'HARNESS_BLOCKS',
    'AppendInstructions',
    'BlockFunc',
    'BlockPreset',
    'ChangePolicy',
    'InstructionBaselinePart',
    'InstructionBlock',
    'InstructionDeltaPart',
    'InstructionDigest',
    'InstructionRecord',
    'UnaddressableBlockWarning',
    'UnmatchedRouteWarning',
    'WindowObserver',
    'instruction_records',
    'strip_records',
)
