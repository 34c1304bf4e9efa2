"""`pydantic-ai-append check` on hand-written cassettes of the APIs beyond OpenAI's and Anthropic's: each named as
itself, with the model its request names (in the body, or Gemini's path), the break where it is, and the provider's
usage as its reply reports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..check_helpers import interaction, run, write_cassette


def test_a_gemini_cassette_is_read_as_gemini(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    uri = 'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent'

    def request(system: str, texts: list[str]) -> dict[str, Any]:
        contents = [{'role': 'model' if i % 2 else 'user', 'parts': [{'text': text}]} for i, text in enumerate(texts)]
        return {'contents': contents, 'systemInstruction': {'role': 'user', 'parts': [{'text': system}]}}

    usage = {'promptTokenCount': 60, 'cachedContentTokenCount': 0, 'candidatesTokenCount': 1}
    reply: dict[str, Any] = {'candidates': [], 'usageMetadata': usage, 'modelVersion': 'gemini-2.5-flash'}
    file = write_cassette(
        tmp_path / 'gemini.yaml',
        [
            interaction(uri, request('Be brief.', ['a']), reply),
            interaction(uri, request('Be brief.', ['a', 'ok', 'b']), reply),
            interaction(uri, request('Be terse.', ['a', 'ok', 'b', 'ok', 'c']), reply),
        ],
    )
    status, out, _ = run(capsys, str(file))
    assert status == 1
    assert out.startswith(f'{file}#0: gemini gemini-2.5-flash, 3 requests')
    assert '(system in request 1, system in request 2), at byte 12 of it' in out
    assert 'provider: read 0 of 180 input tokens from cache (0%)' in out  # usageMetadata, summed


def test_a_cohere_cassette_is_read_as_cohere_chat(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    uri = 'https://api.cohere.com/v2/chat'

    def request(system: str, texts: list[str]) -> dict[str, Any]:
        turns = [{'role': 'assistant' if i % 2 else 'user', 'content': text} for i, text in enumerate(texts)]
        return {'model': 'command-r7b-12-2024', 'messages': [{'role': 'system', 'content': system}, *turns]}

    # Cohere's reply names no model, and reports billed and counted tokens with the cached ones beside them.
    usage = {
        'billed_units': {'input_tokens': 50},
        'tokens': {'input_tokens': 60, 'output_tokens': 1},
        'cached_tokens': 20,
    }
    reply: dict[str, Any] = {'id': 'r', 'finish_reason': 'COMPLETE', 'message': {'role': 'assistant'}, 'usage': usage}
    file = write_cassette(
        tmp_path / 'cohere.yaml',
        [
            interaction(uri, request('Be brief.', ['a']), reply),
            interaction(uri, request('Be brief.', ['a', 'ok', 'b']), reply),
            interaction(uri, request('Be terse.', ['a', 'ok', 'b', 'ok', 'c']), reply),
        ],
    )
    status, out, _ = run(capsys, str(file))
    assert status == 1
    assert out.startswith(f'{file}#0: cohere-chat command-r7b-12-2024, 3 requests')
    assert '(message in request 1, message in request 2), at byte' in out
    assert 'provider: read 60 of 180 input tokens from cache (33%)' in out  # `tokens` and `cached_tokens`, summed
