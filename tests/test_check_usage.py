"""The provider's own cache use in the checker's report: beside the prefix the checker judged reusable, from the usage
each recorded reply reports, with a flag where the two disagree (`_usage.disagreement` holds the rule).

The cassettes are written here in the shape the real APIs record: long enough instructions for the providers' 1,024
token minimum, and each reply's `usage` as OpenAI and Anthropic report it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot

from .check_helpers import CHAT, MESSAGES, RESPONSES, assistant, interaction, run, user, write_cassette

RULES = ' '.join(
    f'Rule {n}: answer in the language of the question, briefly, and cite the file you read.' for n in range(60)
)


def chat_reply(prompt_tokens: int, cached_tokens: int) -> dict[str, Any]:
    message: dict[str, Any] = {'role': 'assistant', 'content': 'Done.', 'refusal': None, 'annotations': []}
    usage = {
        'prompt_tokens': prompt_tokens,
        'completion_tokens': 3,
        'total_tokens': prompt_tokens + 3,
        'prompt_tokens_details': {'cached_tokens': cached_tokens, 'audio_tokens': 0},
        'completion_tokens_details': {'reasoning_tokens': 0, 'audio_tokens': 0},
    }
    choice: dict[str, Any] = {'index': 0, 'message': message, 'logprobs': None, 'finish_reason': 'stop'}
    return {
        'id': 'chatcmpl-CkQ2', 'object': 'chat.completion', 'created': 1764700000, 'model': 'gpt-5.2-2025-12-11',
        'choices': [choice], 'usage': usage, 'service_tier': 'default', 'system_fingerprint': None,
    }  # fmt: skip


def chat(system: str, turns: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{'role': 'system', 'content': system}]
    for turn in range(turns):
        messages += [user(f'What does step {turn} do?'), assistant(f'Step {turn} parses.')]
    return {'model': 'gpt-5.2', 'messages': [*messages, user(f'What does step {turns} do?')]}


def test_the_provider_read_more_than_the_checker_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # The third request changes the first system message's first word, yet the provider read most of it from cache:
    # the checker's verdict on it is the one to doubt.
    cassette = write_cassette(
        tmp_path / 'chat.yaml',
        [
            interaction(CHAT, chat(RULES, 0), chat_reply(1_310, 0)),
            interaction(CHAT, chat(RULES, 1), chat_reply(1_335, 1_280)),
            interaction(CHAT, chat(f'Now {RULES}', 2), chat_reply(1_361, 1_280)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 1
    assert out.replace(str(tmp_path), '…').splitlines()[-3:] == snapshot(
        [
            '  provider: read 2,560 of 4,006 input tokens from cache (64%)',
            '  request 2 (interaction 2), read_more: the provider read 1,280 of 1,361 input tokens from cache (94%), but the checker judged only 0 of 5,421 bytes (0%) reusable, so the verdict on this request is likely wrong: compare it with the request before it by hand; if the provider is right, the checker does not know one of its cache rules',
            '1 conversation in 1 cassette: 1 breaks its prefix',
        ]
    )
    status, out, _ = run(capsys, str(cassette), '--json')
    verdicts = json.loads(out)['cassettes'][0]['conversations'][0]['request_verdicts']
    assert verdicts[2] == snapshot(
        {
            'request': 2,
            'interaction': 2,
            'reused_bytes': 0,
            'total_bytes': 5421,
            'provider': {
                'input_tokens': 1361,
                'cache_read_tokens': 1280,
                'cache_write_tokens': 0,
                'cache_reported': True,
            },
            'disagreement': {
                'kind': 'read_more',
                'message': 'the provider read 1,280 of 1,361 input tokens from cache (94%), but the checker judged only 0 of 5,421 bytes (0%) reusable, so the verdict on this request is likely wrong: compare it with the request before it by hand; if the provider is right, the checker does not know one of its cache rules',
            },
        }
    )


def test_a_miss_the_prefix_does_not_explain(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    cassette = write_cassette(
        tmp_path / 'chat.yaml',
        [
            interaction(CHAT, chat(RULES, 0), chat_reply(1_310, 0)),
            interaction(CHAT, chat(RULES, 1), chat_reply(1_335, 0)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    assert out.splitlines()[1:] == snapshot(
        [
            '  provider: read 0 of 2,645 input tokens from cache (0%)',
            '  request 1 (interaction 1), missed: the checker judged 5,227 of 5,322 bytes (about 1,311 tokens) reusable, but the provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another machine, or no breakpoint over the prefix), not an error of the checker',
            '1 conversation in 1 cassette: every one keeps its prefix',
        ]
    )


def anthropic_reply(uncached: int, written: int, read: int) -> dict[str, Any]:
    usage = {
        'input_tokens': uncached,
        'cache_creation_input_tokens': written,
        'cache_read_input_tokens': read,
        'cache_creation': {'ephemeral_5m_input_tokens': written, 'ephemeral_1h_input_tokens': 0},
        'output_tokens': 4,
        'service_tier': 'standard',
    }
    return {
        'id': 'msg_01XFDUDYJgAACzvnptvVoYEL', 'type': 'message', 'role': 'assistant', 'model': 'claude-sonnet-4-6',
        'content': [{'type': 'text', 'text': 'Done.'}], 'stop_reason': 'end_turn', 'stop_sequence': None,
        'usage': usage,
    }  # fmt: skip


def anthropic(turns: int, breakpoint: bool) -> dict[str, Any]:
    system: dict[str, Any] = {'type': 'text', 'text': RULES}
    if breakpoint:
        system['cache_control'] = {'type': 'ephemeral'}
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages += [user(f'What does step {turn} do?'), assistant(f'Step {turn} parses.')]
    messages.append(user(f'What does step {turns} do?'))
    return {'model': 'claude-sonnet-4-6', 'max_tokens': 1024, 'system': [system], 'messages': messages}


@pytest.mark.parametrize('breakpoint', [True, False])
def test_anthropic_reads_only_at_a_breakpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str], breakpoint: bool):
    # Nothing read of a long prefix is a miss worth a line only where a breakpoint covered it.
    cassette = write_cassette(
        tmp_path / 'messages.yaml',
        [
            interaction(MESSAGES, anthropic(0, breakpoint), anthropic_reply(1_330, 0, 0)),
            interaction(MESSAGES, anthropic(1, breakpoint), anthropic_reply(1_350, 0, 0)),
        ],
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    flagged = [line for line in out.splitlines() if line.startswith('  request ')]
    assert flagged == (
        snapshot(
            [
                '  request 1 (interaction 1), missed: the checker judged 5,222 of 5,317 bytes (about 1,326 tokens) reusable, but the provider read nothing from cache: a miss the prefix does not explain (an expired entry, routing to another machine, or no breakpoint over the prefix), not an error of the checker'
            ]
        )
        if breakpoint
        else []
    )


def test_a_reply_that_cannot_be_read_says_no_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A Chat reply is read only for its usage, so one the checker can't decode leaves the verdict as it was.
    unreadable = interaction(CHAT, chat(RULES, 1), b'\x1f\x9d\x90', response_headers={'content-encoding': ['compress']})
    cassette = write_cassette(
        tmp_path / 'chat.yaml', [interaction(CHAT, chat(RULES, 0), chat_reply(1_310, 0)), unreadable]
    )
    status, out, _ = run(capsys, str(cassette))
    assert status == 0
    assert out.splitlines()[1] == snapshot(
        '  provider: read 0 of 1,310 input tokens from cache (0%), as 1 of the 2 replies report'
    )


def test_a_responses_reply_that_cannot_be_read_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A Responses reply holds the output a later `previous_response_id` brings in, so the checker must read it.
    body = {'model': 'gpt-5.2', 'input': [user('Hi')]}
    broken = interaction(RESPONSES, body, b'\x1f\x9d\x90', response_headers={'content-encoding': ['compress']})
    status, _, err = run(capsys, str(write_cassette(tmp_path / 'responses.yaml', [broken])))
    assert (status, err.replace(str(tmp_path), '…')) == snapshot(
        (
            2,
            "pydantic-ai-append check: error: …/responses.yaml: interaction 0 (POST https://api.openai.com/v1/responses): the response body has content-encoding 'compress', which the checker cannot decode\n",
        )
    )
