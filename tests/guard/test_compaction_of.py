"""A compaction the user installed, told from other rewrites and applied in whole pairs (`_compaction_of`).

Summarizing history processors under `PrefixGuard(on_defer='compact')`: applied as whole-pair compaction.

A processor that replaces old turns with a summary (Pydantic AI's documented pattern: summarize the older
messages, return the summary and the recent ones) changes the consumed prefix, like one that trims. The guard
applies it as a compaction: the cut where the kept messages start moves earlier to a whole-pair boundary, the
summary is kept after the marker, and a new window opens. The agent tests show it through `Agent.run`; the
properties check the cut on the pure functions for any history, since no agent conversation reaches every shape.

A compaction the user writes, through `PrefixGuard` with default options: history processors that keep the first
message and the last N, or only the last N, whatever that splits.

The same 32-run conversation as the harness strategies get (`tests/harness/test_harness_compaction.py`), with and
without the guard. The processors cut by message count alone, so their cut often falls between a tool call and its
result; the guard moves it to the nearest whole-pair cut, warns once for each such cut, and never sends either half
alone.
"""

from __future__ import annotations

import itertools
import json
import warnings
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import AppendInstructions, InstructionBaselinePart, InstructionDeltaPart, instruction_records
from pydantic_ai_append.guard import (
    ConsumedHistory,
    ConsumedPrefixChangedWarning,
    OrphanedToolPairWarning,
    PrefixGuard,
    PrefixGuardWarning,
    WireVerifier,
    compact,
    decide_rewrite,
    tool_pair_problems,
)
from pydantic_ai_append.guard._compaction import elided_count, elision_marker, whole_pair_cut
from pydantic_ai_append.guard._pairing import tool_pairs
from pydantic_ai_append.testing import Api, WireCapture
from pydantic_ai_append.testing.fake_provider import FakeProvider, Text, ToolCalls, openai_chat_model
from tests.compaction_scenario import (
    RUNS,
    WIRE_RUNS,
    broken_pairs,
    converse,
    converse_on_the_wire,
    stale_deliveries,
    unpaired_on_the_wire,
)

from .test_compaction import conversation
from .test_decision import histories

pytestmark = [pytest.mark.anyio]

SUMMARY = 'Summary of earlier turns: the user asked how many users there are (42).'


def summarize_all_but_last(messages: list[ModelMessage]) -> list[ModelMessage]:
    """Pydantic AI's documented pattern, without the model call: a summary, then the latest message."""
    if len(messages) <= 5:
        return messages
    return [ModelRequest(parts=[UserPromptPart(SUMMARY)]), messages[-1]]


def texts(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for message in messages
        for part in message.parts
        if isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str)
    ]


def tool_ids(messages: list[ModelMessage]) -> tuple[list[str], list[tuple[str, Any]]]:
    """The ids of the calls, and the ids and contents of the results, in what the model received."""
    calls = [part.tool_call_id for m in messages for part in m.parts if isinstance(part, ToolCallPart)]
    results = [
        (part.tool_call_id, part.content) for m in messages for part in m.parts if isinstance(part, ToolReturnPart)
    ]
    return calls, results


@dataclass
class WindowsOpened:
    """Counts the windows the guard says requests open, as a `WireVerifier` is told them."""

    count: int = 0

    def open_window(self) -> None:
        self.count += 1


