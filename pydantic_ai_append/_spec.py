"""What the package's capabilities share when they are loaded from an agent spec (YAML, JSON or a dict).

Pydantic AI builds a capability named in a spec by calling the class's `from_spec` with the entry's arguments,
and derives the spec's JSON schema from that method's signature. [`AppendInstructions`][pydantic_ai_append.AppendInstructions]
and [`PrefixGuard`][pydantic_ai_append.guard.PrefixGuard] each define one that takes only plain data. A spec's
values were never seen by a type checker, and some options can't be written as data at all (a verifier object, a
block function), so this module checks what a spec entry says before a capability is built from it: an error
names the offending option and says what to do, instead of failing later inside a request.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from pydantic_ai.exceptions import UserError

__all__ = ('refuse_options', 'signing_key_from', 'spec_text', 'spec_texts')


def refuse_options(
    capability: str, options: Mapping[str, object], *, accepted: str, python_only: Mapping[str, str]
) -> None:
    """Refuse every option of a spec entry that `from_spec` didn't take, naming the first one.

    Args:
        capability: The capability's name in specs.
        options: The options left over.
        accepted: The options a spec entry takes, as the error lists them.
        python_only: Options the capability has in Python that a spec can't carry, with why not.
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
    """The signing key a spec gives: written in it, or named as the environment variable that holds it.

    The variable is read once, when the spec is loaded. A variable that isn't set, or is empty, is an error
    rather than no key, since records would otherwise go unsigned without anyone noticing.
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
