"""The prefix invariant: a runtime may edit its own context only in ways that keep what the model consumed.

Every change to what an agent sends mid-conversation (a history processor, compaction, a changed tool list,
changed instructions, a model editing its own instructions) must leave the already-consumed prefix
byte-identical and must never separate a tool call from its result. This package checks that at two levels.

The modules, by concept:

- `pairing`: which tool calls have their results, and where the ones that don't are (pure).
- `rewrite`: the context window, its generation boundary, and the decision on a proposed rewrite (pure).
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
from .pairing import PairProblemKind, Position, ToolPairProblem, tool_pair_problems
from .rewrite import (
    ContextWindow,
    InstructionEdit,
    PrefixDivergence,
    RewriteAction,
    RewriteDecision,
    apply_rewrite,
    consumed_boundary,
    decide_rewrite,
    message_bytes,
    self_edit,
    validate_rewrite,
)

__all__ = (
    'ConsumedPrefixChangedWarning',
    'ContextWindow',
    'InstructionEdit',
    'InstructionsChangedWarning',
    'NonMonotonicRewriteError',
    'OrphanedToolPairError',
    'OrphanedToolPairWarning',
    'PairProblemKind',
    'Position',
    'PrefixDivergence',
    'PrefixGuardWarning',
    'RetiredToolReferencedWarning',
    'RewriteAction',
    'RewriteDecision',
    'ToolListChangedWarning',
    'ToolPairProblem',
    'WirePrefixDivergenceError',
    'WirePrefixDivergenceWarning',
    'apply_rewrite',
    'consumed_boundary',
    'decide_rewrite',
    'message_bytes',
    'self_edit',
    'tool_pair_problems',
    'validate_rewrite',
)