async def test_a_summarizing_processor_is_applied_as_whole_pair_compaction():
    received: list[tuple[str | None, list[ModelMessage]]] = []
    replies = [
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'users'}, tool_call_id='c1')]),
        ModelResponse(parts=[TextPart('42 users.')]),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'admins'}, tool_call_id='c2')]),
        ModelResponse(parts=[TextPart('7 admins.')]),
        ModelResponse(parts=[TextPart('Bye.')]),
    ]

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append((info.instructions, list(messages)))
        return replies.pop(0)

    windows = WindowsOpened()
    state = {'plan': 'count users'}
    context = AppendInstructions[None](id='plan')

    @context.instructions(name='state')
    def plan(ctx: RunContext[None]) -> str:
        return state['plan']

    counts = {'users': 42, 'admins': 7}

    def query_db(sql: str) -> int:
        """Run a query."""
        return counts[sql]

    agent = Agent(
        FunctionModel(answer),
        deps_type=type(None),
        tools=[query_db],
        capabilities=[
            ProcessHistory(summarize_all_but_last),
            PrefixGuard[None](on_defer='compact', verifier=windows),
            context,
        ],
    )
    history = (await agent.run('How many users?')).all_messages()
    state['plan'] = 'count admins'
    # The second request of this run is the result of `c2`: the processor keeps it and summarizes its call away.
    with pytest.warns(OrphanedToolPairWarning, match=r"Compacted in whole tool pairs, the cut moved: .*call 'c2'"):
        result = await agent.run('And admins?', message_history=history)
    instructions, sent = received[3]
    # The cut moved earlier, to the prompt that made the call: the pair `c2` is kept whole, the summary before it, and
    # with the prompt the plan's change it was sent with.
    assert texts(sent) == [
        elision_marker(len(history)),
        SUMMARY,
        'And admins?',
        '<system><context id="capability:plan:state">\ncount admins\n</context></system>',
    ]
    assert tool_ids(sent) == (['c2'], [('c2', 7)])
    # Pydantic AI merges the summary's request with the prompt's; without the summary there would be three more.
    assert len(sent) == 3 and len(received[2][1]) == len(history) + 1
    # The instruction window outlives the compaction: the prefix is the one sent from the start, its baseline kept.
    assert instructions == received[0][0] and instructions is not None and 'count users' in instructions
    assert tool_pair_problems(result.all_messages()) == [] and elided_count(result.all_messages()) == len(history)
    records = [type(record) for record in instruction_records(result.all_messages())]
    assert records == [InstructionBaselinePart, InstructionDeltaPart] and windows.count == 1

    # The next run continues the window (the processor leaves the shorter history alone): the prefix is kept,
    # with no warning, and the plan's change is delivered after it.
    state['plan'] = 'say bye'
    final = await agent.run('Thanks.', message_history=result.all_messages())
    last_instructions, last_sent = received[4]
    assert last_instructions == instructions
    assert texts(last_sent)[: len(texts(sent))] == texts(sent) and tool_ids(last_sent) == tool_ids(sent)
    assert 'say bye' in texts(last_sent)[-1]
    assert tool_pair_problems(final.all_messages()) == [] and windows.count == 1


async def test_a_summary_with_no_whole_pair_cut_before_it_keeps_the_consumed_prefix():
    # Inside the first turn's tool loop the only whole-pair boundary is the start: nothing can be replaced.
    replies = [
        ModelResponse(parts=[ToolCallPart('query_any', {'sql': 'a'}, tool_call_id=f'c{n}')]) for n in range(3)
    ] + [ModelResponse(parts=[TextPart('done')])]
    agent = Agent(
        FunctionModel(lambda messages, info: replies.pop(0)),
        deps_type=type(None),
        tools=[query_any],
        capabilities=[ProcessHistory(summarize_all_but_last), PrefixGuard[None](on_defer='compact')],
    )
    with pytest.warns(OrphanedToolPairWarning, match=r'Refused, the consumed prefix kept: .*\(the rule: '):
        result = await agent.run('Query three times.')
    assert elided_count(result.all_messages()) is None and len(result.all_messages()) == 8
    assert tool_pair_problems(result.all_messages()) == []


def query_any(sql: str) -> int:
    """Run a query."""
    return 1


