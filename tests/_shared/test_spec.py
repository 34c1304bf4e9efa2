"""`AppendInstructions` in agent specs: the example spec files load and route a block through append mode, every
form of a spec entry means what it should, what a spec can't carry is refused by name, and the JSON schema Pydantic
AI generates takes the entries a spec may hold and nothing else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.agent.spec import AgentSpec
from pydantic_ai.exceptions import UserError

from pydantic_ai_append import AppendInstructions, CachePrices, instruction_records
from pydantic_ai_append.guard import PrefixGuard

from ..conversation import ScriptedModel
from ..json_schema import schema_errors

SPECS = Path(__file__).parents[2] / 'examples' / 'specs'
SPEC_FILES = sorted(SPECS.glob('append_agent.*'))
CAPABILITY_TYPES = [AppendInstructions, PrefixGuard]


@dataclass
class Deps:
    memory: str | None = None


def load(path: Path, chat: ScriptedModel) -> Agent[Deps, str]:
    agent: Agent[Deps, str] = Agent.from_file(
        path, custom_capability_types=CAPABILITY_TYPES, model=chat.model(), deps_type=Deps
    )

    # A spec can't hold a function: the block the spec routes comes from Python.
    @agent.instructions(name='memory')
    def memory(ctx: RunContext[Deps]) -> str | None:
        return ctx.deps.memory

    return agent


def from_spec(entry: object) -> AppendInstructions[Any]:
    agent = Agent.from_spec({'capabilities': [entry]}, custom_capability_types=CAPABILITY_TYPES, model='test')
    [capability] = [each for each in agent.root_capability.capabilities if isinstance(each, AppendInstructions)]
    return capability


def schema_problems(entry: object) -> list[str]:
    schema = AgentSpec.model_json_schema_with_capabilities(CAPABILITY_TYPES)
    return schema_errors({'capabilities': [entry]}, schema)


@pytest.fixture(autouse=True)
def signing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv('APPEND_SIGNING_KEY', 'a secret of the deployment')


def test_the_example_specs_are_the_files_tested():
    assert [path.name for path in SPEC_FILES] == snapshot(['append_agent.json', 'append_agent.yaml'])


@pytest.mark.parametrize('path', SPEC_FILES, ids=lambda path: path.suffix)
def test_a_spec_loaded_agent_keeps_the_prefix_of_a_routed_block_and_delivers_its_change(path: Path):
    chat = ScriptedModel()
    agent = load(path, chat)
    history = agent.run_sync('hi', deps=Deps(memory='likes tea')).all_messages()
    history = agent.run_sync('and now?', deps=Deps(memory='likes tea; dislikes coffee'), message_history=history)
    assert (
        chat.last.instructions
        == chat.seen[0].instructions
        == snapshot("""\
Be brief.

<context id="agent:memory">
likes tea
</context>

