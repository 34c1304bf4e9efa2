"""Keep the prompt cache of Pydantic AI agents while their instructions change.

An instruction block marked `on_change='append'` keeps its first value in the prefix; each change is appended to
the conversation as an element that replaces the earlier one, so what the provider cached stays byte-identical.
The public surface is this `__all__`, `guard` (the prefix invariant) and `testing` (what an agent sends). Behind it:

- `_capability` (options, hooks), `_blocks` (a request's blocks, routes, presets), `_request` (one request),
  `_suspended` (a resumed turn), `_window` (what the model holds, pure), `_kept` (each conversation's last scan).
- `_records` (record types), `_encoding` (how they are stored and checked), `_history` (carriers in history).
- `_rendering` (the text of every element), `_diff` (diff hunks), `_lookalikes` (notes beside imitations).
- `_telemetry` (the provider's cache use in tokens and dollars, against the prefix kept and rewrite mode).
- `_store`, `_sqlite_store` (record stores, by conversation id), `_reattach` (records put back into history that
  came through a UI adapter).
- `_spec` (spec entries), `_compat` (release differences), `_cache` (memory across conversations).
- `_segments`, `_conversation`, `_transport`: request bodies as cache-order segments, for `guard` and `testing`.
- `_causes`: why a request moved the prefix, told from its elements, for the messages of `testing` and the checker.
- `_cassettes`, `_verdicts`, `_check`, `__main__`: the cassette checker, `pydantic-ai-append check`.

The names are imported when first used, so `pydantic-ai-append check`, which needs none of them, starts without
importing Pydantic AI.
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._blocks import (
        HARNESS_BLOCKS,
        BlockFunc,
        BlockPreset,
        ChangePolicy,
        UnaddressableBlockWarning,
        UnmatchedRouteWarning,
        WindowObserver,
    )
    from ._cache import set_memory_limit
    from ._capability import AppendInstructions
    from ._history import instruction_records, strip_records
    from ._records import (
        InstructionBaselinePart,
        InstructionBlock,
        InstructionDeltaPart,
        InstructionDigest,
        InstructionRecord,
    )
    from ._store.memory import InMemoryRecordStore
    from ._store.protocol import RecordEntry, RecordStore, RecordStoreError, SyncRecordStore
    from ._store.sqlite import SQLiteRecordStore
    from ._telemetry.summary import CacheSummary

__all__ = (
    'HARNESS_BLOCKS',
    'AppendInstructions',
    'BlockFunc',
    'BlockPreset',
    'CacheSummary',
    'ChangePolicy',
    'InMemoryRecordStore',
    'InstructionBaselinePart',
    'InstructionBlock',
    'InstructionDeltaPart',
    'InstructionDigest',
    'InstructionRecord',
    'RecordEntry',
    'RecordStore',
    'RecordStoreError',
    'SQLiteRecordStore',
    'SyncRecordStore',
    'UnaddressableBlockWarning',
    'UnmatchedRouteWarning',
    'WindowObserver',
    'instruction_records',
    'set_memory_limit',
    'strip_records',
)

_HOMES = {
    '_blocks': (
        'HARNESS_BLOCKS',
        'BlockFunc',
        'BlockPreset',
        'ChangePolicy',
        'UnaddressableBlockWarning',
        'UnmatchedRouteWarning',
        'WindowObserver',
    ),
    '_cache': ('set_memory_limit',),
    '_capability': ('AppendInstructions',),
    '_history': ('instruction_records', 'strip_records'),
    '_records': (
        'InstructionBaselinePart',
        'InstructionBlock',
        'InstructionDeltaPart',
        'InstructionDigest',
        'InstructionRecord',
    ),
    '_store.sqlite': ('SQLiteRecordStore',),
    '_store.memory': ('InMemoryRecordStore',),
    '_store.protocol': ('RecordEntry', 'RecordStore', 'RecordStoreError', 'SyncRecordStore'),
    '_telemetry.summary': ('CacheSummary',),
}
_MODULES = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(_importlib.import_module(f'.{module}', __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
