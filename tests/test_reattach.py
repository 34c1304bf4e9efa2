"""Records put back into history that came through Pydantic AI's UI adapters, which drop every part's metadata.

Each conversation runs a real agent over several turns; between turns the history goes to the protocol and back, as
a chat server's client would hold it, and the entry `records_entry` made of the history before the dump stands in
for the server's record store. AG-UI needs `ag-ui-protocol`, which the dev environments don't install.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pydantic_ai.messages
import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, ReinjectSystemPrompt
from pydantic_ai.messages import (
    BinaryContent,
    CachePoint,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,  # pyright: ignore[reportDeprecated]
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.ui.vercel_ai import VercelAIAdapter
from pydantic_ai.ui.vercel_ai.request_types import SubmitMessage, UIMessage

from pydantic_ai_append import AppendInstructions, instruction_records
from pydantic_ai_append._store.reattach import content_keys, reattach, records_entry

RoundTrip = Callable[[list[ModelMessage]], list[ModelMessage]]
PROMPTS = ['What is next?', 'Look it up.', 'ok', 'ok', 'Anything else?']


class Conversation:
    """An agent whose one append-mode block changes every turn, and the instructions of each model call."""

    def __init__(self, *extra: AbstractCapability[None]) -> None:
        self.turn = 0
        self.instructions: list[str | None] = []
        context = AppendInstructions[None](id='ctx')
        context.instructions(name='state')(lambda: f'- [ ] step {self.turn}')
        capabilities: list[AbstractCapability[None]] = [context, *extra]
        self.agent = Agent(
            FunctionModel(self.play),
            deps_type=type(None),
            system_prompt='You are a todo bot.',
            capabilities=capabilities,
        )
        self.agent.tool_plain(self.lookup)

    def play(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.instructions.append(info.instructions)
        if self.turn == 1 and not isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse(parts=[ToolCallPart('lookup', '{"q": "todos"}', tool_call_id='call_1')])
        return ModelResponse(parts=[TextPart(f'Answer {self.turn}.')])

    @staticmethod
    def lookup(q: str) -> str:
        return f'found {q}'

    def run(self, between: Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]]) -> list[str | None]:
        """Run every turn, passing the history through `between` (given the entry of the history before it)."""
        history: list[ModelMessage] = []
        for self.turn, prompt in enumerate(PROMPTS):
            sent = between(history, records_entry(history)) if history else None
            history = self.agent.run_sync(prompt, message_history=sent).all_messages()
        return self.instructions


def vercel_dumped(messages: list[ModelMessage]) -> list[ModelMessage]:
    dumped = [
        message.model_dump(mode='json', by_alias=True, exclude_none=True)
        for message in VercelAIAdapter.dump_messages(messages)
    ]
    client = [UIMessage.model_validate(json.loads(json.dumps(message))) for message in dumped]
    return VercelAIAdapter.load_messages(client)


def vercel_sanitized(messages: list[ModelMessage]) -> list[ModelMessage]:
    adapter = VercelAIAdapter(
        agent=Agent('test'), run_input=SubmitMessage(id='c1', messages=[]), manage_system_prompt='server'
    )
    with warnings.catch_warnings():
        # It warns that it stripped the system prompts, as a server in this mode means it to.
        warnings.filterwarnings(
            'ignore', '(Parts carrying the system voice|Client-submitted system prompts) were', UserWarning
        )
        return adapter.sanitize_messages(vercel_dumped(messages))


def agui(messages: list[ModelMessage]) -> list[ModelMessage]:
    pytest.importorskip('ag_ui')
    from ag_ui.core import Message  # pyright: ignore[reportMissingImports, reportUnknownVariableType]
    from pydantic_ai.ui.ag_ui import AGUIAdapter

    # Untyped where `ag-ui-protocol` isn't installed, as in the dev environments pyright runs in.
    protocol: TypeAdapter[list[Any]] = TypeAdapter(list[Message])  # pyright: ignore[reportUnknownArgumentType]
    adapter: Any = AGUIAdapter
    client = protocol.validate_json(protocol.dump_json(adapter.dump_messages(messages), by_alias=True))
    return adapter.load_messages(client)


def with_reattach(round_trip: RoundTrip) -> Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]]:
    return lambda history, entry: reattach(round_trip(history), entry)


def without_reattach(round_trip: RoundTrip) -> Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]]:
    return lambda history, entry: round_trip(history)


ROUND_TRIPS = [
    pytest.param(vercel_dumped, id='vercel'),
    pytest.param(vercel_sanitized, id='vercel-server'),
    pytest.param(agui, id='ag-ui'),
]


@pytest.mark.parametrize('round_trip', ROUND_TRIPS)
def test_reattached_records_keep_the_instructions_byte_identical(round_trip: RoundTrip):
    sent = Conversation().run(with_reattach(round_trip))
    assert len(sent) == len(PROMPTS) + 1
    assert set(sent) == {sent[0]}


@pytest.mark.parametrize('round_trip', ROUND_TRIPS)
def test_without_reattach_every_turn_opens_a_window(round_trip: RoundTrip):
    sent = Conversation().run(without_reattach(round_trip))
    assert len(set(sent)) == len(PROMPTS)


def test_carriers_in_history_survive_reinject_system_prompt():
    """What the adapters' run adds with `manage_system_prompt='server'`, which drops the system prompt parts a run
    starts with: the plugin's carriers are made other parts first."""
    sent = Conversation(ReinjectSystemPrompt(replace_existing=True)).run(with_reattach(vercel_sanitized))
    assert len(set(sent)) == 1


