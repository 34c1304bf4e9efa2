"""The pure model of the invariant: what the model consumed, a proposed rewrite of it, and the decision on that rewrite.

A [`ConsumedHistory`][pydantic_ai_append.guard.ConsumedHistory] is a message history plus its *generation boundary*:
how many messages the model has already consumed, which is everything up to and including its latest reply
(what the last request sent, and what the model answered). It keeps the bytes those messages would be
sent as, taken when it is made, so a rewrite is judged against what the model actually saw, even if
a message object was changed in place since.

A rewrite proposes a new message list. [`decide_rewrite`][pydantic_ai_append.guard.decide_rewrite] judges it,
strongest first:

| the rewrite                                                                   | decision  |
|:------------------------------------------------------------------------------|:----------|
| drops the schema of a tool that history still calls                           | `abort`   |
| changes only what comes after the boundary, pairing every call                | `patch`   |
| compacts consumed history: drops, clears or summarizes messages, keeping the  | `compact` |
| order of what it keeps and the latest message, editing nothing anyone said    |           |
| separates a tool call from its result or answers a call twice, otherwise      | `abort`   |
| changes consumed messages in any other way (edits, reorders, inserts)        | `defer`   |

`patch` is applied now. `compact` is applied as a new window, in whole tool-pair units, with a marker where
messages were elided (`RewriteDecision.history`, see `compaction_of` in `_compaction_of`): one that elides a single
run of messages and splits a pair at its edge is applied with the edge moved to a whole-pair cut, and one that comes
to nothing once cut that way is a `patch` that sends the history as it was. `defer` keeps the old prefix and holds
the rewrite until the next window boundary, where the cache is paid for anyway
([`apply_rewrite`][pydantic_ai_append.guard.apply_rewrite] keeps it in `ConsumedHistory.deferred` for
[`open_next`][pydantic_ai_append.guard.ConsumedHistory.open_next]). `abort` keeps the old prefix and drops the
rewrite. A rewrite the model asked for is judged the same way: it is never trusted
because the model asked ([`self_edit`][pydantic_ai_append.guard.self_edit]).

Only problems the rewrite makes count: a history that already had an orphan doesn't make every later rewrite
fail, and a rewrite that mends one is welcome.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from pydantic_ai.messages import ModelMessage

from .._wire.segments import excerpt, first_difference
from ._bytes import message_bytes
from ._compaction_of import Compacted, compaction_of
from ._consumed import ConsumedHistory
from ._errors import NonMonotonicRewriteError, OrphanedToolPairError
from ._pairing import ToolPairProblem, called_tools, tool_pair_problems

RewriteAction: TypeAlias = Literal['patch', 'compact', 'defer', 'abort']
"""What becomes of a rewrite: applied now, applied as a compaction that opens a new window, held until the next
window boundary, or dropped."""


@dataclass(frozen=True)
class PrefixDivergence:
    """The first consumed message a rewrite would change.

    ```python
    from pydantic_ai_append.guard import PrefixDivergence

    print(PrefixDivergence(1, b'{"kind":"response"}', None).describe())
    #> message 1 (consumed) would be dropped: {"kind":"response"}
    ```
    """

    message_index: int
    """The index of the message."""

    consumed: bytes
    """The message as the model consumed it."""

    proposed: bytes | None
    """The message as the rewrite would send it, or `None` if the rewrite drops it."""

    def describe(self) -> str:
        """One line naming the message and showing both sides around the first byte that differs."""
        head = f'message {self.message_index} (consumed)'
        if self.proposed is None:
            return f'{head} would be dropped: {_excerpt(self.consumed, 0)}'
        offset = first_difference(self.consumed, self.proposed)
        return (
            f'{head} would change at byte {offset}: consumed {_excerpt(self.consumed, offset)}, '
            f'proposed {_excerpt(self.proposed, offset)}'
        )


def _excerpt(data: bytes, offset: int) -> str:
    # Narrower than the wire's excerpts: a reason holds two of them on one line, and messages are long.
    return excerpt(data, offset, width=40, lead=20)


@dataclass(frozen=True)
class RewriteDecision:
    """What becomes of a rewrite, and why.

    ```python
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

    from pydantic_ai_append.guard import ConsumedHistory, decide_rewrite

    history = [ModelRequest.user_text_prompt('Hi'), ModelResponse(parts=[TextPart('Hello!')])]
    decision = decide_rewrite(ConsumedHistory.of(history), [*history, ModelRequest.user_text_prompt('Bye')])
    print(decision.action, decision.reason)
    #> patch the consumed prefix is unchanged and every tool call keeps its result
    ```
    """

    action: RewriteAction
    """What becomes of the rewrite."""

    reason: str
    """Why, naming the messages, ids and tools involved."""

    divergence: PrefixDivergence | None = None
    """The first consumed message the rewrite would change, if any."""

    problems: tuple[ToolPairProblem, ...] = ()
    """The tool pairs the rewrite would break (for a `compact`, those its cut was moved not to break)."""

    retired_tools: tuple[str, ...] = ()
    """Tools the rewrite would stop declaring though history still calls them."""

    via: Literal['rewrite', 'append'] = 'rewrite'
    """How a `patch` is applied: as the rewrite itself, or as a change appended to an append-mode block."""

    history: tuple[ModelMessage, ...] | None = None
    """The history to send in place of the proposal, if not the proposal itself: for a `compact`, what the
    compaction kept, in whole tool pairs, without this package's records, with a marker where messages were elided;
    for a `patch`, the history as it was, when a compaction cut in whole tool pairs comes to nothing."""

    def error(self) -> NonMonotonicRewriteError | None:
        """The error that refuses this rewrite, or `None` for a `patch` or a `compact`."""
        if self.action in ('patch', 'compact'):
            return None
        if self.problems:
            return OrphanedToolPairError(self.reason)
        return NonMonotonicRewriteError(self.reason)


def _prefix_divergence(current: ConsumedHistory, proposed: Sequence[ModelMessage]) -> PrefixDivergence | None:
    index = current.first_change(proposed)
    if index == len(current.consumed):
        return None
    return PrefixDivergence(
        index, current.consumed[index], message_bytes(proposed[index]) if index < len(proposed) else None
    )


def decide_rewrite(
    current: ConsumedHistory,
    proposed: Sequence[ModelMessage],
    *,
    tools: Collection[str] | None = None,
    requested_by: Literal['runtime', 'model'] = 'runtime',
    sending: bool = False,
    declared_before: Collection[str] | None = None,
) -> RewriteDecision:
    """Decide what becomes of a rewrite of `current` into `proposed`, by the table in this module's docstring.

    The decision depends only on its arguments, so asking again gives the same answer.

    Args:
        current: What the model consumed.
        proposed: The whole message list the rewrite would send.
        tools: The names of the tools the rewrite would declare (function and output tools), if the tool list
            is part of the rewrite; a tool that history still calls must stay declared.
        requested_by: Who asked for the rewrite. A model's request is judged exactly like the runtime's; it is
            only named in the reason.
        declared_before: The tools declared before this rewrite, if known: then only those of them that `tools`
            leaves out count as retired, and a name history calls that was never declared (a model can call a tool
            that doesn't exist) doesn't.
        sending: Whether `proposed` is about to be sent, so every call before its last request must be answered
            (see [`tool_pair_problems`][pydantic_ai_append.guard.tool_pair_problems]).
    """
    who = 'the model asked for a rewrite that' if requested_by == 'model' else 'the rewrite'
    found = tool_pair_problems(proposed, sending=sending)
    divergence = _prefix_divergence(current, proposed)
    # Judged against the history as the model consumed it: a processor may have edited the very objects it holds, and
    # a pair it broke that way is the rewrite's doing, not a problem the history already had. Rebuilding it encodes
    # every consumed message again, so a proposal that keeps the prefix and breaks no pair is spared it.
    full = current.as_consumed() if found or divergence is not None else []
    before = {problem.key for problem in tool_pair_problems(full)}
    problems = tuple(problem for problem in found if problem.key not in before)
    retired: tuple[str, ...] = ()
    called: dict[str, int] = {}
    if tools is not None:
        called = called_tools(proposed)
        retired = tuple(
            name for name in called if name not in tools and (declared_before is None or name in declared_before)
        )
    if not retired and not problems and divergence is None:
        return RewriteDecision('patch', 'the consumed prefix is unchanged and every tool call keeps its result')
    if not retired and divergence is not None:
        compacted = compaction_of(full, proposed, known=before, sending=sending)
        if compacted is not None:
            return _compaction_decision(who, divergence, compacted)
    if problems or retired:
        return _abort(who, divergence, problems, retired, called)
    assert divergence is not None
    return RewriteDecision(
        'defer', f'{who} is deferred to the next window boundary: {divergence.describe()}', divergence=divergence
    )


def _compaction_decision(who: str, divergence: PrefixDivergence, compacted: Compacted) -> RewriteDecision:
    """A `compact` of a rewrite recognised as a compaction, or a `patch` that sends the history as it was when the
    compaction, cut in whole tool pairs, comes to nothing.
    """
    if not compacted.changed:
        return RewriteDecision(
            'patch',
            f'{who}, cut in whole tool pairs, leaves the history as it was: it is sent unchanged',
            divergence=divergence,
            history=tuple(compacted.messages),
        )
    split = ''.join(f'; the cut moved so as not to split it: {problem.describe()}' for problem in compacted.split)
    return RewriteDecision(
        'compact',
        f'{who} compacts the conversation ({compacted.elided} messages elided), opening a new window{split}',
        divergence=divergence,
        problems=compacted.split,
        history=tuple(compacted.messages),
    )


def _abort(
    who: str,
    divergence: PrefixDivergence | None,
    problems: tuple[ToolPairProblem, ...],
    retired: tuple[str, ...],
    called: Mapping[str, int],
) -> RewriteDecision:
    """An `abort` of a rewrite that breaks tool pairs or stops declaring tools history calls, naming each."""
    reasons = [problem.describe() for problem in problems]
    reasons += [
        f'tool `{name}` is called at message {called[name]} but would no longer be declared' for name in retired
    ]
    return RewriteDecision(
        'abort',
        f'{who} is aborted and the old prefix kept: ' + '; '.join(reasons),
        divergence=divergence,
        problems=problems,
        retired_tools=retired,
    )


def validate_rewrite(
    current: ConsumedHistory, proposed: Sequence[ModelMessage], *, tools: Collection[str] | None = None
) -> None:
    """Raise unless `proposed` can replace `current` now: consumed prefix byte-identical, every tool pair kept.

    Raises:
        OrphanedToolPairError: The rewrite separates a tool call from its result (naming ids and positions).
        NonMonotonicRewriteError: The rewrite changes a consumed message, or drops a tool history calls.
    """
    error = decide_rewrite(current, proposed, tools=tools).error()
    if error is not None:
        raise error


def apply_rewrite(
    current: ConsumedHistory,
    proposed: Sequence[ModelMessage],
    *,
    tools: Collection[str] | None = None,
    requested_by: Literal['runtime', 'model'] = 'runtime',
) -> tuple[ConsumedHistory, RewriteDecision]:
    """Apply a rewrite as its decision says, and return the resulting history with the decision.

    A `patch` gives a history of `proposed` with the same boundary; a `compact` gives the compacted history, none of
    it consumed (a new window); a `defer` gives `current` holding the rewrite for
    [`ConsumedHistory.open_next`][pydantic_ai_append.guard.ConsumedHistory.open_next]; an `abort` raises.

    Raises:
        OrphanedToolPairError: The rewrite separates a tool call from its result.
        NonMonotonicRewriteError: The rewrite drops a tool history calls.
    """
    decision = decide_rewrite(current, proposed, tools=tools, requested_by=requested_by)
    if decision.action == 'patch':
        return ConsumedHistory(decision.history or tuple(proposed), current.boundary), decision
    if decision.history is not None:
        return ConsumedHistory(decision.history, 0), decision
    if decision.action == 'defer':
        return current.holding(tuple(proposed)), decision
    error = decision.error()
    assert error is not None
    raise error


@dataclass(frozen=True)
class InstructionEdit:
    """A model's proposal to change one instruction block.

    ```python
    from pydantic_ai_append.guard import InstructionEdit

    edit = InstructionEdit('capability:notes:memory', '- prefers tabs')
    print(edit.block_id)
    #> capability:notes:memory
    ```
    """

    block_id: str
    """The id of the block, such as `'capability:notes:memory'`."""

    content: str | None
    """The block's proposed text, or `None` to withdraw it."""


def self_edit(
    current: ConsumedHistory,
    proposal: InstructionEdit | Sequence[ModelMessage],
    *,
    append_blocks: Collection[str] = (),
    tools: Collection[str] | None = None,
) -> RewriteDecision:
    """Decide a rewrite the model proposed: never trusted because the model asked.

    An edit to an instruction block always touches the consumed prefix, where the block's first value was
    sent. It is offered the append path: if the block is in `append_blocks`, the decision is a `patch` made
    `via='append'` (the change is appended to the conversation, the prefix stays as it was); any other block
    (literal, or rewrite-mode) is refused. A proposed message list is judged by
    [`decide_rewrite`][pydantic_ai_append.guard.decide_rewrite].

    Args:
        current: What the model consumed.
        proposal: The block edit, or the whole message list the model proposes.
        append_blocks: The ids of the blocks the model may change, all in append mode.
        tools: For a message list, the tools the rewrite would declare.
    """
    if not isinstance(proposal, InstructionEdit):
        return decide_rewrite(current, proposal, tools=tools, requested_by='model')
    if proposal.block_id in append_blocks:
        return RewriteDecision(
            'patch', f'block {proposal.block_id!r} is in append mode: the change is appended', via='append'
        )
    editable = ', '.join(repr(block) for block in sorted(append_blocks)) or 'none'
    return RewriteDecision(
        'abort',
        f'block {proposal.block_id!r} is not an append-mode block the model may edit (those are: {editable}); '
        'changing it would rewrite the consumed prefix, so the edit is refused',
    )
