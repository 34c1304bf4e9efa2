"""The cache settings `docs/delivery.md` recommends are ones the installed Pydantic AI has.

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
from pathlib import Path

from inline_snapshot import snapshot
from pydantic_ai.models.anthropic import AnthropicModelSettings
from pydantic_ai.models.bedrock import BedrockModelSettings
from pydantic_ai.models.mistral import MistralModelSettings
from pydantic_ai.models.openai import OpenAIChatModelSettings, OpenAIResponsesModelSettings
from pydantic_ai.models.openrouter import OpenRouterModelSettings
from pydantic_ai.settings import ModelSettings

PAGE = Path(__file__).parent.parent / 'docs' / 'delivery.md'

SETTINGS_OF_PROVIDER: dict[str, list[type]] = {
    'anthropic': [AnthropicModelSettings],
    'bedrock': [BedrockModelSettings],
    'mistral': [MistralModelSettings],
    'openai': [OpenAIChatModelSettings, OpenAIResponsesModelSettings],
    'openrouter': [OpenRouterModelSettings],
}
"""Each provider prefix of a setting name, and the settings classes of the models that read it."""

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
