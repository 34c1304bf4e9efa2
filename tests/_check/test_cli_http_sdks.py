"""The checker on cassettes of the providers reached over plain HTTP with an OpenAI-Chat-shaped body: Mistral, Groq and
Hugging Face, each recorded from Pydantic AI's real model class and its SDK against the fake provider, written as
vcrpy records them. The checker names each API as itself and reports the usage its replies hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.testing import PromptWire
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text

from ..check_helpers import interaction, run, write_cassette
from ..fake_models import live_loopback
from ..http_sdk_models import HTTP_SDK_MODELS

pytestmark = [live_loopback, pytest.mark.anyio]

RULES = 'Follow the house rules. ' * 400  # about 2,400 tokens: above the minimum the fake caches from


async def record(prompt_wire: PromptWire, provider: str, windows: Literal['keep', 'price'] = 'keep') -> None:
    """Run a three-turn conversation through `provider`'s model, recording it."""
    memory = AppendInstructions[list[str]](id='memory', windows=windows)
    memory.instructions(name='notes')(lambda ctx: '\n'.join(ctx.deps))

    def make_client(client_class: type[Any]) -> Any:
        return prompt_wire.http_client(client_class=client_class)

    history: list[ModelMessage] = []
    with FakeProvider(script=lambda request: Text('Noted.')) as server:
        async with HTTP_SDK_MODELS[provider](make_client, server.url) as model:
            agent = Agent(model, deps_type=list[str], instructions=RULES, capabilities=[memory])
            for turn, notes in enumerate([['a'], ['a'], ['a', 'b']]):
                history = (await agent.run(f'turn {turn}', deps=notes, message_history=history)).all_messages()


@pytest.mark.parametrize('provider', list(HTTP_SDK_MODELS))
async def test_a_cassette_of_each_api_is_read_as_itself(
    prompt_wire: PromptWire, tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str
):
    await record(prompt_wire, provider)
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
    await record(prompt_wire, 'groq', windows='price')
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
