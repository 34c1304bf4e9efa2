"""Setting up `AppendInstructions`: its options, its blocks, and the message each misuse is refused with."""

from __future__ import annotations

from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent
from pydantic_ai.exceptions import UserError

from pydantic_ai_append import AppendInstructions, instruction_records

from .conversation import ScriptedModel


@pytest.mark.parametrize(
    ('options', 'message'),
    [
        ({}, snapshot("`AppendInstructions` needs an `id`, such as `AppendInstructions(id='todos')`.")),
        ({'id': 'a:b'}, snapshot("`AppendInstructions` id 'a:b' cannot contain a colon; colons separate id segments.")),
        (
            {'id': 'x', 'defer_loading': True},
            snapshot(
                "`AppendInstructions` can't be loaded on demand (`defer_loading=True`): its blocks are the prefix of "
                'every request from the first.'
            ),
        ),
        (
            {'id': 'x', 'append_ids': 'agent:memory'},
            snapshot("`append_ids` takes a sequence of ids, not the string 'agent:memory'."),
        ),
        (
            {'id': 'x', 'append_ids': ['memory']},
            snapshot(
                "`append_ids` entry 'memory' is not an instruction id: ids start with one of 'agent', 'capability', "
                "'toolset', such as `capability:repo_context`."
            ),
        ),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str):
    with pytest.raises(UserError) as error:
        AppendInstructions(**options)  # pyright: ignore[reportArgumentType]
    assert str(error.value) == message


def test_blocks_without_run_context_sync_and_async():
    chat = ScriptedModel(inline=True)
    values = {'sync': 'one', 'async': 'two'}
    context = AppendInstructions(id='plain')

    @context.instructions
    def sync_block() -> str:
        return values['sync']

    @context.instructions(name='async_block')
    async def async_block() -> str:
        return values['async']

    agent = Agent(chat.model(), capabilities=[context])
    history = agent.run_sync('one').all_messages()
    values['async'] = 'three'
    agent.run_sync('two', message_history=history)
    assert chat.last.messages[-1] == snapshot("""\
system: <context id="capability:plain:async_block">
three
</context>\
""")
    assert 'capability:plain:sync_block' in (chat.last.instructions or '')


def test_bad_blocks_are_refused():
    context = AppendInstructions(id='todos')

    @context.instructions(name='state')
    def state() -> str:
        return ''

    with pytest.raises(UserError) as duplicate:
        context.instructions(name='state')(state)
    with pytest.raises(UserError) as colon:
        context.instructions(name='a:b')(state)
    with pytest.raises(UserError) as empty:
        context.instructions(name=' ')(state)
    with pytest.raises(UserError) as policy:
        context.instructions(name='other', on_change='replace')(state)  # pyright: ignore[reportArgumentType]
    assert [str(error.value) for error in (duplicate, colon, empty, policy)] == snapshot(
        [
            "Two blocks share the id 'capability:todos:state'; give each block of `AppendInstructions` 'todos' its own `name`.",
            "Block name 'a:b' cannot contain a colon; colons separate id segments.",
            "Block names must be non-empty; got ' ' on `AppendInstructions` 'todos'.",
            "Unknown `on_change` policy 'replace' for block 'other': use 'append' or 'rewrite'.",
        ]
    )


def test_a_block_must_return_text():
    context = AppendInstructions(id='todos')

    @context.instructions(name='count')
    def count() -> str:
        return 3  # pyright: ignore[reportReturnType]

    agent = Agent(ScriptedModel().model(), capabilities=[context])
    with pytest.raises(UserError) as error:
        agent.run_sync('hi')
    assert str(error.value) == snapshot(
        "Instruction block 'count' returned 3 (int); a block returns a `str`, or `None` to withdraw it."
    )


def test_one_append_capability_per_agent():
    agent = Agent(
        ScriptedModel().model(),
        capabilities=[AppendInstructions(id='one'), AppendInstructions(id='two')],
    )
    with pytest.raises(UserError) as error:
        agent.run_sync('hi')
    assert str(error.value) == snapshot(
        "An agent can have only one `AppendInstructions` capability, but 'one' and 'two' both handle this request: "
        'register all blocks on one, and route other sources through its `append_ids`.'
    )


def capability(**options: Any) -> AppendInstructions[None]:
    arguments: dict[str, Any] = {'id': 't', **options}
    return AppendInstructions(**arguments)


@pytest.mark.parametrize(
    ('options', 'register', 'message'),
    [
        pytest.param({'id': 42}, {}, '`id` takes a string, not 42', id='id'),
        pytest.param({'id': ''}, {}, 'needs an `id`', id='id-empty'),
        pytest.param({'append_ids': 42}, {}, 'takes a sequence of ids, not 42', id='append_ids'),
        pytest.param({'append_ids': [3]}, {}, 'entry 3 is neither', id='append_ids-entry'),
        pytest.param({'signing_key': 5}, {}, '`signing_key` takes a non-empty str or bytes, not 5', id='signing_key'),
        pytest.param({'signing_key': b''}, {}, "not b''", id='signing_key-empty'),
        pytest.param({'verifier': 'v'}, {}, '`verifier` takes a `WireVerifier`', id='verifier'),
        pytest.param({}, {'name': 3}, '`name` takes a string, not 3', id='name'),
        pytest.param({}, {'on_change': 'sometimes'}, "Unknown `on_change` policy 'sometimes'", id='on_change'),
        pytest.param({}, {'function': 42}, 'registers a function computing a block, not 42', id='function'),
    ],
)
def test_every_option_refuses_a_value_of_the_wrong_type_or_form(
    options: dict[str, Any], register: dict[str, Any], message: str
):
    with pytest.raises(UserError) as error:
        function = register.pop('function', lambda: 'a')
        capability(**options).instructions(**register)(function)
    assert message in str(error.value)


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


@pytest.mark.parametrize('mode', ['strict', 1, None])
def test_the_verifier_refuses_a_mode_it_doesnt_have(mode: Any):
    from pydantic_ai_append.guard import WireVerifier

    with pytest.raises(UserError) as error:
        WireVerifier(mode=mode)
    assert repr(mode) in str(error.value)


def test_options_set_after_construction_take_effect_on_the_next_request():
    opened: list[str] = []

    class Observer:
        def open_window(self) -> None:
            opened.append('window')

    context = AppendInstructions(id='todos')
    context.instructions(lambda: 'Write tests.', name='state')
    context.signing_key = 'set later'
    context.verifier = Observer()
    result = Agent(ScriptedModel().model(), capabilities=[context]).run_sync('Hello')
    history = result.all_messages()
    assert len(instruction_records(history, signing_key='set later', conversation_id=result.conversation_id)) == 1
    assert instruction_records(history, signing_key='another', conversation_id=result.conversation_id) == []
    assert opened == ['window']