async def test_a_processor_that_keeps_the_first_message_and_the_last_is_a_compaction():
    # A cut from the middle: the marker stands where the elided messages were, after the first message.
    replies = [ModelResponse(parts=[TextPart(str(n))]) for n in range(4)]
    guard = PrefixGuard[None](on_defer='compact')
    agent = Agent(FunctionModel(lambda messages, info: replies.pop(0)), deps_type=type(None), capabilities=[guard])
    history: list[ModelMessage] = []
    for prompt in ['one', 'two', 'three']:
        history = (await agent.run(prompt, message_history=history)).all_messages()

    def keep_first_and_last(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [messages[0], messages[-1]]

    middle = Agent(
        FunctionModel(lambda messages, info: replies.pop(0)),
        deps_type=type(None),
        capabilities=[ProcessHistory(keep_first_and_last), guard],
    )
    result = await middle.run('four', message_history=history)
    # The reply before the kept prompt is kept too, so the two prompts stay two requests.
    assert texts(result.all_messages()) == ['one', elision_marker(4), '2', 'four', '3']


async def test_a_summary_that_starts_with_a_response_gets_a_request_for_the_marker():
    # A summarizing model's reply, as `summary.new_messages()` of a summarizer agent gives it.
    replies = [ModelResponse(parts=[TextPart(str(n))]) for n in range(4)]
    received: list[list[ModelMessage]] = []
    prompts = ['one', 'two', 'three', 'four']

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received.append(list(messages))
        return replies.pop(0)

    def summarize(messages: list[ModelMessage]) -> list[ModelMessage]:
        if len(messages) <= 5:
            return messages
        return [ModelResponse(parts=[TextPart('We counted to two.')]), messages[-1]]

    agent = Agent(
        FunctionModel(answer),
        deps_type=type(None),
        capabilities=[ProcessHistory(summarize), PrefixGuard[None](on_defer='compact')],
    )
    history: list[ModelMessage] = []
    for prompt in prompts[:-1]:
        history = (await agent.run(prompt, message_history=history)).all_messages()
    await agent.run(prompts[-1], message_history=history)
    assert [type(message).__name__ for message in received[-1]] == ['ModelRequest', 'ModelResponse', 'ModelRequest']
    assert texts(received[-1])[1:] == ['We counted to two.', 'four']
    assert elided_count(received[-1]) == len(history)


# --- On the wire


def chat_pairs(body: bytes) -> tuple[list[str], list[tuple[str, str]]]:
    """The ids of the assistant's tool calls, and the ids and contents of the tool messages, in an OpenAI Chat body.

    Read from the JSON as the provider reads it, not through this package's code.
    """
    messages: list[dict[str, Any]] = json.loads(body)['messages']
    tool_calls: list[list[dict[str, Any]]] = [message.get('tool_calls') or [] for message in messages]
    calls: list[str] = [call['id'] for made in tool_calls for call in made]
    results = [(message['tool_call_id'], message['content']) for message in messages if message['role'] == 'tool']
    return calls, results


@pytest.mark.vcr
async def test_on_the_wire_the_summary_goes_out_with_every_call_answered():
    verifier = WireVerifier(mode='enforce')
    capture = WireCapture()
    script = [
        ToolCalls([('query_db', {'sql': 'users'})]),
        Text('42 users.'),
        ToolCalls([('query_db', {'sql': 'admins'})]),
        Text('7 admins.'),
    ]

    def query_db(sql: str) -> int:
        """Run a query."""
        return {'users': 42, 'admins': 7}[sql]

    guard = PrefixGuard[None](on_defer='compact', verifier=verifier)
    with FakeProvider(script=script) as server:
        async with capture.http_client(transport=verifier.transport()) as http_client:
            agent = Agent(
                openai_chat_model(server.url, http_client=http_client),
                deps_type=type(None),
                tools=[query_db],
                capabilities=[ProcessHistory(summarize_all_but_last), guard],
            )
            history = (await agent.run('How many users?')).all_messages()
            with pytest.warns(OrphanedToolPairWarning):
                result = await agent.run('And admins?', message_history=history)
    bodies = [exchange.request_body for exchange in capture.exchanges]
    compacted = json.loads(bodies[3])['messages']
    before = json.loads(bodies[2])['messages']
    assert [message['role'] for message in compacted] == ['user', 'user', 'user', 'assistant', 'tool']
    assert [message['content'] for message in compacted[:3]] == [elision_marker(len(history)), SUMMARY, 'And admins?']
    # Every call on the wire has its result, with the tool's own value (not one made up for a dropped result).
    call_ids, results = chat_pairs(bodies[3])
    assert len(call_ids) == 1 and results == [(call_ids[0], '7')]
    # Negative control: the request before carried the first pair, which the summary replaced; without it, this
    # request would have sent those messages and the new pair.
    assert len(chat_pairs(bodies[2])[0]) == 1 and chat_pairs(bodies[2])[0] != call_ids
    assert len(compacted) < len(before) + 2
    assert verifier.divergences == [] and result.output == '7 admins.'


# --- Properties of the cut, for any history


@given(st.data())
def test_a_summarized_compaction_never_separates_a_tool_call_from_its_result(data: st.DataObject):
    history = data.draw(histories())
    at = data.draw(st.integers(0, len(history)))
    summary = [ModelRequest(parts=[UserPromptPart('summary')])]
    compacted = compact(history, keep_from=at, summary=summary)
    cut = whole_pair_cut(history, at, earlier=True)
    if compacted == history:
        assert cut in (None, 0)
        return
    assert cut is not None and 0 < cut <= at
    # What is kept is the marker and the summary, in the request the cut starts at, then the history after it.
    first, kept = compacted[0], history[cut]
    assert isinstance(first, ModelRequest) and isinstance(kept, ModelRequest)
    assert first.parts[1:] == [*summary[0].parts, *kept.parts] and compacted[1:] == history[cut + 1 :]
    # Every pair is on one side of the cut.
    assert all((call.message_index >= cut) == (result.message_index >= cut) for call, result in tool_pairs(history))
    assert tool_pair_problems(compacted) == []
    assert elided_count(compacted) == cut


@given(st.data())
def test_the_earlier_cut_is_the_last_whole_pair_boundary_before_the_position(data: st.DataObject):
    history = data.draw(histories())
    at = data.draw(st.integers(0, len(history)))
    earlier = whole_pair_cut(history, at, earlier=True)
    later = whole_pair_cut(history, at)
    # Every boundary is where no pair straddles; the earlier and later cuts bracket `at` with none between.
    boundaries = [index for index in range(len(history)) if whole_pair_cut(history, index) == index]
    for index in boundaries:
        assert all((c.message_index >= index) == (r.message_index >= index) for c, r in tool_pairs(history))
    assert earlier == max((index for index in boundaries if index <= at), default=None)
    assert later == min((index for index in boundaries if index >= at), default=None)


async def test_a_rewrite_that_adds_before_the_whole_history_is_refused():
    replies = [ModelResponse(parts=[TextPart(str(n))]) for n in range(2)]
    guard = PrefixGuard[None](on_defer='compact')
    plain = Agent(FunctionModel(lambda messages, info: replies.pop(0)), deps_type=type(None), capabilities=[guard])
    history = (await plain.run('one')).all_messages()

    def prepend(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [ModelRequest(parts=[UserPromptPart('A note.')]), *messages]

    agent = Agent(
        FunctionModel(lambda messages, info: replies.pop(0)),
        deps_type=type(None),
        capabilities=[ProcessHistory(prepend), guard],
    )
    # It replaces nothing: the consumed history is sent as it was, without the note.
    with pytest.warns(ConsumedPrefixChangedWarning, match='Refused, the consumed prefix kept'):
        result = await agent.run('two', message_history=history)
    assert texts(result.all_messages()) == ['one', '0', 'two', '1']


async def test_a_rewrite_that_ends_with_an_old_message_keeps_no_suffix_and_is_refused():
    guard = PrefixGuard[None](on_defer='compact')
    model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('0')]))
    history = (await Agent(model, deps_type=type(None), capabilities=[guard]).run('one')).all_messages()

    def summarize_into_the_first(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [ModelRequest(parts=[UserPromptPart('A summary.')]), messages[0]]

    agent = Agent(model, deps_type=type(None), capabilities=[ProcessHistory(summarize_into_the_first), guard])
    # It drops the step's new request as well, which no compaction can give back: refused, and the run fails.
    with pytest.warns(ConsumedPrefixChangedWarning), pytest.raises(UserError, match='must end with a `ModelRequest`'):
        await agent.run('two', message_history=history)


def no_consecutive_requests(history: list[ModelMessage]) -> bool:
    return not any(isinstance(a, ModelRequest) and isinstance(b, ModelRequest) for a, b in itertools.pairwise(history))


def finished(history: list[ModelMessage]) -> bool:
    last = history[-1]
    return isinstance(last, ModelResponse) and not any(isinstance(part, ToolCallPart) for part in last.parts)


@settings(max_examples=40)
@given(st.data())
def test_through_the_guard_a_summary_at_any_cut_never_separates_a_pair(data: st.DataObject):
    # Pydantic AI merges consecutive requests before processors see them but not in the history the guard is given,
    # so with those a processor's rewrite never matches what was consumed (a separate defect): left out here.
    history = data.draw(histories(retries=False).filter(finished).filter(no_consecutive_requests))
    at = data.draw(st.integers(1, len(history)))
    # What the processor is given: Pydantic AI merges consecutive requests first, so `at` indexes these.
    given_to_processor: list[ModelMessage] = []

    def summarize_before(messages: list[ModelMessage]) -> list[ModelMessage]:
        given_to_processor[:] = messages
        return [ModelRequest(parts=[UserPromptPart(SUMMARY)]), *messages[min(at, len(messages) - 1) :]]

    agent = Agent(
        FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart('ok')])),
        capabilities=[ProcessHistory(summarize_before), PrefixGuard(on_defer='compact')],
    )
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', PrefixGuardWarning)
        sent = agent.run_sync('next', message_history=history).all_messages()[:-1]
    assert tool_pair_problems(sent, sending=True) == []
    full = given_to_processor
    cut = whole_pair_cut(full, min(at, len(full) - 1), earlier=True)
    if elided_count(sent) is None:
        # Refused: no cut at or before the summary's keeps every pair, so the consumed history went out as it was.
        event('refused')
        assert cut in (None, 0)
        assert texts(sent) == texts(full)
        return
    event('compacted')
    # Where the summary splits no pair it is applied as it is; where it does, its cut is moved earlier, to the last
    # whole-pair boundary before it.
    kept_from = elided_count(sent)
    assert kept_from is not None and kept_from in (min(at, len(full) - 1), cut) and kept_from > 0
    # The summary's request is joined to the first kept message if that is a request, as Pydantic AI joins them.
    assert len(sent) == len(full) - kept_from + (not isinstance(full[kept_from], ModelRequest))
    assert texts(sent) == [elision_marker(kept_from), SUMMARY, *texts(full[kept_from:])]
    assert all((c.message_index >= kept_from) == (r.message_index >= kept_from) for c, r in tool_pairs(full))


