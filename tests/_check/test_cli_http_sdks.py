"""The checker on cassettes of the providers reached over plain HTTP with an OpenAI-Chat-shaped body: Mistral, Groq and
Hugging Face, each recorded from Pydantic AI's real model class and its SDK against the fake provider, written as
vcrpy records them. The checker names each API as itself and reports the usage its replies hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pydantic_ai_append.testing import PromptWire

from ..check_helpers import interaction, run, write_cassette
from ..fake_models import live_loopback
from ..http_sdk_models import HTTP_SDK_MODELS, three_turns

pytestmark = [live_loopback, pytest.mark.anyio]


@pytest.mark.parametrize('provider', list(HTTP_SDK_MODELS))
async def test_a_cassette_of_each_api_is_read_as_itself(
    prompt_wire: PromptWire, tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str
):
    await three_turns(prompt_wire, provider)
    file = written(prompt_wire, tmp_path / f'{provider}.yaml')
    status, out, _ = run(capsys, str(file))
    header, usage, verdict = out.splitlines()
    assert status == 0
    assert header.startswith(f'{file}#0: {provider}-chat ') and header.endswith(': prefix kept')
    # Pydantic AI reads the cached tokens Mistral and Groq report; its Hugging Face model reads none.
    assert usage.startswith('  provider: read 0 of ' if provider == 'huggingface' else '  provider: read 4,864 of ')
    assert verdict == '1 conversation in 1 cassette: every one keeps its prefix'


async def test_a_window_groqs_prices_opened_may_be_the_price_rules(
    prompt_wire: PromptWire, tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    # genai-prices prices Groq's Llama cache reads as uncached input, so windows by price open at the first change.
    await three_turns(prompt_wire, 'groq', windows='price')
    status, out, _ = run(capsys, str(written(prompt_wire, tmp_path / 'groq.yaml')))
    assert status == 1
    assert 'nothing else changed: either the plugin opened a new window by price' in out


def written(prompt_wire: PromptWire, path: Path) -> Path:
    """The recorded exchanges, written as vcrpy writes a cassette."""
    return write_cassette(
        path,
        [
            interaction(
                f'http://127.0.0.1:8080{exchange.path}',
                exchange.request_body.decode(),
                exchange.response_body.decode(),
                request_headers={'User-Agent': [exchange.user_agent or '']},
            )
            for exchange in prompt_wire.exchanges
        ],
    )
