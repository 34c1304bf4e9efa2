"""The fake provider's AWS Bedrock Converse API: its prompt cache on hand-computed cases, its event-stream framing read
by botocore's own parser, and an agent through the real `boto3` client caching its kept prefix across a change.

Sizes are chosen so the counts are easy to check: a block of `n` bytes of compact JSON is `ceil(n / 4)` tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, cast

import pytest
from dirty_equals import IsPositiveInt
from inline_snapshot import snapshot
from pydantic_ai import Agent, ModelHTTPError, RunContext
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.bedrock import BedrockModelSettings
from pydantic_ai.usage import RequestUsage

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, bedrock_model
from pydantic_ai_append.testing.fake_provider.caching import CacheUse, PromptCache

from ..fake_models import live_loopback

CLAUDE = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
"""Claude Sonnet 4.5 in a cross-region profile: 1,024 tokens at least per checkpoint."""

POINT: dict[str, Any] = {'cachePoint': {'type': 'default'}}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def converse(system_bytes: int, *, point: dict[str, Any] | None = POINT, **more: Any) -> dict[str, Any]:
    # `system` + `{"text":""}` is 17 bytes, so the system block is `system_bytes` bytes in all.
    system: list[dict[str, Any]] = [{'text': 's' * (system_bytes - 17)}]
    if point is not None:
        system.append(point)
    # `user{"text":"Hi"}`: 17 bytes, 5 tokens.
    return {'system': system, 'messages': [{'role': 'user', 'content': [{'text': 'Hi'}]}], **more}


def test_bedrock_writes_at_a_cache_point_then_reads_it_and_leaves_the_rest_uncached():
    cache = PromptCache(Clock())
    # 4,400 bytes: 1,100 tokens, over Claude Sonnet 4.5's 1,024; the cache point itself counts nothing.
    assert cache.bedrock(CLAUDE, converse(4_400)) == CacheUse(1_105, 0, written_5m=1_100)
    assert cache.bedrock(CLAUDE, converse(4_400)) == CacheUse(1_105, 1_100)
    # No cache point: nothing read or written, though the prefix is cached.
    assert cache.bedrock(CLAUDE, converse(4_400, point=None)) == CacheUse(1_105, 0)


def test_bedrock_caches_nothing_below_the_models_minimum_and_caches_per_model():
    cache = PromptCache(Clock())
    # 4,000 bytes: 1,000 tokens.
    cache.bedrock(CLAUDE, converse(4_000))
    assert cache.bedrock(CLAUDE, converse(4_000)) == CacheUse(1_005, 0)
    # Claude Haiku 4.5 needs 4,096: 1,100 tokens is not enough.
    haiku = 'us.anthropic.claude-haiku-4-5-20251001-v1:0'
    cache.bedrock(haiku, converse(4_400))
    assert cache.bedrock(haiku, converse(4_400)) == CacheUse(1_105, 0)
    # Amazon Nova needs 1,024, and the prefix Claude cached is not Nova's.
    nova = 'us.amazon.nova-pro-v1:0'
    cache.bedrock(CLAUDE, converse(4_400))
    assert cache.bedrock(nova, converse(4_400)) == CacheUse(1_105, 0, written_5m=1_100)
    assert cache.bedrock(nova, converse(4_400)).read == 1_100


def test_bedrock_caches_tools_then_system_then_messages_up_to_each_cache_point():
    cache = PromptCache(Clock())
    # `tool{"toolSpec":{"name":"t","description":""}}` is 46 bytes, so the tool is 4,400 bytes: 1,100 tokens.
    tool = {'toolSpec': {'name': 't', 'description': 'd' * (4_400 - 46)}}
    tools = {'toolConfig': {'tools': [tool, POINT]}}
    assert cache.bedrock(CLAUDE, converse(400, **tools)) == CacheUse(1_205, 0, written_5m=1_200)
    # The system prompt changed: the tools before it are still read, the system block is written again.
    assert cache.bedrock(CLAUDE, converse(404, **tools)) == CacheUse(1_206, 1_100, written_5m=101)
    # A cache point in the messages: everything before it is one prefix, written past the one read.
    messages = [{'role': 'user', 'content': [{'text': 'Hi'}, POINT]}]
    assert cache.bedrock(CLAUDE, converse(404, messages=messages, **tools)) == CacheUse(1_206, 1_201, written_5m=5)


def test_bedrock_tool_choice_or_thinking_end_the_prefix_at_the_messages():
    cache = PromptCache(Clock())
    messages = [{'role': 'user', 'content': [{'text': 'Hi'}, POINT]}]
    cache.bedrock(CLAUDE, converse(4_400, messages=messages))
    changes: list[dict[str, Any]] = [
        {'toolConfig': {'tools': [], 'toolChoice': {'any': {}}}},
        {'additionalModelRequestFields': {'thinking': {'type': 'enabled', 'budget_tokens': 2_048}}},
    ]
    for changed in changes:
        assert cache.bedrock(CLAUDE, converse(4_400, messages=messages, **changed)) == CacheUse(
            1_105, 1_100, written_5m=5
        ), changed


def test_bedrock_retention_5_minutes_reset_by_a_hit_or_1_hour():
    clock = Clock()
    cache = PromptCache(clock)
    cache.bedrock(CLAUDE, converse(4_400))
    clock.now = 290.0
    assert cache.bedrock(CLAUDE, converse(4_400)).read == 1_100
    clock.now = 290.0 + 290.0
    assert cache.bedrock(CLAUDE, converse(4_400)).read == 1_100
    clock.now = 580.0 + 301.0
    assert cache.bedrock(CLAUDE, converse(4_400)) == CacheUse(1_105, 0, written_5m=1_100)
    hourly = PromptCache(clock)
    point = {'cachePoint': {'type': 'default', 'ttl': '1h'}}
    assert hourly.bedrock(CLAUDE, converse(4_400, point=point)) == CacheUse(1_105, 0, written_1h=1_100)
    clock.now += 3_000.0
    assert hourly.bedrock(CLAUDE, converse(4_400, point=point)).read == 1_100


def test_bedrock_finds_a_cache_point_again_within_20_blocks_a_run_of_tool_blocks_taking_one():
    cache = PromptCache(Clock())

    def conversation(*contents: list[dict[str, Any]]) -> dict[str, Any]:
        # The cache point goes at the end of the last message.
        turns: list[tuple[str, list[dict[str, Any]]]] = [('user', [{'text': 'Hi00'}])]
        turns += [('assistant', content) for content in contents]
        turns[-1] = (turns[-1][0], [*turns[-1][1], POINT])
        return converse(4_400, point=None, messages=[{'role': role, 'content': content} for role, content in turns])

    # `user{"text":"Hi00"}`: 19 bytes, 5 tokens.
    first = cache.bedrock(CLAUDE, conversation())
    assert first == CacheUse(1_105, 0, written_5m=1_105)
    calls: list[dict[str, Any]] = [{'toolUse': {'toolUseId': f't{n}', 'name': 'read', 'input': {}}} for n in range(30)]
    # 30 blocks, 1 position: the earlier cache point is 1 position back.
    assert cache.bedrock(CLAUDE, conversation(calls)).read == first.prompt
    # 21 text blocks, 21 positions: out of reach.
    assert cache.bedrock(CLAUDE, conversation([{'text': 'x'}] * 21)).read == 0


def test_bedrock_refuses_a_fifth_cache_point_a_leading_one_one_in_novas_tools_and_any_to_a_model_that_cannot_cache():
    blocks = [{'text': 'a'}, POINT] * 4
    with pytest.raises(ValueError, match='A request may hold at most 4 cachePoint blocks; this one has 5.'):
        PromptCache(Clock()).bedrock(CLAUDE, converse(4_400, messages=[{'role': 'user', 'content': blocks}]))
    with pytest.raises(ValueError, match='A cachePoint must follow content, and this one comes first in the request'):
        PromptCache(Clock()).bedrock(CLAUDE, {'system': [POINT, {'text': 'x'}]})
    with pytest.raises(ValueError, match="The model 'meta.llama3-3-70b-instruct-v1:0' does not support prompt caching"):
        PromptCache(Clock()).bedrock('meta.llama3-3-70b-instruct-v1:0', converse(4_400))
    tools = {'toolConfig': {'tools': [{'toolSpec': {'name': 't'}}, POINT]}}
    with pytest.raises(ValueError, match="The model 'amazon.nova-pro-v1:0' caches no tool definitions"):
        PromptCache(Clock()).bedrock('amazon.nova-pro-v1:0', converse(4_400, **tools))
    assert PromptCache(Clock()).bedrock('meta.llama3-3-70b-instruct-v1:0', converse(4_400, point=None)) == CacheUse(
        1_105, 0
    )


@dataclass
class Desk:
    todos: list[str] = field(default_factory=lambda: ['write tests'])


HOUSE_STYLE = 'Follow the house style. ' * 400
"""About 9,600 bytes of instructions: over Claude Sonnet 4.5's minimum on their own."""


