"""The fake provider's prompt cache (`pydantic_ai_append.testing.fake_provider.caching`): each documented rule on a hand-computed case, and the
usage it reports read back by Pydantic AI's own model classes.

Sizes are chosen so the counts are easy to check: a block of `n` bytes of compact JSON is `ceil(n / 4)` tokens.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModelSettings
from pydantic_ai.usage import RequestUsage

from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    anthropic_model,
    google_model,
    openai_chat_model,
    openai_responses_model,
)
from pydantic_ai_append.testing.fake_provider.caching import CacheUse, PromptCache

from ..fake_models import live_loopback


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def chat(system_bytes: int, tail: str = '') -> dict[str, Any]:
    # `{"role":"system","content":""}` is 30 bytes, so the system message is `system_bytes` bytes in all.
    messages: list[dict[str, Any]] = [{'role': 'system', 'content': 'x' * (system_bytes - 30)}]
    if tail:
        messages.append({'role': 'user', 'content': tail})
    return {'model': 'gpt-5.2', 'messages': messages}


def test_openai_caches_from_1024_tokens_in_128_token_steps_for_5_minutes():
    clock = Clock()
    cache = PromptCache(clock)
    # 8,000 bytes: 2,000 tokens, 15 whole steps of 128 tokens (512 bytes).
    assert cache.openai(chat(8_000), responses=False)[1] == CacheUse(2_000, 0)
    assert cache.openai(chat(8_000), responses=False)[1] == CacheUse(2_000, 1_920)
    clock.now = 299.0
    # A use keeps it 5 minutes more.
    assert cache.openai(chat(8_000, tail='next'), responses=False)[1].read == 1_920
    clock.now = 299.0 + 301.0
    assert cache.openai(chat(8_000), responses=False)[1] == CacheUse(2_000, 0)


def test_openai_reads_only_the_steps_before_the_first_changed_byte_and_nothing_below_1024_tokens():
    cache = PromptCache(Clock())
    cache.openai(chat(8_000), responses=False)
    # A byte changed at offset 4,498 (the content starts at 28): 8 whole steps before it, exactly the minimum.
    changed = chat(8_000)
    content = changed['messages'][0]['content']
    changed['messages'][0]['content'] = content[:4_470] + 'y' + content[4_471:]
    assert cache.openai(changed, responses=False)[1] == CacheUse(2_000, 1_024)
    # A byte changed at offset 28: no whole step before it.
    early = chat(8_000)
    early['messages'][0]['content'] = 'y' + content[1:]
    assert cache.openai(early, responses=False)[1].read == 0
    short = PromptCache(Clock())
    short.openai(chat(4_000), responses=False)
    assert short.openai(chat(4_000), responses=False)[1] == CacheUse(1_000, 0)


def test_responses_previous_response_id_continues_the_stored_prompt():
    cache = PromptCache(Clock())
    first = {'model': 'gpt-5.2', 'instructions': 'i' * 6_000, 'input': 'Hi'}
    prompt, use = cache.openai(first, responses=True)
    assert use.read == 0
    cache.remember('resp_1', prompt, [{'type': 'message', 'content': 'Hello'}])
    later = {'model': 'gpt-5.2', 'previous_response_id': 'resp_1', 'input': [{'role': 'user', 'content': 'More'}]}
    again, use = cache.openai(later, responses=True)
    assert again.startswith(prompt)
    assert use.read == len(prompt) // 512 * 128


def anthropic(system_bytes: int, *, ttl: str | None = '5m', model: str = 'claude-sonnet-4-5', **more: Any):
    # `system` + `{"type":"text","text":""}` is 31 bytes, so the system block is `system_bytes` bytes in all.
    block: dict[str, Any] = {'type': 'text', 'text': 's' * (system_bytes - 31)}
    if ttl is not None:
        block['cache_control'] = {'type': 'ephemeral', **({'ttl': ttl} if ttl == '1h' else {})}
    # `user"Hi"`: 8 bytes, 2 tokens.
    return {'model': model, 'system': [block], 'messages': [{'role': 'user', 'content': 'Hi'}], **more}


def test_anthropic_writes_at_a_breakpoint_then_reads_it_and_leaves_the_rest_uncached():
    cache = PromptCache(Clock())
    # 4,400 bytes: 1,100 tokens, over claude-sonnet-4-5's 1,024.
    assert cache.anthropic(anthropic(4_400)) == CacheUse(1_102, 0, written_5m=1_100)
    assert cache.anthropic(anthropic(4_400)) == CacheUse(1_102, 1_100)
    # No breakpoint: nothing read or written, though the prefix is cached.
    assert cache.anthropic(anthropic(4_400, ttl=None)) == CacheUse(1_102, 0)


def test_anthropic_caches_nothing_below_the_models_minimum():
    cache = PromptCache(Clock())
    # 4,000 bytes: 1,000 tokens.
    cache.anthropic(anthropic(4_000))
    assert cache.anthropic(anthropic(4_000)) == CacheUse(1_002, 0)
    # claude-sonnet-4-6 needs 2,048 and claude-haiku-4-5 4,096: 1,100 tokens is not enough for either.
    for model in ('claude-sonnet-4-6', 'claude-haiku-4-5'):
        cache.anthropic(anthropic(4_400, model=model))
        assert cache.anthropic(anthropic(4_400, model=model)) == CacheUse(1_102, 0), model
    assert cache.anthropic(anthropic(8_400, model='claude-sonnet-4-6')).written_5m == 2_100


def test_anthropic_caches_per_model_and_tool_choice_or_thinking_end_it_at_the_messages():
    cache = PromptCache(Clock())
    cache.anthropic(anthropic(4_400))
    assert cache.anthropic(anthropic(4_400, model='claude-opus-4-1')).read == 0
    # A breakpoint on the last message: the system block's prefix is read, the messages' isn't.
    messages = [{'role': 'user', 'content': [{'type': 'text', 'text': 'Hi', 'cache_control': {'type': 'ephemeral'}}]}]
    cache.anthropic(anthropic(4_400, messages=messages))
    changes: list[dict[str, Any]] = [
        {'tool_choice': {'type': 'any'}},
        {'thinking': {'type': 'enabled', 'budget_tokens': 2_048}},
    ]
    for changed in changes:
        # `user{"type":"text","text":"Hi"}`: 31 bytes, 8 tokens.
        assert cache.anthropic({**anthropic(4_400, messages=messages), **changed}) == CacheUse(
            1_108, 1_100, written_5m=8
        ), changed


def test_anthropic_deferred_tools_are_outside_the_prefix():
    cache = PromptCache(Clock())
    cache.anthropic(anthropic(4_400))
    deferred = {'name': 'search_files', 'input_schema': {'type': 'object'}, 'defer_loading': True}
    assert cache.anthropic(anthropic(4_400, tools=[deferred])) == CacheUse(1_102, 1_100)
    with pytest.raises(ValueError, match="Tool 'search_files' cannot have both defer_loading=true and cache_control"):
        cache.anthropic(anthropic(4_400, tools=[{**deferred, 'cache_control': {'type': 'ephemeral'}}]))


def test_anthropic_retention_5_minutes_refreshed_by_a_read_or_1_hour():
    clock = Clock()
    cache = PromptCache(clock)
    cache.anthropic(anthropic(4_400))
    clock.now = 290.0
    assert cache.anthropic(anthropic(4_400)).read == 1_100
    clock.now = 290.0 + 290.0
    assert cache.anthropic(anthropic(4_400)).read == 1_100
    clock.now = 580.0 + 301.0
    assert cache.anthropic(anthropic(4_400)) == CacheUse(1_102, 0, written_5m=1_100)
    assert cache.anthropic(anthropic(4_400, ttl='1h')) == CacheUse(1_102, 1_100)
    hourly = PromptCache(clock)
    assert hourly.anthropic(anthropic(4_400, ttl='1h')) == CacheUse(1_102, 0, written_1h=1_100)
    clock.now += 3_000.0
    assert hourly.anthropic(anthropic(4_400, ttl='1h')).read == 1_100


def conversation(turns: int) -> dict[str, Any]:
    # A 1,100-token system block, then `turns` user blocks of 8 bytes; the breakpoint is the request's own.
    messages = [{'role': 'user', 'content': f'Hi{turn:02d}'} for turn in range(turns)]
    request = anthropic(4_400, ttl=None)
    return {**request, 'messages': messages, 'cache_control': {'type': 'ephemeral'}}


def test_anthropic_automatic_breakpoint_found_again_within_20_blocks():
    cache = PromptCache(Clock())
    # Each user block is `user"HiNN"`, 10 bytes, 3 tokens.
    assert cache.anthropic(conversation(1)) == CacheUse(1_103, 0, written_5m=1_103)
    # 20 blocks later, the last breakpoint's prefix is the 20th boundary looked back at.
    assert cache.anthropic(conversation(20)) == CacheUse(1_160, 1_103, written_5m=57)
    # 21 blocks after that one, it is out of reach, and the one before it too.
    assert cache.anthropic(conversation(41)) == CacheUse(1_223, 0, written_5m=1_223)


def test_anthropic_counts_a_run_of_tool_calls_or_results_as_one_block_of_lookback():
    cache = PromptCache(Clock())
    first = cache.anthropic(conversation(1))
    calls: list[dict[str, object]] = [
        {'type': 'tool_use', 'id': f't{n}', 'name': 'read', 'input': {}} for n in range(12)
    ]
    results = [{'type': 'tool_result', 'tool_use_id': f't{n}', 'content': 'x'} for n in range(12)]
    fan_out = conversation(1)
    fan_out['messages'] = [
        *fan_out['messages'],
        {'role': 'assistant', 'content': calls},
        {'role': 'user', 'content': results},
    ]
    # 24 blocks, 2 positions: the previous breakpoint is 3 positions back.
    use = cache.anthropic(fan_out)
    assert (use.read, use.written_5m) == (first.prompt, use.prompt - first.prompt)
    # 21 text blocks, 21 positions: out of reach.
    texts = conversation(1)
    texts['messages'] = [*texts['messages'], {'role': 'assistant', 'content': [{'type': 'text', 'text': 'x'}] * 21}]
    assert cache.anthropic(texts).read == 0


def test_anthropic_refuses_a_fifth_breakpoint_and_an_automatic_one_of_another_ttl():
    with pytest.raises(ValueError, match="the last block has a cache_control ttl of '5m', the request '1h'"):
        PromptCache(Clock()).anthropic(
            {**anthropic(4_400), 'messages': [], 'cache_control': {'type': 'ephemeral', 'ttl': '1h'}}
        )
    control = {'type': 'ephemeral'}
    blocks = [{'type': 'text', 'text': 'a', 'cache_control': control}] * 4
    request = anthropic(4_400, messages=[{'role': 'user', 'content': blocks}])
    with pytest.raises(ValueError, match='A maximum of 4 blocks with cache_control may be provided. Found 5.'):
        PromptCache(Clock()).anthropic(request)


def gemini(system_bytes: int, *texts: str, tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    # `system` + `{"text":""}` is 17 bytes, so the system part is `system_bytes` bytes in all.
    request: dict[str, Any] = {'systemInstruction': {'parts': [{'text': 's' * (system_bytes - 17)}], 'role': 'user'}}
    if tools is not None:
        request['tools'] = tools
    # `user{"text":"Hi"}`: 17 bytes, 5 tokens.
    request['contents'] = [{'role': 'user', 'parts': [{'text': text}]} for text in texts]
    return request


def test_gemini_reads_the_longest_prefix_an_earlier_request_sent():
    cache = PromptCache(Clock())
    # 8,400 bytes: 2,100 tokens, over gemini-2.5-flash's 2,048.
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Hi')) == CacheUse(2_105, 0)
    # No marker needed: the whole earlier request is read, and what follows it is not.
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Hi', 'Yo')) == CacheUse(2_110, 2_105)
    # The first content changed: only the system instruction is shared.
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Ho', 'Yo')) == CacheUse(2_110, 2_100)
    # A byte changed in the system instruction ends the prefix before it starts.
    changed = gemini(8_400, 'Hi')
    changed['systemInstruction']['parts'][0]['text'] = 'S' + 's' * 8_382
    assert cache.gemini('gemini-2.5-flash', changed) == CacheUse(2_105, 0)


def test_gemini_orders_system_instruction_then_tools_then_contents():
    cache = PromptCache(Clock())
    # `tool{"name":"a"}`: 16 bytes, 4 tokens.
    declared = [{'functionDeclarations': [{'name': 'a'}]}]
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Hi', tools=declared)) == CacheUse(2_109, 0)
    # Another tool: the contents after it are not read, though they are unchanged.
    renamed = [{'functionDeclarations': [{'name': 'b'}]}]
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Hi', tools=renamed)) == CacheUse(2_109, 2_100)
    # A tool without declarations is one block: `tool{"googleSearch":{}}`, 23 bytes, 6 tokens.
    search: list[dict[str, Any]] = [{'functionDeclarations': [{'name': 'b'}]}, {'googleSearch': {}}]
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Hi', tools=search)) == CacheUse(2_115, 2_104)


def test_gemini_caches_nothing_below_the_models_minimum_and_per_model():
    cache = PromptCache(Clock())
    # 8,000 bytes: 2,000 tokens, under 2,048, so the request is not cached at all.
    cache.gemini('gemini-2.5-flash', gemini(8_000))
    assert cache.gemini('gemini-2.5-flash', gemini(8_000)) == CacheUse(2_000, 0)
    # Over the minimum in all, but the shared prefix (the 1,000-token system instruction) is under it.
    cache.gemini('gemini-2.5-flash', gemini(4_000, 'x' * 8_000))
    assert cache.gemini('gemini-2.5-flash', gemini(4_000, 'y' * 8_000)) == CacheUse(3_004, 0)
    # Cached for gemini-2.5-flash only.
    cache.gemini('gemini-2.5-flash', gemini(8_400))
    assert cache.gemini('gemini-2.5-pro', gemini(8_400)) == CacheUse(2_100, 0)
    # The 3.x models need 4,096 (16,400 bytes are 4,100 tokens), and 2.0 doesn't cache implicitly at any length.
    for model, size in [
        ('gemini-3-pro-preview', 8_400),
        ('gemini-3-pro-preview', 16_400),
        ('gemini-2.0-flash', 40_000),
    ]:
        cache.gemini(model, gemini(size))
    assert cache.gemini('gemini-3-pro-preview', gemini(8_400)).read == 0
    assert cache.gemini('gemini-3-pro-preview', gemini(16_400)).read == 4_100
    assert cache.gemini('gemini-2.0-flash', gemini(40_000)) == CacheUse(10_000, 0)


def test_gemini_keeps_a_prefix_5_minutes_from_its_last_use():
    clock = Clock()
    cache = PromptCache(clock)
    cache.gemini('gemini-2.5-flash', gemini(8_400))
    clock.now = 299.0
    assert cache.gemini('gemini-2.5-flash', gemini(8_400, 'Hi')).read == 2_100
    clock.now = 299.0 + 299.0
    assert cache.gemini('gemini-2.5-flash', gemini(8_400)).read == 2_100
    clock.now = 598.0 + 301.0
    assert cache.gemini('gemini-2.5-flash', gemini(8_400)) == CacheUse(2_100, 0)


LONG = 'Follow the house style. ' * 400
"""About 9,600 bytes of instructions: well over every minimum."""


@live_loopback
@pytest.mark.anyio
async def test_pydantic_ai_reads_the_reported_cache_usage_on_every_api():
    settings = AnthropicModelSettings(anthropic_cache_instructions=True)
    with FakeProvider(script=lambda request: Text('Done.')) as server:
        runs = [
            (Agent(anthropic_model(server.url), instructions=LONG, model_settings=settings), 'anthropic'),
            (Agent(openai_chat_model(server.url), instructions=LONG), 'openai-chat'),
            (Agent(openai_responses_model(server.url), instructions=LONG), 'openai-responses'),
            (Agent(google_model(server.url), instructions=LONG), 'gemini'),
        ]
        usages: dict[str, tuple[RequestUsage, RequestUsage]] = {}
        for agent, api in runs:
            first, second = await agent.run('Hello'), await agent.run('Hello')
            usages[api] = (first.response.usage, second.response.usage)
    assert server.errors == []
    for api, (first, second) in usages.items():
        assert (first.cache_read_tokens, second.cache_read_tokens > 0) == (0, True), api
        # Pydantic AI counts what was read and written in the input tokens, on every API.
        assert second.input_tokens == first.input_tokens, api
    first, second = usages['anthropic']
    assert (first.cache_write_tokens > 0, second.cache_write_tokens) == (True, 0)
    assert second.cache_read_tokens == first.cache_write_tokens
