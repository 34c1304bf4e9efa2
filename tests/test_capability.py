"""`AppendInstructions` itself (`_capability`): its options, its blocks, the message each misuse is refused with, and
its hooks among other capabilities'.

Setting up `AppendInstructions`: its options, its blocks, and the message each misuse is refused with.

`AppendInstructions` with what it composes with: `FallbackModel` and `ModelFallback`, whose members each get
their own path's wording, history processors, and other capabilities' hooks that copy or clear messages.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, CapabilityOrdering
from pydantic_ai.exceptions import ModelHTTPError, UserError
from pydantic_ai.messages import CompactionPart, ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.models.concurrency import ConcurrencyLimitedModel
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel

from pydantic_ai_append import AppendInstructions, instruction_records

from .conversation import ScriptedModel
from .todo_agent import Deps, make_agent


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


def test_each_fallback_model_member_gets_the_changes_on_its_own_path():
    wrapped_path, inline_path = ScriptedModel(), ScriptedModel(inline=True)
    failing = {'wrapped': False}

    def first_fails() -> None:
        if failing['wrapped']:
            raise ModelHTTPError(status_code=500, model_name='scripted')

    wrapped_path.on_request = first_fails
    agent = make_agent(FallbackModel(wrapped_path.model(), inline_path.model()))
    history = agent.run_sync('one', deps=Deps(todos=['a'])).all_messages()
    history = agent.run_sync('two', deps=Deps(), message_history=history).all_messages()
    failing['wrapped'] = True
    agent.run_sync('three', deps=Deps(), message_history=history)
    assert wrapped_path.seen[1].messages[-1] == snapshot("""\
user: <system><context id="capability:todos:state" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context></system>\
""")
    assert inline_path.last.messages[-3] == snapshot("""\
system: <context id="capability:todos:state" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context>\
""")
    assert inline_path.last.instructions == wrapped_path.seen[0].instructions


def test_every_change_of_a_request_reaches_the_serving_member():
    wrapped_path, inline_path = ScriptedModel(), ScriptedModel(inline=True)

    def always_fails() -> None:
        raise ModelHTTPError(status_code=500, model_name='scripted')

    wrapped_path.on_request = always_fails
    agent = make_agent(FallbackModel(wrapped_path.model(), inline_path.model()))
    history = agent.run_sync('one', deps=Deps(todos=['a'], memory='m')).all_messages()
    agent.run_sync('two', deps=Deps(), message_history=history)
    assert inline_path.last.messages[-2:] == snapshot(
        [
            """\
system: <context id="capability:todos:state" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context>\
""",
            """\
system: <context id="capability:todos:memory" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context>\
""",
        ]
    )


def concurrency_limited(model: Model) -> Model:
    return ConcurrencyLimitedModel(model, limiter=2)


@pytest.mark.parametrize('wrap', [concurrency_limited, WrapperModel])
def test_a_fallback_model_inside_a_wrapper_model_gets_each_members_path(wrap: Callable[[Model], Model]):
    # A wrapper forwards `profile` to the `FallbackModel`, which has none of its own: each member is asked instead.
    wrapped_path, inline_path = ScriptedModel(), ScriptedModel(inline=True)
    agent = make_agent(wrap(FallbackModel(wrapped_path.model(), inline_path.model())))
    history = agent.run_sync('one', deps=Deps(todos=['a'])).all_messages()
    agent.run_sync('two', deps=Deps(todos=['b']), message_history=history)
    assert wrapped_path.last.messages[-2:] == snapshot(
        [
            'user: two',
            """\
user: <system><context id="capability:todos:state">
- [ ] b
</context></system>\
""",
        ]
    )


def test_the_model_fallback_capability_sets_up_the_model_that_serves():
    try:
        from pydantic_ai.capabilities import ModelFallback  # pyright: ignore[reportAttributeAccessIssue]
    except ImportError:
        pytest.skip('this release has no per-attempt model fallback')
    inline_path, wrapped_path = ScriptedModel(inline=True), ScriptedModel()
    failing = {'inline': False}

    def inline_fails() -> None:
        if failing['inline']:
            raise ModelHTTPError(status_code=500, model_name='scripted')

    inline_path.on_request = inline_fails
    agent = make_agent(inline_path.model())
    agent = Agent(
        inline_path.model(),
        deps_type=Deps,
        capabilities=[*agent.root_capability.capabilities, ModelFallback(wrapped_path.model())],
    )
    history = agent.run_sync('one', deps=Deps(todos=['a'])).all_messages()
    failing['inline'] = True
    agent.run_sync('two', deps=Deps(), message_history=history)
    assert wrapped_path.last.messages[-1] == snapshot("""\