def edited(history: list[ModelMessage], entry: dict[str, Any]) -> list[ModelMessage]:
    loaded = vercel_dumped(history)
    if len(loaded) == 8:
        first = loaded[0]
        assert isinstance(first, ModelRequest)
        parts = [UserPromptPart('What is first?') if isinstance(part, UserPromptPart) else part for part in first.parts]
        loaded[0] = ModelRequest(parts=parts)
    return reattach(loaded, entry)


def dropped(history: list[ModelMessage], entry: dict[str, Any]) -> list[ModelMessage]:
    loaded = vercel_dumped(history)
    first = loaded[0].parts
    once = len(loaded) == 8 and any(isinstance(part, UserPromptPart) and part.content == PROMPTS[0] for part in first)
    return reattach(loaded[2:] if once else loaded, entry)


@pytest.mark.parametrize('between', [edited, dropped])
def test_an_edit_or_a_dropped_message_opens_a_window_there(
    between: Callable[[list[ModelMessage], dict[str, Any]], list[ModelMessage]],
):
    sent = Conversation().run(between)
    # Calls: turn 1, turn 2 (a tool call and after it), turn 3; the edit comes before turn 4.
    assert set(sent[:4]) == {sent[0]}
    assert sent[4] != sent[0]
    assert sent[5] == sent[4]


def test_an_empty_entry_leaves_no_records_and_no_remnants():
    first = Conversation().agent.run_sync('Hi').all_messages()
    loaded = vercel_dumped(first)
    assert records_entry(loaded) == {'format': 1, 'carriers': []}
    for entry in [{}, {'format': 99, 'carriers': records_entry(first)['carriers']}, records_entry(loaded)]:
        restored = reattach(loaded, entry)
        assert instruction_records(restored) == []
        assert [part for message in restored for part in message.parts if isinstance(part, SystemPromptPart)] == [
            SystemPromptPart('You are a todo bot.', timestamp=loaded[0].parts[0].timestamp)  # pyright: ignore
        ]


def test_reattach_puts_back_exactly_what_was_there():
    conversation = Conversation()
    conversation.run(with_reattach(vercel_dumped))
    full = conversation.agent.run_sync('Done?').all_messages()
    restored = reattach(vercel_dumped(full), records_entry(full))
    assert instruction_records(restored) == instruction_records(full)
    assert [[type(part) for part in message.parts] for message in restored] == [
        [type(part) for part in message.parts] for message in full
    ]


