"""Compaction in whole tool-pair units: where history is cut, the marker it leaves, and the instruction window it keeps.

`compact` is a public function a history processor calls, so it is tested directly with the cut it finds
(`whole_pair_cut`); the agent tests show the guard recognising a compaction as a window boundary, applying a trimming
processor's rewrite in whole tool pairs, and `AppendInstructions` keeping its instructions across one.

What `decide_rewrite` takes for a compaction, and what not, is in `test_compaction_of.py`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

import pytest
from inline_snapshot import snapshot
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pydantic_ai_append import (
    AppendInstructions,
    InstructionBaselinePart,
    InstructionBlock,
    InstructionDeltaPart,
    instruction_records,
)
from pydantic_ai_append._encoding import encode_baseline
from pydantic_ai_append._history import carrier
from pydantic_ai_append._reopening import CUT_KEY, MOVED_KEY
from pydantic_ai_append.guard import (
    ConsumedPrefixChangedWarning,
    OrphanedToolPairWarning,
    PrefixGuard,
    compact,
    tool_pair_problems,
)
from pydantic_ai_append.guard._compaction import elided_count, elision_marker, keeping_window, whole_pair_cut

from ..conversation import change_carrier

pytestmark = [pytest.mark.anyio]


def conversation() -> list[ModelMessage]:
    return [
        ModelRequest.user_text_prompt('How many users?'),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'a'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('query_db', 42, tool_call_id='c1')]),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'b'}, tool_call_id='c2')]),
        ModelRequest(parts=[ToolReturnPart('query_db', 7, tool_call_id='c2')]),
        ModelResponse(parts=[TextPart('42 users, 7 admins.')]),
        ModelRequest(
            parts=[UserPromptPart('Thanks.'), change_carrier('capability:c:state', 'a', 'b')],
        ),
        ModelResponse(parts=[TextPart('You are welcome.')]),
    ]


def test_the_cut_moves_past_every_tool_pair():
    history = conversation()
    # Each result answers a call before it, so the first cut that keeps every pair is the next user turn.
    assert [whole_pair_cut(history, at) for at in range(len(history))] == [0, 6, 6, 6, 6, 6, 6, None]


def test_compaction_keeps_pairs_and_the_records_kept_and_marks_the_frontier():
    kept = compact(conversation(), keep_from=2)
    assert tool_pair_problems(kept) == []
    assert [type(record) for record in instruction_records(kept)] == [InstructionDeltaPart]
    first = kept[0]
    assert isinstance(first, ModelRequest)
    assert [part.content for part in first.parts if isinstance(part, UserPromptPart)] == [elision_marker(6), 'Thanks.']
    assert elision_marker(6) == snapshot(
        """\