def keep_first_and_last(count: int):
    def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [messages[0], *messages[-count:]] if len(messages) > count + 1 else messages

    return processor


def keep_last(count: int):
    def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-count:] if len(messages) > count else messages

    return processor


@pytest.mark.parametrize(
    ('processor', 'splits'),
    [(keep_first_and_last(5), True), (keep_first_and_last(6), False), (keep_last(5), True)],
    ids=['first and last 5', 'first and last 6', 'last 5'],
)
def test_a_processor_cutting_by_count_is_applied_in_whole_pairs(processor: object, splits: bool):
    alone = converse(ProcessHistory(processor), guarded=False)  # pyright: ignore[reportArgumentType]
    guarded = converse(ProcessHistory(processor), guarded=True)  # pyright: ignore[reportArgumentType]
    assert len(guarded.requests) == 2 * RUNS
    # A conversation's turn is four messages, so keeping 6 cuts between turns, and 5 inside one. A cut inside splits
    # a pair, and the guard says where, naming the call (nothing else is warned about). Without the guard, Pydantic
    # AI would repair those requests silently, dropping the results it was sent. With it, no request and no stored
    # history has a split pair.
    assert bool(guarded.warnings) == splits
    assert all(
        warning.startswith('OrphanedToolPairWarning: Compacted in whole tool pairs, the cut moved: ')
        and "call 'call_" in warning
        for warning in guarded.warnings
    )
    assert [problems for request in guarded.requests if (problems := broken_pairs(request.messages))] == []
    assert [problems for history in guarded.histories if (problems := broken_pairs(history))] == []
    # Bounded as the processor bounds it: a cut moved later keeps fewer messages, one moved earlier at most a few more.
    assert max(guarded.lengths) <= max(alone.lengths) + 2
    assert max(guarded.parts) <= max(alone.parts) + 4
    # The messages move only where the guard applied a compaction, the instructions never (no cache prices here).
    assert guarded.opened and set(guarded.prefix_moves()) <= set(guarded.opened)
    assert guarded.instruction_moves() == []
    assert stale_deliveries(guarded) == []


