"""The prefix invariant: a runtime may edit its own context only in ways that keep what the model consumed.

Every change to what an agent sends mid-conversation (a history processor, compaction, a changed tool list,
changed instructions, a model editing its own instructions) must leave the already-consumed prefix
byte-identical and must never separate a tool call from its result. This package checks that at two levels.

The modules, by concept:

- `pairing`: which tool calls have their results, and where the ones that don't are (pure).
- `rewrite`: the context window, its generation boundary, and the decision on a proposed rewrite (pure).
- `compaction`: cutting history in whole tool-pair units, with a marker at the frontier (pure).
- `tools`: tool schema versions: a retired tool stays declared while history calls it, and never runs.
- `edit_tool`: a tool that lets the model edit chosen append-mode blocks, as appended changes only.
- `capability`: [`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard], the guard on an agent's requests.
- `errors`: what the guard raises and the warning class of each condition it observes.
- `wire`: what is actually sent, split into cache-order segments and compared with the previous request.
"""

from .capability import DeferPolicy, GuardMode, PrefixGuard
from .compaction import compact, elided_count, elision_marker, whole_pair_cut
from .edit_tool import BlockWriter, self_edit_toolset
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
    called_tools,
    consumed_boundary,
    decide_rewrite,
    message_bytes,
    self_edit,
    validate_rewrite,
)
from .tools import RetiredTools, retired_tool_message
from .wire import VerifierMode, WireDivergence, WireVerifier

__all__ = (
    'BlockWriter',
    'ConsumedPrefixChangedWarning',
    'ContextWindow',
    'DeferPolicy',
    'GuardMode',
    'InstructionEdit',
    'InstructionsChangedWarning',
    'NonMonotonicRewriteError',
    'OrphanedToolPairError',
    'OrphanedToolPairWarning',
    'PairProblemKind',
    'Position',
    'PrefixDivergence',
    'PrefixGuard',
    'PrefixGuardWarning',
    'RetiredToolReferencedWarning',
    'RetiredTools',
    'RewriteAction',
    'RewriteDecision',
    'ToolListChangedWarning',
    'ToolPairProblem',
    'VerifierMode',
    'WireDivergence',
    'WirePrefixDivergenceError',
    'WirePrefixDivergenceWarning',
    'WireVerifier',
    'apply_rewrite',
    'called_tools',
    'compact',
    'consumed_boundary',
    'decide_rewrite',
    'elided_count',
    'elision_marker',
    'message_bytes',
    'retired_tool_message',
    'self_edit',
    'self_edit_toolset',
    'tool_pair_problems',
    'validate_rewrite',
    'whole_pair_cut',
)
