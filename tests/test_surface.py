"""The public surface: the `__all__` of the package, `guard`, `testing` and `testing.fake_provider`, pinned, so that
changing it is a decision.

Everything else is private (`_module.py`, `_name`), and a reader of the package's namespace sees nothing more than
`__all__` promises.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from inline_snapshot import snapshot

import pydantic_ai_append
import pydantic_ai_append.guard
import pydantic_ai_append.testing
import pydantic_ai_append.testing.fake_provider

PUBLIC_MODULES = [
    pydantic_ai_append,
    pydantic_ai_append.guard,
    pydantic_ai_append.testing,
    pydantic_ai_append.testing.fake_provider,
]


def test_the_public_names():
    assert {module.__name__: list(module.__all__) for module in PUBLIC_MODULES} == snapshot(
        {
            'pydantic_ai_append': [
                'HARNESS_BLOCKS',
                'AppendInstructions',
                'BlockFunc',
                'BlockPreset',
                'CachePrices',
                'CacheSummary',
                'ChangePolicy',
                'InMemoryRecordStore',
                'InstructionBaselinePart',
                'InstructionBlock',
                'InstructionDeltaPart',
                'InstructionDigest',
                'InstructionRecord',
                'NoTenantWarning',
                'RecordEntry',
                'RecordStore',
                'RecordStoreError',
                'RedisRecordStore',
                'SQLiteRecordStore',
                'SyncRecordStore',
                'UnaddressableBlockWarning',
                'UnmatchedRouteWarning',
                'WindowObserver',
                'instruction_records',
                'set_memory_limit',
                'strip_records',
            ],
            'pydantic_ai_append.guard': [
                'BlockWriter',
                'ConsumedHistory',
                'ConsumedPrefixChangedWarning',
                'DeferPolicy',
                'GuardMode',
                'InstructionEdit',
                'InstructionsChangedWarning',
                'NonMonotonicRewriteError',
                'OrphanedToolPairError',
                'OrphanedToolPairWarning',
                'PrefixDivergence',
                'PrefixGuard',
                'PrefixGuardWarning',
                'RepairPolicy',
                'RetiredToolReferencedWarning',
                'RewriteAction',
                'RewriteDecision',
                'ToolListChangedWarning',
                'ToolPairProblem',
                'VerifierMode',
                'WireDivergence',
                'WirePrefixDivergenceError',
                'WirePrefixDivergenceWarning',
                'WireVerifier',
                'apply_rewrite',
                'compact',
                'decide_rewrite',
                'self_edit',
                'self_edit_toolset',
                'tool_pair_problems',
                'validate_rewrite',
            ],
            'pydantic_ai_append.testing': [
                'Api',
                'PrefixReuse',
                'PromptWire',
                'Segment',
                'WireCapture',
                'WireConversation',
                'WireExchange',
                'assert_prefix_stable',
                'prefix_reuse',
                'transcript',
            ],
            'pydantic_ai_append.testing.fake_provider': [
                'FakeProvider',
                'FakeRequest',
                'Script',
                'ServedApi',
                'ServerExchange',
                'Text',
                'ToolCalls',
                'Turn',
                'anthropic_model',
                'bedrock_model',
                'google_model',
                'openai_chat_model',
                'openai_responses_model',
            ],
        }
    )


@pytest.mark.parametrize('module', PUBLIC_MODULES, ids=lambda module: module.__name__)
def test_every_public_name_imports(module: ModuleType):
    # `from module import *` and `from module import name` read these attributes; a name in `__all__` that nothing
    # defines fails only there, not when the module is imported.
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == [], f'{module.__name__} lists names in its `__all__` that do not import: {missing}'


@pytest.mark.parametrize('module', PUBLIC_MODULES, ids=lambda module: module.__name__)
def test_nothing_public_outside_all(module: ModuleType):
    def is_submodule(name: str, value: object) -> bool:
        return isinstance(value, ModuleType) and value.__name__ == f'{module.__name__}.{name}'

    unlisted = [
        name
        for name, value in vars(module).items()
        if not name.startswith('_') and name not in module.__all__ and not is_submodule(name, value)
    ]
    assert unlisted == [], f'{module.__name__} has public names that are not in its `__all__`: {unlisted}'


def test_the_package_imports_its_names_when_first_used():
    # So that `pydantic-ai-append check` starts without Pydantic AI (`_check/test_cli.py`); `dir` lists them all the same.
    assert set(pydantic_ai_append.__all__) <= set(dir(pydantic_ai_append))
    with pytest.raises(AttributeError, match="module 'pydantic_ai_append' has no attribute 'Missing'"):
        pydantic_ai_append.Missing  # noqa: B018  # pyright: ignore[reportAttributeAccessIssue]