def retry(content: str, **tool: str) -> RetryPromptPart:  # pyright: ignore[reportDeprecated]
    """A retry as 2.58 writes them; 2.68 deprecates the part, and writes other parts that load the same."""
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', '`RetryPromptPart` is deprecated')
        return RetryPromptPart(content, **tool)  # pyright: ignore[reportArgumentType, reportDeprecated]


def test_keys_are_kept_by_a_round_trip_and_chained():
    history: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart('Be kind.'), UserPromptPart('ok')]),
        ModelResponse(parts=[TextPart('a'), TextPart('b'), ToolCallPart('t', '{"b": 2, "a": 1}', tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('t', {'r': [1, 2]}, tool_call_id='c1')]),
        ModelResponse(parts=[ToolCallPart('u', 'not json', tool_call_id='c2'), ToolCallPart('v', None, 'c3')]),
        ModelRequest(parts=[ToolReturnPart('u', 'bad', tool_call_id='c2'), ToolReturnPart('v', 1, 'c3')]),
        ModelResponse(parts=[TextPart('ok')]),
        ModelRequest(
            parts=[UserPromptPart(['x', ImageUrl('https://e.com/a.png'), BinaryContent(b'a', media_type='image/png')])]
        ),
        ModelResponse(parts=[TextPart('')]),
        ModelRequest(parts=[UserPromptPart('ok')]),
    ]
    keys = content_keys(history)
    assert content_keys(vercel_dumped(history)) == keys
    assert len(set(keys)) == len(keys)
    # A tool result is keyed by its call alone (AG-UI changes its type); another call is another key.
    assert content_keys([*history[:2], ModelRequest(parts=[ToolReturnPart('t', '{"r": [1, 2]}', 'c1')])])[2] == keys[2]
    assert content_keys([*history[:2], ModelRequest(parts=[ToolReturnPart('t', {'r': [1, 2]}, 'c9')])])[2] != keys[2]
    split = [history[0], ModelRequest(parts=[UserPromptPart('more')])]
    assert content_keys(split)[0] == content_keys(split)[1]


def test_other_user_content_and_retries_without_a_tool_are_keyed():
    history: Sequence[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(['x', CachePoint()]), retry('try again')]),
    ]
    assert content_keys(history) != content_keys([ModelRequest(parts=[UserPromptPart(['x'])])])


def test_retries_keep_their_keys_on_2_68():
    """2.58's adapters load a retry as the text it sends the model, which opens a new window there."""
    if not hasattr(pydantic_ai.messages, 'RetryFeedbackPart'):
        pytest.skip('2.58 has no RetryFeedbackPart')
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart('hi')]),
        ModelResponse(parts=[ToolCallPart('u', {}, tool_call_id='c2')]),
        ModelRequest(parts=[retry('bad', tool_name='u', tool_call_id='c2')]),
        ModelResponse(parts=[TextPart('a')]),
        ModelRequest(parts=[retry('try again')]),
    ]
    assert content_keys(vercel_dumped(history)) == content_keys(history)


def test_carriers_go_back_in_their_places():
    """Beside a system prompt of the user's and each other, where the adapters keep none of them in place."""

    A, B = '<context id="a">\n1\n</context>', '<context id="b">\n2\n</context>'

    def carrier(text: str) -> SystemPromptPart:
        return SystemPromptPart(text, metadata={'pydantic_ai_append': {'kind': text}})

    parts = [SystemPromptPart('Be kind.'), carrier(''), UserPromptPart('hi'), carrier(A), carrier(B)]
    history: list[ModelMessage] = [ModelRequest(parts=parts)]
    loaded = [
        ModelRequest(
            parts=[
                SystemPromptPart(part.content) if isinstance(part, SystemPromptPart) and part.metadata else part
                for part in parts
            ]
        )
    ]
    assert reattach(loaded, records_entry(history)) == history