<elided messages="6">
Earlier turns of this conversation were elided to save context. Tool calls were removed together with their results; nothing after this point refers to them.
</elided>\
"""
    )
    # Compacting again counts what the first compaction elided too.
    again = compact(
        [*kept, ModelRequest.user_text_prompt('More?'), ModelResponse(parts=[TextPart('No.')])], keep_from=2
    )
    assert elided_count(again) == 8


def baseline_carrier(value: str | None) -> SystemPromptPart:
    """The (empty) carrier of a window baseline stating the block `capability:c:state` as `value`."""
    baseline = InstructionBaselinePart(instructions=(InstructionBlock(id='capability:c:state', content=value),))
    return carrier('', encode_baseline(baseline))


def test_a_cut_that_takes_the_baseline_moves_it_after_the_marker():
    history = conversation()
    first = history[0]
    assert isinstance(first, ModelRequest)
    history[0] = replace(first, parts=[*first.parts, baseline_carrier('a')])
    kept = compact(history, keep_from=2)
    front = kept[0]
    assert isinstance(front, ModelRequest)
    # The marker stays first (it is how the next compaction counts), the baseline right after it, then what was kept.
    assert [type(part).__name__ for part in front.parts] == [
        'UserPromptPart',
        'SystemPromptPart',
        'UserPromptPart',
        'SystemPromptPart',
    ]
    assert elided_count(kept) == 6
    assert [type(record) for record in instruction_records(kept)] == [InstructionBaselinePart, InstructionDeltaPart]
    # Cut again, it moves again, alone, as the change goes with the request it was on; where it is kept, or a provider's
    # compaction ended its window, nothing moves.
    again = compact([*kept, ModelResponse(parts=[TextPart('x')]), ModelRequest.user_text_prompt('y')], keep_from=1)
    assert [type(record) for record in instruction_records(again)] == [InstructionBaselinePart]
    assert keeping_window([ModelRequest(parts=[baseline_carrier('a')])], kept) == kept
    ended = [ModelRequest(parts=[baseline_carrier('a')]), ModelResponse(parts=[CompactionPart(content=None)])]
    assert keeping_window(ended, kept[1:]) == kept[1:]
    # A window whose prefix states no block is let go: its first change, which carries the sentence on how elements
    # supersede each other, may be among those cut.
    assert keeping_window([ModelRequest(parts=[baseline_carrier(None)])], kept[1:]) == kept[1:]


def test_a_cut_that_keeps_the_first_request_moves_the_baseline_after_the_first_windows():
    # Harness's sliding window keeps the first request, which holds the first window's baseline: a later window's
    # baseline, cut, goes after it (so it is still the window history has open), marked as cut for `AppendInstructions`.
    first = ModelRequest(parts=[UserPromptPart('start'), baseline_carrier('a')])
    later = baseline_carrier('b')
    full: list[ModelMessage] = [
        first,
        ModelResponse(parts=[TextPart('one')]),
        ModelRequest(parts=[UserPromptPart('go on'), later]),
        ModelResponse(parts=[TextPart('two')]),
        ModelRequest.user_text_prompt('and now'),
    ]
    kept = keeping_window(full, [first, *full[3:]])
    front = kept[0]
    assert isinstance(front, ModelRequest)
    assert [part.metadata for part in front.parts if isinstance(part, SystemPromptPart)] == [
        cast('SystemPromptPart', first.parts[1]).metadata,
        {**cast('dict[str, Any]', later.metadata), CUT_KEY: True},
    ]
    records = instruction_records(kept)
    assert [record.instructions[0] for record in records if isinstance(record, InstructionBaselinePart)] == [
        InstructionBlock(id='capability:c:state', content='a'),
        InstructionBlock(id='capability:c:state', content='b'),
    ]


def test_a_summary_that_starts_with_a_response_gets_a_request_for_the_marker_before_it():
    summary = [ModelResponse(parts=[TextPart('We talked about users.')])]
    kept = compact(conversation(), keep_from=6, summary=summary)
    assert [type(message).__name__ for message in kept] == [
        'ModelRequest',
        'ModelResponse',
        'ModelRequest',
        'ModelResponse',
    ]
    assert elided_count(kept) == 6 and tool_pair_problems(kept) == []


def test_compaction_that_would_elide_nothing_or_split_a_pair_changes_nothing():
    history = conversation()
    assert compact(history, keep_from=0) == history
    assert compact(history[:5], keep_from=1) == history[:5]
    assert elided_count([]) is None
    assert elided_count([ModelResponse(parts=[TextPart('x')])]) is None
    assert elided_count([ModelRequest(parts=[])]) is None
    assert elided_count([ModelRequest(parts=[UserPromptPart(['a list'])])]) is None
    assert elided_count([ModelRequest.user_text_prompt('<elided messages="x">')]) is None


# --- On an agent


def scripted(*turns: ModelResponse) -> FunctionModel:
    remaining = list(turns)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return remaining.pop(0)

    return FunctionModel(answer)


def text(content: str) -> ModelResponse:
    return ModelResponse(parts=[TextPart(content)])


def drop_oldest_40_percent(messages: list[ModelMessage]) -> list[ModelMessage]:
    return messages[int(len(messages) * 0.4) :]


async def test_a_trimming_processor_is_applied_as_whole_pair_compaction():
    model = scripted(
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'a'}, tool_call_id='c1')]), text('42.'), text('7.')
    )
    guard = PrefixGuard[None]()

    def query_db(sql: str) -> int:
        """Run a query."""
        return 42

    agent = Agent(model, deps_type=type(None), tools=[query_db], capabilities=[guard])
    history = (await agent.run('How many users?')).all_messages()
    trimming = Agent(
        model, deps_type=type(None), tools=[query_db], capabilities=[ProcessHistory(drop_oldest_40_percent), guard]
    )
    # The trim keeps a result whose call it drops: the cut is moved past the pair, which goes whole.
    with pytest.warns(OrphanedToolPairWarning, match=r"Compacted in whole tool pairs, the cut moved: .*call 'c1'"):
        result = await trimming.run('And admins?', message_history=history)
    sent = result.all_messages()
    assert tool_pair_problems(sent) == [] and elided_count(sent) == 4
    assert [type(message).__name__ for message in sent] == ['ModelRequest', 'ModelResponse']
    # The request says, for `AppendInstructions`, that it keeps none of the consumed messages as they were.
    assert sent[0].metadata == {MOVED_KEY: {'messages': 0, 'bytes': 0}}


async def test_compaction_keeps_the_instructions_and_sends_the_cut_change_again():
    state = {'todos': '- [ ] write tests'}
    seen: list[tuple[str | None, list[str]]] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        texts = [
            part.content
            for message in messages
            for part in message.parts
            if isinstance(part, UserPromptPart | TextPart) and isinstance(part.content, str)
        ]
        seen.append((info.instructions, texts))
        return text('ok')

    context = AppendInstructions[None](id='todos')

    @context.instructions(name='state')
    def todos(ctx: RunContext[None]) -> str:
        return state['todos']

    def compact_all_but_last_turn(messages: list[ModelMessage]) -> list[ModelMessage]:
        return compact(messages, keep_from=len(messages) - 1) if len(messages) > 4 else messages

    guard = PrefixGuard[None]()
    agent = Agent(
        FunctionModel(answer),
        deps_type=type(None),
        capabilities=[ProcessHistory(compact_all_but_last_turn), guard, context],
    )
    history: list[ModelMessage] = []
    for turn, todo in enumerate(['- [x] write tests', '- [x] write tests\n- [ ] ship']):
        history = (await agent.run(f'turn {turn}', message_history=history)).all_messages()
        state['todos'] = todo
    result = await agent.run('turn 2', message_history=history)
    # The third request was compacted: its instructions are the first request's, with the first value; the change the
    # cut took goes again at the tail, from what the prefix states to the current value.
    instructions, texts = seen[-1]
    assert instructions == seen[0][0] and instructions is not None and '- [ ] write tests' in instructions
    assert texts[0].startswith('<elided messages="4">')
    assert [t for t in texts if '<context' in t] == [
        snapshot("""\
