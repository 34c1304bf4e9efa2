"""The `AppendInstructions` capability: its options, its blocks, and the hooks that hand each request to `_request`.

The adapter between Pydantic AI and the window logic. It holds what the user configures and nothing per
conversation: each request is decided from history and the blocks' values, so one instance serves every
conversation of an agent. The guard uses `block_policies`, `block_id` and `opens_window`, and nothing else of it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any, Literal, cast, overload

from pydantic_ai import AgentRunResult, RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering, ProcessHistory, SelectModel, WrapRunHandler
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import AgentDepsT

from ._blocks import BlockFunc, BlockPreset, ChangePolicy, OwnBlock, RequestSettings, WindowObserver, takes_run_context
from ._compat import ask_for_framing_announcement
from ._encoding import key_bytes
from ._history import opens_window
from ._rendering import SUPERSESSION_SENTENCE
from ._reopening import PriceRule
from ._request import handle_request, is_inline
from ._shared.prices import CachePrices
from ._shared.spec import refuse_options, signing_key_from, spec_text, spec_texts, spec_windows
from ._store.memory import PROCESS_STORE
from ._store.protocol import DEFAULT_STORE_TIMEOUT, OnStoreError, RecordStore, SyncRecordStore, checked_store
from ._store.reattach import run_keeping_records
from ._store.tenant import EntryKeys, checked_tenant
from ._suspended import Resumed, resume_turn, resumed_window
from ._telemetry.observe import observe
from ._telemetry.summary import CacheSummary, summary
from ._wire.transport import conversation_scope

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

    A block registered with `on_change='append'` keeps its first value in the prefix, as a `<context id="...">`
    element; a change is appended as a later element with the same id (in full, or a `<context-diff>` if shorter).

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
    """Ids of other sources' blocks to route through append mode: an exact id (`'agent:memory'`), a source for all
    its blocks (`'capability:repo_context'`), or a preset such as [`HARNESS_BLOCKS`][pydantic_ai_append.HARNESS_BLOCKS].
    An id you name is held in the window while its block is absent, so its appearance is delivered as a change (an
    `UnmatchedRouteWarning` says once that it matches nothing); a preset's only while its capability is on the agent.
    """

    _: KW_ONLY

    signing_key: str | bytes | None = field(default=None, repr=False)
    """A secret to sign records with, so records forged in history from a client are told apart from genuine ones,
    and bound to their `conversation_id`. A record that fails the check opens a new window, and a resumed turn whose
    recorded instructions its signed window doesn't vouch for is refused with a `UserError`."""

    verifier: WindowObserver | None = field(default=None, repr=False)
    """A [`WireVerifier`][pydantic_ai_append.guard.WireVerifier] (or anything with `open_window()`) to tell when a
    request opens a new window, so the prefix that request moves isn't reported as a divergence."""

    record_store: RecordStore | SyncRecordStore | None = field(default=PROCESS_STORE, repr=False)
    """Where a run whose history lost its records (behind a UI adapter) finds them: unless given, one for the process."""

    tenant: Callable[[RunContext[AgentDepsT]], str] | None = field(default=None, repr=False)
    """A function naming a run's tenant, its authenticated user (as a UI adapter's `conversation_scope`), such as
    `lambda ctx: ctx.deps.user_id`: the record store's entries are keyed by it too, so no tenant reads another's. Without
    one, entries are keyed by the conversation id a client chooses, and the first records the store gives a run warn
    (`NoTenantWarning`)."""

    on_store_error: OnStoreError = 'raise'
    """What a failed load from `record_store` does: `'raise'` a `RecordStoreError`, or `'new_window'`: warn, go on."""

    store_timeout: float = DEFAULT_STORE_TIMEOUT
    """Seconds each `record_store` call may take before it counts as failed (saves run after the run returns)."""

    windows: Literal['price', 'keep'] | CachePrices = 'price'
    """When a window the prefix needn't leave gives way to a new one, which states the blocks' current values and
    carries no changes: `'price'` when its carried changes cost more than writing the request again, by the cache
    prices of the model that served the last response (or when the provider's cache has expired); a `CachePrices` to
    weigh by those prices instead; `'keep'` never, so every change is carried while the window lasts."""

    _blocks: dict[str, OwnBlock[AgentDepsT]] = field(
        default_factory=dict[str, 'OwnBlock[AgentDepsT]'], init=False, repr=False
    )
    """The blocks registered with `instructions`, by name, in registration order."""

    _routing: tuple[tuple[str, ...], frozenset[str], set[str]] = field(init=False, repr=False, compare=False)
    """Every id of `append_ids` (presets flattened), the ones named directly, and those warned about once."""

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
        if not isinstance(self.windows, CachePrices) and self.windows not in ('price', 'keep'):
            raise UserError(
                f"`AppendInstructions` option `windows` takes 'price', 'keep' or a `CachePrices`, not {self.windows!r}."
            )
        self._store = checked_store(self.record_store, self.on_store_error, self.store_timeout)
        self._keys = EntryKeys(self.id, checked_tenant(self.tenant))
        self._routing = (*_routes(self.append_ids), set[str]())

    @classmethod
    def from_spec(
        cls,
        id: str,
        append_ids: Sequence[str] = (),
        signing_key: str | None = None,
        signing_key_env: str | None = None,
        on_store_error: OnStoreError = 'raise',
        store_timeout: float = DEFAULT_STORE_TIMEOUT,
        windows: Literal['price', 'keep'] | dict[str, float] = 'price',
        **python_only: Any,
    ) -> AppendInstructions[Any]:
        """Build the capability from a spec entry (`{'AppendInstructions': {'id': 'context', 'append_ids': [...]}}`): a
        spec can't hold a function, so it only routes other sources' blocks.

        Args:
            id: The capability's id.
            append_ids: The ids of other sources' blocks to route through append mode.
            signing_key: A secret to sign records with, written in the spec.
            signing_key_env: The environment variable holding that secret, read when the spec is loaded.
            on_store_error: What a failing record store does: `'raise'` or `'new_window'`.
            store_timeout: Seconds each record store call may take before it counts as failed.
            windows: `'price'`, `'keep'`, or the prices to weigh windows by: `input`, `cache_read` and `cache_write`
                per million tokens, and optionally the cache's `retention_seconds`.
            **python_only: Options a spec can't carry (`verifier`, `instructions`, `record_store`, `tenant`), refused.
        """
        refuse_options(
            'AppendInstructions',
            python_only,
            accepted='`id`, `append_ids`, `signing_key`, `signing_key_env`, `on_store_error`, `store_timeout` '
            'and `windows`',
            python_only={
                'verifier': 'a `WireVerifier` is a Python object',
                'instructions': 'block functions are Python functions, registered with `@context.instructions`',
                'record_store': 'a store is a Python object (a spec keeps the default, one in memory)',
                'tenant': 'a tenant is named by a Python function of the run',
            },
        )
        return cls(
            spec_texts('AppendInstructions', 'append_ids', append_ids),
            id=spec_text('AppendInstructions', 'id', id),
            signing_key=signing_key_from(signing_key, signing_key_env),
            on_store_error=on_store_error,
            store_timeout=store_timeout,
            windows=spec_windows(windows),
        )

    def get_ordering(self) -> CapabilityOrdering:
        """Inside history processing, compaction and model selection: it sees what is sent, and none stores that."""
        return CapabilityOrdering(position='innermost', wrapped_by=(ProcessHistory, SelectModel))

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
            if not block_name or not block_name.strip():
                raise UserError(
                    f'Block names must be non-empty; got {block_name!r} on `AppendInstructions` {self.id!r}.'
                )
            if ':' in block_name:
                raise UserError(f'Block name {block_name!r} cannot contain a colon; colons separate id segments.')
            if block_name in self._blocks:
                raise UserError(
                    f'Two blocks share the id {self.block_id(block_name)!r}; give each block of `AppendInstructions` '
                    f'{self.id!r} its own `name`.'
                )
            self._blocks[block_name] = OwnBlock(block_name, function, on_change, takes_run_context(function))
            return function

        return register(function) if function is not None else register

    def block_id(self, name: str) -> str:
        """The id of the block registered as `name`, as changes and the prefix name it: `capability:<id>:<name>`."""
        return f'capability:{self.id}:{name}'

    @property
    def block_policies(self) -> Mapping[str, ChangePolicy]:
        """The `on_change` policy of each block registered with `instructions`, by name, in registration order."""
        return MappingProxyType({name: block.on_change for name, block in self._blocks.items()})

    opens_window = staticmethod(opens_window)

    async def for_run(self, ctx: RunContext[AgentDepsT]) -> AbstractCapability[AgentDepsT]:
        """Refuse realtime sessions; resuming a suspended turn, a copy with its window as history had it untrimmed."""
        if not isinstance(ctx.model, Model):
            # A realtime session's model is a `RealtimeModel`; every other run's is a `Model`.
            raise UserError(
                f"`AppendInstructions` {self.id!r} can't serve a realtime session (model {ctx.model.model_name!r}): a "
                'session calls none of the model-request hooks that send its blocks, so the model would never see '
                'them. Open the session on an agent without `AppendInstructions`; its own named instructions '
                '(`@agent.instructions(name=...)`) reach a session.'
            )
        messages = ctx.messages
        if not messages or not isinstance(last := messages[-1], ModelResponse) or last.state != 'suspended':
            return self
        resumed = resumed_window(messages, key=self._request().key, conversation_id=ctx.conversation_id)
        if resumed is None:
            return self
        run = copy.copy(self)
        run._resumed = resumed
        return run

    async def wrap_run(self, ctx: RunContext[AgentDepsT], *, handler: WrapRunHandler) -> AgentRunResult[Any]:
        """Restore records the history lost from `record_store`, save new ones; name the conversation to transports."""
        with conversation_scope(ctx.conversation_id):
            return await run_keeping_records(self._store, self.on_store_error, self._keys, ctx, handler)

    async def before_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Send the window's prefix, record this request's changes, and send history as the window has it."""
        messages = request_context.messages
        if not messages or not isinstance(messages[-1], ModelRequest):
            return resume_turn(self._request(), ctx, request_context, self._resumed)
        return await handle_request(self._request(), ctx, request_context)

    def _request(self) -> RequestSettings[AgentDepsT]:
        key = key_bytes(self.signing_key)
        prices = self.windows if isinstance(self.windows, CachePrices) else None
        rule = PriceRule(prices) if self.windows != 'keep' else None
        return RequestSettings(self, cast('str', self.id), self._blocks, *self._routing, key, self.verifier, rule)

    async def prepare_model_request(
        self, ctx: RunContext[AgentDepsT], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Have the `<system>` framing announced for the model serving this attempt (`FallbackModel` may switch)."""
        parts = request_context.model_request_parameters.instruction_parts or []
        if not is_inline(request_context.model) and any(part.content == SUPERSESSION_SENTENCE for part in parts):
            ask_for_framing_announcement(request_context)
        return request_context

    async def after_model_request(
        self, ctx: RunContext[AgentDepsT], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        """Report the provider's cache use in tokens and dollars against the prefix the window kept (`_telemetry`)."""
        return observe(ctx, request_context, response)

    @staticmethod
    def cache_summary(messages: Sequence[ModelMessage]) -> CacheSummary:
        """A conversation's cache use and cost, as its provider reported them, against rewrite mode's cost."""
        return summary(messages)
