"""What the package's capabilities share when they are loaded from an agent spec (YAML, JSON or a dict).

Pydantic AI builds a spec's capability with the class's `from_spec`, whose signature gives the spec's schema. A
spec's values were never type-checked, and some options can't be data (a verifier, a block function), so an entry
is checked before a capability is built from it, with an error naming the option and what to do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, cast

from pydantic_ai.exceptions import UserError

from .prices import CachePrices


def refuse_options(
    capability: str, options: Mapping[str, object], *, accepted: str, python_only: Mapping[str, str]
) -> None:
    """Refuse every option of `capability`'s spec entry that `from_spec` didn't take, naming the first: one of
    `python_only` (options a spec can't carry, with why not), or one not `accepted`.
    """
    for name in options:
        if name in python_only:
            raise UserError(
                f"`{capability}` option `{name}` can't come from a spec: {python_only[name]}. Build the capability in "
                'Python and pass it in `capabilities=` of `Agent.from_spec` or `Agent.from_file` instead.'
            )
        raise UserError(f'`{capability}` specs have no option `{name}`; they take {accepted}.')


def spec_text(capability: str, name: str, value: object) -> str:
    """`value` if it is a string, as a spec option `name` of `capability` must be."""
    if not isinstance(value, str):
        raise UserError(f'`{capability}` option `{name}` takes a string, not {value!r}.')
    return value


def spec_texts(capability: str, name: str, value: object) -> tuple[str, ...]:
    """`value` as a tuple, if it is a list of strings, as a spec option `name` of `capability` must be."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise UserError(f'`{capability}` option `{name}` takes a list of strings, not {value!r}.')
    return tuple(spec_text(capability, f'{name}[{index}]', item) for index, item in enumerate(value))  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]


def signing_key_from(signing_key: object, signing_key_env: object) -> str | None:
    """The signing key a spec gives, or the one in the environment variable it names, read once when it is loaded:
    an unset or empty variable is an error, or records would go unsigned unnoticed.
    """
    if signing_key is not None and signing_key_env is not None:
        raise UserError(
            '`AppendInstructions` takes `signing_key` or `signing_key_env` from a spec, not both; '
            f'`signing_key_env` names {signing_key_env!r}.'
        )
    if signing_key_env is None:
        return None if signing_key is None else spec_text('AppendInstructions', 'signing_key', signing_key)
    variable = spec_text('AppendInstructions', 'signing_key_env', signing_key_env)
    key = os.environ.get(variable)
    if not key:
        raise UserError(
            f'`AppendInstructions` option `signing_key_env` names the environment variable {variable!r}, which is '
            'not set or is empty; set it to the signing key before loading the spec.'
        )
    return key


_PRICE_KEYS = frozenset({'input', 'cache_read', 'cache_write', 'retention_seconds'})


def spec_windows(value: object) -> Literal['price', 'keep'] | CachePrices:
    """`AppendInstructions`'s `windows` from a spec: `'price'` or `'keep'` as they are (the capability checks them),
    or the prices a mapping gives, as `CachePrices`.
    """
    if not isinstance(value, Mapping):
        return cast("Literal['price', 'keep']", value)
    prices = cast('Mapping[str, Any]', value)
    unknown = sorted(set(prices) - _PRICE_KEYS)
    if unknown or not {'input', 'cache_read', 'cache_write'} <= set(prices):
        raise UserError(
            f'`AppendInstructions` option `windows` takes `input`, `cache_read`, `cache_write` and optionally '
            f'`retention_seconds`, not {dict(prices)!r}.'
        )
    seconds = prices.get('retention_seconds')
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)):
        raise UserError(f'`AppendInstructions` option `windows.retention_seconds` takes a number, not {seconds!r}.')
    retention = timedelta(seconds=seconds) if seconds is not None else None
    return CachePrices(prices['input'], prices['cache_read'], prices['cache_write'], retention)
