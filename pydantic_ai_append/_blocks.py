"""The instruction blocks of one request: the capability's own, and the other sources' blocks it routes by id.

Each is resolved in prefix order (literal, append-mode, native append mode, rewrite-mode) as a `CurrentBlock`,
beside its `InstructionPart`. An `append_ids` entry that matches no block is held in the window as withdrawn, so
the block appearing later is delivered as a change. A preset (`HARNESS_BLOCKS`) is a tuple of its own type, so its
entries are told from the ids a user named: they are held only while the capability they name is on the agent.
"""

from __future__ import annotations

import inspect
import reprlib
import warnings
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeAlias, cast

from pydantic.alias_generators import to_snake
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import CapabilityInstructionSource, InstructionId, InstructionPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.tools import AgentDepsT

from ._compat import in_prefix, native_policy
from ._reopening import PriceRule
from ._window import CurrentBlock

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


class BlockPreset(tuple[str, ...]):
    """A named set of `append_ids` entries, given whole to `append_ids` or as one of its entries.

    ```python
    from pydantic_ai_append import HARNESS_BLOCKS, AppendInstructions

    context = AppendInstructions(id='context', append_ids=[HARNESS_BLOCKS, 'agent:memory'])
    print('capability:sub_agents' in HARNESS_BLOCKS)
    #> True
    ```
    """

    __slots__ = ()


HARNESS_BLOCKS = BlockPreset(
    (
        # `RepoContext` (harness): the `AGENTS.md` / `CLAUDE.md` files of the workspace, read at each run's start.
        # On pydantic-ai-slim 2.58 it has this id only when built as `RepoContext(id='repo_context')`.
        'capability:repo_context',
        # `SubAgents` (harness): the list of agents a task can be delegated to, which grows with the agent folders.
        'capability:sub_agents',
        # `LogfireMCP` (harness), whose id is `logfire-mcp`: its query guidance, the current UTC hour, and the
        # hosted server's instructions. On 2.58 the guidance and the hour share the id, so they can't be told
        # apart and are left where Pydantic AI puts them.
        'capability:logfire-mcp',
        # Pydantic AI's catalog of capabilities that can be loaded on demand (`defer_loading=True`); from 2.59.
        # On 2.58 the catalog has no id, so it can't be routed.
        'capability:deferred_capabilities',
    )
)
"""The ids of the blocks Pydantic AI and Pydantic AI Harness compute and change during a conversation: `RepoContext`'s
context files, `SubAgents`' delegates, `LogfireMCP`'s guidance and the catalog of capabilities loaded on demand. From
2.59 these use Pydantic AI's own append mode; routed through `AppendInstructions`, the plugin owns them instead.
"""


Resolved: TypeAlias = list[tuple[CurrentBlock | None, InstructionPart | None]]
"""A request's blocks, each beside the part it came from (if any), as `current_blocks` resolves them."""


class UnaddressableBlockWarning(UserWarning):
    """A block routed through append mode can't be addressed, so it is rewritten instead.

    Changes name the block they replace by its id; two blocks that share an id can't be told apart. Give each
    its own `name`, or silence this with `warnings.filterwarnings('ignore', category=UnaddressableBlockWarning)`.
    """


class UnmatchedRouteWarning(UserWarning):
    """An `append_ids` entry matches no instruction block of a request, and something can be done about it.

    Warned once per entry: for one you named (its source isn't on the agent, or the id is misspelt), and for any
    whose source capability is on the agent without an id, so its block has none (on 2.58, `RepoContext()`; build
    it as `RepoContext(id='repo_context')`). A block only absent for now needs nothing: it is delivered as a change
    when it appears. Silence it with `warnings.filterwarnings('ignore', category=UnmatchedRouteWarning)`.
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


class WindowObserver(Protocol):
    """What is told a request opens a new window: a [`WireVerifier`][pydantic_ai_append.guard.WireVerifier]."""

    def open_window(self) -> None:
        """The next request opens a new window and may move the prefix."""


@dataclass(frozen=True)
class RequestSettings(Generic[AgentDepsT]):
    """What a request needs to know of the capability handling it."""

    owner: object
    """The capability, to tell it from another one on the same agent."""

    source_id: str
    """The capability's id, the middle segment of its blocks' ids."""

    own: Mapping[str, OwnBlock[AgentDepsT]]
    """The capability's own blocks, by name, in registration order."""

    routed: Sequence[str]
    """Ids of other sources' blocks to route through append mode, exact or by source."""

    named: frozenset[str]
    """The entries of `routed` the user named rather than took from a preset."""

    warned: set[str]
    """The entries already warned about, shared by every request of the capability, so each is warned once."""

    key: bytes | None
    """The signing key of records, if any."""

    verifier: WindowObserver | None
    """What to tell when a request opens a new window."""

    windows: PriceRule | None
    """What decides whether a request that could keep its window does (`None`: it always does)."""

    def block_id(self, name: str) -> str:
        """The id of the own block named `name`."""
        return f'capability:{self.source_id}:{name}'


def _matches(part_id: str, routed: str) -> bool:
    """Whether the block `part_id` is what the `append_ids` entry `routed` names: that id, or a block of that source."""
    return part_id == routed or part_id.startswith(f'{routed}:')


async def current_blocks(
    blocks: RequestSettings[AgentDepsT], ctx: RunContext[AgentDepsT], params: ModelRequestParameters
) -> Resolved:
    """Every block of this request in prefix order, each with its part; one Pydantic AI delivers through history (a
    loaded deferred capability's) has no `CurrentBlock`, and takes no part in the window.
    """
    parts = list(params.instruction_parts or [])
    counts = Counter(str(part.id) for part in parts if part.id is not None) if blocks.routed else Counter[str]()
    literal, appending, native, rewriting = (Resolved() for _ in range(4))
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
            source = InstructionId(CapabilityInstructionSource(blocks.source_id), name=own.name)
            part = InstructionPart(content=text, dynamic=True, name=own.name, id=source)
            rewriting.append((CurrentBlock(block_id, text, 'rewrite'), part))
    return [*literal, *appending, *native, *rewriting]


def _absent_routed(
    blocks: RequestSettings[Any], capabilities: Mapping[str, AbstractCapability[Any]], parts: Sequence[InstructionPart]
) -> list[CurrentBlock]:
    """The entries of `append_ids` no block matches that are held, withdrawn: the user's, and a preset's while the
    capability it names is on the agent. Warned as `UnmatchedRouteWarning` says, if the request has instructions.
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
    """The run's capability `routed` would name if it had an id, known by its class (`RepoContext`: `repo_context`)."""
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
