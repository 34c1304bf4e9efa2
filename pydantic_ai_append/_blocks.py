"""The instruction blocks of one request: the capability's own, and the other sources' blocks it routes by id.

Every block is resolved in prefix order (literal, append-mode, Pydantic AI's own append mode, rewrite-mode) as a
`CurrentBlock`, beside the `InstructionPart` it came from, if any. An `append_ids` entry that matches no block of
the request is held in the window as a withdrawn block, so that the block appearing later is delivered as a change.
"""

from __future__ import annotations

import inspect
import reprlib
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias, cast

from pydantic.alias_generators import to_snake
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CapabilityInstructionSource, InstructionId, InstructionPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import AgentDepsT

from ._compat import in_prefix, native_policy
from ._window import CurrentBlock

__all__ = (
    'BlockFunc',
    'Blocks',
    'ChangePolicy',
    'OwnBlock',
    'UnaddressableBlockWarning',
    'UnmatchedRouteWarning',
    'current_blocks',
    'takes_run_context',
)

ChangePolicy: TypeAlias = Literal['append', 'rewrite']
"""What a change to a block does: `'append'` keeps the first value in the prefix and appends the change to the
conversation; `'rewrite'` rewrites the block in the prefix, which opens a new window."""

BlockFunc: TypeAlias = (
    Callable[[RunContext[AgentDepsT]], str | None]
    | Callable[[RunContext[AgentDepsT]], Awaitable[str | None]]
    | Callable[[], str | None]
    | Callable[[], Awaitable[str | None]]
)
"""A function computing a block's text: with or without `RunContext`, sync or async; `None` withdraws the block."""


class UnaddressableBlockWarning(UserWarning):
    """A block routed through append mode can't be addressed, so it is rewritten instead.

    Changes name the block they replace by its id; two blocks that share an id can't be told apart. Give each
    its own `name`, or silence this with `warnings.filterwarnings('ignore', category=UnaddressableBlockWarning)`.
    """


class UnmatchedRouteWarning(UserWarning):
    """An `append_ids` entry matches no instruction block of a request, and something can be done about it.

    Warned for an entry you named yourself: usually its source isn't on the agent or the id is misspelt. Warned
    for any entry, a preset's included, whose source capability is on the agent without an id, so the block it
    contributes has none and can't be routed: on `pydantic-ai-slim` 2.58, `RepoContext()` is such a capability,
    and `RepoContext(id='repo_context')` gives its block the id `HARNESS_BLOCKS` routes. A block that is only
    absent for now (a context file not written yet) needs nothing: it is held in the window, withdrawn, and
    delivered as a change when it appears. Other preset entries (the blocks of capabilities the agent doesn't
    have) are never warned about. Warned once per `AppendInstructions` and entry; silence it with
    `warnings.filterwarnings('ignore', category=UnmatchedRouteWarning)`.
    """

    @staticmethod
    def about(routed: str, anonymous: AbstractCapability[Any] | None = None) -> str:
        """The warning's message for the entry `routed`, whose source is `anonymous`, present without an id."""
        if anonymous is not None:
            name = type(anonymous).__name__
            return (
                f"`append_ids` entry {routed!r} matches no instruction block of this request: the agent's `{name}` "
                'has no id, so neither has the block it contributes, and that block is rewritten in the prefix '
                f'instead. Build it as `{name}(id={_source_of(routed)!r})` to route it.'
            )
        return (
            f'`append_ids` entry {routed!r} matches no instruction block of this request: check that its source is '
            'on the agent and gives its block that id, or remove the entry. If the block only appears later, this '
            'is expected: it is delivered as a change when it does.'
        )


@dataclass(frozen=True)
class OwnBlock(Generic[AgentDepsT]):
    """A block registered on the capability with its decorator."""

    name: str
    """The block's name; its id is `capability:<capability id>:<name>`."""

    function: BlockFunc[AgentDepsT]
    """The function computing its text."""

    on_change: ChangePolicy
    """What a change to it does."""

    takes_ctx: bool
    """Whether `function` takes the `RunContext`."""


@dataclass(frozen=True)
class Blocks(Generic[AgentDepsT]):
    """What resolving a request's blocks needs to know of the capability."""

    source_id: str
    """The capability's id, the middle segment of its blocks' ids."""

    own: Mapping[str, OwnBlock[AgentDepsT]]
    """The capability's own blocks, by name, in registration order."""

    routed: Sequence[str]
    """Ids of other sources' blocks to route through append mode, exact or by source."""

    named: frozenset[str]
    """The entries of `routed` the user named rather than took from a preset: warned about when they match no
    block, and always held in the window while absent (a preset's only while the capability it names is on the
    agent)."""

    warned: set[str]
    """The entries already warned about, shared by every request of the capability, so each is warned once."""

    def block_id(self, name: str) -> str:
        """The id of the own block named `name`."""
        return f'capability:{self.source_id}:{name}'


def _matches(part_id: str, routed: str) -> bool:
    """Whether the block `part_id` is what the `append_ids` entry `routed` names: that id, or a block of that source."""
    return part_id == routed or part_id.startswith(f'{routed}:')


