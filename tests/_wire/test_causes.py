"""Why a prefix moved: `assert_prefix_stable` names the cause and the fix before it suggests `new_windows=`, for each
cause the plugin's elements in the requests tell: a literal, rewrite-mode or dynamic instruction changed, a block
changed policy, the records were lost, compaction, a tool changed, or instructions without the plugin changed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from pydantic_ai_append import AppendInstructions, strip_records
from pydantic_ai_append._rendering import SUPERSESSION_SENTENCE
from pydantic_ai_append._store.memory import PROCESS_STORE
from pydantic_ai_append._wire.causes import explain
from pydantic_ai_append._wire.segments import Segment, common_prefix_length, segments
from pydantic_ai_append.testing import Api, PromptWire


@dataclass
class Deps:
    todos: list[str] = field(default_factory=lambda: ['write the parser', 'write its tests'])
    now: str = '12:00'
    mood: str = 'calm'


def reply(request: httpx2.Request) -> httpx2.Response:
    if request.url.path.endswith('/messages'):
        content = [{'type': 'text', 'text': 'OK.'}]
        usage = {'input_tokens': 30, 'output_tokens': 2}
        return httpx2.Response(
            200,
            json={'id': 'msg_1', 'type': 'message', 'role': 'assistant', 'model': 'claude-sonnet-4-6',
                  'content': content, 'stop_reason': 'end_turn', 'stop_sequence': None, 'usage': usage},
        )  # fmt: skip
    if request.url.path.endswith('/responses'):
        text: dict[str, Any] = {'type': 'output_text', 'text': 'OK.', 'annotations': []}
        item: dict[str, Any] = {
            'type': 'message',
            'id': 'msg_1',
            'status': 'completed',
            'role': 'assistant',
            'content': [text],
        }
        return httpx2.Response(
            200,
            json={'id': 'resp_1', 'object': 'response', 'created_at': 0, 'status': 'completed', 'model': 'gpt-5.2',
                  'output': [item], 'parallel_tool_calls': True, 'tool_choice': 'auto', 'tools': []},
        )  # fmt: skip
    choice = {'index': 0, 'message': {'role': 'assistant', 'content': 'OK.'}, 'finish_reason': 'stop'}
    return httpx2.Response(
        200, json={'id': 'c1', 'object': 'chat.completion', 'created': 0, 'model': 'gpt-5.2', 'choices': [choice]}
    )


def model_for(api: Api, client: httpx2.AsyncClient) -> Model:
    if api == 'anthropic':
        return AnthropicModel('claude-sonnet-4-6', provider=AnthropicProvider(api_key='offline', http_client=client))
    provider = OpenAIProvider(api_key='offline', http_client=client)
    if api == 'openai-responses':
        return OpenAIResponsesModel('gpt-5.2', provider=provider)
    return OpenAIChatModel('gpt-5.2', provider=provider)


def todos(policy: Literal['append', 'rewrite'] = 'append', *, stored: bool = True) -> AppendInstructions[Deps]:
    store = None if not stored else PROCESS_STORE
    capability = AppendInstructions[Deps](id='todos', record_store=store, tenant=lambda ctx: 'alice')

    @capability.instructions(name='state', on_change=policy)
    def state(ctx: RunContext[Deps]) -> str:  # pyright: ignore[reportUnusedFunction]
        return '\n'.join(f'- [ ] {todo}' for todo in ctx.deps.todos)

    @capability.instructions(name='mood', on_change='rewrite')
    def mood(ctx: RunContext[Deps]) -> str:  # pyright: ignore[reportUnusedFunction]
        return f'Mood: {ctx.deps.mood}.'

    return capability


def agent(
    prompt_wire: PromptWire,
    capability: AppendInstructions[Deps] | None,
    instructions: str = 'Be brief.',
    api: Api = 'openai-chat',
    **kwargs: Any,
) -> Agent[Deps]:
    model = model_for(api, prompt_wire.http_client(transport=httpx2.MockTransport(reply)))
    capabilities = [capability] if capability is not None else []
    # A small `max_tokens`: above about 21,000 Pydantic AI streams Anthropic requests behind the scenes.
    settings: ModelSettings = {'max_tokens': 1024}
    return Agent(
        model, deps_type=Deps, instructions=instructions, capabilities=capabilities, model_settings=settings, **kwargs
    )


def why_and_fix(prompt_wire: PromptWire) -> list[str]:
    with pytest.raises(AssertionError) as error:
        prompt_wire.assert_prefix_stable()
    return [line for line in str(error.value).splitlines() if not line.startswith(('request ', '  request '))]


async def two_turns(
    first: Agent[Deps],
    second: Agent[Deps],
    change: Callable[[Deps], None] | None = None,
    history: Callable[[Sequence[ModelMessage]], Sequence[ModelMessage]] | None = None,
) -> None:
    deps = Deps()
    messages: Sequence[ModelMessage] = (await first.run('What is next?', deps=deps)).all_messages()
    deps.todos.append('write the docs')
    if change is not None:
        change(deps)
    messages = history(messages) if history is not None else messages
    await second.run('And then?', deps=deps, message_history=messages)


@pytest.mark.anyio
@pytest.mark.parametrize('api', ['openai-chat', 'openai-responses', 'anthropic'])
async def test_a_clock_in_a_dynamic_instruction(prompt_wire: PromptWire, api: Api):
    # The first differing byte is in the todo block (the new window states its current value), but what moved the
    # prefix is the clock; the same on every API, whether instructions are one text or one message each.
    the_agent = agent(prompt_wire, todos(), api=api)

    @the_agent.instructions
    def clock(ctx: RunContext[Deps]) -> str:  # pyright: ignore[reportUnusedFunction]
        return f'The time is {ctx.deps.now}.'

    await two_turns(the_agent, the_agent, change=lambda deps: setattr(deps, 'now', '12:05'))
    assert why_and_fix(prompt_wire) == snapshot(
        [
            "why: an instruction after the blocks changed (a rewrite-mode block, or a dynamic instruction this plugin does not own), which opened a new window: 'The time is 12:00.' became 'The time is 12:05.'",
            "fix: make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)",
            '(only if request 1 is meant to open a new window, pass new_windows=(1,))',
        ]
    )


@pytest.mark.anyio
async def test_a_rewrite_mode_block(prompt_wire: PromptWire):
    the_agent = agent(prompt_wire, todos())
    await two_turns(the_agent, the_agent, change=lambda deps: setattr(deps, 'mood', 'in a hurry'))
    assert why_and_fix(prompt_wire)[0] == snapshot(
        "why: an instruction after the blocks changed (a rewrite-mode block, or a dynamic instruction this plugin does not own), which opened a new window: 'Mood: calm.' became 'Mood: in a hurry.'"
    )


@pytest.mark.anyio
async def test_a_literal_instruction(prompt_wire: PromptWire):
    capability = todos()
    await two_turns(agent(prompt_wire, capability), agent(prompt_wire, capability, instructions='Be very brief.'))
    assert why_and_fix(prompt_wire)[:2] == snapshot(
        [
            "why: a literal instruction, before the blocks, changed: 'Be brief.' became 'Be very brief.'",
            "fix: keep literal instructions the same through a conversation; if one must change, make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)",
        ]
    )


@pytest.mark.anyio
async def test_a_block_that_changed_policy(prompt_wire: PromptWire):
    await two_turns(agent(prompt_wire, todos()), agent(prompt_wire, todos('rewrite')))
    assert why_and_fix(prompt_wire)[:2] == snapshot(
        [
            'why: block `capability:todos:state` is no longer among the append-mode blocks: it changed policy, or its capability was added or removed',
            "fix: keep each block's `on_change` policy, and the agent's capabilities, the same through a conversation",
        ]
    )


@pytest.mark.anyio
async def test_lost_records(prompt_wire: PromptWire):
    # Without a record store: with one, the records are put back.
    the_agent = agent(prompt_wire, todos(stored=False))
    await two_turns(the_agent, the_agent, history=strip_records)
    assert why_and_fix(prompt_wire)[:2] == snapshot(
        [
            "why: the blocks were stated again with their current values (block `capability:todos:state` first) and nothing else changed: the history lost the plugin's records and no record store put them back (`record_store=None`, or its entry for this conversation was evicted, expired or saved under another `conversation_id`), so a new window opened",
            "fix: behind a UI adapter or a store of role and text, keep a record store (`record_store=`: the process's `InMemoryRecordStore` by default; across processes `SQLiteRecordStore` or your own, with room and time for every open conversation) and pass every run of a conversation the same `conversation_id` (the adapters pass the chat's id); elsewhere pass on the history Pydantic AI returns (docs/behind-a-ui.md)",
        ]
    )


@pytest.mark.anyio
async def test_compaction(prompt_wire: PromptWire):
    the_agent = agent(prompt_wire, todos())
    deps = Deps()
    messages = (await the_agent.run('What is next?', deps=deps)).all_messages()
    messages = (await the_agent.run('And then?', deps=deps, message_history=messages)).all_messages()
    await the_agent.run('Go on.', deps=deps, message_history=messages[2:])
    assert why_and_fix(prompt_wire)[:2] == snapshot(
        [
            'why: message 0 of the conversation changed or is gone in request 2: compaction or a history processor rewrote earlier messages, or this is another conversation',
            'fix: if that is the compaction you chose, the move is expected; otherwise keep history append-only (the guard refuses rewrites of what the model already read: docs/guard.md)',
        ]
    )


@pytest.mark.anyio
async def test_a_tool_added(prompt_wire: PromptWire):
    def search(query: str) -> str:
        return query

    capability = todos()
    await two_turns(agent(prompt_wire, capability), agent(prompt_wire, capability, tools=[search]))
    assert why_and_fix(prompt_wire)[:2] == snapshot(
        [
            'why: tool `search` was added: tools come first in cache order, so every byte after them is sent again',
            'fix: keep the tool set, its order and its definitions the same through a conversation',
        ]
    )


@pytest.mark.anyio
async def test_instructions_without_the_plugin(prompt_wire: PromptWire):
    the_agent = agent(prompt_wire, None)

    @the_agent.instructions
    def clock(ctx: RunContext[Deps]) -> str:  # pyright: ignore[reportUnusedFunction]
        return f'The time is {ctx.deps.now}.'

    await two_turns(the_agent, the_agent, change=lambda deps: setattr(deps, 'now', '12:05'))
    assert why_and_fix(prompt_wire)[:2] == snapshot(
        [
            "why: the instructions changed and state no block of this plugin: 'The time is 12:00.' became 'The time is 12:05.'",
            "fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)",
        ]
    )


@pytest.mark.anyio
async def test_a_block_that_joined_the_append_mode_blocks(prompt_wire: PromptWire):
    await two_turns(agent(prompt_wire, todos('rewrite')), agent(prompt_wire, todos()))
    assert why_and_fix(prompt_wire)[0] == snapshot(
        'why: block `capability:todos:state` joined the append-mode blocks: it changed policy, or its capability was added or removed'
    )


@pytest.mark.anyio
async def test_compaction_that_restates_the_blocks(prompt_wire: PromptWire):
    # A summary in place of the first turn: the new window states the todo list as it is now, so the instructions
    # differ first, and the messages after them too.
    the_agent = agent(prompt_wire, todos())
    deps = Deps()
    messages = (await the_agent.run('What is next?', deps=deps)).all_messages()
    deps.todos.append('write the docs')
    summary = ModelRequest(parts=[UserPromptPart('Summary: we planned the parser.')])
    await the_agent.run('And then?', deps=deps, message_history=[summary, *strip_records(messages)[1:]])
    assert why_and_fix(prompt_wire)[0] == snapshot(
        'why: the blocks were stated again with their current values in request 1, and messages changed: compaction or a history processor rewrote earlier messages, or this is another conversation'
    )


# Shapes the agents above don't send, tested on `explain` itself: a system prompt as a list of text blocks (Anthropic,
# with a cache breakpoint on instructions), a part of the instructions added, a change outside the instructions' text.


def anthropic(system: object, *messages: dict[str, Any]) -> list[Segment]:
    return segments('anthropic', json.dumps({'system': system, 'messages': list(messages)}).encode())


BLOCK = f'<context id="capability:todos:state">\n- [ ] a\n</context>\n\n{SUPERSESSION_SENTENCE}'
USER = {'role': 'user', 'content': 'Hi'}


def test_a_system_prompt_of_text_blocks_with_a_part_added():
    earlier = anthropic([{'type': 'text', 'text': 'Be brief.'}, {'type': 'text', 'text': BLOCK}], USER)
    later = anthropic(
        [{'type': 'text', 'text': 'Be brief.'}, {'type': 'text', 'text': f'{BLOCK}\n\nMood: calm.'}], USER
    )
    cause = explain(1, earlier, later, common_prefix_length(earlier, later))
    assert cause is not None and cause.reason == snapshot(
        "an instruction after the blocks changed (a rewrite-mode block, or a dynamic instruction this plugin does not own), which opened a new window: 'Mood: calm.' was added"
    )


def test_nothing_to_tell_where_the_instructions_text_is_the_same():
    earlier = anthropic([{'type': 'text', 'text': BLOCK}], USER)
    later = anthropic([{'type': 'text', 'text': BLOCK, 'citations': None}], USER)
    assert explain(1, earlier, later, common_prefix_length(earlier, later)) is None


def test_nothing_to_tell_where_the_blocks_are_the_same_and_history_kept():
    # An instruction segment that was split differently: the same text, in other pieces.
    earlier = anthropic([{'type': 'text', 'text': f'Be brief.\n\n{BLOCK}'}], USER)
    later = anthropic([{'type': 'text', 'text': 'Be brief.'}, {'type': 'text', 'text': BLOCK}], USER)
    assert explain(1, earlier, later, common_prefix_length(earlier, later)) is None


def test_instructions_as_lists_of_parts():
    # OpenAI Chat lets a system or developer message's content be a list of text parts, or carry none.
    def chat(text: str) -> list[Segment]:
        parts = [{'type': 'text', 'text': 'Be brief.'}, {'type': 'text', 'text': text}]
        messages: list[dict[str, Any]] = [
            {'role': 'developer', 'content': parts},
            {'role': 'system', 'content': None},
            USER,
        ]
        return segments('openai-chat', json.dumps({'messages': messages}).encode())

    earlier, later = chat('The time is 12:00.'), chat('The time is 12:05.')
    cause = explain(1, earlier, later, common_prefix_length(earlier, later))
    assert cause is not None and cause.kind == 'instructions'


def test_an_instruction_added_is_not_taken_for_compaction():
    # The later request has one more system message where the earlier had the user's: the instructions changed.
    def chat(*systems: str) -> list[Segment]:
        messages = [*({'role': 'system', 'content': text} for text in systems), USER]
        return segments('openai-chat', json.dumps({'messages': messages}).encode())

    earlier, later = chat('Be brief.'), chat('Be brief.', 'The time is 12:00.')
    cause = explain(1, earlier, later, common_prefix_length(earlier, later))
    assert cause is not None and (cause.kind, cause.reason) == snapshot(
        ('instructions', "the instructions changed and state no block of this plugin: 'The time is 12:00.' was added")
    )