async def run_desk(server: FakeProvider, *, appended: bool) -> list[RequestUsage]:
    """Three runs over one history, the todos changed by a tool call in the first and the third and before the
    second and the third; the first two through Converse, the third through ConverseStream. Each response's usage.
    """
    context = AppendInstructions[Desk](id='desk')

    def todos(ctx: RunContext[Desk]) -> str:
        return '\n'.join(f'- {todo}' for todo in ctx.deps.todos)

    if appended:
        context.instructions(name='todos')(todos)
        agent = Agent(bedrock_model(server.url), deps_type=Desk, instructions=HOUSE_STYLE, capabilities=[context])
    else:
        agent = Agent(bedrock_model(server.url), deps_type=Desk, instructions=[HOUSE_STYLE, todos])

    @agent.tool
    def add_todo(ctx: RunContext[Desk], item: str) -> str:
        """Add a todo."""
        ctx.deps.todos.append(item)
        return f'{item}: added'

    desk = Desk()
    # With `max_tokens` set, newer releases send `converse` rather than streaming behind the scenes.
    settings = BedrockModelSettings(max_tokens=1_024)
    first = await agent.run('Plan.', deps=desk, model_settings=settings)
    desk.todos.append('write docs')
    second = await agent.run('Next?', deps=desk, message_history=first.all_messages(), model_settings=settings)
    desk.todos[0] = 'write more tests'
    async with agent.run_stream('Go.', deps=desk, message_history=second.all_messages()) as stream:
        assert await stream.get_output() == 'Streamed.'
        messages = stream.all_messages()
    return [message.usage for message in messages if isinstance(message, ModelResponse)]