async def current_blocks(
    blocks: Blocks[AgentDepsT], ctx: RunContext[AgentDepsT], params: ModelRequestParameters
) -> list[tuple[CurrentBlock | None, InstructionPart | None]]:
    """Every block of this request in prefix order, each with the part it came from (if any).

    A block Pydantic AI delivers through history rather than the prefix (a loaded deferred capability's) comes
    without a `CurrentBlock`: it is passed through and takes no part in the window.
    """
    parts = list(params.instruction_parts or [])
    counts = Counter(str(part.id) for part in parts if part.id is not None) if blocks.routed else Counter[str]()
    literal: list[tuple[CurrentBlock | None, InstructionPart | None]] = []
    appending: list[tuple[CurrentBlock | None, InstructionPart | None]] = []
    rewriting: list[tuple[CurrentBlock | None, InstructionPart | None]] = []
    native: list[tuple[CurrentBlock | None, InstructionPart | None]] = []
    for part in parts:
        part_id = str(part.id) if part.id is not None else None
        if not in_prefix(params, part):
            native.append((None, part))
            continue
        if part_id is not None and any(_matches(part_id, routed) for routed in blocks.routed):
            if counts[part_id] == 1:
                # Pydantic AI strips instruction text, and keeps an append-mode part that is empty so its
                # withdrawal can be recorded: empty means withdrawn.
                appending.append((CurrentBlock(part_id, part.content or None, 'append'), part))
                continue
            # Left as Pydantic AI has them. Warned only if the user named them: blocks a preset reaches that share
            # an id (`LogfireMCP`'s two on 2.58) are the framework's to fix, not the user's.
            if any(_matches(part_id, named) for named in blocks.named):
                warnings.warn(
                    f'Instruction block {part_id!r} is routed through append mode, but {counts[part_id]} blocks share '
                    "that id, so a change can't say which one it replaces; rewriting it instead.",
                    UnaddressableBlockWarning,
                    stacklevel=2,
                )
        if native_policy(part) == 'append':
            native.append((CurrentBlock(part_id, part.content, 'native') if part_id is not None else None, part))
            continue
        target = rewriting if part.dynamic else literal
        target.append((CurrentBlock(part_id, part.content, 'rewrite' if part.dynamic else 'literal'), part))
    appending.extend((block, None) for block in _absent_routed(blocks, ctx.capabilities, parts))
    for own in blocks.own.values():
        content = await _call(own, ctx)
        block_id = blocks.block_id(own.name)
        if own.on_change == 'append':
            appending.append((CurrentBlock(block_id, content, 'append'), None))
        elif content is not None and (text := content.strip()):
            # Rewritten in the prefix like Pydantic AI's own dynamic instructions, so stripped like them, and
            # left out when empty.
            part = InstructionPart(
                content=text,
                dynamic=True,
                name=own.name,
                id=InstructionId(CapabilityInstructionSource(blocks.source_id), name=own.name),
            )
            rewriting.append((CurrentBlock(block_id, text, 'rewrite'), part))
    return [*literal, *appending, *native, *rewriting]


def _absent_routed(
    blocks: Blocks[Any], capabilities: Mapping[str, AbstractCapability[Any]], parts: Sequence[InstructionPart]
) -> list[CurrentBlock]:
    """The entries of `append_ids` that no block of this request matches and that are held, as withdrawn blocks.

    An entry the user named is held; a preset's entry only while the capability it names is on the agent
    (`capabilities` is the run's, by id), since a preset names many blocks a given agent never has. Unmatched
    entries are warned about once per capability, when the request has instructions at all: one the user named,
    and any whose source is on the agent with no id.
    """
    ids = [str(part.id) for part in parts if part.id is not None]
    ids.extend(blocks.block_id(name) for name in blocks.own)
    absent: list[CurrentBlock] = []
    for routed in blocks.routed:
        if any(_matches(part_id, routed) for part_id in ids):
            continue
        named = routed in blocks.named
        if (parts or blocks.own) and routed not in blocks.warned:
            anonymous = _anonymous_source(routed, capabilities)
            if named or anonymous is not None:
                blocks.warned.add(routed)
                warnings.warn(UnmatchedRouteWarning.about(routed, anonymous), UnmatchedRouteWarning, stacklevel=4)
        if named or _source_of(routed) in capabilities:
            absent.append(CurrentBlock(routed, None, 'append'))
    return absent


def _source_of(routed: str) -> str | None:
    """The capability id an entry such as `'capability:repo_context'` names, if it names a capability's block."""
    namespace, _, rest = routed.partition(':')
    return (rest.partition(':')[0] or None) if namespace == 'capability' else None


def _anonymous_source(
    routed: str, capabilities: Mapping[str, AbstractCapability[Any]]
) -> AbstractCapability[Any] | None:
    """The capability of the run that `routed` would name if it had an id, present without one: it is known by its
    class, as the framework's own ids are the snake case of their class names (`RepoContext`: `repo_context`).
    """
    source = _source_of(routed)
    return next(
        (cap for cap in capabilities.values() if cap.id is None and to_snake(type(cap).__name__) == source), None
    )


def takes_run_context(function: Callable[..., Any]) -> bool:
    """Whether `function` takes the `RunContext`: it has a positional parameter that must be passed."""
    return any(
        parameter.default is inspect.Parameter.empty
        and parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for parameter in inspect.signature(function).parameters.values()
    )


async def _call(block: OwnBlock[Any], ctx: RunContext[Any]) -> str | None:
    function = cast('Callable[..., Any]', block.function)
    value = function(ctx) if block.takes_ctx else function()
    if inspect.isawaitable(value):
        value = await value
    if value is not None and not isinstance(value, str):
        raise UserError(
            f'Instruction block {block.name!r} returned {reprlib.repr(value)} ({type(value).__name__}); a block '
            'returns a `str`, or `None` to withdraw it.'
        )
    return value
