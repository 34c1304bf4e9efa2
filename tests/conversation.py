"""A scripted function model that writes down what each request showed the model, for snapshots.

Logic tests use it instead of a provider: it goes through the whole agent loop, including Pydantic AI's
`<system>` wrapping for models without inline system prompts, and returns what each request carried as
short readable lines.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile


@dataclass
class Seen:
    """One request as the model received it."""

    instructions: str | None
    messages: list[str]
    settings: dict[str, object]
    parts: list[str]
    """The instruction parts the instructions were joined from."""


Turn = str | Sequence[tuple[str, dict[str, object]]] | ModelResponse
"""A scripted reply: text, tool calls as `(tool name, args)` pairs, or a whole response."""


@dataclass
class ScriptedModel:
    """A function model that replies from a script and keeps every request it received."""

    inline: bool = False
    script: list[Turn] = field(default_factory=list[Turn])
    seen: list[Seen] = field(default_factory=list[Seen])
    on_request: Callable[[], None] | None = None

    def model(self, retention: timedelta | None = None) -> FunctionModel:
        """The model, whose provider keeps a cached prefix for `retention` if given."""
        profile = ModelProfile(supports_inline_system_prompts=self.inline, default_cache_retention=retention)
        return FunctionModel(self._reply, profile=profile, model_name='scripted')

    def _reply(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        lines = [line for message in messages for line in describe(message)]
        parts = [part.content for part in info.model_request_parameters.instruction_parts or []]
        self.seen.append(Seen(info.instructions, lines, dict(info.model_settings or {}), parts))
        if self.on_request is not None:
            self.on_request()
        turn = self.script.pop(0) if self.script else 'ok'
        if isinstance(turn, ModelResponse):
            return turn
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(
            parts=[
                ToolCallPart(name, json.dumps(args), tool_call_id=f'call_{len(self.seen)}_{index}')
                for index, (name, args) in enumerate(turn)
            ]
        )

    @property
    def last(self) -> Seen:
        return self.seen[-1]


def describe(message: ModelMessage) -> list[str]:
    """Short lines for a message's parts, as the model received them."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(message, ModelRequest):
            if isinstance(part, SystemPromptPart):
                lines.append(f'system: {part.content}')
            elif isinstance(part, UserPromptPart):
                lines.append(f'user: {part.content}')
            elif isinstance(part, ToolReturnPart):
                lines.append(f'tool-return {part.tool_name}: {part.model_response_str()}')
            else:
                lines.append(f'{part.part_kind}')
        elif isinstance(part, TextPart):
            lines.append(f'assistant: {part.content}')
        elif isinstance(part, ToolCallPart):
            lines.append(f'call {part.tool_name}: {part.args_as_json_str()}')
        else:
            lines.append(f'{part.part_kind}')
    return lines


def change_carrier(block_id: str, previous: str | None, content: str | None) -> SystemPromptPart:
    """The carrier a window stores for one block's change from `previous` to `content`, outside any window."""
    from pydantic_ai_append._encoding import encode_change
    from pydantic_ai_append._history import carrier
    from pydantic_ai_append._records import content_hash
    from pydantic_ai_append._rendering import change_text

    text = change_text(block_id, previous, content)
    digest = content_hash(content) if content is not None else None
    base = content_hash(previous) if previous is not None else None
    return carrier(text, encode_change(block_id, base=base, state={block_id: digest}, prev='', text=text))
