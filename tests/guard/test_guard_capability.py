"""The guard on an agent: what history processors and tool-list changes do to a request, with and without it.

The failure the guard exists for is shown on the wire, with real `openai` and `anthropic` clients talking to the
fake provider (recorded as cassettes): a model calls `query_db`; between turns a policy update removes
`query_db` from the agent's tools and a history processor drops the oldest 40% of history, which holds the call
but not its result. Without the guard the run's history keeps an orphaned tool result and the next request
declares no `query_db`; Pydantic AI's own repair then drops the orphaned result from that request, so the model
silently loses the answer the tool gave. With the guard, that request never goes out in that shape. The rest uses `FunctionModel`, since it is about
the agent loop, not the bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Literal, cast

import pytest
from inline_snapshot import snapshot
from logfire.testing import CaptureLogfire
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import AbstractCapability, ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition

from pydantic_ai_append import AppendInstructions
from pydantic_ai_append.guard import (
    ConsumedPrefixChangedWarning,
    InstructionsChangedWarning,
    OrphanedToolPairError,
    OrphanedToolPairWarning,
    PrefixGuard,
    RetiredToolReferencedWarning,
    ToolListChangedWarning,
    tool_pair_problems,
)
from pydantic_ai_append.guard._bytes import message_bytes
from pydantic_ai_append.guard._retired import retired_tool_message, retirement_notice
from pydantic_ai_append.testing import Api, WireCapture
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, anthropic_model, openai_chat_model

pytestmark = [pytest.mark.anyio]


def drop_oldest_40_percent(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages[int(len(messages) * 0.4) :]


class Counter:
    def __init__(self) -> None:
        self.runs = 0


def build_agent(
    model: Model, counter: Counter, *, with_query_db: bool, capabilities: list[AbstractCapability[None]]
) -> Agent[None, str]:
    agent = Agent(model, deps_type=type(None), instructions='Answer from the database.', capabilities=capabilities)
    if with_query_db:

        @agent.tool_plain
        def query_db(sql: str) -> int:
            """Run a read-only SQL query."""
            counter.runs += 1
            return 42

    return agent


async def policy_update_conversation(
    api: Api, guard: PrefixGuard[None] | None
) -> tuple[list[dict[str, Any]], list[ModelMessage], Counter]:
    """Run 1 calls `query_db`; before run 2 the tool is removed and a processor drops the oldest 40%."""
    capture = WireCapture()
    counter = Counter()
    script = [ToolCalls([('query_db', {'sql': 'select count(*) from users'})]), Text('42 users.'), Text('About 40.')]
    factory = openai_chat_model if api == 'openai-chat' else anthropic_model
    with FakeProvider(script=script) as server:
        async with capture.http_client() as http_client:
            model = factory(server.url, http_client=http_client)
            guarded: list[AbstractCapability[None]] = [guard] if guard is not None else []
            first = build_agent(model, counter, with_query_db=True, capabilities=guarded)
            history = (await first.run('How many users?')).all_messages()
            history = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))
            second = build_agent(
                model, counter, with_query_db=False, capabilities=[ProcessHistory(drop_oldest_40_percent), *guarded]
            )
            result = await second.run('And admins?', message_history=history)
    bodies = [json.loads(exchange.request_body) for exchange in capture.exchanges]
    return bodies, result.all_messages(), counter


def chat_shape(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The roles (with tool call ids) and the tool names of an OpenAI Chat request."""
    roles: list[str] = []
    for message in body['messages']:
        if message['role'] == 'tool':
            roles.append(f'tool result {message["tool_call_id"]}')
        elif message.get('tool_calls'):
            roles.append('assistant calls ' + ', '.join(call['id'] for call in message['tool_calls']))
        else:
            roles.append(message['role'])
    return roles, [tool['function']['name'] for tool in body.get('tools', [])]