@pytest.mark.vcr
@pytest.mark.anyio
@pytest.mark.parametrize('api', ['openai-chat', 'anthropic'])
async def test_on_the_wire_every_call_goes_with_its_result(api: Api):
    bodies, warned = await converse_on_the_wire(api, ProcessHistory(keep_first_and_last(5)))
    assert len(bodies) == 2 * WIRE_RUNS
    # Read from the JSON as the provider reads it: every call answered, every result after its call.
    assert [problems for body in bodies if (problems := unpaired_on_the_wire(api, body))] == []
    # The processor split pairs, the guard moved its cuts (and said so), and the verifier saw the prefix move only
    # where the guard opened a window (`converse_on_the_wire` checks it saw no other divergence).
    assert warned and all('Compacted in whole tool pairs, the cut moved' in warning for warning in warned)
    # Bounded: the second half of the conversation sends no more than the first did.
    counts = [len(json.loads(body)['messages']) for body in bodies]
    assert max(counts[WIRE_RUNS:]) <= max(counts[:WIRE_RUNS])


# --- What `decide_rewrite` takes for a compaction, and what not


def test_a_provider_compaction_run_from_a_hook_is_its_own_marker():
    # What `OpenAICompaction(stateless=True)` leaves: the provider's compacted item, then the step's new request.
    history = conversation()
    compacted = ModelResponse(parts=[CompactionPart(None, id='cmp_1', provider_name='openai')])
    proposed = [compacted, history[-2]]
    decision = decide_rewrite(ConsumedHistory.of(history[:-1]).adding([history[-2]]), proposed)
    assert decision.action == 'compact' and decision.history is not None
    assert elided_count(decision.history) is None and decision.history[0] is compacted


