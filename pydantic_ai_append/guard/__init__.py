"""The prefix invariant: a runtime may edit its own context only in ways that keep what the model consumed.

Every change to what an agent sends mid-conversation (a history processor, compaction, a changed tool list,
changed instructions, a model editing its own instructions) must leave the already-consumed prefix
byte-identical and must never separate a tool call from its result. This package checks that at two levels.

The modules, by concept:

- `errors`: what the guard raises and the warning class of each condition it observes.
- `wire`: what is actually sent, split into cache-order segments and compared with the previous request.
"""

from .errors import (
    ConsumedPrefixChangedWarning,
    InstructionsChangedWarning,
    NonMonotonicRewriteError,
    OrphanedToolPairError,
    OrphanedToolPairWarning,
    PrefixGuardWarning,
    RetiredToolReferencedWarning,
    ToolListChangedWarning,
    WirePrefixDivergenceError,
    WirePrefixDivergenceWarning,
)
from .wire import VerifierMode, WireDivergence, WireVerifier

__all__ = (
    'ConsumedPrefixChangedWarning',
    'InstructionsChangedWarning',
    'NonMonotonicRewriteError',
    'OrphanedToolPairError',
    'OrphanedToolPairWarning',
    'PrefixGuardWarning',
    'RetiredToolReferencedWarning',
    'ToolListChangedWarning',
    'VerifierMode',
    'WireDivergence',
    'WirePrefixDivergenceError',
    'WirePrefixDivergenceWarning',
    'WireVerifier',
)