<system><context id="capability:todos:state">
- [x] write tests
- [ ] ship
</context></system>\
""")
    ]
    records: list[Any] = instruction_records(result.all_messages())
    assert [type(record) for record in records] == [InstructionBaselinePart, InstructionDeltaPart]


async def test_a_trim_that_no_whole_pair_cut_allows_keeps_the_consumed_prefix():
    model = scripted(ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'a'}, tool_call_id='c1')]), text('42.'))

    def query_db(sql: str) -> int:
        """Run a query."""
        return 42

    def drop_call(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [messages[0], *messages[2:]] if len(messages) > 2 else messages

    agent = Agent(
        model, deps_type=type(None), tools=[query_db], capabilities=[ProcessHistory(drop_call), PrefixGuard()]
    )
    # The only request after the call answers it, so no cut keeps the pair: the rewrite is refused.
    with pytest.warns(OrphanedToolPairWarning, match=r'Refused, the consumed prefix kept: .*\(the rule: '):
        result = await agent.run('How many users?')
    assert elided_count(result.all_messages()) is None and len(result.all_messages()) == 4


async def test_a_processor_that_empties_history_is_refused_and_the_run_fails():
    guard = PrefixGuard[None](on_defer='compact')
    history = (
        await Agent(scripted(text('hi')), deps_type=type(None), capabilities=[guard]).run('hello')
    ).all_messages()

    def empty(messages: list[ModelMessage]) -> list[ModelMessage]:
        return []

    agent = Agent(scripted(text('never')), deps_type=type(None), capabilities=[ProcessHistory(empty), guard])
    with pytest.warns(ConsumedPrefixChangedWarning), pytest.raises(UserError, match='must end with a `ModelRequest`'):
        await agent.run('again', message_history=history)


def test_a_cut_that_would_split_a_pair_is_not_taken_even_where_an_old_orphan_goes():
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt('hi'),
        ModelResponse(parts=[TextPart('hello')]),
        # Left by an earlier trim: its call is gone. Cutting past it must not split the pair that follows.
        ModelRequest(parts=[ToolReturnPart('old', 1, tool_call_id='x0'), UserPromptPart('next')]),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'q'}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('query_db', 42, tool_call_id='c1')]),
        ModelResponse(parts=[TextPart('42')]),
        ModelRequest.user_text_prompt('and?'),
    ]
    assert whole_pair_cut(history, 3) == 6
    assert tool_pair_problems(compact(history, keep_from=3)) == []


async def test_a_repeated_prompt_does_not_move_the_compaction_cut():
    model = scripted(text('a'), text('b'), text('c'), text('d'))
    guard = PrefixGuard[None](on_defer='compact')
    agent = Agent(model, deps_type=type(None), capabilities=[guard])
    history: list[ModelMessage] = []
    for prompt in ['same', 'other', 'same']:
        history = (await agent.run(prompt, message_history=history)).all_messages()

    def keep_last_three(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-3:]

    trimming = Agent(model, deps_type=type(None), capabilities=[ProcessHistory(keep_last_three), guard])
    result = await trimming.run('next', message_history=history)
    assert elided_count(result.all_messages()) == 4


def test_a_native_tool_pair_inside_one_response_allows_any_cut():
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt('search'),
        ModelResponse(
            parts=[
                NativeToolCallPart('web_search', {'q': 'x'}, tool_call_id='n1'),
                NativeToolReturnPart('web_search', 'found', tool_call_id='n1'),
                TextPart('Found it.'),
            ]
        ),
        ModelRequest.user_text_prompt('thanks'),
    ]
    assert whole_pair_cut(history, 1) == 2


def test_a_cut_keeps_a_second_result_with_its_call():
    history: list[ModelMessage] = [
        ModelRequest.user_text_prompt('q'),
        ModelResponse(parts=[ToolCallPart('f', {}, tool_call_id='c1')]),
        ModelRequest(parts=[ToolReturnPart('f', 1, tool_call_id='c1')]),
        ModelResponse(parts=[TextPart('a')]),
        ModelRequest(parts=[ToolReturnPart('f', 1, tool_call_id='c1'), UserPromptPart('again')]),
        ModelResponse(parts=[TextPart('b')]),
        ModelRequest.user_text_prompt('next'),
    ]
    assert whole_pair_cut(history, 3) == 6
    assert tool_pair_problems(compact(history, keep_from=3)) == []
