"""`pydantic-ai-append check` on AWS Bedrock Converse: a conversation of an Agent on `BedrockConverseModel`, through the
real boto3 client against the fake provider on loopback, recorded by vcrpy as pytest-recording records it (botocore
sends through urllib3, which vcrpy patches; ConverseStream's binary event stream lands in the YAML as `!!binary`).

The checker names the API `bedrock-converse` and the model from the path, finds where a changed instruction breaks
the prefix in the system blocks, and reports the usage each reply carries, JSON or in the stream's `metadata` event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any, cast

import pytest
import vcr  # pyright: ignore[reportMissingTypeStubs]
import yaml
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import AgentStreamEvent, ModelMessage, ModelResponse
from pydantic_ai.models.bedrock import BedrockModelSettings

from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, bedrock_model

from ..check_helpers import interaction, run, write_cassette
from ..fake_models import live_loopback
from ..wire import vcr_config

pytestmark = [live_loopback, pytest.mark.anyio]

CLAUDE = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
RULES = 'Follow the house rules. ' * 400  # about 2,400 tokens: above Claude Sonnet 4.5's 1,024


async def discard(ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
    async for _ in events:
        pass


async def record(cassette: Path, *, streamed: bool) -> list[ModelResponse]:
    """Three turns of an agent whose dynamic instructions change before the third, recorded into `cassette`."""
    todos = ['write tests']
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        # Plain instructions: the change is rewritten into the system prompt, after the static rules.
        agent = Agent(bedrock_model(server.url, CLAUDE), instructions=[RULES, lambda: '\n'.join(todos)])
        settings = BedrockModelSettings(max_tokens=1_024)  # `converse` on newer releases, unless streamed
        history: list[ModelMessage] = []
        recorder: Any = cast('Any', vcr).VCR(record_mode='all', **vcr_config())  # vcrpy's types are partial
        with recorder.use_cassette(str(cassette)):
            for turn in range(3):
                if turn == 2:
                    todos.append('write docs')
                result = await agent.run(
                    f'turn {turn}',
                    message_history=history,
                    model_settings=settings,
                    event_stream_handler=discard if streamed else None,
                )
                history = result.all_messages()
    return [message for message in history if isinstance(message, ModelResponse)]


@pytest.mark.parametrize('streamed', [False, True], ids=['converse', 'converse-stream'])
async def test_a_recorded_bedrock_conversation_is_read_as_bedrock_converse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], streamed: bool
):
    cassette = tmp_path / 'bedrock.yaml'
    responses = await record(cassette, streamed=streamed)
    recorded = yaml.safe_load(cassette.read_text())['interactions']
    paths = {interaction['request']['uri'].rsplit('/', 1)[-1] for interaction in recorded}
    assert paths == {'converse-stream' if streamed else 'converse'}
    assert {type(interaction['response']['body']['string']) for interaction in recorded} == {bytes if streamed else str}
    status, out, _ = run(capsys, str(cassette))
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith(f'{cassette}#0: bedrock-converse {CLAUDE}, 3 requests, ')
    assert lines[0].endswith('prefix broken at request 2')
    # The rules are the first system block; the changed instructions, the second.
    assert 'first divergent segment is 1 (system in request 1, system in request 2)' in lines[1]
    assert lines[2:4] == ['    request 1: {"text":"write tests"}', '    request 2: {"text":"write tests\\nwrite docs"}']
    read, sent = sum(r.usage.cache_read_tokens for r in responses), sum(r.usage.input_tokens for r in responses)
    assert read > 0
    assert f'  provider: read {read:,} of {sent:,} input tokens from cache ({read / sent:.0%})' in lines
    # Each reply's usage, as Pydantic AI read it from the same reply.
    status, out, _ = run(capsys, '--json', str(cassette))
    (conversation,) = json.loads(out)['cassettes'][0]['conversations']
    assert (conversation['api'], conversation['model']) == ('bedrock-converse', CLAUDE)
    assert [verdict['provider'] for verdict in conversation['request_verdicts']] == [
        {
            'input_tokens': response.usage.input_tokens,
            'cache_read_tokens': response.usage.cache_read_tokens,
            'cache_write_tokens': response.usage.cache_write_tokens,
            'cache_reported': True,
        }
        for response in responses
    ]
    assert [verdict['disagreement'] for verdict in conversation['request_verdicts']] == [None] * 3


def converse_request(turns: int, *, cache_point: bool) -> dict[str, Any]:
    point = [{'cachePoint': {'type': 'default'}}] if cache_point else []
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages += [
            {'role': 'user', 'content': [{'text': f'What does step {turn} do?'}]},
            {'role': 'assistant', 'content': [{'text': f'Step {turn} parses.'}]},
        ]
    messages.append({'role': 'user', 'content': [{'text': f'What does step {turns} do?'}, *point]})
    return {'messages': messages, 'system': [{'text': RULES}, *point], 'inferenceConfig': {'maxTokens': 1024}}


def converse_reply(input_tokens: int) -> dict[str, Any]:
    usage = {'inputTokens': input_tokens, 'outputTokens': 3, 'totalTokens': input_tokens + 3}
    usage |= {'cacheReadInputTokens': 0, 'cacheWriteInputTokens': 0}
    message = {'role': 'assistant', 'content': [{'text': 'Done.'}]}
    return {'output': {'message': message}, 'stopReason': 'end_turn', 'usage': usage, 'metrics': {'latencyMs': 90}}


@pytest.mark.parametrize('cache_point', [True, False])
def test_bedrock_reads_only_at_a_cache_point(tmp_path: Path, capsys: pytest.CaptureFixture[str], cache_point: bool):
    # As on Anthropic: nothing read of a long prefix is a miss worth a line only where a cache point covered it.
    uri = f'https://bedrock-runtime.us-east-1.amazonaws.com/model/{CLAUDE.replace(":", "%3A")}/converse'
    cassette = write_cassette(
        tmp_path / 'converse.yaml',
        [
            interaction(uri, converse_request(0, cache_point=cache_point), converse_reply(2_410)),
            interaction(uri, converse_request(1, cache_point=cache_point), converse_reply(2_430)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    flagged = [line.split(':')[0] for line in out.splitlines() if line.startswith('  request ')]
    assert flagged == (['  request 1 (interaction 1), missed'] if cache_point else [])


def in_recorders_form(recorded: dict[str, Any], recorder: str) -> dict[str, Any]:
    """One interaction of a vcrpy cassette as Pydantic AI's older serializer or cassetter records it."""
    request, response = dict(recorded['request']), dict(recorded['response'])
    request_body, response_body = request.pop('body'), response.pop('body')['string']
    if recorder == 'pydantic_ai_serializer':
        # A JSON body as structure beside the headers (keys sorted when written); a binary one as vcrpy has it.
        request['parsed_body'] = json.loads(request_body)
        if isinstance(response_body, str):
            response['parsed_body'] = json.loads(response_body)
        else:
            response['body'] = {'string': response_body}
        return {'request': request, 'response': response}
    request['body'] = {'type': 'json', 'content': json.loads(request_body)}
    response['body'] = (
        {'type': 'json', 'content': json.loads(response_body)}
        if isinstance(response_body, str)
        else {'type': 'binary', 'content': response_body.hex()}
    )
    return {'request': request, 'response': response}


@pytest.mark.parametrize('recorder', ['pydantic_ai_serializer', 'cassetter'])
@pytest.mark.parametrize('streamed', [False, True], ids=['converse', 'converse-stream'])
async def test_a_bedrock_conversation_in_pydantic_ais_cassette_forms(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], streamed: bool, recorder: str
):
    plain = tmp_path / 'vcrpy.yaml'
    await record(plain, streamed=streamed)
    interactions = yaml.safe_load(plain.read_text())['interactions']
    other = write_cassette(tmp_path / f'{recorder}.yaml', [in_recorders_form(item, recorder) for item in interactions])

    def verdict(file: Path) -> tuple[Any, ...]:
        status, out, _ = run(capsys, '--json', str(file))
        (c,) = json.loads(out)['cassettes'][0]['conversations']
        broken = [(d['request'], d['segment'], d['kind']) for d in c['divergences']]
        return status, c['api'], c['model'], broken, [r['provider'] for r in c['request_verdicts']]

    # Keys sorted change the bytes, not where the prefix breaks or what the provider reported.
    assert verdict(other) == verdict(plain)
    assert verdict(other)[:4] == (1, 'bedrock-converse', CLAUDE, [(2, 1, 'system')])
