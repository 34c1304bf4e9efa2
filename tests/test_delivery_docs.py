"""`docs/delivery.md`'s table of model classes: the path each takes, and the cache settings it recommends.

The path a change takes is the plugin's choice from the model's profile, which Pydantic AI builds per provider and
model name and changes between releases, so the table's paths are checked against real model classes built with
providers pointed nowhere (no request is sent, so no agent run: the plugin's `is_inline` is what a run would ask).

The page tells each provider's users what to set for the provider to cache the prefix the plugin keeps. A setting
name that Pydantic AI doesn't have is dropped without an error (model settings are a `TypedDict`), so a misspelt or
renamed one in the docs would cost users their cache in silence. This reads every provider-prefixed cache setting the
page names and looks it up in the `ModelSettings` subclass of that provider's model, on whichever release is installed
(the suite runs on 2.68 and 2.58). xAI's is a provider argument, not a setting: `XaiProvider` is read from its source,
because `xai-sdk`, which it imports, isn't installed for the suite.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from importlib.metadata import version
from pathlib import Path

import pytest
from inline_snapshot import snapshot
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
from pydantic_ai.models.bedrock import BedrockConverseModel, BedrockModelSettings
from pydantic_ai.models.bedrock_mantle import BedrockMantleResponsesModel
from pydantic_ai.models.cerebras import CerebrasModel
from pydantic_ai.models.cohere import CohereModel
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.google import GoogleModel
from pydantic_ai.models.groq import GroqModel
from pydantic_ai.models.huggingface import HuggingFaceModel
from pydantic_ai.models.mistral import MistralModel, MistralModelSettings
from pydantic_ai.models.ollama import OllamaModel
from pydantic_ai.models.openai import (
    OpenAIChatModel,
    OpenAIChatModelSettings,
    OpenAIResponsesModel,
    OpenAIResponsesModelSettings,
)
from pydantic_ai.models.openrouter import OpenRouterModel, OpenRouterModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.bedrock import BedrockProvider
from pydantic_ai.providers.bedrock_mantle import BedrockMantleProvider
from pydantic_ai.providers.cerebras import CerebrasProvider
from pydantic_ai.providers.cohere import CohereProvider
from pydantic_ai.providers.deepseek import DeepSeekProvider
from pydantic_ai.providers.google import GoogleProvider
from pydantic_ai.providers.groq import GroqProvider
from pydantic_ai.providers.huggingface import HuggingFaceProvider
from pydantic_ai.providers.mistral import MistralProvider
from pydantic_ai.providers.ollama import OllamaProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.providers.openrouter import OpenRouterProvider
from pydantic_ai.settings import ModelSettings

from pydantic_ai_append._request import is_inline

PAGE = Path(__file__).parent.parent / 'docs' / 'delivery.md'

SETTINGS_OF_PROVIDER: dict[str, list[type]] = {
    'anthropic': [AnthropicModelSettings],
    'bedrock': [BedrockModelSettings],
    'mistral': [MistralModelSettings],
    'openai': [OpenAIChatModelSettings, OpenAIResponsesModelSettings],
    'openrouter': [OpenRouterModelSettings],
}
"""Each provider prefix of a setting name, and the settings classes of the models that read it."""

OLDEST = version('pydantic-ai-slim').startswith('2.58.')
"""The table gives a path for 2.68 and one for 2.58; the main suite runs on those two."""

KEY = 'unused'
BEDROCK = BedrockProvider(region_name='us-east-1', api_key=KEY)
OPENROUTER = OpenRouterProvider(api_key=KEY)
CEREBRAS = CerebrasProvider(api_key=KEY)
OLLAMA = OllamaProvider(base_url='http://127.0.0.1:9/v1')

PATHS: list[tuple[Model, str, str]] = [
    (OpenAIChatModel('gpt-5.2', provider=OpenAIProvider(api_key=KEY)), 'inline', 'inline'),
    (OpenAIChatModel('deepseek-chat', provider=DeepSeekProvider(api_key=KEY)), 'wrapped', 'wrapped'),
    (OpenAIResponsesModel('gpt-5.2', provider=OpenAIProvider(api_key=KEY)), 'inline', 'inline'),
    (AnthropicModel('claude-opus-4-8', provider=AnthropicProvider(api_key=KEY)), 'inline', 'inline'),
    (AnthropicModel('claude-sonnet-5-5', provider=AnthropicProvider(api_key=KEY)), 'wrapped', 'inline'),
    (AnthropicModel('claude-sonnet-4-6', provider=AnthropicProvider(api_key=KEY)), 'wrapped', 'wrapped'),
    (GoogleModel('gemini-2.5-pro', provider=GoogleProvider(api_key=KEY)), 'wrapped', 'wrapped'),
    (BedrockConverseModel('us.anthropic.claude-opus-4-8', provider=BEDROCK), 'wrapped', 'wrapped'),
    (BedrockConverseModel('amazon.nova-pro-v1:0', provider=BEDROCK), 'wrapped', 'wrapped'),
    (
        BedrockMantleResponsesModel(
            'openai.gpt-oss-120b', provider=BedrockMantleProvider(region_name='us-east-1', api_key=KEY)
        ),
        'inline',
        'inline',
    ),
    (MistralModel('mistral-large-latest', provider=MistralProvider(api_key=KEY)), 'wrapped', 'wrapped'),
    (GroqModel('llama-3.3-70b-versatile', provider=GroqProvider(api_key=KEY)), 'inline', 'inline'),
    (CohereModel('command-r-plus', provider=CohereProvider(api_key=KEY)), 'inline', 'inline'),
    (HuggingFaceModel('Qwen/Qwen3-235B-A22B', provider=HuggingFaceProvider(api_key=KEY)), 'inline', 'inline'),
    (OpenRouterModel('openai/gpt-5', provider=OPENROUTER), 'inline', 'wrapped'),
    (OpenRouterModel('openai/gpt-oss-120b', provider=OPENROUTER), 'wrapped', 'wrapped'),
    (OpenRouterModel('anthropic/claude-opus-4-8', provider=OPENROUTER), 'inline', 'wrapped'),
    (OpenRouterModel('google/gemini-2.5-pro', provider=OPENROUTER), 'wrapped', 'wrapped'),
    (CerebrasModel('gpt-oss-120b', provider=CEREBRAS), 'inline', 'inline'),
    (CerebrasModel('llama-3.3-70b', provider=CEREBRAS), 'wrapped', 'wrapped'),
    (OllamaModel('gpt-oss:20b', provider=OLLAMA), 'inline', 'inline'),
    (OllamaModel('llama3.3', provider=OLLAMA), 'wrapped', 'wrapped'),
    (FunctionModel(lambda messages, info: None), 'wrapped', 'wrapped'),  # pyright: ignore[reportArgumentType]
]
"""Models the table names, with the path it gives on 2.68 and on 2.58."""


@pytest.mark.parametrize(
    ('model', 'newest', 'oldest'), PATHS, ids=[f'{type(model).__name__}:{model.model_name}' for model, *_ in PATHS]
)
def test_each_model_takes_the_path_the_table_gives(model: Model, newest: str, oldest: str):
    assert ('inline' if is_inline(model) else 'wrapped') == (oldest if OLDEST else newest)


NAMED_SETTING = re.compile(r'\b((' + '|'.join(SETTINGS_OF_PROVIDER) + r')_\w*cache\w*)\b')


def keys(settings: type) -> frozenset[str]:
    # A `TypedDict`'s annotations hold its bases' keys too.
    return frozenset(settings.__annotations__)


def named_settings() -> list[tuple[str, str]]:
    return sorted(set(NAMED_SETTING.findall(PAGE.read_text())))


def test_the_page_names_the_cache_settings_of_each_provider_that_has_them():
    assert [name for name, _ in named_settings()] == snapshot(
        [
            'anthropic_cache',
            'anthropic_cache_instructions',
            'anthropic_cache_messages',
            'anthropic_cache_tool_definitions',
            'bedrock_cache_instructions',
            'bedrock_cache_messages',
            'bedrock_cache_tool_definitions',
            'mistral_prompt_cache_key',
            'openai_prompt_cache_key',
            'openrouter_cache_instructions',
            'openrouter_cache_messages',
            'openrouter_cache_tool_definitions',
        ]
    )


def test_every_cache_setting_the_page_names_is_one_the_installed_release_has():
    missing = [
        (name, settings.__name__)
        for name, provider in named_settings()
        for settings in SETTINGS_OF_PROVIDER[provider]
        if name not in keys(settings)
    ]
    assert missing == []


def test_the_unified_cache_setting_the_page_names_is_one_the_installed_release_has():
    assert 'cache=True' in PAGE.read_text()
    assert 'cache' in keys(ModelSettings)


def test_the_xai_provider_takes_the_grpc_metadata_the_page_recommends():
    text = PAGE.read_text()
    assert "XaiProvider(metadata=(('x-grok-conv-id', conversation_id),))" in text
    spec = importlib.util.find_spec('pydantic_ai.providers.xai')
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    provider = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == 'XaiProvider')
    # The last `__init__` is the implementation; the ones before it are its overloads.
    init = [node for node in provider.body if isinstance(node, ast.FunctionDef) and node.name == '__init__'][-1]
    assert 'metadata' in [argument.arg for argument in init.args.kwonlyargs]
