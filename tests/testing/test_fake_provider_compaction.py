"""The fake provider's native compaction, driven by Pydantic AI's own `AnthropicCompaction` and `OpenAICompaction`.

A conversation grows past the capability's threshold in its second run; the fake compacts that request, the
compaction lands in the history as a `CompactionPart`, and Pydantic AI sends the next request from the compaction
on. Both capabilities ship with every supported release (2.58 and later), so nothing here is skipped.
"""

from __future__ import annotations

import base64
import json

import httpx2
import pytest
from anthropic import AsyncAnthropic
from anthropic.types.beta import BetaContextManagementConfigParam, BetaMessageParam
from dirty_equals import IsStr
from inline_snapshot import snapshot
from pydantic_ai import Agent, ModelHTTPError
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.anthropic import AnthropicCompaction
from pydantic_ai.models.openai import OpenAICompaction

from pydantic_ai_append.testing import WireCapture
from pydantic_ai_append.testing.fake_provider import (
    FakeProvider,
    Text,
    ToolCalls,
    anthropic_model,
    openai_responses_model,
)

from ..fake_models import get_time, live_loopback

SCRIPT = [ToolCalls([('get_time', {})]), Text('It is noon.'), Text('Noted.'), Text('Still noon.')]
"""One turn per request the conversation makes: a compaction that used one would exhaust it."""

LONG_PROMPT = 'Remember this: ' + 'lorem ipsum ' * 100
"""About 300 tokens by the fake's count: the second run's request passes 400 tokens with it, the first doesn't."""


async def converse(agent: Agent, *, stream_second_run: bool = False) -> list[ModelMessage]:
    """Three runs on one history: a tool call, then a long prompt that passes the threshold, then a short one."""
    first = await agent.run('What time is it?')
    if stream_second_run:
        async with agent.run_stream(LONG_PROMPT, message_history=first.all_messages()) as stream:
            await stream.get_output()
        history = stream.all_messages()
    else:
        history = (await agent.run(LONG_PROMPT, message_history=first.all_messages())).all_messages()
    return (await agent.run('And now?', message_history=history)).all_messages()


def compacted_response(history: list[ModelMessage]) -> ModelResponse:
    return next(m for m in history if isinstance(m, ModelResponse) and isinstance(m.parts[0], CompactionPart))


@live_loopback
@pytest.mark.anyio
async def test_anthropic_compaction_summary_starts_the_next_request():
    with FakeProvider(script=SCRIPT) as server:
        model = anthropic_model(server.url)
        agent = Agent(model, tools=[get_time], capabilities=[AnthropicCompaction(token_threshold=400)])
        history = await converse(agent)
    assert (server.compactions, server.errors, len(server.requests)) == ([2], [], 4)
    summary = 'Fake compaction of request 2: 5 messages, about 503 tokens, summarized.'
    assert compacted_response(history).parts == [
        CompactionPart(content=summary, provider_name='anthropic'),
        TextPart(content='Noted.'),
    ]
    # The compaction's own tokens are reported apart from the turn's, and Pydantic AI adds them back in.
    assert compacted_response(history).usage.input_tokens == 124 + 503
    assert compacted_response(history).usage.details == snapshot(
        {
            'input_tokens': 124,
            'output_tokens': 1,
            'cache_creation_input_tokens': 0,
            'cache_read_input_tokens': 0,
            'message_iterations': 1,
            'compaction_iterations': 1,
            'compaction_input_tokens': 503,
            'compaction_output_tokens': 17,
        }
    )
    assert json.loads(server.requests[3])['messages'] == snapshot(
        [
            {
                'role': 'assistant',
                'content': [
                    {'content': summary, 'type': 'compaction'},
                    {'text': 'Noted.', 'type': 'text'},
                ],
            },
            {'role': 'user', 'content': [{'text': 'And now?', 'type': 'text'}]},
        ]
    )


@live_loopback
@pytest.mark.anyio
async def test_anthropic_compaction_json_reply_and_boundary():
    # Pydantic AI always streams from Anthropic, so the SDK is called directly for a non-streamed reply. The second
    # request is as large, but the API ignores what comes before a compaction block, so it isn't over the trigger.
    context_management: BetaContextManagementConfigParam = {
        'edits': [{'type': 'compact_20260112', 'trigger': {'type': 'input_tokens', 'value': 100}}]
    }
    long_message: BetaMessageParam = {'role': 'user', 'content': LONG_PROMPT}
    with FakeProvider(script=[Text('Noted.'), Text('Still noted.')]) as server:
        async with httpx2.AsyncClient() as http_client:
            client = AsyncAnthropic(base_url=server.url, api_key='fake', http_client=http_client)
            message = await client.beta.messages.create(
                model='claude-sonnet-4-6',
                max_tokens=100,
                messages=[long_message],
                context_management=context_management,
                betas=['compact-2026-01-12'],
            )
            after: list[BetaMessageParam] = [
                long_message,
                {'role': 'assistant', 'content': [{'type': 'compaction', 'content': 'Summary.'}]},
                {'role': 'user', 'content': 'Hi'},
            ]
            await client.beta.messages.create(
                model='claude-sonnet-4-6', max_tokens=100, messages=after, context_management=context_management
            )
    assert server.compactions == [0]
    assert message.model_dump(include={'content', 'stop_reason', 'usage'}, exclude_none=True) == snapshot(
        {
            'content': [
                {
                    'content': 'Fake compaction of request 0: 1 message, about 352 tokens, summarized.',
                    'type': 'compaction',
                },
                {'text': 'Noted.', 'type': 'text'},
            ],
            'stop_reason': 'end_turn',
            'usage': {
                'cache_creation_input_tokens': 0,
                'cache_read_input_tokens': 0,
                'input_tokens': 76,
                'iterations': [
                    {
                        'cache_creation_input_tokens': 0,
                        'cache_read_input_tokens': 0,
                        'input_tokens': 352,
                        'output_tokens': 17,
                        'type': 'compaction',
                    },
                    {
                        'cache_creation_input_tokens': 0,
                        'cache_read_input_tokens': 0,
                        'input_tokens': 76,
                        'output_tokens': 1,
                        'type': 'message',
                    },
                ],
                'output_tokens': 1,
            },
        }
    )


