"""Shared helpers of the cassette checker's tests (`_check/test_cli.py`, `_check/test_cassettes.py`,
`_wire/test_usage.py`): cassettes built by hand, as vcrpy records them, and the command run in-process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from pydantic_ai_append._check.cli import main

CHAT = 'https://api.openai.com/v1/chat/completions'
RESPONSES = 'https://api.openai.com/v1/responses'
MESSAGES = 'https://api.anthropic.com/v1/messages?beta=true'

Body = dict[str, Any] | str | bytes | None


def interaction(
    uri: str,
    body: Body,
    response: Body = None,
    *,
    method: str = 'POST',
    request_headers: dict[str, list[str]] | None = None,
    response_headers: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """One interaction as vcrpy's YAML serializer records it: bodies as text, or bytes where they aren't UTF-8."""

    def encoded(value: Body) -> str | bytes | None:
        return json.dumps(value) if isinstance(value, dict) else value

    return {
        'request': {'method': method, 'uri': uri, 'body': encoded(body), 'headers': request_headers or {}},
        'response': {
            'status': {'code': 200, 'message': 'OK'},
            'headers': response_headers or {'content-type': ['application/json']},
            'body': {'string': encoded(response if response is not None else {'ok': True})},
        },
    }


def write_cassette(path: Path, interactions: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # `safe_dump` writes bytes as `!!binary`, as vcrpy's dumper does.
    path.write_text(yaml.safe_dump({'interactions': interactions, 'version': 1}))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(['check', *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def user(text: str) -> dict[str, Any]:
    return {'role': 'user', 'content': text}


def assistant(text: str) -> dict[str, Any]:
    return {'role': 'assistant', 'content': text}


def tool(name: str) -> dict[str, Any]:
    return {'type': 'function', 'function': {'name': name, 'parameters': {'type': 'object'}}}


def chat_turns(systems: list[str], tools: list[list[str]], model: str = 'gpt-5.2') -> list[dict[str, Any]]:
    """A three-turn OpenAI Chat conversation, with each request's system prompt and tool list as given."""
    history: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for index, (system, names) in enumerate(zip(systems, tools, strict=True)):
        history.append(user(f'question {index}'))
        body = {'model': model, 'messages': [{'role': 'system', 'content': system}, *history]}
        body['tools'] = [tool(name) for name in names]
        turns.append(interaction(CHAT, body))
        history.append(assistant(f'answer {index}'))
    return turns
