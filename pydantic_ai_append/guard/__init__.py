"""The prefix invariant: a runtime may edit its own context only in ways that keep what the model consumed.

Every change to what an agent sends mid-conversation (a history processor, compaction, a changed tool list,
changed instructions, a model editing its own instructions) must leave the already-consumed prefix
byte-identical and must never separate a tool call from its result. This package checks that at three levels:

- on an agent: [`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard], a capability that judges every request
  against what the model consumed, with whole-pair [`compact`][pydantic_ai_append.guard.compact]ion and a
  self-edit tool ([`self_edit_toolset`][pydantic_ai_append.guard.self_edit_toolset]);
- on the wire: [`WireVerifier`][pydantic_ai_append.guard.WireVerifier], an HTTP client maker that compares the
  bytes of each provider request with the previous one before it is sent;
- as pure functions, usable without an agent: [`ConsumedHistory`][pydantic_ai_append.guard.ConsumedHistory] and
  [`decide_rewrite`][pydantic_ai_append.guard.decide_rewrite], `validate_rewrite`, `apply_rewrite`, `self_edit`
  and `tool_pair_problems`.

The modules, by concept (all private; this page's names are the public surface):

- `_pairing`: which tool calls have their results, and where the ones that don't are.
- `_bytes`: the canonical bytes a message is judged by.
- `_consumed`: what the model has consumed: the messages and the generation boundary.
- `_decision`: the decision on a proposed rewrite: patch, defer or abort.
- `_compaction`: compaction in whole tool-pair units, with a marker at the frontier: the whole-pair cut, the marker,
  and cutting history for a processor of one's own.
- `_compaction_of`: telling a compaction (the one a user installed) from other rewrites, and turning it into the
  history to send.
- `_repair`: histories that arrive broken, mended in whole tool-pair units.
- `_retired`: tool schema versions: a retired tool stays declared while history calls it, and never runs.
- `_edit_tool`: a tool that lets the model edit chosen append-mode blocks, as appended changes only.
- `_plan`: what `PrefixGuard` does with one request, worked out in one pure step: the decision under its mode and
  policies, what it sends, how much of it is verified, its warnings.
- `_capability`: `PrefixGuard`, the guard on an agent's requests, whose hooks apply and read that plan.
- `_options`: what `PrefixGuard` may be told: its modes and policies, checked, and its agent-spec entry.
- `_proposal`: a proposed request read against what the model consumed: whether it opens a new window, and which of
  its messages are new.
- `_tool_memory`: the tools each conversation declared, kept across its runs; a changed tool list warned about, a
  retired tool told of.
- `_wire`: `WireVerifier`, the check of what is actually sent.
- `_wire_divergence`: `WireDivergence`, what the verifier reports of a request that breaks the prefix.
- `_wire_transport`: the httpx transport that hands each provider request to the verifier before it is sent.
- `_errors`: what the guard raises and the warning class of each condition it observes.
"""

from ._capability import PrefixGuard
from ._compaction import compact
from ._consumed import ConsumedHistory
from ._decision import (
    InstructionEdit,
    PrefixDivergence,
    RewriteAction,
    RewriteDecision,
    apply_rewrite,
    decide_rewrite,
    self_edit,
    validate_rewrite,
)
from ._edit_tool import BlockWriter, self_edit_toolset
from ._errors import (
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
from ._options import DeferPolicy, GuardMode
from ._pairing import ToolPairProblem, tool_pair_problems
from ._repair import RepairPolicy
from ._wire import VerifierMode, WireVerifier
from ._wire_divergence import WireDivergence

__all__ = (
    'BlockWriter',
    'ConsumedHistory',
    'ConsumedPrefixChangedWarning',
    'DeferPolicy',
    'GuardMode',
    'InstructionEdit',
    'InstructionsChangedWarning',
    'NonMonotonicRewriteError',
    'OrphanedToolPairError',
    'OrphanedToolPairWarning',
    'PrefixDivergence',
    'PrefixGuard',
    'PrefixGuardWarning',
    'RepairPolicy',
    'RetiredToolReferencedWarning',
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
    'compact',
    'decide_rewrite',
    'self_edit',
    'self_edit_toolset',
    'tool_pair_problems',
    'validate_rewrite',
)
