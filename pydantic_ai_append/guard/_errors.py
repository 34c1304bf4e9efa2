"""What the guard raises when it refuses a rewrite, and the warnings it gives when it only observes.

Every refusal is a [`NonMonotonicRewriteError`][pydantic_ai_append.guard.NonMonotonicRewriteError]: the
rewrite would change something the model has already consumed. Each condition the guard can observe has a
warning class of its own, all under [`PrefixGuardWarning`][pydantic_ai_append.guard.PrefixGuardWarning], so
each can be silenced on its own with the standard `warnings` module:

```python
import warnings

from pydantic_ai_append.guard import ToolListChangedWarning

warnings.filterwarnings('ignore', category=ToolListChangedWarning)
```
"""

from __future__ import annotations

from pydantic_ai.exceptions import UserError


class NonMonotonicRewriteError(UserError):
    """A rewrite of an agent's context that would change what the model has already consumed.

    The message names the first message (or wire segment) that would change, and how.
    """


class OrphanedToolPairError(NonMonotonicRewriteError):
    """A rewrite that would separate a tool call from its result, or give one call two results.

    The message names every tool call id involved and the positions of its call and result.
    """


class WirePrefixDivergenceError(NonMonotonicRewriteError):
    """A request body whose cache-order segments don't start with the previous request's, refused before sending.

    The message names the first divergent segment: its index, its kind and an excerpt of both sides.
    """


class PrefixGuardWarning(UserWarning):
    """The base of every warning the guard gives; silence them all with this category."""


class ConsumedPrefixChangedWarning(PrefixGuardWarning):
    """A request would change messages the model has already consumed (a history processor or compaction did it)."""


class OrphanedToolPairWarning(PrefixGuardWarning):
    """A request would separate a tool call from its result, or give one call two results."""


class ToolListChangedWarning(PrefixGuardWarning):
    """The tool definitions sent changed within a window, which moves the cached prefix at its start."""


class RetiredToolReferencedWarning(PrefixGuardWarning):
    """A tool left the active set while history still calls it; it stays declared until the next window."""


class InstructionsChangedWarning(PrefixGuardWarning):
    """The instructions sent changed within a window, which moves the cached prefix."""


class WirePrefixDivergenceWarning(PrefixGuardWarning):
    """A request body's cache-order segments don't start with the previous request's (observe mode)."""
