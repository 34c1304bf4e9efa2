"""What the checker reports: the verdict on each conversation of a cassette, request by request, and the options that
allow a request to move the prefix.

`verdicts` judges the requests and builds these; `cli` prints them, as a report or as `--json`'s document.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._wire.causes import Cause
from .._wire.segments import Api
from .._wire.usage import Disagreement, ProviderUsage


@dataclass(frozen=True)
class NewWindow:
    """An `--allow-new-window` option: a request allowed to move its conversation's prefix."""

    request: int
    """The request's position in its conversation, from 0."""

    file: Path | None = None
    """The cassette it applies to, or `None` for every cassette."""

    conversation: int | None = None
    """The conversation's number in the cassette, or `None` for every conversation."""

    def applies(self, file: Path, conversation: int, request: int) -> bool:
        """Whether this option allows request `request` of conversation `conversation` of `file` to move the prefix."""
        return (
            request == self.request
            and (self.file is None or same_file(self.file, file))
            and (self.conversation is None or self.conversation == conversation)
        )


def same_file(one: Path, other: Path) -> bool:
    """Whether two paths name the same cassette, as written or once resolved."""
    return one == other or one.resolve() == other.resolve()


@dataclass(frozen=True)
class Divergence:
    """A request that does not extend the previous request of its conversation byte for byte."""

    request: int
    """The request's position in its conversation, from 0."""

    interaction: int
    """Its position among the cassette's interactions, from 0."""

    segment: int
    """The first segment of the previous request it does not repeat, or from which a changed setting invalidates the
    cache."""

    kind: str
    """That segment's kind: `tool`, `system`, `message`, `instructions`, `input` or `output`; or `setting`, if every
    segment up to it is repeated but a setting the provider documents as part of its cache changed."""

    message: str
    """What `assert_prefix_stable` says of it: both sides around the first differing byte; for a `setting`, the
    setting's values in both requests and the provider's rule."""

    setting: str | None = None
    """For a `setting`, the request field that changed (`tool_choice`, `text.format`)."""

    cause: Cause | None = None
    """Why the prefix moved and the fix, where the plugin's elements in the requests tell it (`_wire.causes`)."""


@dataclass(frozen=True)
class RequestVerdict:
    """One request of a conversation: the prefix the checker judged reusable, beside what the provider read."""

    request: int
    """The request's position in its conversation, from 0."""

    interaction: int
    """Its position among the cassette's interactions, from 0."""

    reused_bytes: int
    """Segment bytes it repeats, from the start, of the request before it."""

    total_bytes: int
    """Segment bytes of all of it."""

    provider: ProviderUsage | None
    """What its recorded reply says the provider read from cache, or `None` if the reply reports no usage."""

    disagreement: Disagreement | None
    """Where the provider's cache use and the checker's verdict don't agree (`_wire.usage.disagreement`)."""


@dataclass(frozen=True)
class ConversationReport:
    """The verdict on one conversation."""

    file: Path
    """The cassette."""

    number: int
    """Its position among the cassette's conversations, from 0, by first request."""

    api: Api
    """The provider API."""

    model: str
    """The `model` of its request bodies (empty if they name none)."""

    interactions: tuple[int, ...]
    """The cassette interactions of its requests, in order."""

    reused_bytes: int
    """Segment bytes its requests repeat, from the start, of the request before them, as `prefix_reuse` counts."""

    total_bytes: int
    """Segment bytes of all its requests."""

    new_windows: tuple[int, ...]
    """Requests that moved the prefix where an `--allow-new-window` option allowed it."""

    divergences: tuple[Divergence, ...]
    """Requests that broke the prefix, in order."""

    requests: tuple[RequestVerdict, ...] = ()
    """Each request's verdict, with the provider's cache use where the cassette recorded it."""

    @property
    def name(self) -> str:
        """`FILE#K`, as `--allow-new-window` takes it."""
        return f'{self.file}#{self.number}'

    @property
    def prefix_kept(self) -> bool:
        """Whether every request extends the one before it, but where a new window was allowed."""
        return not self.divergences


@dataclass(frozen=True)
class CassetteReport:
    """The verdicts on the conversations of one cassette."""

    file: Path
    """The cassette."""

    conversations: tuple[ConversationReport, ...]
    """Its conversations, by first request."""

    other_requests: int
    """Interactions that are not requests to one of the APIs it reads (`API_PATHS`), and so are not checked."""
