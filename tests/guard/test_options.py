"""`PrefixGuard` in agent specs: each form of a spec entry, what a spec can't carry, the JSON schema Pydantic AI
generates for it, and a spec-loaded guard at work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.agent.spec import AgentSpec
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelRequest
from pydantic_ai.models import Model

from pydantic_ai_append.guard import ConsumedPrefixChangedWarning, PrefixGuard
from pydantic_ai_append.guard._capability import PrefixGuardSpecOptions

from ..conversation import ScriptedModel
from ..json_schema import schema_errors


def from_spec(
    entry: object, model: Model | str = 'test', capabilities: Sequence[AbstractCapability[Any]] = ()
) -> Agent[None, str]:
    return Agent.from_spec(
        {'capabilities': [entry]}, custom_capability_types=[PrefixGuard], model=model, capabilities=capabilities
    )


def guard_of(agent: Agent[None, str]) -> PrefixGuard[Any]:
    [guard] = [each for each in agent.root_capability.capabilities if isinstance(each, PrefixGuard)]
    return guard


def schema_problems(entry: object) -> list[str]:
    return schema_errors({'capabilities': [entry]}, AgentSpec.model_json_schema_with_capabilities([PrefixGuard]))


@pytest.mark.parametrize(
    ('entry', 'expected'),
    [
        ('PrefixGuard', PrefixGuard[Any]()),
        ({'PrefixGuard': 'observe'}, PrefixGuard[Any]('observe')),
        ({'PrefixGuard': {'on_defer': 'compact'}}, PrefixGuard[Any](on_defer='compact')),
        ({'PrefixGuard': {'mode': 'observe', 'on_defer': 'compact'}}, PrefixGuard[Any]('observe', 'compact')),
    ],
    ids=['name alone', 'mode alone', 'on_defer', 'both options'],
)
def test_each_form_of_a_spec_entry_configures_what_it_says(entry: object, expected: PrefixGuard[Any]):
    assert guard_of(from_spec(entry)) == expected
    assert schema_problems(entry) == []


def test_the_options_as_one_argument_mean_the_same():
    # Pydantic AI passes a mapping of options as keyword arguments; called directly, `from_spec` takes it whole too.
    assert PrefixGuard.from_spec(PrefixGuardSpecOptions(on_defer='compact')) == PrefixGuard[Any](on_defer='compact')


def refusal(entry: object) -> str:
    with pytest.raises(ValueError) as raised:
        from_spec(entry)
    assert isinstance(raised.value.__cause__, UserError)
    return str(raised.value.__cause__)


def test_what_a_spec_cant_carry_or_doesnt_know_is_refused_naming_it():
    entries: dict[str, object] = {
        'verifier': {'PrefixGuard': {'mode': 'enforce', 'verifier': {'mode': 'observe'}}},
        'unknown option': {'PrefixGuard': {'strict': True}},
        'unknown mode': {'PrefixGuard': 'strict'},
        'not a mode': {'PrefixGuard': ['observe']},
        'unknown on_defer': {'PrefixGuard': {'on_defer': 'drop'}},
    }
    assert {name: refusal(entry) for name, entry in entries.items()} == snapshot(
        {
            'verifier': "`PrefixGuard` option `verifier` can't come from a spec: a `WireVerifier` is a Python object. Build the capability in Python and pass it in `capabilities=` of `Agent.from_spec` or `Agent.from_file` instead.",
            'unknown option': '`PrefixGuard` specs have no option `strict`; they take `mode`, `on_defer` and `repair`.',
            'unknown mode': "Unknown `PrefixGuard` mode 'strict': use 'observe' or 'enforce'.",
            'not a mode': "Unknown `PrefixGuard` mode ['observe']: use 'observe' or 'enforce'.",
            'unknown on_defer': "Unknown `PrefixGuard` on_defer 'drop': use 'compact' or 'keep'.",
        }
    )
    assert {name: schema_problems(entry) for name, entry in entries.items()} == snapshot(
        {
            'verifier': [
                "$.capabilities[0]: {'PrefixGuard': {'mode': 'enforce', 'verifier': {'mode': 'observe'}}} matches 0 of the anyOf branches"
            ],
            'unknown option': ["$.capabilities[0]: {'PrefixGuard': {'strict': True}} matches 0 of the anyOf branches"],
            'unknown mode': ["$.capabilities[0]: {'PrefixGuard': 'strict'} matches 0 of the anyOf branches"],
            'not a mode': ["$.capabilities[0]: {'PrefixGuard': ['observe']} matches 0 of the anyOf branches"],
            'unknown on_defer': [
                "$.capabilities[0]: {'PrefixGuard': {'on_defer': 'drop'}} matches 0 of the anyOf branches"
            ],
        }
    )


@pytest.mark.parametrize(
    ('entry', 'outcome', 'sent'),
    [
        (
            {'PrefixGuard': 'observe'},
            r'Sent anyway \(observe mode\)',
            ['user: hi, with a note', 'assistant: ok', 'user: again'],
        ),
        ('PrefixGuard', 'Refused, the consumed prefix kept', ['user: hi', 'assistant: ok', 'user: again']),
    ],
    ids=['observe', 'enforce'],
)
async def test_a_spec_loaded_guard_judges_requests(entry: object, outcome: str, sent: list[str]):
    chat = ScriptedModel()
    history = (await from_spec(entry, model=chat.model()).run('hi')).all_messages()

    def annotate_first(messages: list[ModelMessage]) -> list[ModelMessage]:
        # An edit of a consumed message, not a compaction: the guard refuses it in enforce mode.
        return [ModelRequest.user_text_prompt('hi, with a note'), *messages[1:]]

    agent = from_spec(entry, model=chat.model(), capabilities=[ProcessHistory(annotate_first)])
    with pytest.warns(ConsumedPrefixChangedWarning, match=rf'{outcome}: message 0 \(consumed\) would change'):
        await agent.run('again', message_history=history)
    assert chat.last.messages == sent


pytestmark = [pytest.mark.anyio]


@pytest.mark.parametrize(
    ('build', 'message'),
    [
        pytest.param({'mode': 'strict'}, "Unknown `PrefixGuard` mode 'strict'", id='guard-mode'),
        pytest.param({'on_defer': 3}, 'Unknown `PrefixGuard` on_defer 3', id='guard-on_defer'),
        pytest.param({'repair': None}, 'Unknown `PrefixGuard` repair None', id='guard-repair'),
        pytest.param({'verifier': 'v'}, '`PrefixGuard` option `verifier` takes a `WireVerifier`', id='guard-verifier'),
    ],
)
def test_every_guard_option_refuses_a_value_of_the_wrong_type_or_form(build: dict[str, Any], message: str):
    from pydantic_ai_append.guard import PrefixGuard

    with pytest.raises(UserError) as error:
        PrefixGuard[None](**build)
    assert message in str(error.value)
