"""What a `PrefixGuard` may be told: its modes and policies, checked, and the form its agent-spec entry takes.

The options are checked when the guard is built, so a wrong one is an error that names it rather than a guard that
quietly does something else. A spec entry names the guard alone, with its mode, or with its options; every form comes
to the same three values, and an option a spec can't carry is refused by name (`_shared.spec`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict
from pydantic_ai.exceptions import UserError

from .._shared.spec import refuse_options
from ._repair import RepairPolicy

GuardMode: TypeAlias = Literal['observe', 'enforce']
"""`observe` warns and records a span; `enforce` also refuses every rewrite that isn't a `patch`."""

_MODES: tuple[GuardMode, ...] = ('observe', 'enforce')

DeferPolicy: TypeAlias = Literal['compact', 'keep']
"""What enforce mode does with a compaction of consumed messages: apply it as a new window, or keep the old prefix."""

_DEFER_POLICIES: tuple[DeferPolicy, ...] = ('compact', 'keep')

_REPAIR_POLICIES: tuple[RepairPolicy, ...] = ('answer', 'drop')


class PrefixGuardSpecOptions(BaseModel):
    """The options of a `PrefixGuard` entry in an agent spec, as the spec's JSON schema states them."""

    model_config = ConfigDict(extra='forbid')

    mode: GuardMode = 'enforce'
    """As `PrefixGuard.mode`."""

    on_defer: DeferPolicy = 'compact'
    """As `PrefixGuard.on_defer`."""

    repair: RepairPolicy = 'answer'
    """As `PrefixGuard.repair`."""


def check_options(mode: GuardMode, on_defer: DeferPolicy, repair: RepairPolicy, verifier: object = None) -> None:
    """Refuse a mode or policy the guard doesn't have, naming it and the ones it has, and a verifier that isn't one.

    Raises:
        UserError: If one of them is not one the guard has.
    """
    if verifier is not None and not callable(getattr(verifier, 'open_window', None)):
        raise UserError(
            f'`PrefixGuard` option `verifier` takes a `WireVerifier` (anything with `open_window()`), not {verifier!r}.'
        )
    if mode not in _MODES:
        raise UserError(f"Unknown `PrefixGuard` mode {mode!r}: use 'observe' or 'enforce'.")
    if on_defer not in _DEFER_POLICIES:
        raise UserError(f"Unknown `PrefixGuard` on_defer {on_defer!r}: use 'compact' or 'keep'.")
    if repair not in _REPAIR_POLICIES:
        raise UserError(f"Unknown `PrefixGuard` repair {repair!r}: use 'answer' or 'drop'.")


def spec_options(
    options: GuardMode | PrefixGuardSpecOptions, named: Mapping[str, Any]
) -> tuple[GuardMode, DeferPolicy, RepairPolicy]:
    """The mode, `on_defer` and `repair` a spec entry gives, in whichever form it gives them (see `from_spec`).

    Raises:
        UserError: If the entry has an option the guard doesn't take from a spec, naming it.
    """
    # Anything but the options is taken as the mode, which `check_options` checks, naming the value.
    given: dict[str, Any] = (
        options.model_dump(exclude_unset=True) if isinstance(options, PrefixGuardSpecOptions) else {'mode': options}
    )
    given.update(named)
    mode = given.pop('mode', 'enforce')
    on_defer = given.pop('on_defer', 'compact')
    repair = given.pop('repair', 'answer')
    refuse_options(
        'PrefixGuard',
        given,
        accepted='`mode`, `on_defer` and `repair`',
        python_only={'verifier': 'a `WireVerifier` is a Python object'},
    )
    return mode, on_defer, repair