@live_loopback
@pytest.mark.anyio
async def test_an_agent_through_boto3_keeps_its_cached_prefix_across_changes_with_append_instructions():
    script = [
        ToolCalls([('add_todo', {'item': 'ship'})]),
        Text('Added.'),
        Text('Done.'),
        ToolCalls([('add_todo', {'item': 'review'})]),
        Text('Streamed.'),
    ]
    with FakeProvider(script=script) as server:
        appended = await run_desk(server, appended=True)
    assert server.errors == []
    # Three Converse replies in JSON, then ConverseStream's event streams.
    assert [exchange.response_body[:1] for exchange in server.exchanges] == [b'{'] * 3 + [b'\x00'] * 2
    # Pydantic AI counts what was read and written in the input tokens: each request reads the whole prompt of the
    # one before it, across the tool's change and both changes between runs.
    assert [usage.cache_read_tokens == previous.input_tokens for previous, usage in pairwise(appended)] == [True] * 4
    assert appended[0].cache_write_tokens == appended[0].input_tokens > 1_024
    assert json.loads(server.exchanges[0].response_body) == snapshot(
        {
            'output': {
                'message': {
                    'role': 'assistant',
                    'content': [
                        {'toolUse': {'toolUseId': 'tooluse_fake_0_0', 'name': 'add_todo', 'input': {'item': 'ship'}}}
                    ],
                }
            },
            'stopReason': 'tool_use',
            'usage': {
                'inputTokens': 0,
                'outputTokens': IsPositiveInt(),
                'totalTokens': IsPositiveInt(),
                'cacheReadInputTokens': 0,
                'cacheWriteInputTokens': IsPositiveInt(),
            },
            'metrics': {'latencyMs': 100},
        }
    )
    # The same changes in plain instructions rewrite the system prompt after its cache point: only the static
    # instructions before it are read, never the conversation.
    with FakeProvider(script=script) as server:
        rewritten = await run_desk(server, appended=False)
    assert [usage.cache_read_tokens == previous.input_tokens for previous, usage in pairwise(rewritten)] == [False] * 4
    assert len({usage.cache_read_tokens for usage in rewritten[1:]}) == 1


@live_loopback
@pytest.mark.anyio
async def test_bedrock_refusals_are_validation_exceptions():
    with FakeProvider(script=[Text('Hi.')]) as server:
        # Pydantic AI sends no cache point to a model that can't cache, so the SDK is called directly.
        llama = bedrock_model(server.url, 'meta.llama3-3-70b-instruct-v1:0')
        # botocore ships no type stubs.
        client = cast('Any', llama.client)  # pyright: ignore[reportUnknownMemberType]
        with pytest.raises(client.exceptions.ValidationException, match='does not support prompt caching'):
            client.converse(
                modelId=llama.model_name,
                messages=[{'role': 'user', 'content': [{'text': 'Hi'}, {'cachePoint': {'type': 'default'}}]}],
            )
        agent = Agent(bedrock_model(server.url))
        with pytest.raises(ModelHTTPError, match='FakeProvider script is exhausted') as raised:
            await agent.run('Hello', model_settings=BedrockModelSettings(max_tokens=1_024))
    assert raised.value.status_code == 400
    assert server.errors == [
        "The model 'meta.llama3-3-70b-instruct-v1:0' does not support prompt caching: remove its cachePoint blocks.",
        (
            'FakeProvider script is exhausted: request 1 to /model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/'
            'converse has no turn left; add one to the script'
        ),
    ]