user: <system><context id="capability:todos:state" withdrawn="true">
This context no longer applies. The withdrawal stays in effect until a later <context> element with the same id replaces it.
</context></system>\
""")
    assert wrapped_path.last.settings.get('framing_announcement') == 'always'


def test_records_reach_history_when_a_hook_copies_the_request():
    from dataclasses import replace as copy_of

    from pydantic_ai.capabilities import AbstractCapability

    class CopyRequest(AbstractCapability[object]):
        async def before_model_request(
            self, ctx: RunContext[object], request_context: ModelRequestContext
        ) -> ModelRequestContext:
            request_context.messages = [*request_context.messages[:-1], copy_of(request_context.messages[-1])]
            return request_context

    chat = ScriptedModel()
    context = AppendInstructions(id='context')
    value = ['one']
    context.instructions(name='block')(lambda: value[0])
    agent = Agent(chat.model(), capabilities=[CopyRequest(), context])
    history = agent.run_sync('hi').all_messages()
    value[0] = 'two'
    history = agent.run_sync('again', message_history=history).all_messages()
    assert [type(record).__name__ for record in instruction_records(history)] == snapshot(
        ['InstructionBaselinePart', 'InstructionDeltaPart']
    )
    assert chat.last.messages[-1] == snapshot("""\
user: <system><context id="capability:context:block">
two
</context></system>\
""")


def test_compaction_before_any_window():
    chat = ScriptedModel(script=[ModelResponse(parts=[CompactionPart(content='summary'), TextPart('ok')])])
    history = Agent(chat.model()).run_sync('one').all_messages()
    history = make_agent(chat).run_sync('two', deps=Deps(todos=['a']), message_history=history).all_messages()
    assert [type(record).__name__ for record in instruction_records(history)] == snapshot(['InstructionBaselinePart'])


def test_records_need_a_request_in_history_to_persist():
    from pydantic_ai.capabilities import AbstractCapability

    class ForgetHistory(AbstractCapability[object]):
        async def before_model_request(
            self, ctx: RunContext[object], request_context: ModelRequestContext
        ) -> ModelRequestContext:
            ctx.messages.clear()
            return request_context

    chat = ScriptedModel()
    context = AppendInstructions(id='context')
    context.instructions(name='block')(lambda: 'one')
    result = Agent(chat.model(), capabilities=[ForgetHistory(), context]).run_sync('hi')
    assert 'capability:context:block' in (chat.last.instructions or '')
    assert instruction_records(result.all_messages()) == snapshot([])


def test_history_processors_run_first_wherever_they_are_listed():
    from pydantic_ai.capabilities import ProcessHistory

    chat = ScriptedModel()
    context = AppendInstructions(id='context')
    value = ['one']
    context.instructions(name='block')(lambda: value[0])

    def keep(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages

    # Listed after the plugin, a processor would otherwise write the outgoing messages, without records, to history.
    agent = Agent(chat.model(), capabilities=[context, ProcessHistory[object](keep)])
    history = agent.run_sync('hi').all_messages()
    value[0] = 'two'
    history = agent.run_sync('again', message_history=history).all_messages()
    assert [type(record).__name__ for record in instruction_records(history)] == snapshot(
        ['InstructionBaselinePart', 'InstructionDeltaPart']
    )
    assert chat.last.instructions == chat.seen[0].instructions


@dataclass
class Reminder(AbstractCapability[object]):
    """Ends every request with a request-only message: what a reminder capability sends, never stored."""

    def get_ordering(self) -> CapabilityOrdering:
        return CapabilityOrdering(position=self.position)  # pyright: ignore[reportArgumentType]

    position: str = 'outermost'

    async def before_model_request(
        self, ctx: RunContext[object], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        reminder = ModelRequest(parts=[UserPromptPart('Reminder: be brief.')])
        request_context.messages = [*request_context.messages, reminder]
        return request_context


@pytest.mark.parametrize('position', ['outermost', 'innermost'])
@pytest.mark.parametrize('listed', ['before', 'after'])
def test_a_request_only_message_at_the_end_moves_nothing(listed: str, position: str):
    chat = ScriptedModel(script=[[('tick', {})], 'done', 'ok'])
    value = ['a']
    context = AppendInstructions(id='todos')
    context.instructions(name='state')(lambda: value[0])
    reminder = Reminder(position=position)
    capabilities: list[AbstractCapability[object]] = [reminder, context] if listed == 'before' else [context, reminder]
    agent = Agent(chat.model(), capabilities=capabilities)

    @agent.tool_plain
    def tick() -> str:  # pyright: ignore[reportUnusedFunction]
        """Tick the item off."""
        value[0] = 'b'
        return 'ticked'

    history = agent.run_sync('one').all_messages()
    value[0] = 'c'
    agent.run_sync('two', message_history=history)
    sent = [[line for line in seen.messages if 'Reminder' not in line] for seen in chat.seen]
    # Every request repeats the one before it, the instructions included, and the changes sit in stored requests.
    assert all(later[: len(earlier)] == earlier for earlier, later in itertools.pairwise(sent))
    assert len({seen.instructions for seen in chat.seen}) == 1
    assert [line.split('\n')[0] for line in sent[-1]] == snapshot(
        [
            'user: one',
            'call tick: {}',
            'tool-return tick: ticked',
            'user: <system><context id="capability:todos:state">',
            'assistant: done',
            'user: two',
            'user: <system><context id="capability:todos:state">',
        ]
    )
