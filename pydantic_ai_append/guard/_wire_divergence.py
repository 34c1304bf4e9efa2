"""What `WireVerifier` reports of a request that doesn't extend the previous one: where, and both sides of it.

A divergence names the request's conversation (API and model), its position, and the first segment that differs, with
an excerpt of each side around the first byte that differs, so the message says what moved without the whole body.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._wire.segments import Api, Segment, describe_divergence, parting


@dataclass(frozen=True)
class WireDivergence:
    """A request whose cache-order segments don't start with the previous request's of its conversation and model.

    ```python
    from pydantic_ai_append.guard import WireDivergence

    divergence = WireDivergence(
        api='openai-chat',
        model='gpt-5.2',
        request=2,
        segment=1,
        kind='message',
        previous='{"role":"user","content":"Hello"}',
        current='{"role":"user","content":"Hi"}',
    )
    print(divergence.message)
    #> openai-chat request 2 to model 'gpt-5.2' does not extend request 1 byte for byte: segment 1 (message) differs
    #>   request 1: {"role":"user","content":"Hello"}
    #>   request 2: {"role":"user","content":"Hi"}
    ```
    """

    api: Api
    """The provider API the request was sent to."""

    model: str
    """The model name in the request body; with `api`, it names the conversation the request belongs to."""

    request: int
    """The request's position in its conversation, from 0; the previous request is `request - 1`."""

    segment: int
    """The index of the first segment that differs, counted over the previous request's segments."""

    kind: str
    """What that segment is in the previous request: `tool`, `system`, `message`, `instructions`, `input` or
    `output` (see [`Segment.kind`][pydantic_ai_append.testing.Segment.kind])."""

    previous: str
    """An excerpt of the segment in the previous request, around the first byte that differs."""

    current: str | None
    """An excerpt of the segment in this request around the same byte, or `None` if this request ends before it."""

    @property
    def message(self) -> str:
        """What diverged, with both sides, in a few lines."""
        subject = f'{self.api} request {self.request} to model {self.model!r}'
        sides = (self.previous, self.current)
        differs = f'segment {self.segment} ({self.kind}) differs'
        return describe_divergence(subject, self.request, self.segment, self.kind, sides, differs=differs)


def divergence_of(
    api: Api, model: str, index: int, previous: list[Segment], current: list[Segment], position: int
) -> WireDivergence:
    """The divergence of request `index` from `previous`, at the segment `position` where they part."""
    _, before, after = parting(previous, current, position)
    return WireDivergence(api, model, index, position, previous[position].kind, before, after)