@live_loopback
@pytest.mark.anyio
async def test_anthropic_pause_after_compaction_is_refused():
    with FakeProvider(script=SCRIPT) as server:
        capability = AnthropicCompaction(token_threshold=400, pause_after_compaction=True)
        agent = Agent(anthropic_model(server.url), capabilities=[capability])
        with pytest.raises(ModelHTTPError, match='pause_after_compaction'):
            await agent.run('Hi')
    assert server.errors == snapshot(
        ['FakeProvider does not implement `pause_after_compaction`; leave it off in `AnthropicCompaction`']
    )


@live_loopback
@pytest.mark.anyio
@pytest.mark.parametrize('stream', [False, True], ids=['json', 'stream'])
async def test_openai_server_side_compaction_item_starts_the_next_request(stream: bool):
    with FakeProvider(script=SCRIPT) as server:
        model = openai_responses_model(server.url)
        agent = Agent(model, tools=[get_time], capabilities=[OpenAICompaction(token_threshold=400)])
        history = await converse(agent, stream_second_run=stream)
    assert (server.compactions, server.errors, len(server.requests)) == ([2], [], 4)
    assert json.loads(server.requests[2])['context_management'] == [{'type': 'compaction', 'compact_threshold': 400}]
    compaction, text = compacted_response(history).parts
    assert isinstance(compaction, CompactionPart) and compaction.provider_details is not None
    assert isinstance(text, TextPart) and (compaction.id, text.content) == ('cmp_fake_0002', 'Noted.')
    encrypted_content = compaction.provider_details['encrypted_content']
    # The streamed request is a few bytes longer (`"stream":true`), so its count differs.
    assert base64.b64decode(encrypted_content).decode() == IsStr(
        regex=r'Fake compaction of request 2: 5 messages, about \d+ tokens, summarized\.'
    )
    next_input = json.loads(server.requests[3])['input']
    assert next_input[0] == {'id': 'cmp_fake_0002', 'encrypted_content': encrypted_content, 'type': 'compaction'}
    assert next_input[-1] == {'role': 'user', 'content': 'And now?'}


@live_loopback
@pytest.mark.anyio
async def test_openai_compact_endpoint_replaces_the_history():
    capture = WireCapture()
    with FakeProvider(script=SCRIPT[:3]) as server:
        async with capture.http_client() as http_client:
            model = openai_responses_model(server.url, http_client=http_client)
            agent = Agent(model, tools=[get_time], capabilities=[OpenAICompaction(message_count_threshold=4)])
            first = await agent.run('What time is it?')
            result = await agent.run(LONG_PROMPT, message_history=first.all_messages())
    # The second run's request holds 5 messages: the first 4 go to the compact endpoint, which uses no turn.
    assert (server.compactions, server.errors, len(server.requests), len(server.exchanges)) == ([2], [], 4, 3)
    assert capture.exchanges[2].path.endswith('/v1/responses/compact')
    compact_reply = json.loads(capture.exchanges[2].response_body)
    assert compact_reply == snapshot(
        {
            'id': 'resp_fake_0002',
            'object': 'response.compaction',
            'created_at': 1767225600,
            'output': [
                {
                    'type': 'message',
                    'id': 'msg_fake_2_0',
                    'role': 'user',
                    'status': 'completed',
                    'content': [{'type': 'input_text', 'text': 'What time is it?'}],
                },
                {
                    'type': 'compaction',
                    'id': 'cmp_fake_0002',
                    'encrypted_content': 'RmFrZSBjb21wYWN0aW9uIG9mIHJlcXVlc3QgMjogNCBtZXNzYWdlcywgYWJvdXQgMTAxIHRva2Vucywgc3VtbWFyaXplZC4=',
                },
            ],
            'usage': {
                'input_tokens': 101,
                'input_tokens_details': {'cached_tokens': 0},
                'output_tokens': 17,
                'output_tokens_details': {'reasoning_tokens': 0},
                'total_tokens': 118,
            },
        }
    )
    history = result.all_messages()
    assert isinstance(history[0], ModelResponse) and isinstance(history[0].parts[0], CompactionPart)
    assert history[0].provider_details == {'compaction': True}
    # Pydantic AI keeps only the compaction item, and sends the new prompt after it.
    next_input = json.loads(server.requests[3])['input']
    assert next_input == [compact_reply['output'][-1], {'role': 'user', 'content': LONG_PROMPT}]