def anthropic_shape(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The roles and content block kinds (with tool ids) and the tool names of an Anthropic request."""
    roles: list[str] = []
    for message in body['messages']:
        for block in message['content']:
            kind = block['type']
            ids = block.get('id') or block.get('tool_use_id')
            roles.append(f'{message["role"]} {kind}' + (f' {ids}' if ids else ''))
    return roles, [tool['name'] for tool in body.get('tools', [])]


@pytest.mark.vcr
async def test_without_the_guard_the_request_orphans_a_tool_result():
    bodies, history, _ = await policy_update_conversation('openai-chat', guard=None)
    assert len(bodies) == 3
    assert chat_shape(bodies[1]) == snapshot(
        (
            ['system', 'user', 'assistant calls call_fake_0_0', 'tool result call_fake_0_0'],
            ['query_db'],
        )
    )
    # History starts with the result of a call it no longer holds; the request declares no `query_db`, and the
    # result (the 42 the model answered from) is gone from it: Pydantic AI drops an orphaned result unsent.
    assert [problem.describe() for problem in tool_pair_problems(history)] == snapshot(
        ["the result of `query_db` call 'call_fake_0_0' at message 0, part 0 has no call before it"]
    )
    assert chat_shape(bodies[2]) == snapshot((['system', 'assistant', 'user'], []))


@pytest.mark.vcr
async def test_with_the_guard_the_orphaning_request_never_goes_out():
    guard = PrefixGuard[None]()
    with (
        pytest.warns(OrphanedToolPairWarning, match=r"Compacted in whole tool pairs, the cut moved: .*'call_fake_0_0'"),
        pytest.warns(RetiredToolReferencedWarning, match='History calls `query_db`, which left'),
    ):
        bodies, history, counter = await policy_update_conversation('openai-chat', guard)
    assert chat_shape(bodies[2]) == snapshot(
        (
            ['system', 'user', 'user'],
            ['query_db'],
        )
    )
    # The processor's trim is applied with its cut moved past the pair: the call and its result go together, with
    # the turn that answered from them, and a marker stands in their place. The tool ran once.
    assert tool_pair_problems(history) == []
    assert (len(history), counter.runs) == (2, 1)


@pytest.mark.vcr
async def test_with_the_guard_on_anthropic():
    guard = PrefixGuard[None]()
    with pytest.warns(OrphanedToolPairWarning), pytest.warns(RetiredToolReferencedWarning):
        bodies, _, _ = await policy_update_conversation('anthropic', guard)
    assert anthropic_shape(bodies[2]) == snapshot(
        (
            [
                'user text',
                'user text',
            ],
            ['query_db'],
        )
    )


# --- The agent loop, with a function model


def scripted(*turns: ModelResponse) -> FunctionModel:
    """A model that answers with `turns` in order, across runs."""
    remaining = list(turns)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return remaining.pop(0)

    return FunctionModel(answer)


def call(tool: str, call_id: str, **args: Any) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=call_id)])


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


async def test_observe_mode_warns_and_sends_as_it_is():
    counter = Counter()
    guard = PrefixGuard[None](mode='observe')
    model = scripted(call('query_db', 'c1', sql='x'), text('42.'), text('ok'))
    history = (await build_agent(model, counter, with_query_db=True, capabilities=[guard]).run('go')).all_messages()
    agent = build_agent(
        model, counter, with_query_db=False, capabilities=[ProcessHistory(drop_oldest_40_percent), guard]
    )
    with pytest.warns(OrphanedToolPairWarning, match=r'Sent anyway \(observe mode\)'):
        result = await agent.run('again', message_history=history)
    assert [problem.kind for problem in tool_pair_problems(result.all_messages())] == ['orphaned_result']


async def test_a_call_to_a_retired_tool_is_answered_without_running_it():
    counter = Counter()
    guard = PrefixGuard[None]()
    model = scripted(call('query_db', 'c1', sql='x'), text('42.'), call('query_db', 'c2', sql='y'), text('ok'))
    history = (await build_agent(model, counter, with_query_db=True, capabilities=[guard]).run('go')).all_messages()
    with pytest.warns(RetiredToolReferencedWarning):
        result = await build_agent(model, counter, with_query_db=False, capabilities=[guard]).run(
            'again', message_history=history
        )
    returns = [
        part.content for message in result.new_messages() for part in message.parts if isinstance(part, ToolReturnPart)
    ]
    assert (returns, counter.runs) == ([retired_tool_message('query_db')], 1)


async def test_the_model_is_told_once_at_the_tail_that_a_retired_tool_is_gone():
    sent: list[list[ModelMessage]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(list(messages))
        if len(sent) == 1:
            return call('query_db', 'c1', sql='x')
        return text('ok')

    counter = Counter()
    guard = PrefixGuard[None]()
    model = FunctionModel(answer)
    history = (await build_agent(model, counter, with_query_db=True, capabilities=[guard]).run('go')).all_messages()
    retired = build_agent(model, counter, with_query_db=False, capabilities=[guard])
    with pytest.warns(RetiredToolReferencedWarning):
        history = (await retired.run('again', message_history=history)).all_messages()
    with pytest.warns(RetiredToolReferencedWarning):
        await retired.run('and again', message_history=history)
    notice = retirement_notice('query_db')
    # Told at the end of the first request that declared it retired, and kept there: never told twice, and the
    # requests after send it where it was (the prefix is kept).
    told = [[str(p.content) for m in messages for p in m.parts if p.part_kind == 'user-prompt'] for messages in sent]
    assert told[2] == ['go', 'again', notice]
    assert told[3] == ['go', 'again', notice, 'and again']
    assert [message_bytes(m) for m in sent[3][: len(sent[2])]] == [message_bytes(m) for m in sent[2]]


async def test_a_dropped_consumed_message_is_kept_until_the_next_window():
    counter = Counter()
    # Dropping the first message is a compaction, which `on_defer='keep'` refuses.
    guard = PrefixGuard[None](on_defer='keep')
    model = scripted(text('Hello.'), text('Still here.'))
    history = (await build_agent(model, counter, with_query_db=False, capabilities=[guard]).run('hi')).all_messages()

    def drop_first(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[1:]

    agent = build_agent(model, counter, with_query_db=False, capabilities=[ProcessHistory(drop_first), guard])
    with pytest.warns(ConsumedPrefixChangedWarning, match=r'message 0 \(consumed\) would change'):
        result = await agent.run('again', message_history=history)
    assert len(result.all_messages()) == 4


async def test_a_result_dropped_from_new_messages_is_refused():
    counter = Counter()
    guard = PrefixGuard[None]()
    model = scripted(call('query_db', 'c1', sql='x'), text('42.'))

    def elide_tool_results(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [
            ModelRequest.user_text_prompt('(tool results elided)')
            if any(isinstance(part, ToolReturnPart) for part in message.parts)
            else message
            for message in messages
        ]

    agent = build_agent(model, counter, with_query_db=True, capabilities=[ProcessHistory(elide_tool_results), guard])
    with pytest.raises(OrphanedToolPairError, match="`query_db` call 'c1' at message 1, part 0 gets no result"):
        await agent.run('go')
    assert counter.runs == 1


async def test_tool_list_changes_within_a_run_are_warned_about():
    counter = Counter()
    steps: list[int] = []

    class Hide(AbstractCapability[None]):
        async def prepare_tools(self, ctx: RunContext[None], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
            steps.append(ctx.run_step)
            return tool_defs if ctx.run_step <= 1 else []

    model = scripted(call('query_db', 'c1', sql='x'), text('42.'))
    agent = build_agent(model, counter, with_query_db=True, capabilities=[Hide(), PrefixGuard[None](mode='observe')])
    with (
        pytest.warns(ToolListChangedWarning, match='removed `query_db`'),
        pytest.warns(RetiredToolReferencedWarning, match='Sent anyway'),
    ):
        await agent.run('go')


async def test_changed_instructions_are_warned_about_and_append_mode_keeps_them():
    counter = Counter()
    guard = PrefixGuard[None]()
    model = scripted(text('a'), text('b'), text('c'), text('d'))
    state = {'n': 0}

    def dynamic(ctx: RunContext[None]) -> str:
        return f'Turn {state["n"]}.'

    agent = build_agent(model, counter, with_query_db=False, capabilities=[guard])
    agent.instructions(dynamic)
    history = (await agent.run('one')).all_messages()
    state['n'] = 1
    with pytest.warns(InstructionsChangedWarning, match='The instructions changed within a conversation'):
        history = (await agent.run('two', message_history=history)).all_messages()

    context = AppendInstructions[None](id='turns')
    context.instructions(name='turn')(dynamic)
    appended = build_agent(model, counter, with_query_db=False, capabilities=[context, guard])
    history = (await appended.run('three')).all_messages()
    state['n'] = 2
    result = await appended.run('four', message_history=history)
    assert result.output == 'd'


@pytest.mark.parametrize('signing_key', [None, 'secret'])
def test_a_new_instruction_window_is_not_warned_about_with_or_without_signed_records(signing_key: str | None):
    # The guard recognises the baseline that opens a window by its kind, without the key it was signed with.
    deps = ['plan']
    context = AppendInstructions[list[str]](id='work', signing_key=signing_key)
    context.instructions(name='mode', on_change='rewrite')(lambda ctx: ctx.deps[0])
    context.instructions(name='todo')(lambda: 'write tests')
    agent = Agent(TestModel(), deps_type=list[str], capabilities=[context, PrefixGuard(mode='observe')])
    history = agent.run_sync('one', deps=deps).all_messages()
    deps[0] = 'build'  # a rewrite-mode block changed: the next request opens a new window
    result = agent.run_sync('two', deps=deps, message_history=history)
    assert [AppendInstructions.opens_window(m) for m in result.all_messages() if isinstance(m, ModelRequest)] == [
        True,
        True,
    ]


def test_an_unknown_mode_is_refused():
    with pytest.raises(UserError, match="Unknown `PrefixGuard` mode 'strict': use 'observe' or 'enforce'."):
        PrefixGuard[None](mode=cast('Any', 'strict'))
    with pytest.raises(UserError, match="Unknown `PrefixGuard` on_defer 'drop': use 'compact' or 'keep'."):
        PrefixGuard[None](on_defer=cast('Any', 'drop'))
    with pytest.raises(UserError, match="Unknown `PrefixGuard` repair 'run': use 'answer' or 'drop'."):
        PrefixGuard[None](repair=cast('Any', 'run'))


GUARD_KEYS = tuple(
    f'pydantic_ai_append.guard.{name}' for name in ('action', 'decision', 'mode', 'boundary', 'messages')
)


async def test_each_request_is_a_span_with_its_decision(capfire: CaptureLogfire):
    counter = Counter()
    guard = PrefixGuard[None]()
    model = scripted(call('query_db', 'c1', sql='x'), text('42.'), text('ok'))
    first = build_agent(model, counter, with_query_db=True, capabilities=[guard])
    first.instrument = True
    history = (await first.run('go')).all_messages()
    agent = build_agent(
        model, counter, with_query_db=True, capabilities=[ProcessHistory(drop_oldest_40_percent), guard]
    )
    agent.instrument = True
    with pytest.warns(OrphanedToolPairWarning):
        await agent.run('again', message_history=history)
    spans = [
        {key: span['attributes'][key] for key in GUARD_KEYS}
        for span in capfire.exporter.exported_spans_as_dict()
        if span['name'] == 'prefix_guard'
    ]
    assert spans == snapshot(
        [
            {
                'pydantic_ai_append.guard.action': 'pass',
                'pydantic_ai_append.guard.decision': 'patch',
                'pydantic_ai_append.guard.mode': 'enforce',
                'pydantic_ai_append.guard.boundary': 0,
                'pydantic_ai_append.guard.messages': 1,
            },
            {
                'pydantic_ai_append.guard.action': 'pass',
                'pydantic_ai_append.guard.decision': 'patch',
                'pydantic_ai_append.guard.mode': 'enforce',
                'pydantic_ai_append.guard.boundary': 2,
                'pydantic_ai_append.guard.messages': 3,
            },
            {
                'pydantic_ai_append.guard.action': 'compact',
                'pydantic_ai_append.guard.decision': 'compact',
                'pydantic_ai_append.guard.mode': 'enforce',
                'pydantic_ai_append.guard.boundary': 4,
                'pydantic_ai_append.guard.messages': 3,
            },
        ]
    )


def edit_first_prompt(messages: list[ModelMessage]) -> list[ModelMessage]:
    return [ModelRequest.user_text_prompt('hi, edited'), *messages[1:]]


def drop_first(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages[1:]


@pytest.mark.parametrize(
    ('mode', 'on_defer', 'processor', 'done'),
    [
        ('enforce', 'compact', edit_first_prompt, ('defer', 'defer')),
        ('enforce', 'keep', drop_first, ('defer', 'compact')),
        ('observe', 'compact', edit_first_prompt, ('pass', 'defer')),
        ('observe', 'compact', drop_first, ('pass', 'compact')),
    ],
)
async def test_the_span_says_what_the_guard_did_and_what_it_judged(
    capfire: CaptureLogfire,
    mode: Literal['enforce', 'observe'],
    on_defer: Literal['compact', 'keep'],
    processor: Callable[[list[ModelMessage]], list[ModelMessage]],
    done: tuple[str, str],
):
    guard = PrefixGuard[None](mode=mode, on_defer=on_defer)
    model = scripted(text('Hello.'), text('Still here.'))
    agent = build_agent(model, Counter(), with_query_db=False, capabilities=[guard])
    agent.instrument = True
    history = (await agent.run('hi')).all_messages()
    agent = build_agent(model, Counter(), with_query_db=False, capabilities=[ProcessHistory(processor), guard])
    agent.instrument = True
    # Observe mode sends a compaction as a new window, unwarned; every other case changes the consumed prefix.
    changed = mode == 'enforce' or done[1] == 'defer'
    with pytest.warns(ConsumedPrefixChangedWarning) if changed else nullcontext():
        await agent.run('again', message_history=history)
    spans = [span['attributes'] for span in capfire.exporter.exported_spans_as_dict() if span['name'] == 'prefix_guard']
    keys = ('action', 'decision')
    assert [tuple(span[f'pydantic_ai_append.guard.{key}'] for key in keys) for span in spans] == [
        ('pass', 'patch'),
        done,
    ]
    assert spans[-1]['logfire.msg'] == f'prefix_guard {done[0]}'


async def test_a_request_refused_for_a_pair_its_own_messages_break_says_abort(capfire: CaptureLogfire):
    model = scripted(call('query_db', 'c1', sql='x'), text('42.'))

    def elide_tool_results(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [
            ModelRequest.user_text_prompt('(elided)')
            if any(isinstance(part, ToolReturnPart) for part in message.parts)
            else message
            for message in messages
        ]

    processors: list[AbstractCapability[None]] = [ProcessHistory(elide_tool_results), PrefixGuard[None]()]
    agent = build_agent(model, Counter(), with_query_db=True, capabilities=processors)
    agent.instrument = True
    with pytest.raises(OrphanedToolPairError):
        await agent.run('go')
    spans = [span['attributes'] for span in capfire.exporter.exported_spans_as_dict() if span['name'] == 'prefix_guard']
    assert [span['pydantic_ai_append.guard.action'] for span in spans] == ['pass', 'abort']


def clear_old_results_in_place(messages: list[ModelMessage]) -> list[ModelMessage]:
    # As "clear old tool results" processors do: the very objects of the run's history are edited.
    for message in messages[:-1]:
        for part in message.parts:
            if isinstance(part, ToolReturnPart):
                cast('Any', part).content = '[cleared]'
    return messages


@pytest.mark.parametrize('on_defer', ['keep', 'compact'])
async def test_a_processor_clearing_consumed_results_in_place_compacts_or_is_undone(
    on_defer: Literal['keep', 'compact'],
):
    seen: list[list[str]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append([str(part.content) for m in messages for part in m.parts if isinstance(part, ToolReturnPart)])
        calls = sum(isinstance(message, ModelResponse) for message in messages)
        return call('query_db', f'c{calls}', sql=str(calls)) if calls < 2 else text('done')

    counter = Counter()
    agent = build_agent(
        FunctionModel(answer),
        counter,
        with_query_db=True,
        capabilities=[ProcessHistory(clear_old_results_in_place), PrefixGuard[None](on_defer=on_defer)],
    )
    if on_defer == 'compact':
        # Clearing old results is a compaction: applied as a new window, the pairs kept.
        result = await agent.run('go')
        assert seen == [[], ['42'], ['[cleared]', '42']]
        assert tool_pair_problems(result.all_messages()) == []
        return
    with pytest.warns(ConsumedPrefixChangedWarning, match='Refused, the consumed prefix kept'):
        result = await agent.run('go')
    # The model was sent every result as it was first sent, and the run's history holds them as they were.
    assert seen == [[], ['42'], ['42', '42']]
    assert [str(p.content) for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)] == [
        '42',
        '42',
    ]


async def test_a_tool_name_the_model_made_up_is_not_a_retired_tool():
    counter = Counter()
    model = scripted(call('no_such_tool', 'c1'), text('Sorry.'), text('ok'))
    agent = build_agent(model, counter, with_query_db=True, capabilities=[PrefixGuard[None]()])
    history = (await agent.run('go')).all_messages()
    # Pydantic AI answers the made-up call with a retry; nothing about it is retired, so nothing is warned about.
    assert (await agent.run('again', message_history=history)).output == 'ok'


def forgetting_model(counter_of_calls: list[int]) -> FunctionModel:
    """Answers from the `query_db` result it is sent, and calls `query_db` again whenever it doesn't see one."""

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        results = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart) and p.content == 42]
        if results:
            return text('42 users.')
        counter_of_calls.append(1)
        return call('query_db', f'c{len(counter_of_calls)}', sql='select count(*) from users')

    return FunctionModel(answer)


def drop_tool_results(messages: list[ModelMessage]) -> list[ModelMessage]:
    kept = [m for m in messages[:-1] if not any(isinstance(p, ToolReturnPart) for p in m.parts)]
    return [*kept, messages[-1]]


@pytest.mark.parametrize('guarded', [False, True])
async def test_no_tool_runs_twice_because_of_a_rewrite(guarded: bool):
    counter = Counter()
    model = forgetting_model([])
    guards: list[AbstractCapability[None]] = [PrefixGuard[None]()] if guarded else []
    history = (
        await build_agent(model, counter, with_query_db=True, capabilities=guards).run('How many?')
    ).all_messages()
    agent = build_agent(model, counter, with_query_db=True, capabilities=[ProcessHistory(drop_tool_results), *guards])
    if guarded:
        with pytest.warns(OrphanedToolPairWarning, match="call 'c1'"):
            await agent.run('Still?', message_history=history)
        assert counter.runs == 1
    else:
        # Without the guard the result is dropped, the model doesn't see it, and the query runs again.
        await agent.run('Still?', message_history=history)
        assert counter.runs == 2