def test_a_summary_that_makes_up_a_call_is_no_compaction():
    history = conversation()
    made_up = ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'c'}, tool_call_id='c9')])
    decision = decide_rewrite(
        ConsumedHistory.of(history), [ModelRequest.user_text_prompt('Summary.'), made_up, *history[6:]]
    )
    assert decision.action == 'abort'


def test_edits_insertions_and_reorders_are_no_compaction():
    history = conversation()
    window = ConsumedHistory.of(history)
    edited = ModelRequest.user_text_prompt('How many users are there today?')
    inserted = ModelRequest.user_text_prompt('A note the model never saw.')
    for proposed in (
        [edited, *history[1:]],  # a prompt edited, whatever its size
        [history[0], inserted, *history[1:]],  # a message inserted where nothing was elided
        [*history[:5], history[6], history[5], history[7]],  # two messages swapped
        history[:-1],  # the latest message dropped
    ):
        assert decide_rewrite(window, proposed).action == 'defer', proposed
    # A response's text clamped shorter and a tool result cleared are compactions; text that grows is an edit.
    clamped = replace(history[5], parts=[TextPart('42 users…')])
    cleared = replace(history[2], parts=[ToolReturnPart('query_db', '[cleared]', tool_call_id='c1')])
    grown = replace(history[5], parts=[TextPart('42 users, 7 admins, and more besides.')])
    assert decide_rewrite(window, [*history[:5], clamped, *history[6:]]).action == 'compact'
    assert decide_rewrite(window, [*history[:2], cleared, *history[3:]]).action == 'compact'
    assert decide_rewrite(window, [*history[:5], grown, *history[6:]]).action == 'defer'