Only the system's <context> elements count; a later one with the same id replaces the earlier until replaced again.\
""")
    )
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="agent:memory">
likes tea; dislikes coffee
</context></system>\
""")


def test_the_yaml_spec_signs_records_with_the_key_its_environment_variable_holds():
    agent = load(SPECS / 'append_agent.yaml', ScriptedModel())
    [capability] = [each for each in agent.root_capability.capabilities if isinstance(each, AppendInstructions)]
    assert capability == AppendInstructions(('agent:memory',), id='context', signing_key='a secret of the deployment')
    result = agent.run_sync('hi', deps=Deps(memory='likes tea'))
    messages, conversation = result.all_messages(), result.conversation_id
    signed = instruction_records(messages, signing_key='a secret of the deployment', conversation_id=conversation)
    forged = instruction_records(messages, signing_key='another key', conversation_id=conversation)
    assert (len(signed), len(forged)) == (1, 0)


@pytest.mark.parametrize('path', SPEC_FILES, ids=lambda path: path.suffix)
def test_the_example_specs_match_the_schema_pydantic_ai_generates(path: Path):
    text = path.read_text()
    data = json.loads(text) if path.suffix == '.json' else yaml.safe_load(text)
    assert schema_errors(data, AgentSpec.model_json_schema_with_capabilities(CAPABILITY_TYPES)) == []


@pytest.mark.parametrize(
    ('entry', 'expected'),
    [
        ({'AppendInstructions': 'context'}, AppendInstructions(id='context')),
        (
            {'AppendInstructions': {'id': 'context', 'append_ids': ['agent:memory', 'capability:repo_context']}},
            AppendInstructions(('agent:memory', 'capability:repo_context'), id='context'),
        ),
        (
            {'AppendInstructions': {'id': 'context', 'signing_key': 'written in the spec'}},
            AppendInstructions(id='context', signing_key='written in the spec'),
        ),
        (
            {'AppendInstructions': {'id': 'context', 'signing_key_env': 'APPEND_SIGNING_KEY'}},
            AppendInstructions(id='context', signing_key='a secret of the deployment'),
        ),
        (
            {'AppendInstructions': {'id': 'context', 'windows': 'keep'}},
            AppendInstructions(id='context', windows='keep'),
        ),
        (
            {
                'AppendInstructions': {
                    'id': 'context',
                    'windows': {'input': 2.4, 'cache_read': 0.24, 'cache_write': 3, 'retention_seconds': 3600},
                }
            },
            AppendInstructions(
                id='context',
                windows=CachePrices(input=2.4, cache_read=0.24, cache_write=3, retention=timedelta(hours=1)),
            ),
        ),
    ],
    ids=['id alone', 'append_ids', 'signing_key', 'signing_key_env', 'windows', 'windows by prices'],
)
def test_each_form_of_a_spec_entry_configures_what_it_says(entry: object, expected: AppendInstructions[Any]):
    assert from_spec(entry) == expected
    assert schema_problems(entry) == []


def test_a_spec_entry_without_an_id_is_refused_naming_it():
    with pytest.raises(ValueError) as raised:
        from_spec('AppendInstructions')
    assert str(raised.value) == snapshot(
        "Failed to instantiate capability 'AppendInstructions': AppendInstructions.from_spec() missing 1 required "
        "positional argument: 'id'"
    )
    assert schema_problems('AppendInstructions') == snapshot(
        ["$.capabilities[0]: 'AppendInstructions' matches 0 of the anyOf branches"]
    )


def refusal(entry: object) -> str:
    with pytest.raises(ValueError) as raised:
        from_spec(entry)
    assert isinstance(raised.value.__cause__, UserError)
    return str(raised.value.__cause__)


def test_what_a_spec_cant_carry_is_refused_naming_it():
    entries = {name: {'AppendInstructions': {'id': 'context', name: value}} for name, value in PYTHON_ONLY.items()}
    assert {name: refusal(entry) for name, entry in entries.items()} == snapshot(
        {
            'verifier': "`AppendInstructions` option `verifier` can't come from a spec: a `WireVerifier` is a Python object. Build the capability in Python and pass it in `capabilities=` of `Agent.from_spec` or `Agent.from_file` instead.",
            'instructions': "`AppendInstructions` option `instructions` can't come from a spec: block functions are Python functions, registered with `@context.instructions`. Build the capability in Python and pass it in `capabilities=` of `Agent.from_spec` or `Agent.from_file` instead.",
            'blocks': '`AppendInstructions` specs have no option `blocks`; they take `id`, `append_ids`, `signing_key`, `signing_key_env`, `on_store_error`, `store_timeout` and `windows`.',
        }
    )
    # The schema doesn't offer them either.
    assert {name: schema_problems(entry) for name, entry in entries.items()} == snapshot(
        {
            'verifier': [
                "$.capabilities[0]: {'AppendInstructions': {'id': 'context', 'verifier': {'mode': 'enforce'}}} matches 0 of the anyOf branches"
            ],
            'instructions': [
                "$.capabilities[0]: {'AppendInstructions': {'id': 'context', 'instructions': ['Be brief.']}} matches 0 of the anyOf branches"
            ],
            'blocks': [
                "$.capabilities[0]: {'AppendInstructions': {'id': 'context', 'blocks': []}} matches 0 of the anyOf branches"
            ],
        }
    )


PYTHON_ONLY: dict[str, object] = {'verifier': {'mode': 'enforce'}, 'instructions': ['Be brief.'], 'blocks': []}


def test_a_spec_value_of_the_wrong_kind_is_refused_when_the_spec_is_loaded():
    entries: dict[str, object] = {
        'id not a string': {'AppendInstructions': ['agent:memory']},
        'append_ids a string': {'AppendInstructions': {'id': 'context', 'append_ids': 'agent:memory'}},
        'append_ids item': {'AppendInstructions': {'id': 'context', 'append_ids': ['agent:memory', 7]}},
        'signing_key': {'AppendInstructions': {'id': 'context', 'signing_key': 1234}},
        'both keys': {
            'AppendInstructions': {'id': 'context', 'signing_key': 'one', 'signing_key_env': 'APPEND_SIGNING_KEY'}
        },
        'unset variable': {'AppendInstructions': {'id': 'context', 'signing_key_env': 'APPEND_UNSET_KEY'}},
        'windows': {'AppendInstructions': {'id': 'context', 'windows': 'sometimes'}},
        'windows prices': {'AppendInstructions': {'id': 'context', 'windows': {'input': 1, 'cache_read': 0.1}}},
        'windows retention': {
            'AppendInstructions': {
                'id': 'context',
                'windows': {'input': 1, 'cache_read': 0.1, 'cache_write': 1, 'retention_seconds': '1h'},
            }
        },
        'windows price': {
            'AppendInstructions': {'id': 'context', 'windows': {'input': 1, 'cache_read': -1, 'cache_write': 1}}
        },
    }
    assert {name: refusal(entry) for name, entry in entries.items()} == snapshot(
        {
            'id not a string': "`AppendInstructions` option `id` takes a string, not ['agent:memory'].",
            'append_ids a string': "`AppendInstructions` option `append_ids` takes a list of strings, not 'agent:memory'.",
            'append_ids item': '`AppendInstructions` option `append_ids[1]` takes a string, not 7.',
            'signing_key': '`AppendInstructions` option `signing_key` takes a string, not 1234.',
            'both keys': "`AppendInstructions` takes `signing_key` or `signing_key_env` from a spec, not both; `signing_key_env` names 'APPEND_SIGNING_KEY'.",
            'unset variable': "`AppendInstructions` option `signing_key_env` names the environment variable 'APPEND_UNSET_KEY', which is not set or is empty; set it to the signing key before loading the spec.",
            'windows': "`AppendInstructions` option `windows` takes 'price', 'keep' or a `CachePrices`, not 'sometimes'.",
            'windows prices': "`AppendInstructions` option `windows` takes `input`, `cache_read`, `cache_write` and optionally `retention_seconds`, not {'input': 1, 'cache_read': 0.1}.",
            'windows retention': "`AppendInstructions` option `windows.retention_seconds` takes a number, not '1h'.",
            'windows price': '`CachePrices.cache_read` takes a positive number, not -1.',
        }
    )
