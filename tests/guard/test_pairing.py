"""Tool calls and their results (`tool_pair_problems`): which are paired, which are not, and where, on every kind of
call.
"""

from __future__ import annotations

from inline_snapshot import snapshot
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    ToolCallPart,
    ToolReturnPart,
)

from pydantic_ai_append.guard import tool_pair_problems

from .test_decision import calls, reply, results, retry, user


def describe(messages: list[ModelMessage]) -> list[str]:
    return [problem.describe() for problem in tool_pair_problems(messages)]


# --- Pairing


def test_paired_calls_of_every_kind_have_no_problems():
    history: list[ModelMessage] = [
        user('Count the users, then answer.'),
        calls('c1', 'c2'),
        # Results split over two requests (as deferred tool approvals leave them) still answer their calls.
        results('c1'),
        results('c2'),
        ModelResponse(parts=[ToolCallPart('query_db', {'sql': 'bad'}, tool_call_id='c3')]),
        retry('invalid sql', tool_name='query_db', tool_call_id='c3'),
        ModelResponse(
            parts=[
                NativeToolCallPart('web_search', {'query': 'users'}, tool_call_id='n1'),
                NativeToolReturnPart('web_search', {'results': []}, tool_call_id='n1'),
                ToolCallPart('final_result', {'count': 1}, tool_call_id='out'),
            ]
        ),
        ModelRequest(parts=[ToolReturnPart('final_result', 'Final result processed.', tool_call_id='out')]),
    ]
    assert tool_pair_problems(history) == []


def test_a_retry_without_a_tool_answers_no_call():
    history: list[ModelMessage] = [
        user('Answer in JSON.'),
        reply('not json'),
        retry('Please return JSON.'),
    ]
    assert tool_pair_problems(history) == []


def test_calls_in_the_last_reply_are_awaiting_not_orphaned():
    assert tool_pair_problems([user('go'), calls('c1', 'c2')]) == []
    # Even with some results in: the rest can come with the next run.
    assert tool_pair_problems([user('go'), calls('c1', 'c2'), results('c1')]) == []


def test_every_problem_is_named_with_ids_and_positions():
    history: list[ModelMessage] = [
        user('go'),
        calls('c1', 'c2'),
        results('c1', 'c1'),  # c1 answered twice, c2 never
        reply('done'),
        results('c9'),  # no call anywhere
        results('c7'),  # its call comes later
        calls('c7'),
        results('c7'),
    ]
    assert describe(history) == snapshot(
        [
            "`query_db` call 'c1' at message 1, part 0 is answered twice, again at message 2, part 1",
            "`query_db` call 'c2' at message 1, part 1 gets no result before the next response",
            "the result of `query_db` call 'c9' at message 4, part 0 has no call before it",
            "the result of `query_db` call 'c7' at message 5, part 0 comes before its call at message 6, part 0",
        ]
    )


def test_native_tool_results_pair_inside_their_response():
    native = ModelResponse(
        parts=[
            NativeToolReturnPart('web_search', {}, tool_call_id='n0'),
            NativeToolCallPart('web_search', {}, tool_call_id='n1'),
            NativeToolCallPart('code_execution', {}, tool_call_id='n2'),
        ]
    )
    # The call n2 is unanswered; in the last reply it may still be streaming, anywhere else it is an orphan.
    assert describe([user('go'), native]) == snapshot(
        ["the result of `web_search` call 'n0' at message 1, part 0 has no call before it"]
    )
    assert describe([user('go'), native, user('more')]) == snapshot(
        [
            "the result of `web_search` call 'n0' at message 1, part 0 has no call before it",
            "`web_search` call 'n1' at message 1, part 1 gets no result before the next response",
            "`code_execution` call 'n2' at message 1, part 2 gets no result before the next response",
        ]
    )


def test_a_function_result_does_not_answer_a_native_call():
    history: list[ModelMessage] = [
        user('go'),
        ModelResponse(parts=[NativeToolCallPart('web_search', {}, tool_call_id='n1')]),
        results('n1', tool='web_search'),
        reply('ok'),
    ]
    assert describe(history) == snapshot(
        [
            "`web_search` call 'n1' at message 1, part 0 gets no result before the next response",
            "the result of `web_search` call 'n1' at message 2, part 0 has no call before it",
        ]
    )
