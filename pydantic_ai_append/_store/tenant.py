"""Whose a record store's entry is: the tenant the server names, in the entry's key, and a warning when it names none.

A client chooses the conversation id (the Vercel AI chat `id`, the AG-UI `thread_id`), so an entry keyed by it alone
is any client's to read: one that sends another user's chat id and first message gets that user's records put back,
and their block values reach its model. Pydantic AI's own `ConversationStore` keeps a conversation to the `scope` it
was saved with (the adapter's `conversation_scope`, the authenticated user); the record store keeps an entry to the
tenant the capability's `tenant` option names for the run, which is the same user. An entry saved for one tenant is
never loaded for another: the tenant is part of its key.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, TypeAlias, cast
from urllib.parse import quote

from pydantic_ai import RunContext
from pydantic_ai.exceptions import UserError

Tenant: TypeAlias = Callable[[RunContext[Any]], str]
"""A function naming the tenant of a run (the authenticated user), whose entries no other tenant's runs read."""


class NoTenantWarning(UserWarning):
    """A record store is used by an `AppendInstructions` that names no `tenant`, so its entries are keyed by
    conversation id alone.

    Then every client of the agent is one tenant: a client that sends another user's conversation id, and that
    conversation's first message, gets that user's records back, block values and all. Pass `tenant=` a function of
    the run that names its authenticated user (the value a UI adapter's `conversation_scope` takes). Warned once per
    capability, the first time its store gives a run the records its history lacks. Where every client is one user,
    silence it with `warnings.filterwarnings('ignore', category=NoTenantWarning)`.
    """


def checked_tenant(tenant: object) -> Tenant | None:
    """The option `tenant` of `AppendInstructions`, checked.

    Raises:
        UserError: If `tenant` is neither a function nor `None`.
    """
    if tenant is not None and not callable(tenant):
        raise UserError(
            '`AppendInstructions` option `tenant` takes a function of the run naming its tenant, such as '
            f'`lambda ctx: ctx.deps.user_id`, or `None`, not {tenant!r}.'
        )
    return cast('Tenant | None', tenant)


class EntryKeys:
    """The key of each run's entry in the record store of one `AppendInstructions`: its id, the run's tenant and
    conversation id. Shared by the capability's per-run copies, so it warns once per capability.
    """

    def __init__(self, owner: str, tenant: Tenant | None) -> None:
        self.owner = owner
        """The capability's id, which keeps two agents' entries of one conversation apart."""
        self.tenant = tenant
        """The `tenant` option: what names a run's tenant, or `None`."""
        self.warned = False
        """Whether `NoTenantWarning` was warned."""

    def key(self, ctx: RunContext[Any]) -> str:
        """The key of the entry of `ctx`'s conversation: `<owner>:<conversation id>`, or with a tenant
        `<owner>@<tenant, percent-encoded>:<conversation id>`, so no two tenants' keys are equal.

        Raises:
            UserError: If the `tenant` function returns anything but a non-empty string.
        """
        if self.tenant is None:
            return f'{self.owner}:{ctx.conversation_id}'
        tenant = cast('object', self.tenant(ctx))  # from user code, which may not be type-checked
        if not isinstance(tenant, str) or not tenant:
            raise UserError(
                f'`AppendInstructions` {self.owner!r} option `tenant` returned {tenant!r} for conversation '
                f"{ctx.conversation_id!r}; it must return a non-empty string naming the run's tenant."
            )
        # Encoded, the tenant holds no `:`, so where it ends is plain; `@` keeps it apart from keys without one.
        return f'{self.owner}@{quote(tenant, safe="")}:{ctx.conversation_id}'

    def warn_if_shared(self) -> None:
        """Warn `NoTenantWarning` the first time the store gives a run records without a tenant: where a client's
        history lacks them, as behind a UI, and another user's could be given instead.
        """
        if self.tenant is None and not self.warned:
            self.warned = True
            warnings.warn(
                f'`AppendInstructions` {self.owner!r} keys its record store by conversation id alone: a client that '
                "sends another user's conversation id and first message gets that user's records. Pass `tenant=`, "
                "a function of the run naming its authenticated user (as a UI adapter's `conversation_scope`).",
                NoTenantWarning,
                stacklevel=3,
            )
