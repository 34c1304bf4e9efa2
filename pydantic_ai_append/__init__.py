"""Keep the prompt cache of Pydantic AI agents while their instructions change.

An instruction block marked `on_change='append'` keeps its first value in the prefix; each change is appended to
the conversation as an element that replaces the earlier one, so what the provider cached stays byte-identical.
The public surface is this `__all__`, `guard` and `testing`. The folders are the wings:

- Here, the append engine: `_capability` (options, hooks), `_blocks` (a request's blocks), `_request` (one request),
  `_suspended` (a resumed turn), `_window` (what the model holds), `_reopening` (when it gives way to a new one), `_records`, `_encoding` and `_history` (records,
  stored and found in history), `_rendering` and `_diff` (the elements' text), `_lookalikes`, `_compat`.
- `_shared/`: what every wing uses: the process's caches, a spec entry's checks, cache prices and the schedule of
  windows they price.
- `_store/`: record stores, and records put back into history that came through a UI adapter.
- `_telemetry/`: the provider's cache use in tokens and dollars.
- `_wire/`: request bodies read as the provider's cache reads them, for `guard`, `testing` and `_check/`.
- `_check/` and `__main__`: the cassette checker, `pydantic-ai-append check`.
- `guard/`: the prefix invariant. `testing/`: what an agent sends, for a user's tests.

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
    from ._capability import AppendInstructions
    from ._history import instruction_records, strip_records
    from ._records import (
        InstructionBaselinePart,
        InstructionBlock,
        InstructionDeltaPart,
        InstructionDigest,
        InstructionRecord,
    )
    from ._shared.cache import set_memory_limit
    from ._shared.prices import CachePrices
    from ._store.memory import InMemoryRecordStore
    from ._store.protocol import RecordEntry, RecordStore, RecordStoreError, SyncRecordStore
    from ._store.redis import RedisRecordStore
    from ._store.sqlite import SQLiteRecordStore
    from ._store.tenant import NoTenantWarning
    from ._telemetry.summary import CacheSummary

__all__ = (
    'HARNESS_BLOCKS',
    'AppendInstructions',
    'BlockFunc',
    'BlockPreset',
    'CachePrices',
    'CacheSummary',
    'ChangePolicy',
    'InMemoryRecordStore',
    'InstructionBaselinePart',
    'InstructionBlock',
    'InstructionDeltaPart',
    'InstructionDigest',
    'InstructionRecord',
    'NoTenantWarning',
    'RecordEntry',
    'RecordStore',
    'RecordStoreError',
    'RedisRecordStore',
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
    '_store.tenant': ('NoTenantWarning',),
    '_store.memory': ('InMemoryRecordStore',),
    '_store.protocol': ('RecordEntry', 'RecordStore', 'RecordStoreError', 'SyncRecordStore'),
    '_store.redis': ('RedisRecordStore',),
    '_shared.cache': ('set_memory_limit',),
    '_shared.prices': ('CachePrices',),
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
