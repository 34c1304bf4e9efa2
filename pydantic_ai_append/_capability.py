"""The `AppendInstructions` capability: its options, its blocks, and the hooks that hand each request to `_request`.

This is the adapter between Pydantic AI and the window logic. It holds what the user configures (the blocks
registered with its decorator, the ids of other sources' blocks to route, the signing key) and nothing per
conversation: every request is decided from history and the blocks' current values by
[`handle_request`][pydantic_ai_append._request.handle_request], so one instance serves every conversation of an agent.

Besides the hooks, it offers the guard a small interface, and the guard uses nothing else of it: the self-edit
tool reads the policy of each registered block (`block_policies`) and its id (`block_id`), and
[`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard] asks whether a request opened a new window (`opens_window`).
The value of a block is read and written by the user's own functions, which the tool is given.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, cast, overload

from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import (
    AbstractCapability,
    CapabilityOrdering,
    ProcessHistory,
    SelectModel,
    WrapRunHandler,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelRequest, ModelResponse
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import AgentDepsT

from ._blocks import BlockFunc, Blocks, ChangePolicy, OwnBlock, takes_run_context
from ._compat import ask_for_framing_announcement
from ._history import opens_window
from ._presets import BlockPreset
from ._rendering import SUPERSESSION_SENTENCE
from ._request import RequestSettings, WindowObserver, handle_request, is_inline
from ._spec import refuse_options, signing_key_from, spec_text, spec_texts
from ._suspended import Resumed, resume_turn, resumed_window
from ._transport import conversation_scope

__all__ = ('AppendInstructions',)

_POLICIES: tuple[ChangePolicy, ...] = ('append', 'rewrite')
_NAMESPACES = ('agent', 'capability', 'toolset')


def _routes(append_ids: object) -> tuple[tuple[str, ...], frozenset[str]]:
    """Every id `append_ids` routes, presets flattened, in order; and the ids named directly rather than by a preset."""
    if isinstance(append_ids, str) or not isinstance(append_ids, Sequence):
        shown = f'the string {append_ids!r}' if isinstance(append_ids, str) else repr(append_ids)
        raise UserError(f'`append_ids` takes a sequence of ids, not {shown}.')
    entries = cast('Sequence[object]', [append_ids] if isinstance(append_ids, BlockPreset) else append_ids)
    routed: list[str] = []
    named: set[str] = set()
    for entry in entries:
        if isinstance(entry, BlockPreset):
            routed.extend(entry)
        elif isinstance(entry, str):
            routed.append(entry)
            named.add(entry)
        else:
            raise UserError(
                f'`append_ids` entry {entry!r} is neither an id nor a preset such as `HARNESS_BLOCKS`; pass the '
                'preset itself, or its ids as strings.'
            )
    for route in routed:
        if route.split(':', 1)[0] not in _NAMESPACES:
            raise UserError(
                f'`append_ids` entry {route!r} is not an instruction id: ids start with one of '
                f'{", ".join(repr(namespace) for namespace in _NAMESPACES)}, such as `capability:repo_context`.'
            )
    return tuple(dict.fromkeys(routed)), frozenset(named)


@dataclass
class AppendInstructions(AbstractCapability[AgentDepsT]):
    r"""Instruction blocks that keep the prompt cache when they change.

    A block registered with `on_change='append'` keeps its first value in the prefix, as a
    `<context id="capability:<id>:<name>">` element. When its value changes, the prefix stays byte-identical
    and the change is appended to the conversation as a later element with the same id, which replaces the
    earlier one: the full new value, or a `<context-diff>` when that is shorter. Models that take
    mid-conversation system messages get it as one; the others get `<system>`-wrapped user text.

    ```python
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.test import TestModel

    from pydantic_ai_append import AppendInstructions

    todos = AppendInstructions[list[str]](id='todos')


    @todos.instructions(name='state')
    def state(ctx: RunContext[list[str]]) -> str | None:
        return '\n'.join(ctx.deps) or None


    agent = Agent(TestModel(), deps_type=list[str], capabilities=[todos])
    result = agent.run_sync('What is next?', deps=['write tests'])
    print(result.all_messages()[0].instructions)
    #> <context id="capability:todos:state">
    #> write tests
    #> </context>
    #>
    #> Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.
    ```
    """

    append_ids: Sequence[str | BlockPreset] = ()
    """Ids of other sources' blocks to route through append mode: an exact id such as `'agent:memory'` or
    `'capability:repo_context:agents_md'`, a source such as `'capability:repo_context'` for all of its blocks, or a
    preset such as [`HARNESS_BLOCKS`][pydantic_ai_append.HARNESS_BLOCKS], given whole or as one entry.

    An id you name yourself is held in the window from the first request even while its block is absent, so its
    appearance is delivered as a change; if it matches no block, an `UnmatchedRouteWarning` says so once. A
    preset's id is held that way only while the capability it names is on the agent, and warned about only when
    that capability has no id (so its block has none either)."""

    _: KW_ONLY

    signing_key: str | bytes | None = field(default=None, repr=False)
    """A secret to sign records with, so records forged in history that came from a client are told apart from
    genuine ones. A signed record is bound to its conversation (`conversation_id`), so it can't be replayed into
    another. A record that fails the check opens a new window; it is never delivered. A resumed suspended turn
    whose recorded instructions its signed window doesn't vouch for is refused with a `UserError`."""

    verifier: WindowObserver | None = field(default=None, repr=False)
    """A [`WireVerifier`][pydantic_ai_append.guard.WireVerifier] (or anything with `open_window()`) to tell when a
    request opens a new window, so the prefix that request moves isn't reported as a divergence."""

    _blocks: dict[str, OwnBlock[AgentDepsT]] = field(
        default_factory=dict[str, 'OwnBlock[AgentDepsT]'], init=False, repr=False
    )
    """The blocks registered with `instructions`, by name, in registration order."""

    _routed: tuple[str, ...] = field(default=(), init=False, repr=False)
    """Every id of `append_ids`, presets flattened, in the order given."""

    _named: frozenset[str] = field(default=frozenset[str](), init=False, repr=False)
    """The ids of `append_ids` named directly rather than through a preset."""

    _warned: set[str] = field(default_factory=set[str], init=False, repr=False)
    """The ids already warned about as matching no block, so each is warned once per capability."""

    _resumed: Resumed | None = field(default=None, init=False, repr=False)
    """Per run: the window of the suspended turn the run resumes, as the run's history had it at the start."""

    def __post_init__(self) -> None:
        # Read as objects: the options come from user code, which may not be type-checked.
        if self.id is None or not self.id:
            raise UserError("`AppendInstructions` needs an `id`, such as `AppendInstructions(id='todos')`.")
        if not isinstance(cast('object', self.id), str):
            raise UserError(f'`AppendInstructions` option `id` takes a string, not {self.id!r}.')
        key = cast('object', self.signing_key)
        if key is not None and (not isinstance(key, str | bytes) or not key):
            raise UserError(f'`AppendInstructions` option `signing_key` takes a non-empty str or bytes, not {key!r}.')
        verifier = cast('object', self.verifier)
        if verifier is not None and not callable(getattr(verifier, 'open_window', None)):
            raise UserError(
                f'`AppendInstructions` option `verifier` takes a `WireVerifier` (anything with `open_window()`), not '
                f'{verifier!r}.'
            )
        if ':' in self.id:
            raise UserError(f'`AppendInstructions` id {self.id!r} cannot contain a colon; colons separate id segments.')
        if self.defer_loading:
            raise UserError(
                "`AppendInstructions` can't be loaded on demand (`defer_loading=True`): its blocks are the prefix of "
                'every request from the first.'
            )
        self._routed, self._named = _routes(self.append_ids)

    @classmethod
    def from_spec(
        cls,
        id: str,
        append_ids: Sequence[str] = (),
        signing_key: str | None = None,
        signing_key_env: str | None = None,
        **python_only: Any,
    ) -> AppendInstructions[Any]:
        """Build the capability from an agent spec entry (`Agent.from_spec`, `Agent.from_file`).

        A spec names it `AppendInstructions`, with its `id` alone (`{'AppendInstructions': 'context'}`) or with
        options (`{'AppendInstructions': {'id': 'context', 'append_ids': ['agent:memory']}}`). A spec can't hold a
        function, so a spec-loaded capability has no blocks of its own; it routes other sources' blocks through
        append mode. Register blocks on it in Python (`instructions`) only if it is built there.

        Args:
            id: The capability's id, as `AppendInstructions(id=...)` takes it.
            append_ids: The ids of other sources' blocks to route through append mode.
            signing_key: A secret to sign records with, written in the spec.
            signing_key_env: The name of an environment variable holding that secret, read when the spec is loaded;
                Pydantic AI specs have no interpolation of their own.
            **python_only: Options a spec can't carry (`verifier`, `instructions`), refused with an error that names
                them.
        """
        refuse_options(
            'AppendInstructions',
            python_only,
            accepted='`id`, `append_ids`, `signing_key` and `signing_key_env`',
            python_only={
                'verifier': 'a `WireVerifier` is a Python object',
                'instructions': 'block functions are Python functions, registered with `@context.instructions`',
            },
        )
        return cls(
            spec_texts('AppendInstructions', 'append_ids', append_ids),
            id=spec_text('AppendInstructions', 'id', id),
            signing_key=signing_key_from(signing_key, signing_key_env),
        )

    def get_ordering(self) -> CapabilityOrdering:
        """Run after history processing, compaction and model selection, so the window sees the history and model
        that go out, whatever the order capabilities are listed in.

        A history processor or compaction capability that ran after this capability would write the outgoing
        messages, which carry the rendered changes instead of their records, back into history.
        """
        return CapabilityOrdering(position='innermost', wrapped_by=(ProcessHistory, SelectModel))

    @property
    def _source_id(self) -> str:
        assert self.id is not None, 'checked in `__post_init__`'
        return self.id

    @property
    def _key(self) -> bytes | None:
        return self.signing_key.encode() if isinstance(self.signing_key, str) else self.signing_key

    # --- Registration

    @overload
    def instructions(
        self, function: BlockFunc[AgentDepsT], /, *, name: str | None = None, on_change: ChangePolicy = 'append'
    ) -> BlockFunc[AgentDepsT]: ...

    @overload
    def instructions(
        self, /, *, name: str | None = None, on_change: ChangePolicy = 'append'
    ) -> Callable[[BlockFunc[AgentDepsT]], BlockFunc[AgentDepsT]]: ...

    def instructions(
        self,
        function: BlockFunc[AgentDepsT] | None = None,
        /,
        *,
        name: str | None = None,
        on_change: ChangePolicy = 'append',
    ) -> BlockFunc[AgentDepsT] | Callable[[BlockFunc[AgentDepsT]], BlockFunc[AgentDepsT]]:
        """Register a function computing one instruction block.

        Args:
            function: The function, when used as a bare decorator.
            name: The block's name, unique within this capability; its id is `capability:<id>:<name>`.
                Defaults to the function's name.
            on_change: `'append'` to keep the first value in the prefix and append changes, or `'rewrite'` to
                rewrite the block in place (which opens a new window when it changes).
        """
        if name is not None and not isinstance(cast('object', name), str):
            raise UserError(f'`instructions` option `name` takes a string, not {name!r}.')

        def register(function: BlockFunc[AgentDepsT]) -> BlockFunc[AgentDepsT]:
            if not callable(function):
                raise UserError(f'`instructions` registers a function computing a block, not {function!r}.')
            block_name = name if name is not None else getattr(function, '__name__', '')
            if on_change not in _POLICIES:
                raise UserError(
                    f"Unknown `on_change` policy {on_change!r} for block {block_name!r}: use 'append' or 'rewrite'."
                )
            self._check_name(block_name)
            takes_ctx = takes_run_context(function)
            self._blocks[block_name] = OwnBlock(block_name, function, on_change, takes_ctx)
            return function

        return register(function) if function is not None else register

    def _check_name(self, name: str) -> None:
        if not name or not name.strip():
            raise UserError(f'Block names must be non-empty; got {name!r} on `AppendInstructions` {self.id!r}.')
        if ':' in name:
            raise UserError(f'Block name {name!r} cannot contain a colon; colons separate id segments.')
        if name in self._blocks:
            raise UserError(
                f'Two blocks share the id {self.block_id(name)!r}; give each block of `AppendInstructions` '
                f'{self.id!r} its own `name`.'
            )

    def block_id(self, name: str) -> str:
        """The id of the block registered as `name`, as changes and the prefix name it: `capability:<id>:<name>`."""
        return f'capability:{self._source_id}:{name}'

    @property
    def block_policies(self) -> Mapping[str, ChangePolicy]:
        """The `on_change` policy of each block registered with `instructions`, by name, in registration order."""
        return MappingProxyType({name: block.on_change for name, block in self._blocks.items()})

    @staticmethod
    def opens_window(request: ModelRequest) -> bool:
        """Whether `request` is where a window opened (or ended), so its prefix may differ from the request before.

        That is a request that carries a baseline record. The record is recognised by its kind alone, without
        checking its integrity or signature (the guard asking doesn't hold the signing key): this only says where the
        prefix was meant to move, and is never a reason to deliver anything. A baseline forged into client-supplied
        history can therefore keep the guard from warning that the instructions changed at that request; strip
        such history with `strip_records` first.
        """
        return opens_window(request)

    # --- The request hooks

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractCapability[AgentDepsT]:
        """For a run that resumes a suspended turn, a copy that knows the turn's window as the history had it.

        A history processor runs before each request and may trim the window's records; what the model was told
        when the turn began is read here, from the history the run was given, so the resumed turn can tell it
        again. Any other run is served by the capability itself.
        """
        messages = ctx.messages
        if not messages or not isinstance(last := messages[-1], ModelResponse) or last.state != 'suspended':
            return self
        resumed = resumed_window(messages, key=self._key, conversation_id=ctx.conversation_id)
        if resumed is None:
            return self
        run = copy.copy(self)
        run._resumed = resumed
        return run

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Name the run's conversation to the HTTP transports it sends through, such as a shared `WireVerifier`."""
        with conversation_scope(ctx.conversation_id):
            return await handler()

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send the window's prefix, record this request's changes, and send history as the window has it."""
        blocks = Blocks(self._source_id, self._blocks, self._routed, self._named, self._warned)
        settings = RequestSettings(owner=self, blocks=blocks, key=self._key, verifier=self.verifier)
        messages = request_context.messages
        if not messages or not isinstance(messages[-1], ModelRequest):
            return resume_turn(settings, ctx, request_context, self._resumed)
        return await handle_request(settings, ctx, request_context)

    async def prepare_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Have the `<system>` framing announced from the first request for the model about to serve this attempt.

        Pydantic AI calls this once per attempt on releases that have it (the `ModelFallback` capability switches
        models between attempts); older releases don't, and the step's model, set up by `before_model_request`,
        serves every attempt.
        """
        parts = request_context.model_request_parameters.instruction_parts or []
        if not is_inline(request_context.model) and any(part.content == SUPERSESSION_SENTENCE for part in parts):
            ask_for_framing_announcement(request_context)
        return request_context
