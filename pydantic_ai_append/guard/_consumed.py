"""What the model has consumed: a message history and its generation boundary.

A [`ConsumedHistory`][pydantic_ai_append.guard.ConsumedHistory] is a message history plus its *generation
boundary*: how many messages the model has already consumed, which is everything up to and including its latest
reply (what the last request sent, and what the model answered). It keeps the bytes those messages would be sent
as, taken when it is made, so a rewrite is judged against what the model actually saw, even if a message object
was changed in place since.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse

from ._bytes import MESSAGE_ADAPTER, encode_message, message_bytes


def consumed_boundary(messages: Sequence[ModelMessage]) -> int:
    """How many of `messages` the model has consumed: all of them up to and including its latest reply."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], ModelResponse):
            return index + 1
    return 0


@dataclass(frozen=True)
class ConsumedHistory:
    """A message history and how much of it the model has already consumed.

    ```python
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart

    from pydantic_ai_append.guard import ConsumedHistory

    history = ConsumedHistory.of(
        [ModelRequest.user_text_prompt('Hi'), ModelResponse(parts=[TextPart('Hello!')]), ModelRequest.user_text_prompt('?')]
    )
    print(history.boundary)
    #> 2
    ```
    """

    messages: tuple[ModelMessage, ...]
    """The history, in order."""

    boundary: int
    """How many messages the model has consumed: everything the last request sent, and the model's reply."""

    deferred: tuple[ModelMessage, ...] | None = None
    """A rewrite held until the next window boundary, if there is one."""

    consumed: tuple[bytes, ...] = field(init=False, repr=False, compare=False)
    """The bytes of the consumed messages, taken when this history was made."""

    _snapshots: tuple[dict[str, Any], ...] = field(init=False, repr=False, compare=False)
    """The consumed messages as data, taken with their bytes, to rebuild any that is changed in place later."""

    def __post_init__(self) -> None:
        if not 0 <= self.boundary <= len(self.messages):
            raise ValueError(f'boundary {self.boundary} is outside a history of {len(self.messages)} messages')
        self._take([encode_message(message) for message in self.messages[: self.boundary]])

    def _take(self, entries: Sequence[tuple[bytes, dict[str, Any]]]) -> None:
        object.__setattr__(self, 'consumed', tuple(sent for sent, _ in entries))
        object.__setattr__(self, '_snapshots', tuple(snapshot for _, snapshot in entries))

    def consumed_messages(self) -> list[ModelMessage]:
        """The consumed messages as the model consumed them.

        Each is the message object itself while it still encodes to the bytes taken when this history was made;
        one changed in place since (a history processor may edit the very objects a run holds) is rebuilt from
        the data taken then.
        """
        return [
            message if message_bytes(message) == sent else MESSAGE_ADAPTER.validate_python(snapshot)
            for message, sent, snapshot in zip(self.messages, self.consumed, self._snapshots, strict=False)
        ]

    def as_consumed(self) -> list[ModelMessage]:
        """The whole history, its consumed messages as the model consumed them (`consumed_messages`), then the rest."""
        return [*self.consumed_messages(), *self.messages[self.boundary :]]

    def first_change(self, sent: Sequence[ModelMessage]) -> int:
        """The index of the first consumed message that `sent` doesn't send with the bytes the model consumed (changed
        or left out), or the number of consumed messages if it sends them all so.
        """
        for index, consumed in enumerate(self.consumed):
            # The same object may have been changed in place since it was consumed, so even it is encoded again.
            if index >= len(sent) or message_bytes(sent[index]) != consumed:
                return index
        return len(self.consumed)

    def unchanged(self, sent: Sequence[ModelMessage]) -> dict[str, int]:
        """How many of the consumed messages `sent` starts with unchanged (`messages`), and their bytes (`bytes`)."""
        count = self.first_change(sent)
        return {'messages': count, 'bytes': sum(map(len, self.consumed[:count]))}

    def advance(
        self, messages: Sequence[ModelMessage], *, sent: Sequence[ModelMessage], verified: int
    ) -> ConsumedHistory:
        """The history once the model has answered: all of `messages` consumed.

        Encoding a long history costs more than the rest of a request, so this history's bytes are reused for each
        of the first `verified` messages that is still the very object this history and the request both had at
        that position; every other message is encoded.

        Args:
            messages: The history with the model's reply.
            sent: The messages the request sent.
            verified: How many leading messages of `sent` were checked to have this history's consumed bytes.
        """
        known = min(verified, len(self.consumed), len(sent))
        entries = [
            (self.consumed[index], self._snapshots[index])
            if index < known and message is sent[index] and message is self.messages[index]
            else encode_message(message)
            for index, message in enumerate(messages)
        ]
        return ConsumedHistory._made(tuple(messages), len(messages), None, entries)

    @classmethod
    def of(cls, messages: Sequence[ModelMessage], *, boundary: int | None = None) -> ConsumedHistory:
        """The history `messages`, consumed up to `boundary` (by default, through the model's latest reply)."""
        return cls(tuple(messages), consumed_boundary(messages) if boundary is None else boundary)

    def open_next(self) -> ConsumedHistory:
        """The history at the next window boundary: any deferred rewrite applied, none of it consumed yet."""
        messages = self.deferred if self.deferred is not None else self.messages
        return ConsumedHistory(messages, 0)

    def adding(self, messages: Sequence[ModelMessage]) -> ConsumedHistory:
        """This history with `messages` after it, not consumed yet (a step's new request), keeping its bytes."""
        entries = list(zip(self.consumed, self._snapshots, strict=True))
        return ConsumedHistory._made((*self.messages, *messages), self.boundary, self.deferred, entries)

    def holding(self, deferred: Sequence[ModelMessage]) -> ConsumedHistory:
        """This history, holding `deferred` for the next window boundary.

        It keeps the bytes and data taken when this history was made: its messages may have been edited since.
        """
        entries = list(zip(self.consumed, self._snapshots, strict=True))
        return ConsumedHistory._made(self.messages, self.boundary, tuple(deferred), entries)

    @staticmethod
    def _made(
        messages: tuple[ModelMessage, ...],
        boundary: int,
        deferred: tuple[ModelMessage, ...] | None,
        entries: Sequence[tuple[bytes, dict[str, Any]]],
    ) -> ConsumedHistory:
        """A history whose consumed bytes and snapshots are already known."""
        history = object.__new__(ConsumedHistory)
        object.__setattr__(history, 'messages', messages)
        object.__setattr__(history, 'boundary', boundary)
        object.__setattr__(history, 'deferred', deferred)
        history._take(entries)
        return history
