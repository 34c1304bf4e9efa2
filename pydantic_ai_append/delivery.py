"""How the window's changes reach a model: which path, which wording, and what goes in each request.

A change is sent as a mid-conversation `SystemPromptPart`. Pydantic AI's message preparation then sends it
as a system message on models whose profile has `supports_inline_system_prompts`, and as `<system>`-wrapped
user text on the others; this module picks the wording for that path (the fallback path also says that a
withdrawal stays in effect).

Three details keep the prefix byte-stable on every path:

- A `FallbackModel` has no profile of its own: its members may be on different paths. When they are, each
  member is wrapped so that its own message preparation picks its own wording.
- On releases that tell a non-inline model what `<system>` means only once a mid-conversation system
  message appears (`framing_announcement='when_needed'`), the announcement would move the system prompt at
  the first change. A window on such a model asks for `'always'`, so the announcement is there from the
  first request, unless the user chose a value.
- Pydantic AI doesn't prepare the messages of a resumed turn, so its `<system>` wrapping is applied here
  for the changes on the fallback path.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelRequestPart, SystemPromptPart, UserPromptPart
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from .records import is_carrier
from .rendering import FallbackRenderer, InlineRenderer, Renderer
from .window import Delivery

__all__ = ('PathWording', 'deliver', 'is_inline', 'members', 'paths', 'prepare_model')

_INLINE_TEXT_KEY = 'pydantic_ai_append_inline_text'
"""Metadata of a delivered change on a mixed `FallbackModel`: its wording for members on the inline path."""


def is_inline(model: Model) -> bool:
    """Whether `model` takes mid-conversation system messages, per its profile."""
    return bool(model.profile.get('supports_inline_system_prompts', False))


def members(model: Model) -> list[Model]:
    """The models that may serve a request to `model`: a `FallbackModel`'s members, or the model itself."""
    if isinstance(model, FallbackModel):
        return [member for inner in model.models for member in members(inner)]
    return [model]


def paths(model: Model) -> set[bool]:
    """The delivery paths of the models that may serve `model`'s requests: `True` for inline."""
    return {is_inline(member) for member in members(model)}


class PathWording(WrapperModel):
    """A `FallbackModel` member that sends the changes in the wording of its own delivery path.

    The changes go to every member in the fallback path's wording, which is right for either path; a member
    on the inline path swaps in its own wording when it prepares its messages.
    """

    def prepare_messages(
        self, messages: list[ModelMessage], model_request_parameters: ModelRequestParameters | None = None
    ) -> list[ModelMessage]:
        """Put this member's wording in each change, then prepare the messages as the member does."""
        if is_inline(self.wrapped):
            messages = [_inline_wording(message) for message in messages]
        return self.wrapped.prepare_messages(messages, model_request_parameters)


def _inline_wording(message: ModelMessage) -> ModelMessage:
    if not isinstance(message, ModelRequest) or not any(_inline_text(part) is not None for part in message.parts):
        return message
    parts = [
        replace(part, content=text) if (text := _inline_text(part)) is not None else part for part in message.parts
    ]
    return replace(message, parts=parts)


def _inline_text(part: ModelRequestPart) -> str | None:
    if isinstance(part, SystemPromptPart) and part.metadata and _INLINE_TEXT_KEY in part.metadata:
        return cast(str, part.metadata[_INLINE_TEXT_KEY])
    return None


def prepare_model(request_context: ModelRequestContext, *, tagged: bool) -> tuple[Renderer, bool]:
    """Set up the request's model for delivery.

    Args:
        request_context: The request being prepared; its model and settings may be replaced.
        tagged: Whether the request's prefix has an append-mode section, so changes can follow.

    Returns:
        The renderer the changes are sent with, and whether the model is a `FallbackModel` with members on both
        paths (see [`deliver`][pydantic_ai_append.delivery.deliver]'s `mixed`).
    """
    model = request_context.model
    on_paths = paths(model)
    if tagged and False in on_paths:
        settings = request_context.model_settings or {}
        model_settings = model.settings or {}
        if 'framing_announcement' not in settings and 'framing_announcement' not in model_settings:
            request_context.model_settings = cast(ModelSettings, {**settings, 'framing_announcement': 'always'})
    if on_paths == {True}:
        return InlineRenderer, False
    mixed = isinstance(model, FallbackModel) and True in on_paths
    if mixed:
        request_context.model = _with_path_wording(cast(FallbackModel, model))
    return FallbackRenderer, mixed


def _with_path_wording(model: FallbackModel) -> FallbackModel:
    mixed = copy.copy(model)
    mixed.models = [
        _with_path_wording(member) if isinstance(member, FallbackModel) else PathWording(member)
        for member in model.models
    ]
    return mixed


def deliver(
    messages: list[ModelMessage],
    deliveries: Sequence[Delivery],
    renderer: Renderer,
    *,
    mixed: bool = False,
    wrap: bool = False,
) -> list[ModelMessage]:
    """The outgoing messages: each record replaced by its change's text, or left out if it delivers nothing.

    Args:
        messages: The request's messages, records included.
        deliveries: The changes this request delivers, by position.
        renderer: The renderer of the request's delivery path.
        mixed: Whether the request goes to a `FallbackModel` whose members are on both paths, so each change
            also carries its inline wording for `PathWording` to swap in.
        wrap: Whether to `<system>`-wrap each change here, because Pydantic AI won't prepare these messages.
    """
    by_position = {(delivery.message_index, delivery.part_index): delivery for delivery in deliveries}
    rendered: list[ModelMessage] = []
    for index, message in enumerate(messages):
        if isinstance(message, ModelRequest) and any(is_carrier(part) for part in message.parts):
            parts: list[ModelRequestPart] = []
            for part_index, part in enumerate(message.parts):
                if not is_carrier(part):
                    parts.append(part)
                elif (delivery := by_position.get((index, part_index))) is not None:
                    parts.append(_change_part(delivery, renderer, cast(SystemPromptPart, part), mixed=mixed, wrap=wrap))
            message = replace(message, parts=parts)
        rendered.append(message)
    return rendered


def _change_part(
    delivery: Delivery, renderer: Renderer, carrier: SystemPromptPart, *, mixed: bool, wrap: bool
) -> ModelRequestPart:
    text = renderer.change(delivery.delta, base_matches=delivery.base_matches)
    if wrap:
        return UserPromptPart(f'<system>{text}</system>', timestamp=carrier.timestamp)
    metadata: dict[str, Any] | None = None
    if mixed:
        metadata = {_INLINE_TEXT_KEY: InlineRenderer.change(delivery.delta, base_matches=delivery.base_matches)}
    return SystemPromptPart(text, timestamp=carrier.timestamp, metadata=metadata)
