"""`pydantic-ai-append check`: the cassette checker, on this package's own cassettes, on cassettes built here with a
deliberate cache bust, on one shaped like a recording of the real OpenAI API, and at scale. The forms a cassette's
bodies come in, and the files, bodies and usage the checker refuses, are in `test_cassettes.py`.

The command runs in-process through `main` (so its output is captured and covered); one test runs it as
`python -m pydantic_ai_append` in a subprocess, to show the module entry works.
"""

from __future__ import annotations

import gzip
import json
import runpy
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from inline_snapshot import snapshot

from pydantic_ai_append._check.cassettes import read_cassette
from pydantic_ai_append.testing import WireConversation, prefix_reuse

from ..check_helpers import CHAT, MESSAGES, RESPONSES, assistant, chat_turns, interaction, run, user, write_cassette
from ..wire import CASSETTES

# --- this package's own cassettes ---


def test_the_package_cassettes(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(CASSETTES)
    status, out, _ = run(capsys, '--json', '.')
    document = json.loads(out)
    verdicts = {
        conversation['name']: [divergence['request'] for divergence in conversation['divergences']] or 'kept'
        for cassette in document['cassettes']
        for conversation in cassette['conversations']
    }
    # Each broken prefix is one its test makes on purpose, and asserts:
    # - test_guard_capability, without the guard: history processing orphans a tool result on request 2; with it,
    #   the trim is applied as a compaction whose history starts anew, which the checker takes for a new
    #   conversation (#1);
    # - test_compaction_of: a processor keeping the first message and the last 5, applied as a compaction on every
    #   other request from request 3, each opening the verifier's window; and a summarizing processor applied as
    #   compaction (request 3), which opens the verifier's window;
    # - test_harness_compaction: harness's `SlidingWindowCompaction`, applied as a compaction on every other request
    #   from request 4, each opening the verifier's window;
    # - test_wire_windows: a rewrite-mode block changes (request 1), a compaction (request 2), each opening the
    #   verifier's window; without being told, the verifier refuses the second request, so only one was sent;
    # - test_request_wire: a rewrite-mode block changes before request 6 (`NEW_WINDOW`), passed as `new_windows`;
    # - test_wire (the verifier): observe sends changed instructions (request 3); enforce sends after `open_window()`
    #   (request 1) and refuses otherwise (so 3 requests, kept); a regenerated reply is a shorter request (3);
    #   new instructions for the Responses chain (3); two models taking turns, a window opened for gpt-5.2 only, so
    #   both diverge (gpt-5-mini at its request 1, gpt-5.2 at its request 2), each a conversation of its own.
    assert verdicts == snapshot(
        {
            'test_capture/test_recorded_anthropic_conversation.yaml#0': 'kept',
            'test_capture/test_recorded_openai_chat_conversation.yaml#0': 'kept',
            'test_capture/test_recorded_openai_responses_conversation.yaml#0': 'kept',
            'test_harness_blocks/test_a_history_from_the_older_release_continues_on_the_newer.yaml#0': 'kept',
            'test_harness_blocks/test_every_change_is_delivered_with_the_prefix_kept[anthropic].yaml#0': 'kept',
            'test_harness_blocks/test_every_change_is_delivered_with_the_prefix_kept[openai-chat].yaml#0': 'kept',
            'test_harness_compaction/test_on_the_wire_a_sliding_window_sends_every_call_with_its_result[anthropic].yaml#0': [
                4,
                6,
                8,
                10,
                12,
                14,
            ],
            'test_harness_compaction/test_on_the_wire_a_sliding_window_sends_every_call_with_its_result[openai-chat].yaml#0': [
                4,
                6,
                8,
                10,
                12,
                14,
            ],
            'test_compaction_of/test_on_the_wire_every_call_goes_with_its_result[anthropic].yaml#0': [
                3,
                5,
                7,
                9,
                11,
                13,
                15,
            ],
            'test_compaction_of/test_on_the_wire_every_call_goes_with_its_result[openai-chat].yaml#0': [
                3,
                5,
                7,
                9,
                11,
                13,
                15,
            ],
            'test_guard_capability/test_with_the_guard_on_anthropic.yaml#0': 'kept',
            'test_guard_capability/test_with_the_guard_on_anthropic.yaml#1': 'kept',
            'test_guard_capability/test_with_the_guard_the_orphaning_request_never_goes_out.yaml#0': 'kept',
            'test_guard_capability/test_with_the_guard_the_orphaning_request_never_goes_out.yaml#1': 'kept',
            'test_guard_capability/test_without_the_guard_the_request_orphans_a_tool_result.yaml#0': [2],
            'test_prompt_wire/test_a_cassette_recorded_against_anthropic_replays_through_the_fixture.yaml#0': 'kept',
            'test_prompt_wire/test_a_cassette_recorded_against_openai_replays_through_the_fixture.yaml#0': 'kept',
            'test_compaction_of/test_on_the_wire_the_summary_goes_out_with_every_call_answered.yaml#0': [3],
            'test_wire_windows/test_a_compaction_opens_the_verifiers_window.yaml#0': [2],
            'test_wire_windows/test_append_instructions_opens_the_verifiers_window.yaml#0': [1],
            'test_wire_windows/test_without_being_told_the_verifier_refuses_the_new_window.yaml#0': 'kept',
            'test_request_wire/test_a_resumed_turn_sends_the_suspended_requests_bytes[claude-opus-4-8].yaml#0': 'kept',
            'test_request_wire/test_a_resumed_turn_sends_the_suspended_requests_bytes[claude-sonnet-4-5].yaml#0': 'kept',
            'test_request_wire/test_anthropic_inline.yaml#0': [6],
            'test_request_wire/test_anthropic_wrapped.yaml#0': [6],
            'test_request_wire/test_openai_chat.yaml#0': [6],
            'test_request_wire/test_openai_responses.yaml#0': [6],
            'test_request_wire/test_openai_responses_with_previous_response_id.yaml#0': [6],
            'test_request_wire/test_streamed_runs_keep_the_prefix.yaml#0': 'kept',
            'test_wire/test_a_verifier_joining_mid_conversation_checks_from_its_first_request.yaml#0': 'kept',
            'test_wire/test_enforce_refuses_before_sending[anthropic].yaml#0': 'kept',
            'test_wire/test_enforce_refuses_before_sending[openai-chat].yaml#0': 'kept',
            'test_wire/test_enforce_refuses_before_sending[openai-responses].yaml#0': 'kept',
            'test_wire/test_enforce_sends_a_request_after_an_opened_window[anthropic].yaml#0': [1],
            'test_wire/test_enforce_sends_a_request_after_an_opened_window[openai-chat].yaml#0': [1],
            'test_wire/test_enforce_sends_a_request_after_an_opened_window[openai-responses].yaml#0': [1],
            'test_wire/test_observe_warns_and_sends_changed_instructions[anthropic].yaml#0': [3],
            'test_wire/test_observe_warns_and_sends_changed_instructions[openai-chat].yaml#0': [3],
            'test_wire/test_observe_warns_and_sends_changed_instructions[openai-responses].yaml#0': [3],
            'test_wire/test_regenerating_a_reply_is_a_shorter_request.yaml#0': [3],
            'test_wire/test_responses_previous_response_id_is_compared_after_resolving.yaml#0': [3],
            'test_wire/test_spans_and_chains_per_model.yaml#0': [2],
            'test_wire/test_spans_and_chains_per_model.yaml#1': [1],
        }
    )
    assert status == 1
    # The windows the tests open, allowed: every wire-engine conversation keeps its prefix past request 6.
    status, out, _ = run(capsys, '--allow-new-window', '6', 'test_request_wire')
    assert (status, out.splitlines()[-1]) == (0, '8 conversations in 8 cassettes: every one keeps its prefix')


def test_reuse_is_what_prefix_reuse_measures(capsys: pytest.CaptureFixture[str]):
    # The checker counts reuse itself, one request at a time; it must agree with `prefix_reuse` on the same requests.
    for file in sorted((CASSETTES / 'test_capture').glob('*.yaml')):
        _, out, _ = run(capsys, '--json', str(file))
        [conversation] = json.loads(out)['cassettes'][0]['conversations']
        api = conversation['api']
        wire = WireConversation(api)
        for recorded in read_cassette(file):
            wire.add(recorded.request_body(), recorded.response_body())
        reuse = prefix_reuse(wire.requests)
        assert (conversation['reused_bytes'], conversation['total_bytes']) == (
            sum(row.reused_bytes for row in reuse),
            sum(row.total_bytes for row in reuse),
        )
        assert conversation['reused_bytes'] > 0


# --- deliberate cache busts ---


def bust_instruction_rewritten(tmp: Path) -> Path:
    # Anthropic: the second system block is rewritten in place on the third request.
    turns: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    for index, todos in enumerate(['- [ ] tests', '- [ ] tests', '- [x] tests']):
        history.append(user(f'question {index}'))
        system = [{'type': 'text', 'text': 'Be brief.'}, {'type': 'text', 'text': f'<todos>\n{todos}\n</todos>'}]
        turns.append(interaction(MESSAGES, {'model': 'claude-sonnet-4-6', 'system': system, 'messages': [*history]}))
        history.append(assistant(f'answer {index}'))
    return write_cassette(tmp / 'instruction.yaml', turns)


def bust_tools_reordered(tmp: Path) -> Path:
    return write_cassette(
        tmp / 'tools.yaml',
        chat_turns(['Be brief.'] * 3, [['search', 'fetch'], ['search', 'fetch'], ['fetch', 'search']]),
    )


def bust_timestamp(tmp: Path) -> Path:
    # OpenAI Responses: the instructions carry the time, so every request's prefix moves.
    turns: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    for index, clock in enumerate(['09:00:00', '09:00:00', '09:00:07']):
        history.append(user(f'question {index}'))
        body = {'model': 'gpt-5.2', 'instructions': f'Be brief. The time is {clock}.', 'input': [*history]}
        turns.append(interaction(RESPONSES, body))
        history.append(assistant(f'answer {index}'))
    return write_cassette(tmp / 'timestamp.yaml', turns)


@pytest.mark.parametrize(
    ('build', 'kind'),
    [(bust_instruction_rewritten, 'system'), (bust_tools_reordered, 'tool'), (bust_timestamp, 'instructions')],
)
def test_a_cache_bust_fails_and_an_allowed_window_passes(
    build: Any, kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    file = build(Path('.')).name
    status, out, _ = run(capsys, file)
    assert status == 1
    assert 'prefix broken at request 2\n  interaction 2: request 2 does not extend request 1 byte for byte' in out
    assert f'({kind} in request 1, {kind} in request 2)' in out
    assert f"pass --allow-new-window '{file}#0:2')" in out
    for allowed in ('2', f'{file}:2', f'{file}#0:2'):
        status, out, _ = run(capsys, file, '--allow-new-window', allowed)
        assert (status, out.splitlines()[0].endswith('prefix kept, new window at request 2')) == (0, True)
    # Allowing another request, or another conversation, doesn't hide it.
    assert run(capsys, file, '--allow-new-window', '1')[0] == 1
    assert run(capsys, file, '--allow-new-window', f'{file}#1:2')[0] == 2


def test_the_report_of_a_bust(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    bust_instruction_rewritten(Path('.'))
    assert run(capsys, 'instruction.yaml') == snapshot(
        (
            1,
            """\
instruction.yaml#0: anthropic claude-sonnet-4-6, 3 requests, 161 of 618 bytes reused (26%): prefix broken at request 2
  interaction 2: request 2 does not extend request 1 byte for byte: first divergent segment is 1 (system in request 1, system in request 2), at byte 35 of it
    request 1: {"type":"text","text":"<todos>\\n- [ ] tests\\n</todos>"}
    request 2: {"type":"text","text":"<todos>\\n- [x] tests\\n</todos>"}
  why: the instructions changed and state no block of this plugin: '<todos> - [ ] tests </todos>' became '<todos> - [x] tests </todos>'
  fix: register the part that changes as a block of `AppendInstructions` and make it an append-mode block (`@capability.instructions(name=..., on_change='append')`), or keep it static (a clock belongs in an append-mode block or in the user turn)
  (only if request 2 is meant to open a new window, pass --allow-new-window 'instruction.yaml#0:2')
1 conversation in 1 cassette: 1 breaks its prefix
""",
            '',
        )
    )


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    bust_tools_reordered(Path('.'))
    status, out, _ = run(capsys, '--json', 'tools.yaml')
    assert (status, json.loads(out)) == snapshot(
        (
            1,
            {
                'format': 1,
                'ok': False,
                'errors': [],
                'errors_by_cause': [],
                'cassettes': [
                    {
                        'file': 'tools.yaml',
                        'other_requests': 0,
                        'conversations': [
                            {
                                'name': 'tools.yaml#0',
                                'api': 'openai-chat',
                                'model': 'gpt-5.2',
                                'requests': 3,
                                'interactions': [0, 1, 2],
                                'reused_bytes': 234,
                                'total_bytes': 939,
                                'prefix_kept': False,
                                'new_windows': [],
                                'divergences': [
                                    {
                                        'request': 2,
                                        'interaction': 2,
                                        'segment': 0,
                                        'kind': 'tool',
                                        'message': """\
request 2 does not extend request 1 byte for byte: first divergent segment is 0 (tool in request 1, tool in request 2), at byte 39 of it
  request 1: {"type":"function","function":{"name":"search","parameters":{"type":"object"}}}
  request 2: {"type":"function","function":{"name":"fetch","parameters":{"type":"object"}}}\
""",
                                        'setting': None,
                                        'cause': 'tools',
                                        'why': 'tool `search` was moved: tools come first in cache order, so every byte after them is sent again',
                                        'fix': 'keep the tool set, its order and its definitions the same through a conversation',
                                    }
                                ],
                                'request_verdicts': [
                                    {
                                        'request': 0,
                                        'interaction': 0,
                                        'reused_bytes': 0,
                                        'total_bytes': 234,
                                        'provider': None,
                                        'disagreement': None,
                                    },
                                    {
                                        'request': 1,
                                        'interaction': 1,
                                        'reused_bytes': 234,
                                        'total_bytes': 313,
                                        'provider': None,
                                        'disagreement': None,
                                    },
                                    {
                                        'request': 2,
                                        'interaction': 2,
                                        'reused_bytes': 0,
                                        'total_bytes': 392,
                                        'provider': None,
                                        'disagreement': None,
                                    },
                                ],
                            }
                        ],
                    }
                ],
            },
        )
    )


# --- conversations ---


def test_two_conversations_with_one_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # A parametrized run twice over, then a sub-agent's conversation interleaved with its parent's: a request that
    # extends no conversation's last request and has no history starts a new conversation.
    first = chat_turns(['Be brief.'] * 2, [['search']] * 2)
    second = [interaction(CHAT, {**json.loads(turn['request']['body'])}) for turn in first]
    for turn in second:
        body = json.loads(turn['request']['body'])
        body['messages'][1]['content'] += ' again'
        turn['request']['body'] = json.dumps(body)
    parent, child = chat_turns(['Plan.'] * 2, [[]] * 2), chat_turns(['Research.'] * 2, [[]] * 2)
    file = write_cassette(tmp_path / 'runs.yaml', [*first, *second, parent[0], child[0], parent[1], child[1]])
    status, out, _ = run(capsys, '--json', str(file))
    conversations = json.loads(out)['cassettes'][0]['conversations']
    assert (status, [c['interactions'] for c in conversations]) == (0, [[0, 1], [2, 3], [4, 6], [5, 7]])
    # Negative control: a request that carries history but extends nothing breaks the conversation it shares the
    # longest prefix with, rather than starting one of its own.
    body = json.loads(child[1]['request']['body'])
    body['messages'][1]['content'] = 'question 0, reworded'
    file = write_cassette(tmp_path / 'runs.yaml', [parent[0], child[0], parent[1], interaction(CHAT, body)])
    status, out, _ = run(capsys, '--json', str(file))
    conversations = json.loads(out)['cassettes'][0]['conversations']
    assert (status, [(c['interactions'], c['prefix_kept']) for c in conversations]) == (
        1,
        [([0, 2], True), ([1, 3], False)],
    )


def test_a_cassette_shaped_like_a_real_openai_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # Written for this test: what recording `OpenAIResponsesModel` against api.openai.com with
    # `openai_previous_response_id='auto'` looks like. The first reply is gzip-compressed JSON (kept as `!!binary`),
    # the second a server-sent event stream; each later request sends only its new input and names the reply before.
    headers = {'content-type': ['application/json'], 'authorization': ['DUMMY'], 'user-agent': ['OpenAI/Python']}
    message = {'type': 'message', 'role': 'assistant', 'content': [{'type': 'output_text', 'text': 'Hi.'}]}
    reply: dict[str, Any] = {
        'id': 'resp_0001',
        'object': 'response',
        'model': 'gpt-5.2',
        'output': [message],
    }
    streamed: dict[str, Any] = {
        **reply,
        'id': 'resp_0002',
        'output': [{**message, 'content': [{'type': 'output_text'}]}],
    }
    events: list[dict[str, Any]] = [
        {'type': 'response.created', 'response': {**streamed, 'output': []}},
        {'type': 'response.output_text.delta', 'delta': 'Hello'},
        {'type': 'response.completed', 'response': streamed},
    ]
    stream = ''.join(f'event: {event["type"]}\ndata: {json.dumps(event)}\n\n' for event in events)
    instructions = 'You answer in one line.'
    tools = [{'type': 'function', 'name': 'search', 'parameters': {'type': 'object'}, 'strict': True}]
    base = {'model': 'gpt-5.2', 'instructions': instructions, 'tools': tools}
    interactions = [
        interaction(
            RESPONSES,
            {**base, 'input': [user('Hello?')]},
            gzip.compress(json.dumps(reply).encode()),
            request_headers=headers,
            response_headers={'content-type': ['application/json'], 'content-encoding': ['gzip']},
        ),
        interaction(
            RESPONSES,
            {**base, 'stream': True, 'previous_response_id': 'resp_0001', 'input': [user('And again?')]},
            stream,
            request_headers=headers,
            response_headers={'content-type': ['text/event-stream; charset=utf-8']},
        ),
        interaction('https://api.openai.com/v1/models', None, {'data': []}, method='GET'),
        interaction(
            RESPONSES,
            {**base, 'previous_response_id': 'resp_0002', 'input': [user('Thanks?')]},
            reply,
            request_headers=headers,
        ),
    ]
    file = write_cassette(tmp_path / 'real.yaml', interactions)
    assert '!!binary' in file.read_text()
    status, out, _ = run(capsys, '--json', str(file))
    [cassette] = json.loads(out)['cassettes']
    summary = [(c['requests'], c['interactions'], c['prefix_kept']) for c in cassette['conversations']]
    assert (status, cassette['other_requests'], summary) == (0, 1, [(3, [0, 1, 3], True)])
    # Resolved, each request repeats the whole of the one before: its input, the reply's output, then more.
    reused = cassette['conversations'][0]['reused_bytes']
    # Negative control: without the first reply, the second request names a response the cassette doesn't hold, so
    # it can't be compared and starts a conversation of its own.
    interactions[0]['response']['body']['string'] = None
    write_cassette(file, interactions)
    status, out, _ = run(capsys, '--json', str(file))
    [cassette] = json.loads(out)['cassettes']
    assert (status, [c['interactions'] for c in cassette['conversations']]) == (0, [[0], [1, 3]])
    assert sum(c['reused_bytes'] for c in cassette['conversations']) < reused
    # The instructions rewritten on the last request: broken, even though the request carries only its new input.
    interactions[0]['response']['body']['string'] = gzip.compress(json.dumps(reply).encode())
    interactions[3]['request']['body'] = json.dumps(
        {**base, 'instructions': 'You answer in two lines.', 'previous_response_id': 'resp_0002', 'input': []}
    )
    write_cassette(file, interactions)
    status, out, _ = run(capsys, str(file))
    assert (status, '(instructions in request 1, instructions in request 2)' in out) == (1, True)


# --- entry points and scale ---


def test_python_dash_m(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    file = bust_tools_reordered(tmp_path)
    result = subprocess.run(
        [sys.executable, '-m', 'pydantic_ai_append', 'check', str(file)], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout.splitlines()[-1], result.stderr) == (
        1,
        '1 conversation in 1 cassette: 1 breaks its prefix',
        '',
    )
    # The same module in this process, for coverage (the docs tests may have imported it already).
    monkeypatch.delitem(sys.modules, 'pydantic_ai_append.__main__', raising=False)
    monkeypatch.setattr(sys, 'argv', ['pydantic_ai_append', 'check', str(file), '--allow-new-window', '2'])
    with pytest.raises(SystemExit) as exited:
        runpy.run_module('pydantic_ai_append', run_name='__main__')
    assert exited.value.code == 0
    assert capsys.readouterr().out.endswith('every one keeps its prefix\n')


def huge_cassette(path: Path, conversations: int, turns: int) -> int:
    """Write a cassette of `conversations` conversations of `turns` requests with a long system prompt, by hand."""
    system = 'You follow the house rules.\n' + ''.join(f'Rule {n}: keep the build green.\n' for n in range(300))
    with path.open('w') as out:
        out.write('interactions:\n')
        for number in range(conversations):
            messages: list[dict[str, Any]] = [{'role': 'system', 'content': system}]
            for turn in range(turns):
                messages.append(user(f'conversation {number}, question {turn}: ' + 'how? ' * 20))
                body = json.dumps({'model': 'gpt-5.2', 'messages': messages})
                # A JSON string is a YAML double-quoted scalar.
                out.write(f'- request:\n    method: POST\n    uri: {CHAT}\n    body: {json.dumps(body)}\n')
                out.write('    headers: {}\n  response:\n    status: {code: 200, message: OK}\n    headers: {}\n')
                out.write(f'    body: {{string: {json.dumps(json.dumps({"choices": []}))}}}\n')
                messages.append(assistant(f'answer {turn}'))
    return path.stat().st_size


def test_a_huge_cassette(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    # About 28 MB and 2,400 interactions: 100 conversations of one model, so each request is also matched against
    # every open conversation. Measured on a 2-core machine: about 2 s (41 MB, 3,000 interactions: 3 s, 250 MB RSS);
    # the time is printed, never asserted: a machine under load would fail it.
    conversations, turns = 100, 24
    size = huge_cassette(tmp_path / 'huge.yaml', conversations, turns)
    started = time.perf_counter()
    status, out, _ = run(capsys, '--json', str(tmp_path / 'huge.yaml'))
    elapsed = time.perf_counter() - started
    reports = json.loads(out)['cassettes'][0]['conversations']
    assert (status, len(reports), {report['requests'] for report in reports}) == (0, conversations, {turns})
    print(f'huge cassette: {size / 1e6:.1f} MB, {conversations * turns} interactions, checked in {elapsed:.1f} s')
    assert size > 20e6


def test_the_checker_starts_and_checks_a_cassette_without_pydantic_ai(tmp_path: Path):
    # Its start-up is what `check --help` costs: importing Pydantic AI alone is seconds of CPU on a loaded machine.
    cassette = write_cassette(tmp_path / 'one.yaml', chat_turns(['Be brief.'] * 3, [[]] * 3))
    script = (
        'import contextlib, io, sys\n'
        'from pydantic_ai_append._check.cli import main\n'
        'with contextlib.redirect_stdout(io.StringIO()):\n'
        f'    codes = [main(["--help"]), main(["check", {str(cassette)!r}])]\n'
        'print(*codes, "pydantic_ai" in sys.modules)\n'
    )
    ran = subprocess.run([sys.executable, '-c', script], capture_output=True, text=True, check=True)
    assert ran.stdout.split() == ['0', '0', 'False']


# --- unreadable input, reported once per cause ---


def test_a_cause_shared_by_many_files_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    for number in range(36):
        write_cassette(Path('cassettes') / f'{number:02}.yaml', chat_turns(['x'] * 2, [[]] * 2))
    monkeypatch.setitem(sys.modules, 'yaml', None)
    assert run(capsys, 'cassettes') == snapshot(
        (
            2,
            'incomplete: 36 files could not be read (exit status 2)\n',
            """\
pydantic-ai-append check: error: cassettes/00.yaml, cassettes/01.yaml, cassettes/02.yaml and 33 other files: reading a YAML cassette needs PyYAML, which is not installed: install it with `pip install 'pydantic-ai-append[testing]'`
""",
        )
    )
    status, out, _ = run(capsys, '--json', 'cassettes')
    document = json.loads(out)
    assert (status, document['ok'], len(document['errors']), document['cassettes']) == (2, False, 36, [])
    [cause] = document['errors_by_cause']
    assert (cause['cause'].startswith('reading a YAML cassette needs PyYAML'), len(cause['files'])) == (True, 36)
    assert document['errors'][35] == f'{Path("cassettes/35.yaml")}: {cause["cause"]}'


def test_the_verdicts_of_the_files_read_and_the_count_of_those_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(tmp_path)
    bust_tools_reordered(Path('.'))
    # A body that isn't JSON: the same cause, at the same interaction, in two files.
    for name in ('a.yaml', 'b.yaml'):
        write_cassette(Path(name), [interaction(CHAT, 'Hello there')])
    Path('empty').mkdir()
    args = ['tools.yaml', 'a.yaml', 'b.yaml', 'missing.yaml', 'empty', '--allow-new-window', 'other.yaml:1']
    assert run(capsys, *args) == snapshot(
        (
            2,
            """\
tools.yaml#0: openai-chat gpt-5.2, 3 requests, 234 of 939 bytes reused (25%): prefix broken at request 2
  interaction 2: request 2 does not extend request 1 byte for byte: first divergent segment is 0 (tool in request 1, tool in request 2), at byte 39 of it
    request 1: {"type":"function","function":{"name":"search","parameters":{"type":"object"}}}
    request 2: {"type":"function","function":{"name":"fetch","parameters":{"type":"object"}}}
  why: tool `search` was moved: tools come first in cache order, so every byte after them is sent again
  fix: keep the tool set, its order and its definitions the same through a conversation
  (only if request 2 is meant to open a new window, pass --allow-new-window 'tools.yaml#0:2')
1 conversation in 1 cassette read: 1 breaks its prefix
incomplete: 3 files could not be read and 2 errors in the arguments (exit status 2)
""",
            """\
pydantic-ai-append check: error: missing.yaml: no such file or directory
pydantic-ai-append check: error: empty: no cassettes (*.yaml, *.yml, *.json) in this directory
pydantic-ai-append check: error: a.yaml and b.yaml: interaction 0 (POST https://api.openai.com/v1/chat/completions): the request body is not a JSON object: b'Hello there'
pydantic-ai-append check: error: --allow-new-window names other.yaml, which is not one of the cassettes checked
""",
        )
    )
    status, out, _ = run(capsys, '--json', *args)
    document = json.loads(out)
    assert (status, document['ok'], [c['file'] for c in document['cassettes']]) == (2, False, ['tools.yaml'])
    assert document['errors_by_cause'] == snapshot(
        [
            {'cause': 'no such file or directory', 'files': ['missing.yaml']},
            {'cause': 'empty: no cassettes (*.yaml, *.yml, *.json) in this directory', 'files': []},
            {
                'cause': "interaction 0 (POST https://api.openai.com/v1/chat/completions): the request body is not a JSON object: b'Hello there'",
                'files': ['a.yaml', 'b.yaml'],
            },
            {'cause': '--allow-new-window names other.yaml, which is not one of the cassettes checked', 'files': []},
        ]
    )
    # Every file read, and only the arguments in error: still no verdict of success.
    status, out, _ = run(capsys, 'tools.yaml', '--allow-new-window', 'other.yaml:1', '--allow-new-window', '2')
    assert (status, out.splitlines()[-2:]) == (
        2,
        [
            '1 conversation in 1 cassette read: every one keeps its prefix',
            'incomplete: 1 error in the arguments (exit status 2)',
        ],
    )
